// Issue 39: nested values that match nothing need no value. An optional property whose schema is
// unsatisfiable is never written; an array whose items (or a prefixItems slot) are unsatisfiable
// ends before them; a required one makes its parent unsatisfiable, up to the root, which is
// refused. Walks of each grammar end in values the schema accepts.
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/schema_compile.h"

namespace dsv4::grammar::unsatisfiable_test {
namespace {

using Json = OrderedJson;
using test::compile;
using test::compile_text;
using test::match_at;
using test::has;

void walks_validate(const std::string& schema) {
  test::valid_walks(compile(schema), Json::parse(schema), 60, 23);
}

constexpr const char* kNothing = R"({"allOf": [{"const": "a"}, {"const": "b"}]})";

std::string with_nothing(const std::string& schema) {
  std::string out = schema;
  for (size_t at = out.find("NOTHING"); at != std::string::npos; at = out.find("NOTHING"))
    out.replace(at, 7, kNothing);
  return out;
}

TEST(UnsatisfiableValues, OptionalPropertyIsNeverWritten) {
  const std::string schema = with_nothing(R"({"type": "object", "properties": {"a": {"type": "string",
      "maxLength": 1, "minLength": 2}, "b": NOTHING, "c": {"type": "integer"}}, "required": ["c"]})");
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"c": 1})"), -1);
  EXPECT_EQ(match_at(g, R"({"a")"), 2);
  EXPECT_EQ(match_at(g, R"({"b")"), 2);
  walks_validate(schema);
  // Merged with a property's own keywords (web-types: a string merged with a boolean).
  const std::string merged = R"({"type": "object", "properties": {"r": {"allOf": [{"type": "string"},
      {"type": "boolean"}]}, "s": {"type": "null"}}})";
  EXPECT_EQ(match_at(compile(merged), R"({"r")"), 2);
  walks_validate(merged);
  EXPECT_TRUE(compile_text(merged, false).ok());
}

TEST(UnsatisfiableValues, RequiredPropertyPropagatesUp) {
  const std::string schema = with_nothing(R"({"type": "object", "properties": {"o": {"type": "object",
      "properties": {"p": {"type": "object", "properties": {"q": NOTHING}, "required": ["q"]}},
      "required": ["p"]}, "k": {"type": "integer"}}})");
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"o")"), 2);
  EXPECT_EQ(match_at(g, R"({"k": 2})"), -1);
  walks_validate(schema);
  Json required = Json::parse(schema);
  required["required"] = Json::array({"o"});
  const std::string why = compile_text(required.dump()).message();
  EXPECT_TRUE(has(why, "schema /: unsatisfiable: required 'o' has no value (schema /properties/o: unsatisfiable: "
                       "required 'p'")) << why;
  EXPECT_FALSE(compile_text(required.dump(), false).ok());  // no value at all, in either mode
  // The root itself (bug 5): refused.
  EXPECT_TRUE(has(compile_text(R"({"type": "integer", "const": 1.5})").message(), "schema /: unsatisfiable"));
}

TEST(UnsatisfiableValues, ArrayEndsBeforeItsItems) {
  const std::string items = with_nothing(R"({"type": "array", "items": NOTHING})");
  const Grammar g = compile(items);
  EXPECT_EQ(match_at(g, "[]"), -1);
  EXPECT_EQ(match_at(g, "[\"a\""), 1);
  walks_validate(items);
  const std::string why =
      compile_text(with_nothing(R"({"type": "array", "items": NOTHING, "minItems": 1})")).message();
  EXPECT_TRUE(has(why, "schema /: unsatisfiable: minItems 1 but only 0 items can be present (schema /items")) << why;
  const std::string tuple = with_nothing(R"({"type": "array", "prefixItems": [{"type": "integer"}, NOTHING,
      {"type": "string"}]})");
  const Grammar t = compile(tuple);
  EXPECT_EQ(match_at(t, "[1]"), -1);
  EXPECT_EQ(match_at(t, "[1, "), 2);  // the array ends after the first item
  walks_validate(tuple);
  EXPECT_TRUE(has(compile_text(with_nothing(R"({"type": "array", "prefixItems": [{}, NOTHING], "minItems": 2})")).message(),
                  "unsatisfiable"));
  // Tuple items past the prefix that match nothing: the tuple alone.
  const std::string after = with_nothing(R"({"type": "array", "prefixItems": [{"const": 3}], "items": NOTHING})");
  EXPECT_EQ(match_at(compile(after), "[3]"), -1);
  EXPECT_EQ(match_at(compile(after), "[3, "), 2);
  walks_validate(after);
}

// A type of a type list, or a type an untyped schema's keywords leave without a value, is left out.
TEST(UnsatisfiableValues, TypeWithoutAValueIsLeftOut) {
  const std::string list = R"({"type": ["string", "null"], "minLength": 3, "maxLength": 1})";
  EXPECT_EQ(match_at(compile(list), "null"), -1);
  EXPECT_EQ(match_at(compile(list), R"("")"), 0);
  walks_validate(list);
  const std::string untyped = R"({"minLength": 3, "maxLength": 1, "maximum": 4})";
  EXPECT_EQ(match_at(compile(untyped), "[]"), -1);
  EXPECT_EQ(match_at(compile(untyped), "5"), 0);
  EXPECT_EQ(match_at(compile(untyped), R"("")"), 0);
  walks_validate(untyped);
  EXPECT_TRUE(has(compile_text(R"({"type": ["string", "array"], "minLength": 3, "maxLength": 1, "minItems": 2,
      "maxItems": 1})").message(), "schema /: unsatisfiable: no value of any type in the type list"));
}

// accelerator.json: an anyOf branch that is an array of one item that matches nothing is left out.
TEST(UnsatisfiableValues, BranchNeedingAnUnsatisfiableItemIsLeftOut) {
  const std::string schema = with_nothing(R"({"type": "object", "properties": {"dataType": {"anyOf": [
      {"const": "string"}, {"type": "array", "minItems": 1, "maxItems": 1, "items": NOTHING},
      {"type": "array", "items": {"type": "boolean"}}, {"type": "null"}]}}})");
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"dataType": [true]})"), -1);
  EXPECT_EQ(match_at(g, R"({"dataType": ["a"]})"), 14);
  walks_validate(schema);
}

// A $ref target that matches nothing, reached again from a schema compiled inside it: the
// property that reaches it is never written (its node has no value: min_depth unbounded).
TEST(UnsatisfiableValues, RecursiveTargetThatMatchesNothing) {
  const std::string schema = R"({"$defs": {
      "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}, "z": false}, "required": ["z"]},
      "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "n": {"type": "integer"}}}},
    "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/B"}}})";
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"b": {"n": 1}})"), -1);
  EXPECT_EQ(match_at(g, R"({"a")"), 2);
  EXPECT_EQ(match_at(g, R"({"b": {"a")"), 8);
  walks_validate(schema);
}

// A oneOf compiled inside a value that is left out, in a $ref target reached from elsewhere, is
// still checked (before: its record was dropped with the branch, and it was generated as anyOf).
TEST(UnsatisfiableValues, OneOfInATargetFirstCompiledInADroppedBranch) {
  const std::string schema = R"({"$defs": {
      "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}, "z": false}, "required": ["z"]},
      "B": {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}},
    "type": "object", "properties": {"x": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]},
      "y": {"$ref": "#/$defs/B"}}})";
  const std::string why = compile_text(schema).message();
  EXPECT_TRUE(has(why, "/$defs/B/oneOf: branches 0 and 1 may match the same value")) << why;
  // Only in the dropped value: never generated, so not checked.
  Json unused = Json::parse(schema);
  unused["properties"].erase("y");
  EXPECT_TRUE(compile_text(unused.dump()).ok()) << compile_text(unused.dump()).message();
}

}  // namespace
}  // namespace dsv4::grammar::unsatisfiable_test
