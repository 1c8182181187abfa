#include "io/json_bounded.h"

#include <string>

#include <gtest/gtest.h>

namespace dsv4 {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonBoundedTest, DepthLimit) {
  EXPECT_TRUE(parse_json_bounded(nested(64)).ok());
  Result<nlohmann::json> deep = parse_json_bounded(nested(65));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.message(), "nests deeper than 64 levels");
  EXPECT_FALSE(parse_json_bounded(nested(1000000)).ok());
  EXPECT_TRUE(parse_json_bounded(R"({"a": [1, {"b": [2]}]})", 4).ok());
  EXPECT_FALSE(parse_json_bounded(R"({"a": [1, {"b": [2]}]})", 3).ok());
}

TEST(JsonBoundedTest, InvalidAndOrdered) {
  EXPECT_EQ(parse_json_bounded("{\"a\": 1,}").message(), "not valid JSON");
  EXPECT_EQ(parse_json_bounded("1 2").message(), "not valid JSON");
  EXPECT_EQ(parse_json_bounded("\"\xC3\"").message(), "not valid JSON");  // invalid UTF-8
  Result<nlohmann::ordered_json> o = parse_json_bounded<nlohmann::ordered_json>(R"({"z": 1, "a": 2})");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dump(), R"({"z":1,"a":2})");
}

}  // namespace
}  // namespace dsv4
