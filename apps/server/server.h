// The OpenAI-compatible HTTP server (cpp-httplib): routes, authentication, limits and the bridge
// from HTTP handler threads to the Service (runtime/service.h).
//
//   POST /v1/completions, POST /v1/chat/completions   (stream: server-sent events, data: [DONE])
//   GET  /v1/models, /v1/models/{id}, /health, /metrics, /  (the chat page)
//
// Each request: parse (protocol.h) -> Service::submit with a sink that copies updates into the
// request's queue -> the handler thread drains the queue into one response (or SSE chunks).
// A stream whose client is gone (a failed write) cancels its request, which frees its pages at
// the next step; a non-streaming request runs to its end (max_tokens, --request-timeout).
// Every HTTP worker holds one connection, so the pool is sized for the concurrent streams.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "metrics.h"
#include "protocol.h"
#include "runtime/service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace dsv4::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port (bind() returns it)
  std::string api_key;              // non-empty: /v1/* needs "Authorization: Bearer <key>"
  size_t max_body_bytes = 8u << 20;  // larger bodies: 413
  int http_threads = 128;           // connections served at once (streams hold one each)
  double request_timeout = 0;       // seconds per request (GenerationRequest::timeout_seconds); 0: none
  int retry_after_seconds = 1;      // Retry-After of a 429 (queue full)
  double keepalive_seconds = 2;     // a stream with no update this long gets an SSE comment line
};

class HttpServer {
 public:
  // The service and the model card outlive the server.
  HttpServer(Service& service, const ModelCard& model, const ServerOptions& options);
  ~HttpServer();

  // Binds the listening socket; returns the port.
  Result<int> bind();
  // Serves until stop(); returns once every handler has returned.
  Status run();
  // Graceful shutdown (thread-safe; e.g. from the signal thread): new generation requests get
  // 503, the service finishes running and queued requests within grace_seconds and cancels the
  // rest (Service::shutdown), the streams write their last events, then run() returns.
  void drain(double grace_seconds);
  // Stops at once: closes the listening socket; run() returns when the handlers have.
  void stop();

  HttpMetrics& http_metrics() { return http_metrics_; }

 private:
  // routes(): require_api_key, then the generation and info routes, then error_responses
  // (error bodies, exceptions, the request log).
  void routes();
  void require_api_key();
  void generation_routes();
  void info_routes();
  void error_responses();
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  uint64_t next_seed();

  Service& service_;
  const ModelCard& model_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  HttpMetrics http_metrics_;
  std::atomic<uint64_t> seed_counter_;
  uint64_t seed_base_;
  std::atomic<bool> draining_{false};
  std::atomic<int> active_{0};  // streams still writing
};

// The chat page served at GET / (apps/server/web/chat.html, embedded at build time; a
// placeholder when the file was absent).
std::string_view chat_page();

}  // namespace dsv4::server
