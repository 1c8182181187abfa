// strict: false over a value read more ways at once than the matcher follows (kMaxStacks): the
// anyOf / oneOf / type lists read the fewest ways above the bound are relaxed (named): their object
// branches joined into one object, else (or still over-read) any value; what is enforced elsewhere
// still holds. Under strict the schema is refused as before.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"

namespace dsv4::grammar {
namespace relax_readings_test {  // named: the grammar tests build as one unity translation unit

using Json = OrderedJson;
using test::match_at;

Result<Grammar> compile_json(const Json& schema, bool strict) {
  CompileOptions options;
  options.strict = strict;
  return compile_json_schema(schema, options);
}

// 8 anyOfs of 5 strings that begin alike: read 40 ways.
Json over_read() {
  Json nested = Json::array();
  for (int i = 0; i < 8; ++i)
    nested.push_back(Json{{"anyOf", Json::array({{{"const", std::to_string(i)}},
                                                 {{"type", "string"}, {"maxLength", i + 1}},
                                                 {{"type", "string"}, {"minLength", i}}, {{"type", "string"}},
                                                 {{"type", "string"}, {"pattern", "a"}}})}});
  return Json{{"anyOf", nested}};
}

TEST(RelaxReadings, OverReadAnyOfBecomesAnyValueOnlyWhereItIs) {
  const Json schema = {{"type", "object"},
                       {"properties", {{"x", over_read()}, {"y", {{"type", "integer"}}}}},
                       {"required", Json::array({"x", "y"})},
                       {"additionalProperties", false}};
  Result<Grammar> strict = compile_json(schema, true);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.message().find("read 40 ways at once"), std::string::npos) << strict.message();
  Result<Grammar> g = compile_json(schema, false);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->relaxed, std::vector<std::string>{"/properties/x: anyOf"});
  EXPECT_EQ(match_at(*g, R"({"x": "abc", "y": 1})"), -1);
  EXPECT_EQ(match_at(*g, R"({"x": [1, {"a": null}], "y": 1})"), -1);  // any value: a superset
  EXPECT_EQ(match_at(*g, R"({"x": 1, "y": "s"})"), 14);               // y is still an integer
  EXPECT_EQ(match_at(*g, R"({"x": 1, "z": 2})"), 10);                 // and no other key
  std::mt19937 rng(3);
  for (int i = 0; i < 40; ++i) {
    bool dead_end = false;
    const std::string text = test::random_walk(*g, rng, &dead_end);
    ASSERT_FALSE(dead_end) << text;
    if (text.empty()) continue;
    const Json v = Json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    EXPECT_TRUE(v.contains("x") && v["y"].is_number_integer()) << text;
  }
}

// Object branches that begin alike and nest the schema again (read ever more ways) are joined
// into one object: their keys, each value the branches' values, required where all require it.
TEST(RelaxReadings, ObjectBranchesAreJoinedIntoOneObject) {
  const Json schema = Json::parse(R"({"$defs": {"o": {"anyOf": [
      {"type": "object", "properties": {"a": {"$ref": "#"}}, "additionalProperties": false},
      {"type": "object", "properties": {"a": {"$ref": "#"}, "b": {"type": "integer"}}, "required": ["b"],
       "additionalProperties": false},
      {"type": "object", "properties": {"a": {"$ref": "#"}, "c": {"type": "string"}, "b": {"type": "string"}},
       "additionalProperties": false}]}}, "$ref": "#/$defs/o"})");
  Result<Grammar> strict = compile_json(schema, true);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.message().find("ways at once"), std::string::npos) << strict.message();
  Result<Grammar> g = compile_json(schema, false);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->relaxed, std::vector<std::string>{"/$defs/o: anyOf"});
  EXPECT_EQ(match_at(*g, R"({"a": {"b": 1, "c": "x"}})"), -1);  // a superset: b and c together
  EXPECT_EQ(match_at(*g, R"({"b": "s"})"), -1);                 // b: an integer or a string
  EXPECT_EQ(match_at(*g, R"({"b": true})"), 6);
  EXPECT_EQ(match_at(*g, R"({"d": 1})"), 2);                    // still no other key
  EXPECT_EQ(match_at(*g, "[]"), 0);                             // still an object
  std::mt19937 rng(9);
  for (int i = 0; i < 40; ++i) {
    bool dead_end = false;
    const std::string text = test::random_walk(*g, rng, &dead_end);
    ASSERT_FALSE(dead_end) << text;
    if (text.empty()) continue;
    EXPECT_TRUE(Json::parse(text, nullptr, false).is_object()) << text;
  }
}

TEST(RelaxReadings, TypeListsAndOneOfAreNamedByTheirKeyword) {
  Json branches = Json::array();
  for (int i = 0; i < kMaxStacks + 2; ++i)
    branches.push_back(Json{{"type", Json::array({"string", "null"})}, {"minLength", i}});
  Result<Grammar> g = compile_json(Json{{"oneOf", branches}}, false);
  ASSERT_TRUE(g.ok()) << g.message();
  ASSERT_FALSE(g->relaxed.empty());
  EXPECT_EQ(g->relaxed.back(), "/: oneOf");
  EXPECT_EQ(match_at(*g, R"("x")"), -1);
}

}  // namespace relax_readings_test
}  // namespace dsv4::grammar
