// Access checks on header fields (http_policy.h).
#include "http_policy.h"

#include <algorithm>
#include <cctype>

namespace dsv4::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool listed(const std::vector<std::string>& list, std::string_view item) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& s) { return lower(s) == lower(item); });
}

// The bound address as a Host name ("::1" matches Host "[::1]"); never a wildcard bind's.
bool is_bound_address(std::string_view bound_host, std::string_view name) {
  std::string bound = lower(trim(bound_host));
  if (bound.size() >= 2 && bound.front() == '[' && bound.back() == ']') bound = bound.substr(1, bound.size() - 2);
  return !bound.empty() && bound != "0.0.0.0" && bound != "::" && bound == name;
}

}  // namespace

bool is_loopback_address(std::string_view host) {
  const std::string h = lower(host);
  return h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
}

std::string host_name(std::string_view host_header) {
  std::string_view h = trim(host_header);
  if (h.empty()) return "";
  if (h.front() == '[') {  // [v6]:port
    const size_t close = h.find(']');
    if (close == std::string_view::npos) return "";
    std::string_view rest = h.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return "";
    return lower(h.substr(1, close - 1));
  }
  const size_t colon = h.find(':');
  if (colon != std::string_view::npos) {
    std::string_view port = h.substr(colon + 1);
    if (port.empty() || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return "";
    h = h.substr(0, colon);
  }
  return lower(h);
}

bool host_allowed(const AccessPolicy& policy, std::string_view host_header) {
  const std::string name = host_name(host_header);
  if (name.empty()) return false;
  if (listed(policy.allowed_hosts, name)) return true;
  if (is_bound_address(policy.bound_host, name)) return true;
  if (policy.loopback_bind) return name == "localhost" || name == "127.0.0.1" || name == "::1";
  return policy.allowed_hosts.empty();
}

bool is_cors_origin(const AccessPolicy& policy, std::string_view origin) {
  return !policy.cors_origin.empty() && lower(trim(origin)) == lower(policy.cors_origin);
}

bool is_trusted_proxy(const AccessPolicy& policy, std::string_view peer) { return listed(policy.trusted_proxies, peer); }

bool origin_allowed(const AccessPolicy& policy, std::string_view origin, std::string_view host_header) {
  if (origin.empty() || is_cors_origin(policy, origin)) return true;
  const std::string o = lower(trim(origin));
  const std::string host = lower(trim(host_header));
  return o == "http://" + host || o == "https://" + host;
}

bool is_json_content_type(std::string_view content_type) {
  std::string_view t = content_type.substr(0, content_type.find(';'));
  return lower(trim(t)) == "application/json";
}

std::string client_address(const AccessPolicy& policy, const std::string& peer, std::string_view forwarded_for) {
  if (!is_trusted_proxy(policy, peer)) return peer;
  const std::vector<std::string> hops = split_list(forwarded_for);
  for (auto it = hops.rbegin(); it != hops.rend(); ++it)
    if (!listed(policy.trusted_proxies, *it)) return *it;
  return peer;
}

bool same_secret(std::string_view presented, std::string_view key) {
  if (key.empty()) return false;
  unsigned char diff = presented.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i)
    diff |= static_cast<unsigned char>(presented[i] ^ key[i % key.size()]);
  return diff == 0;
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  std::string_view a = trim(authorization);
  const size_t space = a.find(' ');
  if (space == std::string_view::npos || lower(a.substr(0, space)) != "bearer") return std::nullopt;
  const std::string_view token = trim(a.substr(space + 1));
  if (token.empty()) return std::nullopt;
  return token;
}

int find_key(std::span<const std::string> keys, std::string_view token) {
  int found = -1;
  for (size_t i = 0; i < keys.size(); ++i)
    if (same_secret(token, keys[i])) found = static_cast<int>(i);
  return found;
}

std::string tenant_cache_salt(int tenant, std::string_view cache_salt) {
  return "key " + std::to_string(tenant) + "\n" + std::string(cache_salt);
}

Result<std::vector<std::string>> parse_api_keys(std::string_view text, const std::string& path) {
  std::vector<std::string> keys;
  std::vector<int> lines;
  int line = 0;
  while (!text.empty()) {
    ++line;
    const size_t end = text.find('\n');
    std::string_view key = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!key.empty() && key.back() == '\r') key.remove_suffix(1);
    key = trim(key);
    if (key.empty() || key.front() == '#') continue;
    if (key.size() > kMaxApiKeyBytes)
      return Status::errorf("{}:{}: the key has {} bytes, the limit is {}", path, line, key.size(), kMaxApiKeyBytes);
    for (char c : key)
      if (c <= 0x20 || c > 0x7e)
        return Status::errorf("{}:{}: a key holds printable ASCII without spaces (byte 0x{:02x} found)", path, line,
                              static_cast<unsigned>(static_cast<unsigned char>(c)));
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return Status::errorf("{}:{}: the key of line {} again", path, line, lines[i]);
    keys.emplace_back(key);
    lines.push_back(line);
  }
  if (keys.empty()) return Status::errorf("{}: no key (one per line; '#' starts a comment line)", path);
  return keys;
}

bool transfer_encoding_ok(std::span<const std::string_view> values) {
  if (values.empty()) return true;
  return values.size() == 1 && lower(trim(values[0])) == "chunked";
}

std::vector<std::string> split_list(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace dsv4::server
