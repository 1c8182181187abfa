// Who may talk to the server, as pure functions of a request's header fields (no sockets):
// the Host check against DNS rebinding, the Origin check against cross-site pages, the JSON
// content type (a text/plain POST needs no CORS preflight), the client address behind trusted
// proxies, and the API key. The security model is docs/serving.md's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::server {

// What one request may send, and how long it may take (Connection enforces them).
struct ConnectionLimits {
  uint64_t max_body_bytes = 8u << 20;
  uint32_t max_header_bytes = 16384;
  int max_headers = 100;
  double read_timeout = 30;   // seconds from a request's first byte to its last body byte
  double idle_timeout = 15;   // seconds a connection may wait for its next request
  double write_timeout = 30;  // seconds one write may take (a client that stops reading)
};

struct AccessPolicy {
  bool loopback_bind = true;               // the server listens on a loopback address only
  std::vector<std::string> allowed_hosts;  // --allowed-hosts: extra Host names (no port)
  std::string cors_origin;                 // --cors-origin: the one cross origin allowed ("" none)
  std::vector<std::string> trusted_proxies;  // --trusted-proxies: peers whose X-Forwarded-For counts
  std::string api_key;                     // non-empty: /v1/* needs "Authorization: Bearer <key>"
};

// 127.0.0.0/8, ::1, "localhost".
bool is_loopback_address(std::string_view host);

// The host name of a Host header without its port ("[::1]:8000" -> "::1"); "" when malformed.
std::string host_name(std::string_view host_header);

// Loopback bind: localhost, 127.0.0.1, ::1 (any port) or an allowed host; otherwise only the
// allowed hosts when some are given, else any.
bool host_allowed(const AccessPolicy& policy, std::string_view host_header);

// A request without Origin (not a browser, or a same-origin GET) passes; with one, it must be
// the request's own origin (http(s)://<Host>) or --cors-origin.
bool origin_allowed(const AccessPolicy& policy, std::string_view origin, std::string_view host_header);

// The --cors-origin origin (never when none is set).
bool is_cors_origin(const AccessPolicy& policy, std::string_view origin);

// A peer listed in --trusted-proxies.
bool is_trusted_proxy(const AccessPolicy& policy, std::string_view peer);

// "application/json", any case, parameters (charset) allowed.
bool is_json_content_type(std::string_view content_type);

// The client's address: the peer's, or behind a trusted proxy the right-most X-Forwarded-For
// entry that is not itself a trusted proxy.
std::string client_address(const AccessPolicy& policy, const std::string& peer, std::string_view forwarded_for);

// Constant-time comparison of the presented key with the configured one (never equal when the
// configured key is empty).
bool same_secret(std::string_view presented, std::string_view key);

// Splits "a,b, c" into its non-empty trimmed items.
std::vector<std::string> split_list(std::string_view list);

}  // namespace dsv4::server
