// Routes and the HTTP <-> Service bridge (server.h).
#include "server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace dsv4::server {
namespace {

using Json = nlohmann::ordered_json;

// One request's updates, from the service thread (push) to its HTTP handler thread (take).
class UpdateQueue {
 public:
  void push(const RequestUpdate& u) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      updates_.push_back(u);
      if (u.finished) finished_ = true;
    }
    ready_.notify_one();
  }
  // Waits for at least one update and moves every queued one out.
  std::vector<RequestUpdate> take() {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [&] { return !updates_.empty(); });
    return take_locked();
  }
  // The same, waiting at most `seconds` (then nothing).
  std::vector<RequestUpdate> take_for(double seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return !updates_.empty(); });
    return take_locked();
  }
  bool finished() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }

 private:
  std::vector<RequestUpdate> take_locked() {
    std::vector<RequestUpdate> out(std::make_move_iterator(updates_.begin()), std::make_move_iterator(updates_.end()));
    updates_.clear();
    return out;
  }

  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<RequestUpdate> updates_;
  bool finished_ = false;
};

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(error_body(e), "application/json");
}

ApiError server_error(int status, std::string message, std::string code, std::string type = "server_error") {
  ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.code = std::move(code);
  e.type = std::move(type);
  return e;
}

// Constant-time comparison of the presented key.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

std::string route_label(const std::string& path) {
  for (const char* r : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics", "/"})
    if (path == r) return path;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

HttpServer::HttpServer(Service& service, const ModelCard& model, const ServerOptions& options)
    : service_(service), model_(model), options_(options), http_(std::make_unique<httplib::Server>()),
      seed_counter_(0), seed_base_(std::random_device{}()) {
  const int threads = options_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_tcp_nodelay(true);  // small responses and SSE chunks go out at once (no Nagle wait)
  http_->set_keep_alive_timeout(2);
  http_->set_read_timeout(30);
  http_->set_write_timeout(30);
  routes();
}

HttpServer::~HttpServer() = default;

uint64_t HttpServer::next_seed() { return splitmix64(seed_base_ + seed_counter_.fetch_add(1)); }

Result<int> HttpServer::bind() {
  if (options_.port < 0 || options_.port > 65535)
    return Status::errorf("--port {} is outside [0, 65535]", options_.port);
  if (options_.port == 0) {
    const int port = http_->bind_to_any_port(options_.host);
    if (port <= 0) return Status::errorf("cannot bind {}:any port", options_.host);
    return port;
  }
  if (!http_->bind_to_port(options_.host, options_.port))
    return Status::errorf("cannot bind {}:{} (in use, or not a local address)", options_.host, options_.port);
  return options_.port;
}

Status HttpServer::run() {
  if (!http_->listen_after_bind()) return Status::error("the HTTP server stopped with an error");
  return Status();
}

void HttpServer::stop() {
  draining_.store(true);
  http_->stop();
}

void HttpServer::drain(double grace_seconds) {
  draining_.store(true);
  service_.shutdown(grace_seconds);
  // Every request has its last update now; give the streams a moment to write it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (active_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // A signal right after bind(): stop() only acts once run() is listening.
  while (!http_->is_running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http_->stop();
}

void HttpServer::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  const uint64_t seed = next_seed();
  ApiResult<ApiRequest> parsed = endpoint == Endpoint::kChat ? parse_chat_request(req.body, model_, seed)
                                                             : parse_completions_request(req.body, model_, seed);
  if (!parsed.ok()) return reply_error(res, parsed.error());
  if (draining_.load())
    return reply_error(res, server_error(503, "the server is shutting down", "server_shutting_down"));
  ApiRequest& api = *parsed;
  api.gen.timeout_seconds = options_.request_timeout;

  auto queue = std::make_shared<UpdateQueue>();
  const Service::Submitted sub = service_.submit(api.gen, [queue](const RequestUpdate& u) { queue->push(u); });
  switch (sub.error) {
    case Service::SubmitError::kNone: break;
    case Service::SubmitError::kInvalid:
      return reply_error(res, bad_request("", sub.message));
    case Service::SubmitError::kQueueFull:
      res.set_header("Retry-After", std::to_string(options_.retry_after_seconds));
      return reply_error(res, server_error(429, "the request queue is full: " + sub.message, "queue_full",
                                           "rate_limit_error"));
    case Service::SubmitError::kStopping:
      return reply_error(res, server_error(503, "the server is shutting down", "server_shutting_down"));
  }
  const std::string id = fmt::format("{}-{}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", sub.id);
  auto builder = std::make_shared<ResponseBuilder>(api, model_, id, static_cast<int64_t>(std::time(nullptr)));

  if (!api.stream) {
    while (!builder->finished())
      for (const RequestUpdate& u : queue->take()) builder->add(u);
    ApiResult<std::string> body = builder->response();
    if (!body.ok()) return reply_error(res, body.error());
    res.set_content(*body, "application/json");
    return;
  }

  // Streams: the provider runs on this worker after the handler returns; it sends each batch of
  // updates as SSE events, and an SSE comment line when nothing came for a while (a queued or
  // long-prefilling request), so that a client that left is noticed. A failed write means the
  // client left: cancel (pages freed at the next step). The releaser runs when the response ends
  // either way.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  Service* service = &service_;
  std::atomic<int>* active = &active_;
  const int64_t rid = sub.id;
  const double keepalive = options_.keepalive_seconds;
  active->fetch_add(1);
  res.set_chunked_content_provider(
      "text/event-stream",
      [queue, builder, service, rid, keepalive](size_t, httplib::DataSink& sink) {
        const std::vector<RequestUpdate> updates = queue->take_for(keepalive);
        std::string events = updates.empty() ? ": keep-alive\n\n" : "";
        for (const RequestUpdate& u : updates) events += builder->add(u);
        if (!events.empty() && !sink.write(events.data(), events.size())) {
          service->cancel(rid);
          return false;
        }
        if (builder->finished()) sink.done();
        return true;
      },
      [queue, service, rid, active](bool) {
        if (!queue->finished()) service->cancel(rid);
        active->fetch_sub(1);
      });
}

void HttpServer::routes() {
  require_api_key();
  generation_routes();
  info_routes();
  error_responses();
}

// With --api-key, every /v1/ path needs "Authorization: Bearer <key>" (401 otherwise).
void HttpServer::require_api_key() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_secret(auth.substr(prefix.size()), options_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.http_status = 401;
    e.message = auth.empty() ? "missing API key: send the header \"Authorization: Bearer <key>\""
                             : "incorrect API key provided";
    e.code = "invalid_api_key";
    reply_error(res, e);
    res.set_header("WWW-Authenticate", "Bearer");
    return httplib::Server::HandlerResponse::Handled;
  });
}

void HttpServer::generation_routes() {
  httplib::Server& s = *http_;
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::kCompletions);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::kChat);
  });
}

// The served model, health, metrics and the chat page.
void HttpServer::info_routes() {
  httplib::Server& s = *http_;
  auto model_json = [this] {
    return Json{{"id", model_.id}, {"object", "model"}, {"created", model_.created}, {"owned_by", "dsv4"},
                {"max_model_len", model_.max_context}};
  };
  s.Get("/v1/models", [model_json](const httplib::Request&, httplib::Response& res) {
    res.set_content(Json{{"object", "list"}, {"data", Json::array({model_json()})}}.dump(), "application/json");
  });
  s.Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] == model_.id) return res.set_content(model_json().dump(), "application/json");
    ApiError e = bad_request("model", fmt::format("The model `{}` does not exist", req.matches[1].str()),
                             "model_not_found");
    e.http_status = 404;
    reply_error(res, e);
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool up = !draining_.load() && service_.accepting() && service_.loop_status().ok();
    res.status = up ? 200 : 503;
    res.set_content(Json{{"status", up ? "ok" : "unavailable"}}.dump(), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(format_metrics(service_.metrics(), http_metrics_.snapshot()), "text/plain; version=0.0.4");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = chat_page();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
}

void HttpServer::error_responses() {
  httplib::Server& s = *http_;
  // Responses httplib makes itself (no route, body too large, bad request line) get an
  // OpenAI-style body too; handlers' own error bodies are left alone.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.http_status = res.status;
    if (res.status == 413) {
      e.message = fmt::format("the request body exceeds the server's limit of {} bytes", options_.max_body_bytes);
      e.code = "request_too_large";
    } else if (res.status == 404) {
      e.message = fmt::format("no route for {} {}", req.method, req.path);
      e.code = "not_found";
    } else {
      e.message = fmt::format("HTTP {}", res.status);
    }
    res.set_content(error_body(e), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    reply_error(res, server_error(500, "internal error: " + what, "internal_error"));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    http_metrics_.count(route_label(req.path), res.status);
  });
}

}  // namespace dsv4::server
