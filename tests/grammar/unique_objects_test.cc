// Issue 39: uniqueItems over objects without a required hashable property (sarif's regions and
// rectangles, aiproj's Tags, linutil's preconditions): the optional property with the most
// hashable values is written in every generated item and kept distinct, an unbounded number as
// a canonical integer (a documented subset: docs/serving.md).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/schema_compile.h"

namespace dsv4::grammar::unique_objects_test {
namespace {

using Json = OrderedJson;
using test::compile;
using test::compile_text;
using test::match_at;
using test::has;

// Walks validate, and each item writes `key` with a value no other item of its array has.
void walks_write_distinct(const std::string& schema, const std::string& key) {
  for (const Json& v : test::valid_walks(compile(schema), Json::parse(schema), 120, 31)) {
    std::set<std::string> seen;
    for (const Json& item : v) {
      ASSERT_TRUE(item.contains(key)) << v.dump();
      EXPECT_TRUE(seen.insert(item[key].dump()).second) << v.dump();
    }
  }
}

TEST(UniqueObjects, AnOptionalPropertyIsAlwaysWritten) {
  // sarif's region: integers with a minimum and nested objects, none required.
  const std::string region = R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
      "additionalProperties": false, "properties": {"message": {"type": "object", "properties": {"text":
      {"type": "string"}}}, "startLine": {"type": "integer", "minimum": 1}, "endLine": {"type": "integer",
      "minimum": 1}}}})";
  const Grammar g = compile(region);
  EXPECT_EQ(match_at(g, R"([{"startLine": 1}, {"startLine": 2, "endLine": 2}])"), -1);
  EXPECT_EQ(match_at(g, R"([{"endLine": 1}])"), 3);  // startLine first: it is written in every item
  EXPECT_EQ(match_at(g, R"([{"startLine": 1}, {"startLine": 1}])"), 34);
  EXPECT_EQ(match_at(g, "[{}]"), 2);
  walks_write_distinct(region, "startLine");
  // sarif's rectangle: unbounded numbers only; the first is written as a canonical integer.
  const std::string rectangle = R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
      "properties": {"top": {"type": "number"}, "left": {"type": "number"}}}})";
  EXPECT_EQ(match_at(compile(rectangle), R"([{"top": 1, "left": 2.5}, {"top": 2, "left": 2.5}])"), -1);
  EXPECT_EQ(match_at(compile(rectangle), R"([{"top": 1.5}])"), 10);
  EXPECT_EQ(match_at(compile(rectangle), R"([{"top": 1}, {"top": 1}])"), 22);
  walks_write_distinct(rectangle, "top");
  // The property with the most values wins (aiproj's Tags: Value, any string, over Type, 2 values).
  const std::string tags = R"({"type": ["array", "null"], "uniqueItems": true, "items": {"type": "object",
      "additionalProperties": false, "properties": {"Type": {"type": "string", "enum": ["Repo", "Branch"]},
      "Value": {"type": "string"}}}})";
  EXPECT_EQ(match_at(compile(tags), R"([{"Type": "Repo", "Value": "a"}, {"Type": "Repo", "Value": "b"}])"), -1);
  EXPECT_EQ(match_at(compile(tags), R"([{"Type": "Repo"}])"), 16);
  walks_write_distinct(tags, "Value");
  // A boolean: at most two items (linutil's preconditions); minItems above that is not enforced.
  const std::string flags = R"({"type": "array", "uniqueItems": true, "minItems": 1, "items": {"type": "object",
      "properties": {"matches": {"type": "boolean"}, "data": {"type": "object"}}}})";
  EXPECT_EQ(match_at(compile(flags), R"([{"matches": true}, {"matches": false}, )"), 38);
  walks_write_distinct(flags, "matches");
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "uniqueItems": true, "minItems": 3, "items": {"type": "object",
      "properties": {"m": {"type": "boolean"}}}})").message(), "minItems 3: at most 2 distinct items"));
}

// The key is not promoted where the object cannot hold one more (maxProperties) or where it
// needs another (dependentRequired); the item schema elsewhere is unchanged.
TEST(UniqueObjects, PromotedOnlyWhereTheObjectAllowsIt) {
  const std::string full = R"({"type": "array", "uniqueItems": true, "minItems": 2, "items": {"type": "object",
      "required": ["o"], "maxProperties": 1, "properties": {"o": {"type": "object"}, "k": {"type": "string"}}}})";
  EXPECT_TRUE(has(compile_text(full).message(), "keyword 'uniqueItems'")) << compile_text(full).message();
  const std::string needs = R"({"type": "array", "uniqueItems": true, "minItems": 2, "items": {"type": "object",
      "properties": {"k": {"type": "string"}, "o": {"type": "object"}}, "dependentRequired": {"k": ["o"]}}})";
  EXPECT_TRUE(has(compile_text(needs).message(), "keyword 'uniqueItems'")) << compile_text(needs).message();
  const std::string shared = R"({"$defs": {"r": {"type": "object", "properties": {"n": {"type": "integer"}}}},
      "type": "object", "properties": {"one": {"$ref": "#/$defs/r"}, "all": {"type": "array", "uniqueItems": true,
      "items": {"$ref": "#/$defs/r"}}}})";
  const Grammar g = compile(shared);
  EXPECT_EQ(match_at(g, R"({"one": {}, "all": [{"n": 1}, {"n": 2}]})"), -1);  // "one" may still skip n
  EXPECT_EQ(match_at(g, R"({"one": {}, "all": [{}])"), 21);
  test::valid_walks(g, Json::parse(shared), 80, 5);
}

}  // namespace
}  // namespace dsv4::grammar::unique_objects_test
