// Masks from a number on top of the stack (mask_number.cc: the number's frame alone along its
// bytes, then the matcher) equal the per-token brute force on random walks: numbers at the root,
// in objects and arrays, integers, ranges and multipleOf, and the states that keep the whole
// matcher walk (anyOf readings, uniqueItems integers, DSML parameters) next to them; DSML raw
// strings, whose frame walks apart the same way.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "support/mask_walk.h"

namespace dsv4::grammar {
namespace mask_number_test {  // named: the grammar tests build as one unity translation unit

using Json = dsv4::OrderedJson;

Grammar schema(const std::string& s) {
  Result<Grammar> g = compile_json_schema(Json::parse(s));
  EXPECT_TRUE(g.ok()) << s << ": " << g.message();
  return g.ok() ? std::move(*g) : Grammar{};
}

void expect_equals_walk(const Grammar& g, uint32_t seed, int walks = 30, int steps = 40) {
  const std::vector<std::string> vocab = test::random_vocab(seed);
  const MaskVocab prepared(static_cast<int32_t>(vocab.size()), [&](int32_t id) { return std::string_view(vocab[id]); },
                           [](int32_t) { return false; });
  TokenMasker masker(prepared);
  test::Walker{vocab, g, {&masker}}.run(seed, walks, steps);
}

// Whether the state after text has the number walk.
bool number_walk_after(const Grammar& g, const std::string& text) {
  const JsonMatcher m(g);
  auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
  m.start(*st);
  EXPECT_TRUE(m.feed(*st, text.data(), static_cast<int64_t>(text.size()), *out, *tmp)) << text;
  return TokenMasker::number_on_top(g, *out);
}

TEST(MaskNumber, RootObjectsAndArrays) {
  expect_equals_walk(schema(R"({"type": "number"})"), 31);
  expect_equals_walk(schema(R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "number", "minimum": -5, "exclusiveMaximum": 1000, "multipleOf": 0.25},
      "c": {"type": "integer", "minimum": 10, "maximum": 99}}, "required": ["a", "b", "c"],
      "additionalProperties": false})"), 32);
  expect_equals_walk(schema(R"({"type": "array", "items": {"type": "number"}, "maxItems": 5})"), 33);
  expect_equals_walk(schema(R"({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 20}, "maxItems": 4})"), 34);
}

TEST(MaskNumber, StatesThatKeepTheMatcherWalk) {
  const Grammar any = schema(R"({"anyOf": [{"type": "number"}, {"type": "array", "items": {"type": "integer"}}]})");
  expect_equals_walk(any, 35);
  const Grammar unique = schema(R"({"type": "array", "items": {"type": "integer"}, "uniqueItems": true, "maxItems": 5})");
  expect_equals_walk(unique, 36);
  EXPECT_FALSE(number_walk_after(unique, "[12")) << "a hashed item";
  const Grammar obj = schema(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  EXPECT_TRUE(number_walk_after(obj, "{\"a\": 12"));
  EXPECT_TRUE(number_walk_after(obj, "{\"a\": -"));
  EXPECT_FALSE(number_walk_after(obj, "{\"a\": ")) << "no number frame yet";
  EXPECT_TRUE(number_walk_after(schema(R"({"type": "integer"})"), "7"));
  std::vector<ToolSpec> tools = {{"add", Json::parse(R"({"type": "object", "properties": {"x": {"type": "integer"},
      "y": {"type": "number", "maximum": 9}}, "required": ["x", "y"]})")}};
  Result<Grammar> call = compile_tool_call(tools);
  ASSERT_TRUE(call.ok()) << call.message();
  expect_equals_walk(*call, 37, 12, 250);
}

// DSML raw strings without a pattern: inside a possible closing tag (after '<') the whole-trie
// walk steps the raw frame alone; masks equal the brute force, the tag's end pops to the matcher.
TEST(MaskNumber, DsmlRawStringsApart) {
  std::vector<ToolSpec> tools = {{"note", Json::parse(R"({"type": "object", "properties": {"text": {"type": "string"},
      "short": {"type": "string", "maxLength": 6}, "n": {"type": "integer"}}, "required": ["text", "short", "n"]})")}};
  Result<Grammar> call = compile_tool_call(tools);
  ASSERT_TRUE(call.ok()) << call.message();
  expect_equals_walk(*call, 38, 16, 250);
  const JsonMatcher m(*call);
  auto st = std::make_unique<MatchState>();
  m.start(*st);
  EXPECT_FALSE(TokenMasker::raw_on_top(*call, *st));
}

}  // namespace mask_number_test
}  // namespace dsv4::grammar
