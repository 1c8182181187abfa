// The OpenAI-compatible HTTP server (Boost.Beast on Asio, event-driven): routes, access
// checks, limits and the bridge from connections to the Service (runtime/service.h).
//
//   POST /v1/completions, POST /v1/chat/completions   (stream: server-sent events, data: [DONE])
//   POST /tokenize, /detokenize                        (vLLM's; the tokenizer only)
//   GET  /v1/models, /v1/models/{id}, /health, /metrics, /  (the chat page)
//
// Each request: Connection reads it under its deadlines (connection.h) -> access checks on the
// header (http_policy.h) -> its charge on the admission budget (admission.h) -> on the parse
// pool: parse, render, tokenize and compile its grammar (protocol.h, Service::prepare; every
// POST route, /tokenize and /detokenize too) -> Service::submit with a sink that posts the
// updates to the connection's strand -> ResponseBuilder -> one response or SSE chunks. No
// thread waits for a request: a few I/O threads serve every connection, and the service thread
// stays the only one that steps. A client that leaves cancels its request, streamed or not.
// Limits and the security model: docs/serving.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "http_policy.h"
#include "metrics.h"
#include "protocol.h"
#include "runtime/service.h"

namespace dsv4::server {

struct AccessRecord;  // connection.h

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                   // 0: any free port (bind() returns it)
  AccessPolicy access;               // API key, allowed hosts, CORS origin, trusted proxies
  ConnectionLimits limits;           // body and header bytes, header fields, deadlines
  int max_connections = 1024;        // open connections in all (beyond: closed at once)
  int max_connections_per_client = 64;  // per client address
  int io_threads = 2;                // threads running the connections' I/O
  double request_timeout = 600;      // seconds per request (GenerationRequest::timeout_seconds); 0: none
  int retry_after_seconds = 1;       // Retry-After of a 429 (queue full)
  double keepalive_seconds = 2;      // a stream with no update this long gets an SSE comment line
  bool access_log = true;            // one JSON line per request on stderr (--access-log)
  bool json_whitespace_flexible = false;  // structured output's default layout (--json-whitespace)
  // --prefix-cache-scope key: each API key's requests get their own prefix-cache namespace
  // (tenant_cache_salt); global: only their cache_salt separates them.
  bool prefix_cache_per_key = false;
  // Bytes that the requests being parsed, queued and running may hold together
  // (--max-pending-bytes; admission.h); beyond: 503 + Retry-After. 0: default_pending_bytes().
  int64_t max_pending_bytes = 0;
};

// The access-log line of one request (JSON, no newline): {"id", "client_id", "route", "status",
// "prompt_tokens", "completion_tokens", "cached_tokens", "ttft_ms", "total_ms"}: id the server's,
// client_id the client's X-Request-Id (null: none); token counts and ttft_ms are null where
// the request generated nothing.
std::string access_log_line(const AccessRecord& r);

class HttpServer {
 public:
  // The service and the model card outlive the server.
  HttpServer(Service& service, const ModelCard& model, const ServerOptions& options);
  ~HttpServer();

  // Binds the listening socket; returns the port.
  Result<int> bind();
  // Serves until stop(); returns once the I/O threads have.
  Status run();
  // Graceful shutdown (thread-safe; e.g. from the signal thread): new generation requests get
  // 503, the service finishes running and queued requests within grace_seconds and cancels the
  // rest (Service::shutdown), the streams write their last events, then run() returns.
  void drain(double grace_seconds);
  // Stops at once: run() returns.
  void stop();

  HttpMetrics& http_metrics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The chat page served at GET / (apps/server/web/chat.html, embedded at build time; a
// placeholder when the file was absent).
std::string_view chat_page();

}  // namespace dsv4::server
