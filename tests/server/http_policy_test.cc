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

TEST(HttpPolicy, Lists) {
  EXPECT_EQ(split_list(" a, b ,,c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0"));
}

}  // namespace
}  // namespace dsv4::server
