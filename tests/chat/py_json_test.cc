// Python-style JSON (text.md §3.9): json.dumps(value, ensure_ascii=False).
#include "chat/py_json.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace dsv4::chat {
namespace {

using Json = dsv4::OrderedJson;

TEST(PyJson, FloatRepr) {
  EXPECT_EQ(py_float_repr(2.5), "2.5");
  EXPECT_EQ(py_float_repr(100.0), "100.0");
  EXPECT_EQ(py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(py_float_repr(0.00001), "1e-05");
  EXPECT_EQ(py_float_repr(1.5e-5), "1.5e-05");
  EXPECT_EQ(py_float_repr(1e16), "1e+16");
  EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(py_float_repr(9999999999999998.0), "9999999999999998.0");
  EXPECT_EQ(py_float_repr(1.2345678901234568e+17), "1.2345678901234568e+17");
  EXPECT_EQ(py_float_repr(0.1), "0.1");
  EXPECT_EQ(py_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(py_float_repr(0.0), "0.0");
  EXPECT_EQ(py_float_repr(-0.0), "-0.0");
  EXPECT_EQ(py_float_repr(-123.456), "-123.456");
  EXPECT_EQ(py_float_repr(1e100), "1e+100");
  EXPECT_EQ(py_float_repr(5e-324), "5e-324");
  EXPECT_EQ(py_float_repr(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(py_float_repr(-std::numeric_limits<double>::infinity()), "-Infinity");
}

TEST(PyJson, StringEscapes) {
  EXPECT_EQ(py_json_string("a\"b\\c/d"), R"("a\"b\\c/d")");
  EXPECT_EQ(py_json_string("\b\t\n\f\r"), R"("\b\t\n\f\r")");
  EXPECT_EQ(py_json_string(std::string("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\x7f\"");
  EXPECT_EQ(py_json_string("é中😀\u2028"), "\"é中😀\u2028\"");
}

TEST(PyJson, DumpKeepsOrderAndSpacing) {
  Json v = Json::parse(R"({"z": 1, "a": [true, false, null, -5, 18446744073709551615, 1.0, 1e2, {}], "m": {"x": []}})");
  EXPECT_EQ(py_json(v), R"({"z": 1, "a": [true, false, null, -5, 18446744073709551615, 1.0, 100.0, {}], "m": {"x": []}})");
  Json dup = Json::parse(R"({"a": 1, "b": 2, "a": 3})");
  EXPECT_EQ(py_json(dup), R"({"a": 3, "b": 2})");
}

TEST(PyJson, Depth) {
  EXPECT_EQ(json_depth(Json(1)), 0);
  EXPECT_EQ(json_depth(Json::parse("[[1], {\"a\": [[]]}]")), 4);
}

// The duplicate-key check scanned every earlier key (80,000 keys in a tool call's arguments:
// 28 s). Counted, not timed: at most 2 comparisons per key (hash collisions), so 8x the keys
// cost well under the 64x of a quadratic.
TEST(PyJson, ReparseDuplicateCheckIsLinearInKeys) {
  auto comparisons = [](int n) {
    std::string text = "{";
    for (int i = 0; i < n; ++i) text += (i ? ", \"k" : "\"k") + std::to_string(i) + "\": 0";
    text += ", \"k0\": 1}";
    auto r = py_json_reparse(text);
    EXPECT_TRUE(r);
    if (!r) return uint64_t{0};
    EXPECT_EQ(r->members.size(), static_cast<size_t>(n));
    EXPECT_EQ(r->members.front().value, "1");  // last value, first position
    return r->key_comparisons;
  };
  const uint64_t small = comparisons(4000);
  const uint64_t large = comparisons(32000);
  EXPECT_LE(small, 2u * 4000) << small;
  EXPECT_LE(large, 2u * 32000) << large;
  EXPECT_LE(large, 16 * small) << small << " -> " << large;
}

TEST(PyJson, Reparse) {
  auto r = py_json_reparse(" {\"b\":[1,2.50,\"x\"],\"a\":{\"c\":-0.0}} ");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->dumped, R"({"b": [1, 2.5, "x"], "a": {"c": -0.0}})");
  ASSERT_EQ(r->members.size(), 2u);
  EXPECT_EQ(r->members[0].value, "[1, 2.5, \"x\"]");
  EXPECT_FALSE(r->members[0].value_is_string);
  auto s = py_json_reparse(R"({"k": "a\"b\u0041\/"})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->members[0].value, "a\"bA/");
  EXPECT_TRUE(s->members[0].value_is_string);
  EXPECT_EQ(py_json_reparse("[1]")->kind, PyParsed::Kind::kArray);
  EXPECT_EQ(py_json_reparse("12345678901234567890123")->dumped, "12345678901234567890123");
  EXPECT_EQ(py_json_reparse("1e400")->dumped, "Infinity");
  for (const char* bad : {"", "{", "{\"a\" 1}", "[1,]", "01", "1.", "-", "tru", "\"\\ud800\"", "\"a\nb\"", "{} x",
                          "\"\\x\"", "{'a': 1}", "[1 2]"}) {
    EXPECT_FALSE(py_json_reparse(bad)) << bad;
  }
  EXPECT_FALSE(py_json_reparse(std::string(600, '[') + std::string(600, ']')));
  EXPECT_TRUE(py_json_reparse(std::string(400, '[') + std::string(400, ']')));
}

}  // namespace
}  // namespace dsv4::chat
