#include "io/json_bounded.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "base/ordered_json.h"

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

// {"k0": 0, "k1": 1, ...}: n distinct keys, and the key "k0" repeated `repeats` times at the end.
std::string object_of_keys(int n, int repeats = 0) {
  std::string text = "{";
  for (int i = 0; i < n + repeats; ++i) text += (i ? ", \"k" : "\"k") + std::to_string(i < n ? i : 0) + "\": " + std::to_string(i);
  return text + "}";
}

uint64_t key_comparisons_parsing(const std::string& text) {
  Result<OrderedJson> parsed = parse_json_bounded<OrderedJson>(text);
  EXPECT_TRUE(parsed.ok());
  return parsed->get_ref<const OrderedJson::object_t&>().key_comparisons();
}

// nlohmann::ordered_json compared each new key with every earlier one: n^2/2 comparisons
// (80,000 keys: 3.2e9, seconds of an I/O thread). Counted, not timed: at most 2 comparisons per
// key at any size (the hash table's collisions; its load differs between sizes), so 8x the keys
// cost well under the 64x of a quadratic.
TEST(JsonBoundedTest, ObjectKeysParseInLinearComparisons) {
  const uint64_t small = key_comparisons_parsing(object_of_keys(4000));
  const uint64_t large = key_comparisons_parsing(object_of_keys(32000));
  EXPECT_LE(small, 2u * 4000) << small;
  EXPECT_LE(large, 2u * 32000) << large;
  EXPECT_LE(large, 16 * small) << small << " -> " << large;
  EXPECT_LE(key_comparisons_parsing(object_of_keys(32000, 32000)), 4u * 32000);  // duplicates too
}

// json::parse with a callback (the bounds were counted in one) scanned the parent container at
// every object's end: [{}, {}, ...] of n objects cost n^2/2 steps. 400,000 objects parse here
// in a fraction of a second; quadratic (8e10 steps), no machine finishes within the test's time.
TEST(JsonBoundedTest, ManySmallObjectsParseInLinearTime) {
  constexpr int n = 400000;
  std::string array = "[";
  for (int i = 0; i < n; ++i) array += i ? ",{}" : "{}";
  array += "]";
  Result<OrderedJson> a = parse_json_bounded<OrderedJson>(array, kMaxJsonDepth, nullptr, n + 1);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->size(), static_cast<size_t>(n));
  EXPECT_EQ(parse_json_bounded<OrderedJson>(array, kMaxJsonDepth, nullptr, n).message(),
            "holds more than 400000 values");
  std::string object = "{";
  for (int i = 0; i < n / 4; ++i) object += (i ? ", \"k" : "\"k") + std::to_string(i) + "\": {}";
  object += "}";
  Result<OrderedJson> o = parse_json_bounded<OrderedJson>(object);
  ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(o->size(), static_cast<size_t>(n / 4));
}

TEST(JsonBoundedTest, OrderedJsonKeepsFirstPositionLastValue) {
  for (int n : {3, 40}) {  // below and above the size where the hash index starts
    Result<OrderedJson> o = parse_json_bounded<OrderedJson>(object_of_keys(n, 1));
    ASSERT_TRUE(o.ok());
    ASSERT_EQ(o->size(), static_cast<size_t>(n));
    EXPECT_EQ(o->begin().key(), "k0");
    EXPECT_EQ((*o)["k0"], n);  // the repeat's value
    EXPECT_EQ(std::prev(o->end()).key(), "k" + std::to_string(n - 1));
    for (int i = 0; i < n; ++i) EXPECT_TRUE(o->contains("k" + std::to_string(i)));
    EXPECT_FALSE(o->contains("k" + std::to_string(n)));
    o->erase("k1");  // erase re-indexes the keys after it
    EXPECT_FALSE(o->contains("k1"));
    EXPECT_EQ((*o)["k" + std::to_string(n - 1)], n - 1);
    EXPECT_EQ(o->size(), static_cast<size_t>(n - 1));
  }
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
