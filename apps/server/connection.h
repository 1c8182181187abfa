// One HTTP/1.1 connection on Boost.Beast, event-driven: no thread waits for it. Per request:
//   idle wait for the first byte (--idle-timeout) -> header under a deadline (--read-timeout,
//   from that byte to the body's last one; a slow sender's socket is closed at it, whatever
//   its pace) -> Routes::check on the header (limits, Host, Origin, key: refused requests
//   never have their body read) -> body (--max-body-bytes for every framing) -> Routes::handle.
// The handler answers with reply(), or starts a stream (start_stream, send, end_stream); while
// it is pending the connection watches the socket and calls on_gone once if the client closes
// (a pending read sees the close; a pipelined request falls back to polling POLLRDHUP).
// Every member function runs on the connection's strand (executor()).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http_policy.h"

namespace dsv4::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;


// Open connections in all and per client address (thread-safe).
class ConnectionTable {
 public:
  ConnectionTable(int max_total, int max_per_client) : max_total_(max_total), max_per_client_(max_per_client) {}
  // Counts a new connection; false (nothing counted) over the total limit.
  bool add_connection();
  void remove_connection();
  // Counts the connection against a client address; false (nothing counted) over its limit.
  bool add_client(const std::string& address);
  void remove_client(const std::string& address);
  int open() const;

 private:
  mutable std::mutex mu_;
  int max_total_, max_per_client_;
  int open_ = 0;
  std::map<std::string, int> per_client_;
};

class Connection;

// One request as the access log shows it (Routes::log), once its response is written or the
// connection closed under it.
struct AccessRecord {
  std::string id;          // the server's id of the request (the response's id for a generation)
  std::string client_id;   // the client's X-Request-Id ("": none or unusable)
  std::string target;
  int status = 0;
  int64_t prompt_tokens = -1, completion_tokens = -1, cached_tokens = -1;  // -1: not a generation
  double ttft_ms = -1;     // header read -> the first generated token (-1: none)
  double total_ms = 0;     // header read -> the response's last byte
};

// X-Request-Id as the client sent it when it is 1..128 printable ASCII characters, else "".
std::string client_request_id(std::string_view header);

// The server's side of a connection.
struct Routes {
  // Called with the header read: an error response refuses the request (its body is not read
  // and the connection closes after it), nullopt reads on.
  std::function<std::optional<HttpResponse>(Connection&, const HttpRequest&)> check;
  // Called with the whole request; answers with reply() or a stream, now or later.
  std::function<void(const std::shared_ptr<Connection>&, HttpRequest&&)> handle;
  // Called with every response status sent (metrics) and the request's target.
  std::function<void(const std::string& target, int status)> count;
  // A new X-Request-Id for a request without a usable one (or without a handler's own).
  std::function<std::string()> new_id;
  // Called once per answered request (the access log).
  std::function<void(const AccessRecord&)> log;
};

// An OpenAI-style JSON error response.
HttpResponse json_error(int status, const std::string& message, const std::string& code,
                        const std::string& type = "invalid_request_error");

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const ConnectionLimits& limits, const Routes& routes, ConnectionTable& table,
             std::string peer, bool peer_counted);
  ~Connection();

  void start();
  net::any_io_executor executor() { return stream_.get_executor(); }
  const std::string& peer() const { return peer_; }
  // Counts the connection against another client address (a proxied client's); false: over its limit.
  bool account_to(const std::string& client);

  // A complete response to the current request.
  void reply(HttpResponse res);
  // A chunked response: its header now, then each send() as one chunk; end_stream() ends it.
  void start_stream(HttpResponse head);
  void send(std::string data);
  void end_stream();
  // Called once if the client goes away while the current request is pending (then the
  // connection closes; replies after that are dropped).
  void on_gone(std::function<void()> callback) { on_gone_ = std::move(callback); }
  bool closed() const { return closed_; }
  // The current request's id on the server's side: "" until a handler sets one (a response
  // without one gets Routes::new_id()). Every response's X-Request-Id is the client's own
  // (client_request_id) when it sent one, else this id; the access log keeps both.
  const std::string& request_id() const { return record_.id; }
  void set_request_id(std::string id) { record_.id = std::move(id); }
  // The tenant of the current request: the index of the API key it presented (-1: none).
  int tenant() const { return tenant_; }
  void set_tenant(int tenant) { tenant_ = tenant; }
  // For the access log: the generation's token counts, and the moment of its first token.
  void note_usage(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);
  void note_first_token();

 private:
  void wait_request();
  void read_header();
  void on_header(boost::beast::error_code ec);
  void on_request(boost::beast::error_code ec);
  void refuse(HttpResponse res);  // an error before the body: reply and close
  std::optional<HttpResponse> framing_error(const HttpRequest& req) const;
  std::string response_id();      // X-Request-Id of the response (assigns the server's id)
  void send_response(std::shared_ptr<HttpResponse> res);
  void after_response(boost::beast::error_code ec);
  void linger();
  void drain_input();
  void watch_client();
  void poll_client();
  void stop_watch();
  void write_next();
  void close();
  void log_request();  // the access-log record, once per request
  double elapsed_ms() const;

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const ConnectionLimits& limits_;
  const Routes& routes_;
  ConnectionTable& table_;
  std::string peer_, client_;
  bool client_counted_ = false;
  std::string target_;     // the current request's, for metrics
  bool keep_alive_ = false;
  unsigned version_ = 11;  // the request's HTTP version (10 or 11)
  bool pending_ = false;   // a request is being answered
  bool answered_ = false;  // its reply or stream has started
  bool closed_ = false;
  std::function<void()> on_gone_;
  uint64_t watch_epoch_ = 0;  // a watch's completion from an earlier epoch is stale
  net::steady_timer poll_timer_;
  // Streams.
  std::optional<HttpResponse> stream_head_;
  std::optional<http::response_serializer<http::string_body>> serializer_;
  std::string queued_, writing_;
  bool streaming_ = false, chunked_ = true, writing_now_ = false, ending_ = false;
  int status_ = 0;
  char discard_[4096];  // lingering input, dropped
  // The current request's access-log record, from its header on.
  AccessRecord record_;
  int tenant_ = -1;
  std::chrono::steady_clock::time_point started_;
  bool logged_ = true;
};

}  // namespace dsv4::server
