#include "io/json_bounded.h"

#include <cstdint>
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

TEST(JsonBoundedTest, ParserMessageOnRequest) {
  std::string why;
  EXPECT_EQ(parse_json_bounded("{\"a\": ", kMaxJsonDepth, &why).message(), "not valid JSON");
  EXPECT_NE(why.find("parse error"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(parse_json_bounded("[[1]]", 1, &why).message(), "nests deeper than 1 levels");
  EXPECT_TRUE(why.empty());
}

TEST(JsonBoundedTest, FieldLookup) {
  const nlohmann::json j = nlohmann::json::parse(R"({"a": 1, "n": null})");
  EXPECT_EQ(json_member(j, "a"), &j["a"]);
  EXPECT_EQ(json_member(j, "x"), nullptr);
  EXPECT_NE(json_member(j, "n"), nullptr);  // present, null
  EXPECT_EQ(json_optional(j, "n"), nullptr);  // null counts as unset
  EXPECT_EQ(json_optional(j, "a"), &j["a"]);
  EXPECT_EQ(json_path("", "a"), "a");
  EXPECT_EQ(json_path("model", "vocab"), "model.vocab");
}

TEST(JsonBoundedTest, TypesAndKinds) {
  const nlohmann::json j = nlohmann::json::parse(R"([1, -2, 1.5, "s", true, null, [], {}])");
  EXPECT_STREQ(json_kind(j[0]), "integer");
  EXPECT_STREQ(json_kind(j[1]), "integer");
  EXPECT_STREQ(json_kind(j[2]), "number");
  EXPECT_STREQ(json_kind(j[3]), "string");
  EXPECT_STREQ(json_kind(j[4]), "boolean");
  EXPECT_STREQ(json_kind(j[5]), "null");
  EXPECT_STREQ(json_kind(j[6]), "array");
  EXPECT_STREQ(json_kind(j[7]), "object");
  EXPECT_TRUE(json_is(j[0], JsonType::kNumber));  // an integer is a number
  EXPECT_FALSE(json_is(j[2], JsonType::kInteger));
  EXPECT_STREQ(json_type_name(json_type_of<int32_t>()), "integer");
  EXPECT_STREQ(json_type_name(json_type_of<double>()), "number");
  EXPECT_STREQ(json_type_name(json_type_of<bool>()), "boolean");
  EXPECT_STREQ(json_type_name(json_type_of<std::string>()), "string");
}

TEST(JsonBoundedTest, ReadScalars) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"i": 7, "neg": -1, "big": 18446744073709551615, "f": 2.5, "s": "x", "b": true})");
  int32_t i = 0;
  EXPECT_EQ(json_read(j["i"], i), JsonRead::kOk);
  EXPECT_EQ(i, 7);
  EXPECT_EQ(json_read(j["f"], i), JsonRead::kWrongType);  // 2.5 is not an integer
  EXPECT_EQ(json_read(j["s"], i), JsonRead::kWrongType);
  EXPECT_EQ(i, 7);  // left alone
  uint32_t u = 0;
  EXPECT_EQ(json_read(j["neg"], u), JsonRead::kOutOfRange);
  int64_t wide = 0;
  EXPECT_EQ(json_read(j["big"], wide), JsonRead::kOutOfRange);
  uint64_t widest = 0;
  EXPECT_EQ(json_read(j["big"], widest), JsonRead::kOk);
  EXPECT_EQ(widest, UINT64_MAX);
  double d = 0;
  EXPECT_EQ(json_read(j["i"], d), JsonRead::kOk);  // any number
  EXPECT_EQ(d, 7.0);
  std::string s;
  EXPECT_EQ(json_read(j["s"], s), JsonRead::kOk);
  EXPECT_EQ(s, "x");
  bool b = false;
  EXPECT_EQ(json_read(j["b"], b), JsonRead::kOk);
  EXPECT_TRUE(b);
  EXPECT_EQ(json_read(j["i"], b), JsonRead::kWrongType);
}

}  // namespace
}  // namespace dsv4
