// Who may talk to the server, as pure functions of a request's header fields (no sockets):
// the Host check against DNS rebinding, the Origin check against cross-site pages, the JSON
// content type (a text/plain POST needs no CORS preflight), the client address behind trusted
// proxies, the API keys (one per tenant), and the framing fields a request may carry
// (RFC 9112). The security model is docs/serving.md's.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

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
  std::string bound_host;                  // --host: the bound address, also a valid Host name
  std::vector<std::string> allowed_hosts;  // --allowed-hosts: extra Host names (no port)
  std::string cors_origin;                 // --cors-origin: the one cross origin allowed ("" none)
  std::vector<std::string> trusted_proxies;  // --trusted-proxies: peers whose X-Forwarded-For counts
  // Non-empty: /v1/*, /tokenize and /detokenize (and /metrics with metrics_auth) need
  // "Authorization: Bearer <key>" with one of these; key i is tenant i.
  std::vector<std::string> api_keys;
  bool metrics_auth = false;               // --metrics-auth: /metrics needs a key too
};

// 127.0.0.0/8, ::1, "localhost".
bool is_loopback_address(std::string_view host);

// The host name of a Host header without its port ("[::1]:8000" -> "::1"); "" when malformed.
std::string host_name(std::string_view host_header);

// The bound address (any port) and the allowed hosts always; besides, on a loopback bind
// localhost, 127.0.0.1 and ::1, on another bind any name when no allowed hosts are given.
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

// The credentials of "Authorization: Bearer <token>": the scheme in any case (RFC 9110 §11.1),
// then spaces, then the token; nullopt for another scheme or no token.
std::optional<std::string_view> bearer_token(std::string_view authorization);

// The tenant whose key the token is (its index in keys), or -1. Every key is compared, each in
// constant time, so the time tells nothing about which key matched or how closely.
int find_key(std::span<const std::string> keys, std::string_view token);

// The prefix-cache namespace (GenerationRequest::cache_salt) of a request by tenant `tenant`
// under --prefix-cache-scope key: the key's index, never its text, then the request's own
// cache_salt, so tenants share no cached block whatever salts they send.
std::string tenant_cache_salt(int tenant, std::string_view cache_salt);

// --api-key-file's keys: one per line, surrounding spaces and tabs trimmed; empty lines and
// lines starting with '#' are skipped. Errors name the file and line: a key with spaces or
// characters outside printable ASCII, a key longer than kMaxApiKeyBytes, a key given twice, or
// a file with none.
constexpr size_t kMaxApiKeyBytes = 4096;
Result<std::vector<std::string>> parse_api_keys(std::string_view text, const std::string& path);

// Framing (RFC 9112 §6.1): a request's Transfer-Encoding field values, every line of it; true
// when there are none or they are exactly one "chunked" (any case). Anything else (gzip,
// "chunked, identity", two lines) is answered 400 and the connection closed: the body's end
// would be unknown.
bool transfer_encoding_ok(std::span<const std::string_view> values);

// Splits "a,b, c" into its non-empty trimmed items.
std::vector<std::string> split_list(std::string_view list);

}  // namespace dsv4::server
