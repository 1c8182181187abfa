// Issue 39: uniqueItems over items kept as hashes (unique_items.h): patterned strings and
// formats (printable ASCII without '"' and '\'), unbounded integers, enums of more than 64
// values, oneOf/anyOf of consts, and items without a schema (distinct strings). Dead ends are
// impossible: a character is taken only where an unused continuation remains.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <string>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/json_schema_check.h"
#include "support/schema_compile.h"

namespace dsv4::grammar::unique_items_test {
namespace {

using Json = OrderedJson;
using test::match_at;
using test::has;

using test::compile_text;

// Walks of g end (no dead end) in values `check` accepts whose array items are distinct.
void walks_validate(const Grammar& g, const Json& check, int n_walks = 120) { test::valid_walks(g, check, n_walks, 11); }

TEST(UniqueHashed, PatternedStrings) {
  // drupal-breakpoints.json's multipliers: every string ends in a fixed 'x'.
  const std::string schema = R"({"type": "array", "uniqueItems": true, "items": {"type": "string",
      "pattern": "^\\d+(\\.\\d+)?x$"}})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["1x", "1.5x", "2x", "10x"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["1x", "1x"])"), 9);  // the repeat's 'x': nothing else can follow it
  EXPECT_EQ(match_at(*g, R"(["1x", "1"])"), 9);   // its closing quote
  walks_validate(*g, Json::parse(schema));
  // Escapes and characters beyond printable ASCII are left out (the documented subset).
  g = compile_text(R"({"type": "array", "uniqueItems": true, "items": {"type": "string", "pattern": "^[^x]+$"}})");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["a", "b\"c"])"), 8);
  EXPECT_EQ(match_at(*g, "[\"\xC3\xA9\"]"), 2);
  // A format (its automaton), and minLength the pattern already implies.
  const std::string dates = R"({"type": "array", "uniqueItems": true, "items": {"type": "string", "format": "date",
      "minLength": 4}})";
  g = compile_text(dates);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["2024-01-31", "2024-01-30"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["2024-01-31", "2024-01-31"])"), 25);
  walks_validate(*g, Json::parse(dates));
}

// A finite pattern: the array may hold all its strings, each character only toward an unused one.
TEST(UniqueHashed, FinitePatternsNeverDeadEnd) {
  const std::string schema = R"({"type": "array", "uniqueItems": true, "minItems": 6, "items": {"type": "string",
      "pattern": "^[ab]{1,2}$"}})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["a", "b", "aa", "ab", "ba", "bb"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["a", "b", "aa", "ab", "ba", "bb", )"), 33);  // no seventh string exists
  EXPECT_EQ(match_at(*g, R"(["a", "aa", "ab", "a)"), 19);  // "a", "aa" and "ab" are all used
  EXPECT_EQ(match_at(*g, R"(["a", "aa", "ab", "b)"), 20);  // a prefix: "b", "ba", "bb" remain
  walks_validate(*g, Json::parse(schema), 200);
  // Fewer strings than minItems: unsatisfiable in the generated subset, refused.
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "uniqueItems": true, "minItems": 3, "items": {"type": "string",
      "pattern": "^[ab]$"}})").message(), "uniqueItems"));
  // maxLength that cuts the pattern's strings: not enforced; one it implies: enforced.
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "uniqueItems": true, "items": {"type": "string",
      "pattern": "^a+$", "maxLength": 3}})").message(), "minLength/maxLength"));
  EXPECT_TRUE(compile_text(R"({"type": "array", "uniqueItems": true, "items": {"type": "string",
      "pattern": "^[ab]{1,2}$", "maxLength": 2}})").ok());
  // Nothing in the subset matches: not enforced (strict), relaxed otherwise.
  const std::string accented = R"({"type": "array", "uniqueItems": true, "items": {"type": "string",
      "pattern": "^é+$"}})";
  EXPECT_TRUE(has(compile_text(accented).message(), "printable ASCII"));
  Result<Grammar> relaxed = compile_text(accented, false);
  ASSERT_TRUE(relaxed.ok()) << relaxed.message();
  EXPECT_FALSE(relaxed->relaxed.empty());
}

TEST(UniqueHashed, UnboundedIntegers) {
  const std::string schema = R"({"type": "array", "uniqueItems": true, "items": {"type": "integer"}})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "[1, 10, -5, 0, 100]"), -1);
  EXPECT_EQ(match_at(*g, "[1, 1]"), 5);
  EXPECT_EQ(match_at(*g, "[0, -0]"), 5);  // -0 is 0: never written
  EXPECT_EQ(match_at(*g, "[-0]"), 2);
  // 15 digits at most: a used 15-digit value cannot be written again.
  EXPECT_EQ(match_at(*g, "[123456789012345, 123456789012345"), 32);
  // A 14-digit prefix whose value and ten longer forms are used takes no 14th digit.
  std::string text = "[10000000000000";
  for (int d = 0; d < 10; ++d) text += ", 10000000000000" + std::to_string(d);
  EXPECT_EQ(match_at(*g, text + "]"), -1);
  EXPECT_EQ(match_at(*g, text + ", 10000000000000"), static_cast<int64_t>(text.size() + 15));
  EXPECT_EQ(match_at(*g, text + ", 10000000000001]"), -1);
  walks_validate(*g, Json::parse(schema));
}

// A range of more than 64 values (mtad.json's ports would be one with bounds).
TEST(UniqueHashed, IntegerRanges) {
  const std::string schema = R"({"type": "array", "uniqueItems": true, "items": {"type": "integer", "minimum": 10,
      "maximum": 100}})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "[10, 100, 55]"), -1);
  EXPECT_EQ(match_at(*g, "[55, 55]"), 6);
  EXPECT_EQ(match_at(*g, "[101]"), 3);
  // "1" may become 10-19 or 100: with all eleven used it cannot begin an item.
  std::string text = "[100";
  for (int v = 10; v < 20; ++v) text += ", " + std::to_string(v);
  EXPECT_EQ(match_at(*g, text + "]"), -1);
  EXPECT_EQ(match_at(*g, text + ", 1"), static_cast<int64_t>(text.size() + 2));
  EXPECT_EQ(match_at(*g, text + ", 20]"), -1);
  walks_validate(*g, Json::parse(schema));
  const std::string signed_step = R"({"type": "array", "uniqueItems": true, "minItems": 3, "items": {"type": "number",
      "minimum": -500, "maximum": 500, "multipleOf": 5}})";
  g = compile_text(signed_step);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "[-5, 0, 5]"), -1);
  EXPECT_EQ(match_at(*g, "[-0"), 2);
  EXPECT_EQ(match_at(*g, "[-5, 0, -5]"), 10);
  walks_validate(*g, Json::parse(signed_step));
}

TEST(UniqueHashed, ManyEnumValuesAndConstAlternatives) {
  Json values = Json::array();
  for (int k = 0; k < 257; ++k) values.push_back("v" + std::to_string(k));
  Json schema = {{"type", "array"}, {"uniqueItems", true}, {"items", {{"enum", values}}}};
  Result<Grammar> g = compile_json_schema(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["v0", "v256", "v25"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["v0", "v256", "v256"])"), 19);  // "v256" is used
  walks_validate(*g, schema);
  // jscsrc.json: oneOf of consts beside a type, as one enum.
  const std::string consts = R"({"type": "array", "uniqueItems": true, "items": {"type": "string",
      "oneOf": [{"const": "expressions"}, {"const": "exportsFunction"}, {"const": "paramless-procedures"}]}})";
  g = compile_text(consts);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["expressions", "paramless-procedures"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["expressions", "expressions"])"), 20);  // "expr"
  walks_validate(*g, Json::parse(consts));
}

// asmdef.json, putout.json: uniqueItems without `items`: distinct strings (a subset).
TEST(UniqueHashed, ItemsWithoutSchemaAreDistinctStrings) {
  const std::string schema = R"({"type": "array", "uniqueItems": true})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["a", "b"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["a", "a"])"), 8);
  EXPECT_EQ(match_at(*g, "[1]"), 1);
  walks_validate(*g, Json::parse(schema));
}

// vsix-publish.json's installTargets, deployed.json's modeList: objects told apart by a required
// property whose values are kept as hashes (a subset: two objects equal there are never both made).
TEST(UniqueHashed, ObjectsByARequiredProperty) {
  const std::string schema = R"({"type": "array", "uniqueItems": true, "items": {"type": "object", "required":
      ["sku", "version"], "additionalProperties": false, "properties": {"note": {"type": "string"}, "sku": {"type":
      "string"}, "version": {"type": "string"}}}})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"([{"sku": "a", "version": "1"}, {"sku": "b", "version": "1"}])"), -1);
  EXPECT_EQ(match_at(*g, R"([{"sku": "a", "version": "1"}, {"sku": "a", "version": "2"}])"), 41);
  EXPECT_EQ(match_at(*g, R"([{"note": "n", "sku": "a", "version": "1"}, {"note": "n", "sku": "b", "version": "1"}])"),
            -1);
  walks_validate(*g, Json::parse(schema));
  // An enum property: as many items as values.
  const std::string modes = R"({"type": "array", "uniqueItems": true, "items": {"type": "object", "required":
      ["mode", "n"], "properties": {"mode": {"enum": ["x", "y"]}, "n": {"type": "integer"}}}})";
  g = compile_text(modes);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"([{"mode": "x", "n": 1}, {"mode": "y", "n": 1}])"), -1);
  EXPECT_EQ(match_at(*g, R"([{"mode": "x", "n": 1}, {"mode": "y", "n": 1}, )"), 45);
  EXPECT_EQ(match_at(*g, R"([{"mode": "x", "n": 1}, {"mode": "x")"), 34);
  walks_validate(*g, Json::parse(modes));
  // Containers in other properties (linutil-tab-data.json's entries), with open objects in them.
  const std::string nested = R"({"type": "array", "uniqueItems": true, "items": {"type": "object", "required":
      ["name"], "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "object"}},
      "uniq": {"type": "array", "uniqueItems": true, "items": {"enum": [1, 2]}}}}})";
  g = compile_text(nested);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"([{"name": "a", "tags": [{"k": 1}]}, {"name": "b", "uniq": [2, 1]}])"), -1);
  walks_validate(*g, Json::parse(nested));
  // No property to tell them apart (unique_objects_test.cc: an optional one), or another hashed
  // array inside: not enforced.
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "uniqueItems": true, "minItems": 2, "items": {"type": "object",
      "properties": {"a": {"type": "object"}}}})").message(), "could be written in every item"));
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "uniqueItems": true, "items": {"type": "object", "required": ["a"],
      "properties": {"a": {"type": "string"}, "b": {"type": "array", "uniqueItems": true, "items": {"type":
      "object", "required": ["c"], "properties": {"c": {"type": "string"}}}}}}})").message(), "another uniqueItems"));
  // An array of strings inside (sarif-2.1.0's relationships' kinds), beside 63 keys of an open object outside.
  const std::string inner = R"({"type": "array", "uniqueItems": true, "items": {"type": "object", "required": ["a"],
      "properties": {"a": {"type": "string"}, "b": {"type": "array", "uniqueItems": true, "items": {"type":
      "string"}}}}})";
  g = compile_text(inner);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"([{"a": "x", "b": ["p", "q"]}, {"a": "y", "b": ["p", "q"]}])"), -1);
  EXPECT_EQ(match_at(*g, R"([{"a": "x", "b": ["p", "p"]}])"), 25);
  walks_validate(*g, Json::parse(inner));
  std::string full = "{";
  for (int k = 0; k + 1 < kMaxOpenKeys; ++k) full += "\"k" + std::to_string(k) + "\": 0, ";
  full += "\"z\": [";
  for (int k = 0; k < kMaxUniqueStrings; ++k) {
    full += (k ? ", " : "") + std::string("{\"a\": \"") + std::to_string(k) + "\", \"b\": [";
    for (int v = 0; v < kMaxUniqueStrings; ++v) full += (v ? ", \"" : "\"") + std::to_string(v) + "\"";
    full += "]}";
  }
  full += "]}";
  g = compile_text(R"({"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, )" + inner + "]}}");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, full), -1);
}

// vsix-publish.json's categories, jscsrc.json's allExcept: anyOf [string, enum of strings] is the
// strings (the enum adds none), kept as hashes.
TEST(UniqueHashed, StringsBesideAnEnumOfStrings) {
  const std::string schema = R"({"type": "array", "minItems": 1, "maxItems": 3, "uniqueItems": true, "items":
      {"anyOf": [{"type": "string", "minLength": 1}, {"enum": ["ajax", "build"]}]}})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["ajax", "x", "build"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["ajax", "ajax"])"), 14);
  EXPECT_EQ(match_at(*g, R"([""])"), 2);
  walks_validate(*g, Json::parse(schema));
  const std::string multiline = R"({"type": "array", "uniqueItems": true, "items": {"anyOf": [{"type": "string"},
      {"const": "multiline"}]}})";
  g = compile_text(multiline);
  ASSERT_TRUE(g.ok()) << g.message();
  walks_validate(*g, Json::parse(multiline));
  // An enum value the string branch refuses (too short), or another kind: not the strings alone.
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "uniqueItems": true, "items": {"anyOf": [{"type": "string",
      "minLength": 2}, {"enum": ["a"]}]}})").message(), "uniqueItems"));
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "uniqueItems": true, "items": {"anyOf": [{"type": "string"},
      {"enum": ["a", 1]}]}})").message(), "uniqueItems"));
}

// JSON Schema Test Suite (draft4, 6, 7): every invalid instance is refused; a valid one is
// accepted where it lies in what is generated (strings only, without items schema).
TEST(UniqueHashed, JsonSchemaTestSuite) {
  const std::string root = "/usr/share/json-schema-test-suite/tests/";
  if (!std::ifstream(root + "draft7/uniqueItems.json"))
    GTEST_SKIP() << root << " not installed (scripts/setup.sh installs json-schema-test-suite)";
  int compiled = 0, checked = 0;
  for (const char* draft : {"draft4/", "draft6/", "draft7/"}) {
    std::ifstream in(root + draft + "uniqueItems.json");
    if (!in) continue;
    for (const auto& group : Json::parse(in)) {
      Result<Grammar> g = compile_json_schema(group["schema"]);
      if (!g.ok()) continue;
      ++compiled;
      for (const auto& test : group["tests"]) {
        const bool valid = test["valid"].get<bool>();
        bool strings = test["data"].is_array();
        for (const auto& item : test["data"]) strings = strings && item.is_string();
        if (valid && !strings) continue;
        EXPECT_EQ(match_at(*g, test["data"].dump()) == -1, valid) << draft << test["description"];
        ++checked;
      }
    }
  }
  EXPECT_GT(compiled, 0);
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace dsv4::grammar::unique_items_test
