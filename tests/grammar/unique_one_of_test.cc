// Issue 39 items 3-4: uniqueItems beyond enum strings (literals of distinct values, integers in a
// small range, plain strings kept as hashes) and oneOf proven disjoint by more than types and
// constants (patterns with no common string, a pattern a constant does not match, listed
// objects that never have a key the other requires).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/json_schema_check.h"
#include "support/schema_compile.h"

namespace dsv4::grammar::unique_one_of_test {
namespace {

using Json = OrderedJson;
using test::match_at;
using test::has;

using test::compile_text;

// Walks of g end in values that `check` accepts (uniqueItems and oneOf included).
void walks_validate(const Grammar& g, const Json& check, int n_walks = 80) { test::valid_walks(g, check, n_walks, 5); }

TEST(UniqueItems, PlainStringsAreKeptAsHashes) {
  const std::string schema = R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 2})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["a", "b", "ab", ""])"), -1);
  EXPECT_EQ(match_at(*g, R"(["a", "b", "a"])"), 13);  // the repeat's closing quote
  EXPECT_EQ(match_at(*g, R"(["a", "b", "aa"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["a\n"])"), 3);          // no escapes: the bytes are the value
  EXPECT_EQ(match_at(*g, R"(["x"])"), 4);
  walks_validate(*g, Json::parse(schema));
  // Inside an open object whose keys fill the stack's set: the array still has its room.
  std::string text = "{";
  for (int k = 0; k + 1 < kMaxOpenKeys; ++k) text += "\"k" + std::to_string(k) + "\": 0, ";
  text += R"("z": ["p", "q", "r"]})";
  g = compile_text(R"({"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, )" + schema + "]}}");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, text), -1);
  // Bounded or patterned strings could dead-end (every completion used): not enforced.
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": true})")
                      .message(),
                  "uniqueItems"));
}

TEST(UniqueItems, LiteralsOfDistinctValuesAndSmallIntegerRanges) {
  const std::string literals = R"({"type": "array", "uniqueItems": true, "items": {"enum": [1, 2.5, {"a": 1, "b": 2},
      [1], "x", null]}})";
  Result<Grammar> g = compile_text(literals);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"([1, {"a":1,"b":2}, [1], null])"), -1);  // a literal is its compact text
  EXPECT_EQ(match_at(*g, R"([[1], [1]])"), 6);
  walks_validate(*g, Json::parse(literals));
  const std::string same = R"({"type": "array", "uniqueItems": true, "items": {"enum": [1, 1.0]}})";
  EXPECT_TRUE(has(compile_text(same).message(), "two are equal"));
  const std::string ints = R"({"type": "array", "uniqueItems": true, "items": {"type": "integer", "minimum": -3,
      "maximum": 40, "multipleOf": 2}})";
  g = compile_text(ints);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "[-2, 0, 40]"), -1);
  EXPECT_EQ(match_at(*g, "[-2, 0, -2]"), 8);
  EXPECT_EQ(match_at(*g, "[1]"), 2);
  walks_validate(*g, Json::parse(ints));
  // Numbers whose texts are not canonical (1, 1.0, 1e0): refused (unique_items_test.cc has the rest).
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "uniqueItems": true, "items": {"type": "number"}})").message(),
                  "uniqueItems"));
  // Through a $ref.
  g = compile_text(R"({"$defs": {"c": {"enum": ["r", "g"]}}, "type": "array", "uniqueItems": true,
      "items": {"$ref": "#/$defs/c"}})");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["g", "r"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["g", "g"])"), 7);
}

TEST(OneOfProofs, PatternsAndConstantsThatCannotMeet) {
  // A constant the other branch's pattern rejects (SchemaStore: azure-containerapp-template).
  const std::string scheme = R"({"oneOf": [{"enum": ["HTTP", "HTTPS"]}, {"type": "string",
      "pattern": "^\\[([^\\[].*)?\\]$"}]})";
  Result<Grammar> g = compile_text(scheme);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("[x]")"), -1);
  walks_validate(*g, Json::parse(scheme));
  // Two patterns with no common string (dart-test.json's timeout).
  const std::string timeout = R"({"oneOf": [{"enum": ["none"]}, {"type": "string", "pattern":
      "^(?:[^a-df-zA-DF-Z\\s]+(?:[umUM][sS]|[dhmsDHMS])\\s?)+$"}, {"type": "string", "pattern":
      "^[^a-df-zA-DF-Z\\s]+[xX]$"}]})";
  g = compile_text(timeout);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("1m 30s")"), -1);
  EXPECT_EQ(match_at(*g, R"("1.5X")"), -1);
  walks_validate(*g, Json::parse(timeout));
  // A pattern within the other: nothing is left of it, so only the other (less it) is generated;
  // a format (its automaton is a subset of it) stays refused.
  const std::string within = R"({"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^ab"}]})";
  g = compile_text(within);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("ac")"), -1);
  EXPECT_EQ(match_at(*g, R"("ab")"), 2);  // every string from "ab" on matches both
  walks_validate(*g, Json::parse(within));
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"const": "x"}, {"type": "string", "format": "email"}]})").message(),
                  "may match the same value"));
}

TEST(OneOfProofs, ListedObjectsWithoutTheOthersRequiredKey) {
  const std::string tagged = R"({"oneOf": [{"type": "object", "properties": {"inmemory": {"type": "object"}},
      "required": ["inmemory"]}, {"type": "object", "properties": {"file": {"type": "object", "properties":
      {"path": {"type": "string"}}}}, "required": ["file"]}]})";
  Result<Grammar> g = compile_text(tagged);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"inmemory": {}})"), -1);
  EXPECT_EQ(match_at(*g, R"({"file": {"path": "p"}})"), -1);
  walks_validate(*g, Json::parse(tagged));
  // Both require the same key with any value: {"a": 1} matches both.
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "object", "properties": {"a": {}}, "required": ["a"]},
      {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"]}]})").message(), "may match"));
}

// SchemaStore's install.json and now.json: {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
// beside properties listing both. Each branch stops generating the key the other requires.
TEST(OneOfProofs, RequiredKeysToldApartByNotGeneratingTheOther) {
  const std::string schema = R"({"type": "object", "properties": {"order": {"type": "integer"}, "title": {"type":
      "string"}, "helpvalue": {"type": "string"}}, "required": ["order"], "oneOf": [{"required": ["title"]},
      {"required": ["helpvalue"]}]})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"order": 1, "title": "t"})"), -1);
  EXPECT_EQ(match_at(*g, R"({"order": 1, "helpvalue": "h"})"), -1);
  const std::string both = R"({"order": 1, "title": "t", "helpvalue": "h"})";
  EXPECT_EQ(match_at(*g, both), static_cast<int64_t>(both.find(',', 12)));
  walks_validate(*g, Json::parse(schema));
}

// dart-test.json's foldStackFrameOptions, warp-themes' gradients: closed objects with no
// required key, so {} matches both. Each branch generates only values with one of its keys the
// other never lists (a subset, documented in serving.md).
TEST(OneOfProofs, ObjectsToldApartByRequiringAKeyTheOtherLacks) {
  const std::string schema = R"({"oneOf": [{"type": "object", "additionalProperties": false, "properties":
      {"except": {"type": "array", "items": {"type": "string"}}}}, {"type": "object", "additionalProperties": false,
      "properties": {"only": {"type": "array", "items": {"type": "string"}}}}]})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "{}"), 1);  // valid for both: never generated
  EXPECT_EQ(match_at(*g, R"({"except": ["a"]})"), -1);
  EXPECT_EQ(match_at(*g, R"({"only": []})"), -1);
  walks_validate(*g, Json::parse(schema));
  // warp-themes: left/right beside top/bottom, closed; and the same open, where {"left": ".."}
  // matches both: refused.
  const std::string sides = R"({"oneOf": [{"type": "object", "properties": {"left": {"type": "string"}, "right":
      {"type": "string"}}, "additionalProperties": false}, {"type": "object", "properties": {"top": {"type":
      "string"}, "bottom": {"type": "string"}}, "additionalProperties": false}]})";
  g = compile_text(sides);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"top": "x", "bottom": "y"})"), -1);
  EXPECT_EQ(match_at(*g, R"({"left": "x", "right": "y"})"), -1);
  EXPECT_EQ(match_at(*g, R"({"right": "y"})"), 2);  // "left" comes first and is written
  walks_validate(*g, Json::parse(sides));
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "object", "properties": {"left": {"type": "string"}}},
      {"type": "object", "properties": {"top": {"type": "string"}}}]})").message(), "may match the same value"));
  // Every key of one is listed by the other: nothing tells them apart.
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "object", "properties": {"a": {}}}, {"type": "object",
      "properties": {"a": {}, "b": {}}}]})").message(), "may match the same value"));
}

// yamlfmt.json's formatter: one branch requires "type": "kyaml", the other lists "type" as
// optional with the value "basic": a value of either never satisfies the other.
TEST(OneOfProofs, AKeyOneRequiresWithAValueTheOtherRejects) {
  const std::string schema = R"({"oneOf": [{"type": "object", "properties": {"type": {"enum": ["basic"]}, "indent":
      {"type": "integer"}}}, {"type": "object", "properties": {"type": {"const": "kyaml"}}, "required": ["type"],
      "additionalProperties": false}]})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"indent": 2})"), -1);
  EXPECT_EQ(match_at(*g, R"({"type": "kyaml"})"), -1);
  walks_validate(*g, Json::parse(schema));
}

// Enums of strings and strings without a pattern take part too: each branch generates its
// strings less the others'; a branch left with none is dropped (jasonette's builtin action names
// beside any string; dein's key pattern beside any string).
TEST(OneOfProofs, EnumsAndPlainStringsLessEachOther) {
  const std::string names = R"({"oneOf": [{"type": "string"}, {"type": "string", "enum": ["$render", "$back"]}]})";
  Result<Grammar> g = compile_text(names);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("$back")"), 6);
  EXPECT_EQ(match_at(*g, R"("$backs")"), -1);
  walks_validate(*g, Json::parse(names));
  const std::string keys = R"({"type": "string", "oneOf": [{"pattern": "^[nvx]+$"}, {"type": "string"}]})";
  g = compile_text(keys);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("nv")"), 3);
  EXPECT_EQ(match_at(*g, R"("nva")"), -1);
  walks_validate(*g, Json::parse(keys));
  // Enums that share a value each drop it.
  const std::string shared = R"({"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]})";
  g = compile_text(shared);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("b")"), 1);
  EXPECT_EQ(match_at(*g, R"("c")"), -1);
  walks_validate(*g, Json::parse(shared));
}

// ti8m-cdk-environment-definition.json's cpu: "${1}" matches both patterns. Each branch
// generates its pattern less the other's.
TEST(OneOfProofs, OverlappingPatternsLessEachOther) {
  const std::string schema = R"({"oneOf": [{"type": "string", "pattern": "\\$\\{\\{?.+\\}?\\}"}, {"type": "string",
      "pattern": "\\d+m?"}]})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("${x}")"), -1);
  EXPECT_EQ(match_at(*g, R"("250m")"), -1);
  EXPECT_EQ(match_at(*g, R"("${1")"), -1);  // a digit, no "}": the second only
  EXPECT_EQ(match_at(*g, R"("${1}")"), 4);  // both: never generated
  walks_validate(*g, Json::parse(schema));
  // A format's automaton is a subset of it: nothing to take away exactly.
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "string", "format": "email"}, {"type": "string", "pattern":
      "@"}]})").message(), "may match the same value"));
  // One pattern within the other leaves it nothing: dropped (each of its values matches both).
  const std::string within = R"({"oneOf": [{"type": "string", "pattern": "^a+$"}, {"type": "string", "pattern":
      "a"}]})";
  g = compile_text(within);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("ba")"), -1);
  EXPECT_EQ(match_at(*g, R"("aa")"), 3);
  walks_validate(*g, Json::parse(within));
  // Equal languages leave neither.
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 9}]})").message(),
                  "may match the same value"));
}

}  // namespace
}  // namespace dsv4::grammar::unique_one_of_test
