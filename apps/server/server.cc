// Routes, access checks and the connection <-> Service bridge (server.h).
#include "server.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fmt/format.h>

#include "admission.h"
#include "choices.h"
#include "connection.h"
#include "grammar/json_schema.h"

namespace dsv4::server {
namespace {

namespace beast = boost::beast;
using Json = OrderedJson;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string route_label(std::string_view target) {
  const std::string path(target.substr(0, target.find('?')));
  for (const char* r : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/tokenize", "/detokenize", "/health",
                        "/metrics", "/"})
    if (path == r) return path;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// Structured output with strict false: the keywords its grammar relaxed, for X-Relaxed-Keywords
// ("PATH: KEYWORD; ..."; the grammar was compiled once, on the parse pool, by Service::prepare).
std::string relaxed_keywords(const OutputConstraint& c) {
  std::string joined;
  if (c.compiled)
    for (const std::string& r : c.compiled->relaxed) joined += (joined.empty() ? "" : "; ") + r;
  return joined;
}

HttpResponse api_error_response(const ApiError& e) {
  HttpResponse res{static_cast<http::status>(e.http_status), 11};
  res.set(http::field::content_type, "application/json");
  res.body() = error_body(e);
  return res;
}

HttpResponse content(std::string body, const char* type, http::status status = http::status::ok) {
  HttpResponse res{status, 11};
  res.set(http::field::content_type, type);
  res.body() = std::move(body);
  return res;
}

std::string path_of(const HttpRequest& req) {
  const std::string_view t(req.target().data(), req.target().size());
  return std::string(t.substr(0, t.find('?')));
}

// Every X-Forwarded-For line in order, joined: a proxy may add a line of its own instead of
// appending to the client's.
std::string forwarded_for(const HttpRequest& req) {
  std::string all;
  for (auto [it, end] = req.equal_range("X-Forwarded-For"); it != end; ++it) {
    if (!all.empty()) all += ',';
    all += std::string(it->value());
  }
  return all;
}

// A peer's address as the limits count it: IPv4-mapped IPv6 as IPv4, other IPv6 by its /64
// (one host has a whole /64 to pick addresses from).
std::string peer_key(const net::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6()).to_string();
  if (a.is_v6() && !a.is_loopback()) {
    net::ip::address_v6::bytes_type b = a.to_v6().to_bytes();
    std::fill(b.begin() + 8, b.end(), 0);
    return net::ip::address_v6(b).to_string() + "/64";
  }
  return a.to_string();
}

std::string field(const HttpRequest& req, http::field f) {
  const auto v = req[f];
  return std::string(v.data(), v.size());
}

// One generation request between the service thread and its connection: the sink copies each
// update into the mailbox and posts one pump to the connection's strand, which turns them into
// the response (or SSE chunks). A stream with nothing to send for a while gets a comment line,
// so that a client that left is noticed at the write too.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(Service& service, const std::shared_ptr<Connection>& conn, bool stream, double keepalive_seconds,
           std::atomic<int>& active, HttpResponse headers, AdmissionBudget::Ticket ticket)
      : service_(service), conn_(conn), executor_(conn->executor()), ticket_(std::move(ticket)), stream_(stream),
        keepalive_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(keepalive_seconds))),
        timer_(conn->executor()), active_(active), headers_(std::move(headers)) {
    active_.fetch_add(1);
  }
  ~Exchange() { active_.fetch_sub(1); }

  // On the connection's strand, once submitted (before any pump: that runs on the strand too).
  void begin(int64_t rid, std::shared_ptr<const ApiRequest> api, const ModelCard& model) {
    rid_ = rid;
    const std::string id = fmt::format("{}-{}", api->endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", rid);
    builder_.emplace(std::move(api), model, id, static_cast<int64_t>(std::time(nullptr)), rid);
    // Every choice ends with the connection (choice k has id rid + k).
    auto cancel = [service = &service_, rid, n = builder_->n_generated()] {
      for (int32_t k = 0; k < n; ++k) service->cancel(rid + k);
    };
    std::shared_ptr<Connection> conn = conn_.lock();
    if (!conn) return cancel();
    conn->set_request_id(id);
    conn->on_gone(cancel);
    if (!stream_) return;
    HttpResponse head = headers_;
    head.result(http::status::ok);
    head.set(http::field::content_type, "text/event-stream");
    head.set(http::field::cache_control, "no-cache");
    head.set("X-Accel-Buffering", "no");
    conn->start_stream(std::move(head));
    arm_keepalive();
  }

  // On the service thread.
  void push(const RequestUpdate& u) {
    bool post = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      inbox_.push_back(u);
      post = !posted_;
      posted_ = true;
    }
    if (post) net::post(executor_, [self = shared_from_this()] { self->pump(); });
  }

 private:
  void pump() {
    std::vector<RequestUpdate> updates;
    {
      std::lock_guard<std::mutex> lock(mu_);
      updates.swap(inbox_);
      posted_ = false;
    }
    std::shared_ptr<Connection> conn = conn_.lock();
    std::string events;
    for (const RequestUpdate& u : updates) events += builder_->add(u);
    if (!conn || conn->closed()) return;
    for (const RequestUpdate& u : updates) {
      if (!u.tokens.empty()) conn->note_first_token();
      if (u.finished)  // the prompt once, the completions of every choice
        conn->note_usage(u.prompt_tokens, completion_tokens_ += u.completion_tokens, u.cached_tokens);
    }
    if (stream_) {
      conn->send(std::move(events));
      if (builder_->finished()) {
        timer_.cancel();
        conn->end_stream();
      }
      return;
    }
    if (!builder_->finished()) return;
    ApiResult<std::string> body = builder_->response();
    if (!body.ok()) return conn->reply(with_headers(api_error_response(body.error())));
    conn->reply(with_headers(content(std::move(*body), "application/json")));
  }

  void arm_keepalive() {
    timer_.expires_after(keepalive_);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->builder_->finished()) return;
      std::shared_ptr<Connection> conn = self->conn_.lock();
      if (!conn || conn->closed()) return;
      conn->send(": keep-alive\n\n");
      self->arm_keepalive();
    });
  }

  HttpResponse with_headers(HttpResponse res) const {
    for (const auto& f : headers_) res.set(f.name_string(), f.value());
    return res;
  }

  Service& service_;
  std::weak_ptr<Connection> conn_;
  net::any_io_executor executor_;
  AdmissionBudget::Ticket ticket_;  // the request's charge, given back when the exchange goes
  std::optional<ChoicesBuilder> builder_;
  bool stream_;
  int64_t rid_ = -1;
  int64_t completion_tokens_ = 0;  // of the choices finished so far
  std::chrono::steady_clock::duration keepalive_;
  net::steady_timer timer_;
  std::atomic<int>& active_;
  HttpResponse headers_;  // extra response headers (CORS)
  std::mutex mu_;
  std::vector<RequestUpdate> inbox_;
  bool posted_ = false;
};

}  // namespace

std::string access_log_line(const AccessRecord& r) {
  auto count = [](int64_t n) { return n < 0 ? Json() : Json(n); };
  auto ms = [](double v) { return std::round(v * 1000) / 1000; };
  Json j;
  j["id"] = r.id;
  j["client_id"] = r.client_id.empty() ? Json() : Json(r.client_id);
  j["route"] = route_label(r.target);
  j["status"] = r.status;
  j["prompt_tokens"] = count(r.prompt_tokens);
  j["completion_tokens"] = count(r.completion_tokens);
  j["cached_tokens"] = count(r.cached_tokens);
  j["ttft_ms"] = r.ttft_ms < 0 ? Json() : Json(ms(r.ttft_ms));
  j["total_ms"] = ms(r.total_ms);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

struct HttpServer::Impl {
  Impl(Service& s, const ModelCard& m, const ServerOptions& o)
      : service(s), model(m), options(o), table(o.max_connections, o.max_connections_per_client),
        seed_base(std::random_device{}()),
        budget(o.max_pending_bytes > 0 ? o.max_pending_bytes : default_pending_bytes()), acceptor(net::make_strand(ioc)), accept_retry(acceptor.get_executor()) {
    options.access.loopback_bind = is_loopback_address(options.host);
    options.access.bound_host = options.host;
    routes.check = [this](Connection& c, const HttpRequest& r) { return check(c, r); };
    routes.handle = [this](const std::shared_ptr<Connection>& c, HttpRequest&& r) { handle(c, std::move(r)); };
    routes.count = [this](const std::string& target, int status) { metrics.count(route_label(target), status); };
    routes.new_id = [this] { return fmt::format("req-{:016x}", splitmix64(seed_base ^ id_counter.fetch_add(1) * 0x9E37ull)); };
    if (options.access_log)
      routes.log = [](const AccessRecord& r) { fmt::print(stderr, "{}\n", access_log_line(r)); };
  }

  void accept();
  std::optional<HttpResponse> check(Connection& conn, const HttpRequest& req);
  void handle(const std::shared_ptr<Connection>& conn, HttpRequest&& req);
  template <class Work, class Done>
  void off_io(const std::shared_ptr<Connection>& conn, Work work, Done done);
  ApiResult<ApiRequest> parse_and_prepare(const std::string& body, Endpoint endpoint, const ClientGone& gone);
  void submit(const std::shared_ptr<Connection>& conn, ApiResult<ApiRequest>& parsed, HttpResponse headers,
              AdmissionBudget::Ticket ticket);
  HttpResponse info(const HttpRequest& req);
  HttpResponse cors_headers(const HttpRequest& req) const;
  HttpResponse overloaded() const;
  uint64_t next_seed() { return splitmix64(seed_base + seed_counter.fetch_add(1)); }

  Service& service;
  const ModelCard& model;
  ServerOptions options;
  ConnectionTable table;
  Routes routes;
  HttpMetrics metrics;
  std::atomic<uint64_t> seed_counter{0};
  std::atomic<uint64_t> id_counter{0};
  uint64_t seed_base;
  std::atomic<bool> draining{false};
  std::atomic<int> active{0};  // exchanges not yet released
  AdmissionBudget budget;      // before the handlers and tasks that hold its tickets
  // Last, so destroyed first: its pending handlers own connections, which use the members above.
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry;
  net::thread_pool parse_pool{2};  // destroyed first (joined): its tasks use the members above
};

HttpServer::HttpServer(Service& service, const ModelCard& model, const ServerOptions& options)
    : impl_(std::make_unique<Impl>(service, model, options)) {}

HttpServer::~HttpServer() = default;

HttpMetrics& HttpServer::http_metrics() { return impl_->metrics; }

Result<int> HttpServer::bind() {
  Impl& s = *impl_;
  if (s.options.port < 0 || s.options.port > 65535)
    return Status::errorf("--port {} is outside [0, 65535]", s.options.port);
  boost::system::error_code ec;
  const std::string host = s.options.host == "localhost" ? "127.0.0.1" : s.options.host;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) return Status::errorf("--host {}: not an IP address ({})", s.options.host, ec.message());
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(s.options.port));
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status::errorf("cannot bind {}:{} ({})", s.options.host, s.options.port, ec.message());
  return static_cast<int>(s.acceptor.local_endpoint().port());
}

Status HttpServer::run() {
  Impl& s = *impl_;
  if (!s.acceptor.is_open()) return Status::error("the HTTP server is not bound");
  s.accept();
  std::vector<std::thread> threads;
  for (int i = 1; i < s.options.io_threads; ++i) threads.emplace_back([&s] { s.ioc.run(); });
  s.ioc.run();
  for (std::thread& t : threads) t.join();
  return Status();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  s.draining.store(true);
  net::post(s.acceptor.get_executor(), [&s] {  // the acceptor's strand: not beside its handler
    boost::system::error_code ec;
    s.acceptor.close(ec);
  });
  s.ioc.stop();
}

void HttpServer::drain(double grace_seconds) {
  Impl& s = *impl_;
  s.draining.store(true);
  s.service.shutdown(grace_seconds);
  // Every request has its last update now; give the streams a moment to write it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (s.active.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the last chunk's write
  stop();
}

// Accepts until the acceptor closes: over the total or per-address limit a connection is
// closed at once; out of descriptors, accepting pauses briefly instead of spinning.
void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      accept_retry.expires_after(std::chrono::milliseconds(50));
      return accept_retry.async_wait([this](beast::error_code) { accept(); });
    }
    boost::system::error_code pe;
    const tcp::endpoint remote = socket.remote_endpoint(pe);
    std::string peer = pe ? std::string("?") : peer_key(remote.address());
    // A trusted proxy's connections count per forwarded client, once its header is read.
    const bool proxy = is_trusted_proxy(options.access, peer);
    if (!table.add_connection()) {
      socket.close(pe);
    } else if (!proxy && !table.add_client(peer)) {
      table.remove_connection();
      socket.close(pe);
    } else {
      std::make_shared<Connection>(std::move(socket), options.limits, routes, table, std::move(peer), !proxy)->start();
    }
    accept();
  });
}

// Access rules on the header, before any body byte is read (docs/serving.md, security model).
std::optional<HttpResponse> HttpServer::Impl::check(Connection& conn, const HttpRequest& req) {
  const std::string host = field(req, http::field::host);
  if (!host_allowed(options.access, host))
    return json_error(421, fmt::format("Host \"{}\" is not served here (--allowed-hosts)", host),
                      "misdirected_request");
  const std::string origin = field(req, http::field::origin);
  if (!origin_allowed(options.access, origin, host))
    return json_error(403, fmt::format("cross-origin requests from {} are not allowed (--cors-origin)", origin),
                      "origin_not_allowed", "permission_error");
  if (!options.access.trusted_proxies.empty()) {
    const std::string client = client_address(options.access, conn.peer(), forwarded_for(req));
    if (!conn.account_to(client))
      return json_error(429, fmt::format("too many connections from {}", client), "too_many_connections",
                        "rate_limit_error");
  }
  const std::string path = path_of(req);
  if (req.method() == http::verb::options) {
    if (options.access.cors_origin.empty() || origin.empty())
      return json_error(405, "OPTIONS is answered only to the --cors-origin origin", "method_not_allowed");
    HttpResponse res = cors_headers(req);
    res.result(http::status::no_content);
    res.set(http::field::access_control_allow_methods, "GET, POST, OPTIONS");
    res.set(http::field::access_control_allow_headers, "Authorization, Content-Type, X-Request-Id");
    res.set(http::field::access_control_max_age, "600");
    return res;
  }
  const bool tokenizer_path = path == "/tokenize" || path == "/detokenize";
  const bool guarded = path.rfind("/v1/", 0) == 0 || tokenizer_path ||
                       (options.access.metrics_auth && path == "/metrics");
  if (!options.access.api_keys.empty() && guarded) {
    const std::string auth = field(req, http::field::authorization);
    const std::optional<std::string_view> token = bearer_token(auth);
    const int tenant = token ? find_key(options.access.api_keys, *token) : -1;
    if (tenant < 0) {
      HttpResponse res = json_error(401, auth.empty() ? "missing API key: send the header \"Authorization: Bearer <key>\""
                                                      : "incorrect API key provided",
                                    "invalid_api_key");
      res.set(http::field::www_authenticate, "Bearer");
      return res;
    }
    conn.set_tenant(tenant);
  }
  if (req.method() == http::verb::post) {
    if (path != "/v1/completions" && path != "/v1/chat/completions" && !tokenizer_path)
      return json_error(404, fmt::format("no route for POST {}", path), "not_found");
    if (!is_json_content_type(field(req, http::field::content_type)))
      return json_error(415, "POST bodies must be JSON: send \"Content-Type: application/json\"",
                        "unsupported_media_type");
    if (draining.load()) return json_error(503, "the server is shutting down", "server_shutting_down", "server_error");
  } else if (req.method() == http::verb::head) {
    HttpResponse res{http::status::method_not_allowed, 11};  // no body: a HEAD response has none
    res.set(http::field::allow, "GET, POST, OPTIONS");
    return res;
  } else if (req.method() != http::verb::get) {
    return json_error(405, fmt::format("method {} is not allowed", std::string(req.method_string())),
                      "method_not_allowed");
  }
  return std::nullopt;
}

// 503 + Retry-After: the admission budget is spent.
HttpResponse HttpServer::Impl::overloaded() const {
  HttpResponse res = json_error(503, fmt::format("the server holds {} bytes of requests and --max-pending-bytes is {}; "
                                                 "retry later", budget.held(), budget.limit()),
                                "server_overloaded", "server_error");
  res.set(http::field::retry_after, std::to_string(options.retry_after_seconds));
  return res;
}

// Access-Control-Allow-Origin for the --cors-origin origin (empty otherwise).
HttpResponse HttpServer::Impl::cors_headers(const HttpRequest& req) const {
  HttpResponse res;
  const std::string origin = field(req, http::field::origin);
  if (is_cors_origin(options.access, origin)) {
    res.set(http::field::access_control_allow_origin, options.access.cors_origin);
    res.set(http::field::vary, "Origin");
    res.set(http::field::access_control_expose_headers, "X-Request-Id, X-Relaxed-Keywords");
  }
  return res;
}

void HttpServer::Impl::handle(const std::shared_ptr<Connection>& conn, HttpRequest&& req) {
  HttpResponse headers = cors_headers(req);
  auto reply = [&conn, &headers](HttpResponse res) {
    for (const auto& f : headers) res.set(f.name_string(), f.value());
    conn->reply(std::move(res));
  };
  if (req.method() != http::verb::post) return reply(info(req));
  AdmissionBudget::Ticket ticket = budget.take(AdmissionBudget::charge_for(static_cast<int64_t>(req.body().size())));
  if (!ticket) return reply(overloaded());
  const std::string path = path_of(req);
  auto body = std::make_shared<std::string>(std::move(req.body()));
  if (path == "/tokenize" || path == "/detokenize") {
    const bool tokenize = path == "/tokenize";
    auto work = [this, body, tokenize](const ClientGone& gone) {
      return tokenize ? tokenize_response(*body, model, &gone) : detokenize_response(*body, model);
    };
    auto done = [conn, headers, ticket](ApiResult<std::string>& out) {
      HttpResponse res = out.ok() ? content(std::move(*out), "application/json") : api_error_response(out.error());
      for (const auto& f : headers) res.set(f.name_string(), f.value());
      conn->reply(std::move(res));
    };
    return off_io(conn, std::move(work), std::move(done));
  }
  const Endpoint endpoint = path == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletions;
  auto work = [this, body, endpoint](const ClientGone& gone) { return parse_and_prepare(*body, endpoint, gone); };
  auto done = [this, conn, headers, ticket](ApiResult<ApiRequest>& parsed) mutable {
    submit(conn, parsed, std::move(headers), std::move(ticket));
  };
  off_io(conn, std::move(work), std::move(done));
}

// Parsing and tokenizing a body of up to --max-body-bytes takes a while: that runs on the parse
// pool, so the I/O threads keep serving; `done` runs on the connection's strand. Neither runs
// once the client has left: `gone` is set then, and the work stops at its next stage.
template <class Work, class Done>
void HttpServer::Impl::off_io(const std::shared_ptr<Connection>& conn, Work work, Done done) {
  auto gone = std::make_shared<ClientGone>(false);
  conn->on_gone([gone] { gone->store(true); });
  net::post(parse_pool, [conn, gone, work = std::move(work), done = std::move(done)]() mutable {
    if (gone->load()) return;
    auto result = std::make_shared<decltype(work(*gone))>(work(*gone));
    net::post(conn->executor(), [conn, result, done = std::move(done)]() mutable {
      if (!conn->closed()) done(*result);
    });
  });
}

// On the parse pool: the request, then its validation and grammar (Service::prepare), so that
// neither the I/O threads nor the engine thread compile a schema.
ApiResult<ApiRequest> HttpServer::Impl::parse_and_prepare(const std::string& body, Endpoint endpoint,
                                                          const ClientGone& gone) {
  const uint64_t seed = next_seed();
  ApiResult<ApiRequest> parsed = endpoint == Endpoint::kChat ? parse_chat_request(body, model, seed, &gone)
                                                             : parse_completions_request(body, model, seed, &gone);
  if (!parsed.ok() || gone.load()) return parsed;
  parsed->gen.timeout_seconds = options.request_timeout;
  // The server's default layout (--json-whitespace; a schema's root x-guidance overrides it),
  // before the one compile: followers get it on the rank wire and compile the same grammar.
  if (parsed->gen.constraint.active()) parsed->gen.constraint.whitespace_flexible = options.json_whitespace_flexible;
  if (Status st = service.prepare(parsed->gen); !st.ok()) return bad_request(message_param(st.message()), st.message());
  return parsed;
}

// One request shared by the response builders of its choices; the engine holds its own copy.
void HttpServer::Impl::submit(const std::shared_ptr<Connection>& conn, ApiResult<ApiRequest>& parsed,
                              HttpResponse headers, AdmissionBudget::Ticket ticket) {
  auto reply = [&](HttpResponse res) {
    for (const auto& f : headers) res.set(f.name_string(), f.value());
    conn->reply(std::move(res));
  };
  if (!parsed.ok()) return reply(api_error_response(parsed.error()));
  if (const std::string relaxed = relaxed_keywords(parsed->gen.constraint); !relaxed.empty())
    headers.set("X-Relaxed-Keywords", relaxed);
  if (options.prefix_cache_per_key && conn->tenant() >= 0)
    parsed->gen.cache_salt = tenant_cache_salt(conn->tenant(), parsed->gen.cache_salt);
  ticket.reset();  // the parse's charge, for what the request holds from now on
  ticket = budget.take(request_footprint(*parsed));
  if (!ticket) return reply(overloaded());
  auto api = std::make_shared<const ApiRequest>(std::move(*parsed));
  auto exchange = std::make_shared<Exchange>(service, conn, api->stream, options.keepalive_seconds, active,
                                             headers, std::move(ticket));
  const Service::Submitted sub = service.submit(api->gen, [exchange](const RequestUpdate& u) { exchange->push(u); });
  switch (sub.error) {
    case Service::SubmitError::kNone: break;
    case Service::SubmitError::kInvalid:
      return reply(api_error_response(bad_request(message_param(sub.message), sub.message)));
    case Service::SubmitError::kQueueFull: {
      HttpResponse res = json_error(429, "the request queue is full: " + sub.message, "queue_full", "rate_limit_error");
      res.set(http::field::retry_after, std::to_string(options.retry_after_seconds));
      return reply(std::move(res));
    }
    case Service::SubmitError::kStopping:
      return reply(json_error(503, "the server is shutting down", "server_shutting_down", "server_error"));
  }
  exchange->begin(sub.id, std::move(api), model);
}

// The served model, health, metrics and the chat page.
HttpResponse HttpServer::Impl::info(const HttpRequest& req) {
  const std::string path = path_of(req);
  auto model_json = [this] {
    return Json{{"id", model.id}, {"object", "model"}, {"created", model.created}, {"owned_by", "dsv4"},
                {"max_model_len", model.max_context}};
  };
  if (path == "/v1/models")
    return content(Json{{"object", "list"}, {"data", Json::array({model_json()})}}.dump(), "application/json");
  if (path.rfind("/v1/models/", 0) == 0) {
    const std::string id = path.substr(std::string("/v1/models/").size());
    if (id == model.id) return content(model_json().dump(), "application/json");
    ApiError e = bad_request("model", fmt::format("The model `{}` does not exist", id), "model_not_found");
    e.http_status = 404;
    return api_error_response(e);
  }
  if (path == "/health") {
    const bool up = !draining.load() && service.accepting() && service.loop_status().ok();
    return content(Json{{"status", up ? "ok" : "unavailable"}}.dump(), "application/json",
                   up ? http::status::ok : http::status::service_unavailable);
  }
  if (path == "/metrics")
    return content(format_metrics(service.metrics(), metrics.snapshot()), "text/plain; version=0.0.4");
  if (path == "/") return content(std::string(chat_page()), "text/html; charset=utf-8");
  return json_error(404, fmt::format("no route for {} {}", std::string(req.method_string()), path), "not_found");
}

}  // namespace dsv4::server
