// Access checks on header fields (apps/server/http_policy.h).
#include "server/http_policy.h"

#include <gtest/gtest.h>

namespace dsv4::server {
namespace {

TEST(HttpPolicy, HostName) {
  EXPECT_EQ(host_name("127.0.0.1:8000"), "127.0.0.1");
  EXPECT_EQ(host_name("LocalHost"), "localhost");
  EXPECT_EQ(host_name("[::1]:80"), "::1");
  EXPECT_EQ(host_name("[::1]"), "::1");
  EXPECT_EQ(host_name(""), "");
  EXPECT_EQ(host_name("[::1"), "");
  EXPECT_EQ(host_name("[::1]x"), "");
  EXPECT_EQ(host_name("a:"), "");
  EXPECT_EQ(host_name("a:8x"), "");
}

TEST(HttpPolicy, LoopbackBindAcceptsLocalNamesOnly) {
  AccessPolicy p;
  p.loopback_bind = true;
  for (const char* ok : {"localhost", "127.0.0.1:1", "[::1]:8000", "LOCALHOST:9"}) EXPECT_TRUE(host_allowed(p, ok)) << ok;
  for (const char* bad : {"evil.example", "127.0.0.2", "", "localhost.evil.example", "127.0.0.1.nip.io"})
    EXPECT_FALSE(host_allowed(p, bad)) << bad;
  p.allowed_hosts = {"my.box"};
  EXPECT_TRUE(host_allowed(p, "my.box:8000"));
  EXPECT_TRUE(host_allowed(p, "localhost"));
}

// The bound address is a valid Host (a server on 127.0.0.2 answers http://127.0.0.2:PORT/),
// with the allowed hosts; a wildcard bind's address is not a name.
TEST(HttpPolicy, BoundAddressIsAHost) {
  AccessPolicy p;
  p.loopback_bind = true;
  p.bound_host = "127.0.0.2";
  EXPECT_TRUE(host_allowed(p, "127.0.0.2:8000"));
  EXPECT_TRUE(host_allowed(p, "127.0.0.2"));
  EXPECT_TRUE(host_allowed(p, "localhost:8000"));
  EXPECT_FALSE(host_allowed(p, "127.0.0.3:8000"));
  p.allowed_hosts = {"box.internal"};
  EXPECT_TRUE(host_allowed(p, "box.internal:8000"));
  EXPECT_TRUE(host_allowed(p, "127.0.0.2:8000"));
  p.bound_host = "::1";
  EXPECT_TRUE(host_allowed(p, "[::1]:8000"));
  AccessPolicy net;
  net.loopback_bind = false;
  net.bound_host = "10.1.2.3";
  net.allowed_hosts = {"api.example"};
  EXPECT_TRUE(host_allowed(net, "10.1.2.3:8000"));
  EXPECT_TRUE(host_allowed(net, "api.example"));
  EXPECT_FALSE(host_allowed(net, "evil.example"));
  net.bound_host = "0.0.0.0";
  EXPECT_FALSE(host_allowed(net, "0.0.0.0:8000"));
  net.bound_host = "::";
  EXPECT_FALSE(host_allowed(net, "[::]:8000"));
}

TEST(HttpPolicy, NetworkBindChecksOnlyGivenHosts) {
  AccessPolicy p;
  p.loopback_bind = false;
  EXPECT_TRUE(host_allowed(p, "anything.example"));
  EXPECT_FALSE(host_allowed(p, ""));
  p.allowed_hosts = {"api.example"};
  EXPECT_TRUE(host_allowed(p, "API.example:443"));
  EXPECT_FALSE(host_allowed(p, "other.example"));
}

TEST(HttpPolicy, Origin) {
  AccessPolicy p;
  EXPECT_TRUE(origin_allowed(p, "", "127.0.0.1:8000"));
  EXPECT_TRUE(origin_allowed(p, "http://127.0.0.1:8000", "127.0.0.1:8000"));
  EXPECT_FALSE(origin_allowed(p, "http://127.0.0.1:8001", "127.0.0.1:8000"));
  EXPECT_FALSE(origin_allowed(p, "http://evil.example", "127.0.0.1:8000"));
  EXPECT_FALSE(origin_allowed(p, "null", "127.0.0.1:8000"));
  EXPECT_FALSE(is_cors_origin(p, "http://evil.example"));
  p.cors_origin = "https://app.example";
  EXPECT_TRUE(origin_allowed(p, "https://APP.example", "127.0.0.1:8000"));
  EXPECT_TRUE(is_cors_origin(p, "https://app.example"));
  EXPECT_FALSE(origin_allowed(p, "https://app.example.evil", "127.0.0.1:8000"));
}

TEST(HttpPolicy, JsonContentType) {
  EXPECT_TRUE(is_json_content_type("application/json"));
  EXPECT_TRUE(is_json_content_type("Application/JSON; charset=utf-8"));
  EXPECT_FALSE(is_json_content_type("text/plain"));
  EXPECT_FALSE(is_json_content_type("application/x-www-form-urlencoded"));
  EXPECT_FALSE(is_json_content_type(""));
  EXPECT_FALSE(is_json_content_type("application/jsonx"));
}

TEST(HttpPolicy, ClientAddressTrustsOnlyListedProxies) {
  AccessPolicy p;
  EXPECT_EQ(client_address(p, "10.0.0.9", "1.2.3.4"), "10.0.0.9");  // untrusted peer: its own address
  p.trusted_proxies = {"10.0.0.9", "10.0.0.8"};
  EXPECT_EQ(client_address(p, "10.0.0.9", "1.2.3.4"), "1.2.3.4");
  EXPECT_EQ(client_address(p, "10.0.0.9", "6.6.6.6, 1.2.3.4, 10.0.0.8"), "1.2.3.4");  // right-most untrusted hop
  EXPECT_EQ(client_address(p, "10.0.0.9", ""), "10.0.0.9");
  EXPECT_TRUE(is_trusted_proxy(p, "10.0.0.8"));
  EXPECT_FALSE(is_trusted_proxy(p, "10.0.0.7"));
}

TEST(HttpPolicy, Secrets) {
  EXPECT_TRUE(same_secret("abc", "abc"));
  EXPECT_FALSE(same_secret("abd", "abc"));
  EXPECT_FALSE(same_secret("ab", "abc"));
  EXPECT_FALSE(same_secret("abcd", "abc"));
  EXPECT_FALSE(same_secret("", ""));
}

// RFC 9110 §11.1: the scheme is case-insensitive; one or more spaces before the token.
TEST(HttpPolicy, BearerScheme) {
  for (const char* h : {"Bearer k-1", "bearer k-1", "BEARER k-1", "BeArEr   k-1", " Bearer k-1 "})
    EXPECT_EQ(bearer_token(h).value_or("<none>"), "k-1") << h;
  for (const char* h : {"", "Bearer", "Bearer ", "Basic k-1", "Bearerk-1", "Token k-1", "k-1"})
    EXPECT_FALSE(bearer_token(h).has_value()) << h;
}

TEST(HttpPolicy, KeysAreTenants) {
  const std::vector<std::string> keys = {"alpha-key", "beta-key", "gamma"};
  EXPECT_EQ(find_key(keys, "alpha-key"), 0);
  EXPECT_EQ(find_key(keys, "beta-key"), 1);
  EXPECT_EQ(find_key(keys, "gamma"), 2);
  EXPECT_EQ(find_key(keys, "gamm"), -1);
  EXPECT_EQ(find_key(keys, "alpha-key "), -1);
  EXPECT_EQ(find_key(keys, ""), -1);
  EXPECT_EQ(find_key({}, "alpha-key"), -1);
  // Tenants' namespaces: the key's index, never its text; a client's salt cannot reach another's.
  EXPECT_NE(tenant_cache_salt(0, ""), tenant_cache_salt(1, ""));
  EXPECT_NE(tenant_cache_salt(0, "s"), tenant_cache_salt(0, ""));
  EXPECT_NE(tenant_cache_salt(1, ""), tenant_cache_salt(0, tenant_cache_salt(1, "")));
  EXPECT_EQ(tenant_cache_salt(2, "s"), tenant_cache_salt(2, "s"));
  EXPECT_EQ(tenant_cache_salt(0, "x").find("alpha"), std::string::npos);
}

TEST(HttpPolicy, KeyFile) {
  auto keys = parse_api_keys("# tenants\nalpha-key\r\n\n  beta-key\t\n# gamma\ngamma", "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.message();
  EXPECT_EQ(*keys, (std::vector<std::string>{"alpha-key", "beta-key", "gamma"}));
  auto one = parse_api_keys("solo\n", "k");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{"solo"});
  // Errors name the file and the line.
  auto message = [](std::string_view text) { return parse_api_keys(text, "/etc/dsv4/keys").message(); };
  EXPECT_EQ(message("a\nb c\n"), "/etc/dsv4/keys:2: a key holds printable ASCII without spaces (byte 0x20 found)");
  EXPECT_EQ(message("a\nb\n\na\n"), "/etc/dsv4/keys:4: the key of line 1 again");
  EXPECT_EQ(message("ok\nk\x01y\n"), "/etc/dsv4/keys:2: a key holds printable ASCII without spaces (byte 0x01 found)");
  EXPECT_EQ(message("x\n" + std::string(kMaxApiKeyBytes + 1, 'k')),
            "/etc/dsv4/keys:2: the key has 4097 bytes, the limit is 4096");
  EXPECT_EQ(message(""), "/etc/dsv4/keys: no key (one per line; '#' starts a comment line)");
  EXPECT_EQ(message("# only\n\n  \n"), "/etc/dsv4/keys: no key (one per line; '#' starts a comment line)");
}

// RFC 9112 §6.1: a body's end is known only from Content-Length or a final "chunked".
TEST(HttpPolicy, TransferEncoding) {
  using V = std::vector<std::string_view>;
  EXPECT_TRUE(transfer_encoding_ok(V{}));
  EXPECT_TRUE(transfer_encoding_ok(V{"chunked"}));
  EXPECT_TRUE(transfer_encoding_ok(V{" Chunked "}));
  for (const V& bad : {V{"gzip"}, V{"chunked, identity"}, V{"gzip, chunked"}, V{"identity"}, V{""},
                       V{"chunked", "chunked"}, V{"chunked,"}})
    EXPECT_FALSE(transfer_encoding_ok(bad)) << bad.size() << " " << bad[0];
}

TEST(HttpPolicy, Lists) {
  EXPECT_EQ(split_list(" a, b ,,c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0"));
}

}  // namespace
}  // namespace dsv4::server
