// One HTTP connection's reads, deadlines, replies, streams and client watch (connection.h).
#include "connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <utility>
#include <vector>

#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "protocol.h"

namespace dsv4::server {
namespace {

namespace beast = boost::beast;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

constexpr auto kPollInterval = std::chrono::milliseconds(250);
constexpr auto kLinger = std::chrono::seconds(2);  // a refused client's last bytes
// Unparsed input held at once: a header, or one read of body. Beast bounds neither a chunk-size
// line (extensions) nor a trailer, so the buffer's own ceiling does (error::buffer_overflow).
constexpr size_t kReadChunk = 65536;

int field_count(const HttpRequest& req) {
  int n = 0;
  for (auto it = req.begin(); it != req.end(); ++it) ++n;
  return n;
}

}  // namespace

bool ConnectionTable::add_connection() {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_ >= max_total_) return false;
  ++open_;
  return true;
}

void ConnectionTable::remove_connection() {
  std::lock_guard<std::mutex> lock(mu_);
  --open_;
}

bool ConnectionTable::add_client(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  int& n = per_client_[address];
  if (n >= max_per_client_) {
    if (n == 0) per_client_.erase(address);
    return false;
  }
  ++n;
  return true;
}

void ConnectionTable::remove_client(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_client_.find(address);
  if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
}

int ConnectionTable::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

HttpResponse json_error(int status, const std::string& message, const std::string& code, const std::string& type) {
  ApiError e;
  e.http_status = status;
  e.message = message;
  e.code = code;
  e.type = type;
  HttpResponse res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.body() = error_body(e);
  return res;
}

Connection::Connection(tcp::socket socket, const ConnectionLimits& limits, const Routes& routes,
                       ConnectionTable& table, std::string peer, bool peer_counted)
    : stream_(std::move(socket)), buffer_(limits.max_header_bytes + kReadChunk), limits_(limits), routes_(routes), table_(table), peer_(std::move(peer)),
      client_(peer_), client_counted_(peer_counted), poll_timer_(stream_.get_executor()) {}

Connection::~Connection() {
  if (client_counted_) table_.remove_client(client_);
  table_.remove_connection();
}

bool Connection::account_to(const std::string& client) {
  if (client == client_) return true;
  if (!table_.add_client(client)) return false;
  if (client_counted_) table_.remove_client(client_);
  client_ = client;
  client_counted_ = true;
  return true;
}

void Connection::start() {
  boost::system::error_code ec;
  stream_.socket().set_option(tcp::no_delay(true), ec);  // SSE chunks go out at once
  wait_request();
}

// Waits (idle timeout) for the first byte of the next request, unless it is already buffered.
void Connection::wait_request() {
  pending_ = answered_ = false;
  on_gone_ = nullptr;
  if (buffer_.size() > 0) return read_header();
  stream_.expires_after(seconds(limits_.idle_timeout));
  stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
    if (ec) return self->close();
    self->buffer_.commit(n);
    self->read_header();
  });
}

void Connection::read_header() {
  parser_.emplace();
  parser_->header_limit(limits_.max_header_bytes);
  parser_->body_limit(limits_.max_body_bytes);
  stream_.expires_after(seconds(limits_.read_timeout));  // one deadline for the header and the body
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

std::string client_request_id(std::string_view header) {
  if (header.empty() || header.size() > 128) return {};
  for (char c : header)
    if (c < 0x20 || c > 0x7e) return {};
  return std::string(header);
}

void Connection::on_header(beast::error_code ec) {
  target_ = std::string(parser_->get().target());
  version_ = parser_->get().version() == 10 ? 10 : 11;
  record_ = AccessRecord{};
  record_.target = target_;
  record_.client_id = client_request_id(parser_->get()["X-Request-Id"]);
  tenant_ = -1;
  started_ = std::chrono::steady_clock::now();
  logged_ = false;
  status_ = 0;
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return refuse(json_error(431, fmt::format("the request header exceeds {} bytes", limits_.max_header_bytes),
                             "headers_too_large"));
  if (ec == http::error::body_limit)
    return refuse(json_error(413, fmt::format("the request body exceeds the server's limit of {} bytes",
                                              limits_.max_body_bytes), "request_too_large"));
  if (ec) {
    // Past --read-timeout the stream has closed the socket already: nothing can be answered.
    if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset)
      return close();
    return refuse(json_error(400, fmt::format("malformed HTTP request: {}", ec.message()), "bad_request"));
  }
  const HttpRequest& req = parser_->get();
  if (const int fields = field_count(req); fields > limits_.max_headers)
    return refuse(json_error(431, fmt::format("the request has {} header fields, the limit is {}", fields,
                                              limits_.max_headers), "headers_too_large"));
  if (std::optional<HttpResponse> bad = framing_error(req)) return refuse(std::move(*bad));
  // A body needs a length or chunks: an unframed one has no size to check against the limit.
  if (req.method() == http::verb::post && !parser_->chunked() && !parser_->content_length())
    return refuse(json_error(413, fmt::format("a request body needs Content-Length or chunked encoding "
                                              "(at most {} bytes)", limits_.max_body_bytes), "request_too_large"));
  if (std::optional<HttpResponse> refused = routes_.check(*this, req)) return refuse(std::move(*refused));

  auto read_body = [self = shared_from_this()] {
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](beast::error_code e, size_t) { self->on_request(e); });
  };
  if (parser_->is_done()) return on_request({});
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    return http::async_write(stream_, *cont, [cont, read_body, self = shared_from_this()](beast::error_code e, size_t) {
      if (e) return self->close();
      read_body();
    });
  }
  read_body();
}

// Header fields that make the request's end or target ambiguous (RFC 9112 §6.1, §3.2): a
// Transfer-Encoding other than exactly "chunked" (its body's end is unknown: what follows could
// be read as a second request), and Host given twice.
std::optional<HttpResponse> Connection::framing_error(const HttpRequest& req) const {
  std::vector<std::string_view> codings;
  for (auto [it, end] = req.equal_range(http::field::transfer_encoding); it != end; ++it)
    codings.emplace_back(it->value().data(), it->value().size());
  if (!transfer_encoding_ok(codings)) {
    std::string shown;
    for (std::string_view c : codings) shown += (shown.empty() ? "" : ", ") + std::string(c.substr(0, 64));
    return json_error(400, fmt::format("Transfer-Encoding \"{}\" is not supported: a request body is sent with "
                                       "Content-Length or exactly \"Transfer-Encoding: chunked\"", shown),
                      "bad_request");
  }
  if (req.count(http::field::host) > 1)
    return json_error(400, "the request has more than one Host header field", "bad_request");
  return std::nullopt;
}

void Connection::on_request(beast::error_code ec) {
  if (ec == http::error::buffer_overflow)
    return refuse(json_error(413, fmt::format("a chunk line or trailer exceeds {} bytes", buffer_.max_size()),
                             "request_too_large"));
  if (ec == http::error::body_limit)
    return refuse(json_error(413, fmt::format("the request body exceeds the server's limit of {} bytes",
                                              limits_.max_body_bytes), "request_too_large"));
  if (ec) {
    // Past --read-timeout the socket is closed already; a client that left hears nothing.
    if (ec == beast::error::timeout || ec == http::error::partial_message || ec == http::error::end_of_stream ||
        ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::operation_aborted)
      return close();
    return refuse(json_error(400, fmt::format("malformed HTTP request body: {}", ec.message()), "bad_request"));
  }
  if (field_count(parser_->get()) > limits_.max_headers)  // trailer fields join the header's
    return refuse(json_error(431, fmt::format("the request has more than {} header and trailer fields",
                                              limits_.max_headers), "headers_too_large"));
  stream_.expires_never();
  HttpRequest req = parser_->release();
  keep_alive_ = req.keep_alive();
  pending_ = true;
  watch_client();
  routes_.handle(shared_from_this(), std::move(req));
}

void Connection::refuse(HttpResponse res) {
  keep_alive_ = false;
  pending_ = true;
  answered_ = false;
  reply(std::move(res));
}

void Connection::reply(HttpResponse res) {
  if (closed_ || !pending_ || answered_) return;
  answered_ = true;
  stop_watch();
  res.version(version_);
  res.keep_alive(keep_alive_);
  res.prepare_payload();
  send_response(std::make_shared<HttpResponse>(std::move(res)));
}

std::string Connection::response_id() {
  if (record_.id.empty() && routes_.new_id) record_.id = routes_.new_id();
  return record_.client_id.empty() ? record_.id : record_.client_id;
}

void Connection::send_response(std::shared_ptr<HttpResponse> res) {
  status_ = res->result_int();
  res->set("X-Request-Id", response_id());
  if (routes_.count) routes_.count(target_, status_);
  stream_.expires_after(seconds(limits_.write_timeout));
  http::async_write(stream_, *res, [res, self = shared_from_this()](beast::error_code ec, size_t) {
    self->after_response(ec);
  });
}

double Connection::elapsed_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_).count();
}

void Connection::note_usage(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  record_.prompt_tokens = prompt_tokens;
  record_.completion_tokens = completion_tokens;
  record_.cached_tokens = cached_tokens;
}

void Connection::note_first_token() {
  if (record_.ttft_ms < 0) record_.ttft_ms = elapsed_ms();
}

void Connection::log_request() {
  if (logged_ || (status_ == 0 && !pending_)) return;
  logged_ = true;
  record_.status = status_ != 0 ? status_ : 499;  // 499: the client left before any response
  record_.total_ms = elapsed_ms();
  if (routes_.log) routes_.log(record_);
}

void Connection::after_response(beast::error_code ec) {
  log_request();
  pending_ = false;
  if (ec) return close();
  if (!keep_alive_) return linger();
  stream_.expires_never();
  wait_request();
}

// Closing with unread input would reset the connection and could discard the response at the
// client: send FIN, then read and drop what still comes for a short while.
void Connection::linger() {
  boost::system::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  stream_.expires_after(kLinger);  // once: the whole drain
  drain_input();
}

void Connection::drain_input() {
  stream_.async_read_some(net::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) return self->close();
    self->drain_input();
  });
}

void Connection::start_stream(HttpResponse head) {
  if (closed_ || !pending_ || answered_) return;
  answered_ = streaming_ = true;
  // HTTP/1.0 has no chunks: its stream is unframed and ends with the connection.
  chunked_ = version_ >= 11;
  if (!chunked_) keep_alive_ = false;
  head.version(version_);
  head.keep_alive(keep_alive_);
  head.chunked(chunked_);
  stream_head_.emplace(std::move(head));
  status_ = stream_head_->result_int();
  stream_head_->set("X-Request-Id", response_id());
  serializer_.emplace(*stream_head_);
  if (routes_.count) routes_.count(target_, status_);
  writing_now_ = true;
  stream_.expires_after(seconds(limits_.write_timeout));
  http::async_write_header(stream_, *serializer_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_now_ = false;
    if (ec) return self->close();
    self->stream_.expires_never();
    self->write_next();
  });
}

void Connection::send(std::string data) {
  if (closed_ || !streaming_ || ending_ || data.empty()) return;
  queued_ += data;
  if (!writing_now_) write_next();
}

void Connection::end_stream() {
  if (closed_ || !streaming_) return;
  ending_ = true;
  if (!writing_now_) write_next();
}

// One write at a time: the queued data as one chunk, then (when ending) the last chunk.
void Connection::write_next() {
  if (closed_) return;
  auto done = [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_now_ = false;
    if (ec) return self->close();
    self->stream_.expires_never();
    self->write_next();
  };
  if (!queued_.empty()) {
    writing_.swap(queued_);
    queued_.clear();
    writing_now_ = true;
    stream_.expires_after(seconds(limits_.write_timeout));
    if (!chunked_) return net::async_write(stream_, net::buffer(writing_), done);
    return net::async_write(stream_, http::make_chunk(net::buffer(writing_)), done);
  }
  if (!ending_) return;
  streaming_ = ending_ = false;
  stop_watch();
  if (!chunked_) {
    serializer_.reset();
    stream_head_.reset();
    return after_response({});
  }
  writing_now_ = true;
  stream_.expires_after(seconds(limits_.write_timeout));
  net::async_write(stream_, http::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_now_ = false;
    self->serializer_.reset();
    self->stream_head_.reset();
    self->after_response(ec);
  });
}

// While a request is pending: a readable socket is either the client's close (gone) or a
// pipelined request (then poll for the close, which a read would consume the request for).
void Connection::watch_client() {
  const uint64_t epoch = ++watch_epoch_;
  if (buffer_.size() > 0) return poll_client();
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), epoch](beast::error_code ec) {
    if (epoch != self->watch_epoch_ || !self->pending_ || self->closed_) return;
    if (ec) return self->close();
    char c;
    const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return self->close();
    if (n < 0) return self->watch_client();
    self->poll_client();
  });
}

void Connection::poll_client() {
  const uint64_t epoch = watch_epoch_;
  poll_timer_.expires_after(kPollInterval);
  poll_timer_.async_wait([self = shared_from_this(), epoch](beast::error_code ec) {
    if (ec || epoch != self->watch_epoch_ || !self->pending_ || self->closed_) return;
    pollfd p{self->stream_.socket().native_handle(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) return self->close();
    self->poll_client();
  });
}

void Connection::stop_watch() {
  ++watch_epoch_;
  boost::system::error_code ec;
  poll_timer_.cancel();
  if (!writing_now_) stream_.socket().cancel(ec);  // the pending wait (no write is in flight)
}

// Also the client's departure: a pending request's on_gone runs first.
void Connection::close() {
  if (closed_) return;
  closed_ = true;
  if (pending_ && on_gone_) {
    auto callback = std::move(on_gone_);
    on_gone_ = nullptr;
    callback();
  }
  log_request();  // a stream the client left, or a write that failed
  ++watch_epoch_;
  boost::system::error_code ec;
  poll_timer_.cancel();
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
}

}  // namespace dsv4::server
