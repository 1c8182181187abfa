// Issue 39 item 3: the strict subset without the old caps. More than 64 properties in one object
// and more than 64 enum values (the matcher narrows ranges of their sorted texts, not 64-bit
// sets); anyOf/oneOf of more than 16 branches where the readings the matcher follows at once
// stay within kMaxStacks (counted per first byte, across nested values); a grammar whose
// readings could exceed it is refused (before: one was silently dropped at run time). An
// anyOf/oneOf branch that matches nothing is left out; strict: false relaxes an unsupported
// pattern.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/json_schema_check.h"

namespace dsv4::grammar::caps_test {
namespace {

using Json = OrderedJson;
using test::match_at;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Result<Grammar> compile(const Json& schema, bool strict = true) {
  CompileOptions options;
  options.strict = strict;
  return compile_json_schema(schema, options);
}

// Walks of g end in values that `check` accepts.
void walks_validate(const Grammar& g, const Json& check, int n_walks = 60) { test::valid_walks(g, check, n_walks, 11); }

// 300 properties (keys that are prefixes of others: p1, p10, p100), every 60th required.
TEST(SchemaCaps, MoreThan64PropertiesEachReachable) {
  Json props = Json::object(), required = Json::array();
  for (int i = 0; i < 300; ++i) {
    props["p" + std::to_string(i)] = Json{{"type", "integer"}};
    if (i % 60 == 59) required.push_back("p" + std::to_string(i));
  }
  const Json schema{{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
  Result<Grammar> g = compile(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  std::string all = "{";
  for (int i = 0; i < 300; ++i) all += (i ? ", \"p" : "\"p") + std::to_string(i) + "\": " + std::to_string(i);
  EXPECT_EQ(match_at(*g, all + "}"), -1);
  EXPECT_EQ(match_at(*g, R"({"p1": 1, "p10": 2, "p59": 3, "p100": 4, "p119": 5, "p179": 6, "p239": 7, "p299": 8})"), -1);
  EXPECT_EQ(match_at(*g, R"({"p1": 1, "p0": 2})"), 12);  // generated in the schema's order
  EXPECT_EQ(match_at(*g, R"({"p60": 1})"), 4);           // p59 is required before it
  const std::string missing = R"({"p59": 1, "p119": 1, "p179": 1, "p239": 1})";  // p299 is required
  EXPECT_EQ(match_at(*g, missing), static_cast<int64_t>(missing.size()) - 1);
  EXPECT_EQ(match_at(*g, R"({"p3000": 1})"), 5);
  walks_validate(*g, schema);
  // maxProperties among many: never more than 2 keys, the required one included.
  Json bounded = schema;
  bounded["required"] = Json::array({"p299"});
  bounded["maxProperties"] = 2;
  g = compile(bounded);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"p7": 1, "p299": 1})"), -1);
  EXPECT_EQ(match_at(*g, R"({"p7": 1, "p8": 1})"), 12);  // room for p299 only
  walks_validate(*g, bounded);
}

TEST(SchemaCaps, MoreThan64EnumValuesEachReachable) {
  Json values = Json::array();
  for (int i = 0; i < 500; ++i) values.push_back("v" + std::to_string(i));
  for (int i = 0; i < 100; ++i) values.push_back(i * 7);
  values.push_back(true);
  values.push_back(nullptr);
  const Json schema{{"enum", values}};
  Result<Grammar> g = compile(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  for (const Json& v : values) EXPECT_EQ(match_at(*g, v.dump()), -1) << v.dump();
  EXPECT_EQ(match_at(*g, "\"v500\""), 4);
  EXPECT_EQ(match_at(*g, "\"v\""), 2);
  EXPECT_EQ(match_at(*g, "8"), 1);  // a prefix of 84, not a value
  EXPECT_EQ(match_at(*g, "false"), 0);
  walks_validate(*g, schema);
  // A uniqueItems array over them keeps a 64-bit set of the used values up to 64, hashes beyond.
  const Json unique{{"type", "array"}, {"items", {{"enum", values}}}, {"uniqueItems", true}};
  g = compile(unique);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["v499", 693, true])"), -1);
  EXPECT_EQ(match_at(*g, R"(["v499", 693, 693])"), 15);  // "69" can only become 693
  Json few = Json::array();
  for (int i = 0; i < 64; ++i) few.push_back("v" + std::to_string(i));
  const Json unique_few{{"type", "array"}, {"items", {{"enum", few}}}, {"uniqueItems", true}};
  g = compile(unique_few);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["v1", "v10", "v63"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["v1", "v10", "v1"])"), 17);
  walks_validate(*g, unique_few);
}

// 20 branches that begin with different bytes, at most 5 alike: 5 readings at once.
TEST(SchemaCaps, ManyBranchesWhereFewBeginAlike) {
  Json branches = Json::array();
  for (int i = 0; i < 5; ++i) {
    branches.push_back(Json{{"type", "object"}, {"properties", {{"k" + std::to_string(i), {{"const", i}}}}},
                            {"required", Json::array({"k" + std::to_string(i)})}, {"additionalProperties", false}});
    branches.push_back(Json{{"type", "array"}, {"items", {{"const", i}}}, {"minItems", i + 1}, {"maxItems", i + 1}});
    branches.push_back(Json{{"type", "string"}, {"minLength", i * 2}, {"maxLength", i * 2}});
    branches.push_back(Json{{"type", "integer"}, {"minimum", i * 10}, {"maximum", i * 10 + 5}});
  }
  const Json schema{{"anyOf", branches}};
  Result<Grammar> g = compile(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(match_at(*g, "{\"k" + std::to_string(i) + "\": " + std::to_string(i) + "}"), -1) << i;
    std::string array = "[" + std::to_string(i);
    for (int k = 0; k < i; ++k) array += ", " + std::to_string(i);
    EXPECT_EQ(match_at(*g, array + "]"), -1) << array;
    EXPECT_EQ(match_at(*g, "\"" + std::string(static_cast<size_t>(i * 2), 'x') + "\""), -1) << i;
    EXPECT_EQ(match_at(*g, std::to_string(i * 10 + 5)), -1) << i;
  }
  walks_validate(*g, schema);
  // The old count (concrete branches per anyOf, at most 16) refused nested lists of 4 x 5 that
  // begin alike at most 8 ways.
  Json nested = Json::array();
  for (int i = 0; i < 4; ++i)
    nested.push_back(Json{{"anyOf", Json::array({{{"const", i}}, {{"type", "string"}, {"maxLength", i + 1}},
                                                 {{"type", "array"}, {"maxItems", i}}, {{"type", "integer"}},
                                                 {{"type", "null"}}})}});
  g = compile(Json{{"anyOf", nested}});
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "[1, 2, 3]"), -1);
  EXPECT_EQ(match_at(*g, "\"abcd\""), -1);
}

// Two readings that each open an anyOf inside: 2 x (kMaxStacks / 2 + 1) readings of the value of
// "a". The old count saw at most kMaxStacks / 2 + 1 per anyOf and compiled it; the matcher then
// dropped the readings beyond kMaxStacks.
TEST(SchemaCaps, ReadingsAcrossNestedValuesAreBoundedOrRefused) {
  const std::string too_many = "more than the " + std::to_string(kMaxStacks) + " the matcher follows";
  Json inner = Json::array();
  for (int i = 0; i <= kMaxStacks / 2; ++i)
    inner.push_back(Json{{"type", "string"}, {"pattern", "^x{" + std::to_string(i) + "}$"}});
  Json two = Json::array();
  for (const char* other : {"b", "c"})
    two.push_back(Json{{"type", "object"}, {"properties", {{"a", {{"anyOf", inner}}}, {other, {{"type", "null"}}}}}});
  const std::string why = compile(Json{{"anyOf", two}}).message();
  EXPECT_TRUE(has(why, too_many) && has(why, "read " + std::to_string(2 * (kMaxStacks / 2 + 1)) + " ways")) << why;
  two.erase(1);
  Result<Grammar> g = compile(Json{{"anyOf", two}});
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"a": "xxxxxxxx", "b": null})"), -1);
  // A recursive schema whose branches begin alike through the recursion.
  const std::string recursive = compile(Json::parse(R"({"anyOf": [{"type": "array", "items": {"$ref": "#"}},
      {"type": "array", "items": {"$ref": "#"}, "maxItems": 3}]})")).message();
  EXPECT_TRUE(has(recursive, too_many) && has(recursive, "at least")) << recursive;
  // The any-value grammar recurses through containers that begin differently: 1 reading.
  EXPECT_TRUE(compile(Json::parse(R"({"type": "array", "items": true})")).ok());
}

// Objects of one anyOf are all read at the same key: readings in different keys' values do not
// add up, and where a required constant is read before a key (a discriminator), the objects with
// different constants are never read there together (SchemaStore: enonic-xp's 21 input types).
TEST(SchemaCaps, ReadingsCountedPerKeyAndDiscriminator) {
  Json inner = Json::array();
  for (int i = 0; i <= kMaxStacks / 2; ++i) inner.push_back(Json{{"type", "string"}, {"maxLength", i}});
  Json two = Json::array();
  for (const char* key : {"a", "b"})
    two.push_back(Json{{"type", "object"}, {"properties", {{key, {{"anyOf", inner}}}}}});
  Result<Grammar> g = compile(Json{{"anyOf", two}});  // the old sum over branches: 2 x 17 > 32
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"b": "xx"})"), -1);
  // A recursive tree of node kinds, each told apart by "kind" before "children".
  const Json tree = Json::parse(R"({"$defs": {"node": {"anyOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}, "children": {"type": "array", "items": {"$ref":
       "#/$defs/node"}, "maxItems": 2}}, "required": ["kind"], "additionalProperties": false},
      {"type": "object", "properties": {"kind": {"const": "b"}, "children": {"type": "array", "items": {"$ref":
       "#/$defs/node"}, "maxItems": 2}, "x": {"type": "integer"}}, "required": ["kind"], "additionalProperties": false}]}},
      "$ref": "#/$defs/node"})");
  g = compile(tree);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"kind": "a", "children": [{"kind": "b", "children": [{"kind": "a"}], "x": 1}]})"), -1);
  walks_validate(*g, tree);
  // With the constant after the recursive key, both kinds are read inside "children" at every level.
  Json late = tree;
  for (Json& branch : late["$defs"]["node"]["anyOf"]) {
    Json props = Json::object();
    props["children"] = branch["properties"]["children"];
    for (auto it = branch["properties"].begin(); it != branch["properties"].end(); ++it)
      if (it.key() != "children") props[it.key()] = it.value();
    branch["properties"] = props;
  }
  const std::string why = compile(late).message();
  EXPECT_TRUE(has(why, "at least")) << why;
}

TEST(SchemaCaps, AllOfOfMoreThan16Schemas) {
  Json all = Json::array();
  for (int i = 0; i < 40; ++i) all.push_back(Json{{"properties", {{"p" + std::to_string(i), {{"type", "integer"}}}}}});
  Result<Grammar> g = compile(Json{{"type", "object"}, {"allOf", all}});
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"p0": 1, "p39": 2})"), -1);
}

// A branch that matches nothing (its own keywords, or merged with the keywords beside it, or
// a $ref to such a schema) is left out.
TEST(SchemaCaps, UnsatisfiableBranchesAreLeftOut) {
  const Json beside = Json::parse(R"({"type": "object", "properties": {"t": {"anyOf": [{"const": "a"},
      {"const": "b"}, {"type": "array"}]}}, "anyOf": [{"properties": {"t": {"const": "a"}}}]})");
  Result<Grammar> g = compile(beside);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"t": "a"})"), -1);
  EXPECT_EQ(match_at(*g, R"({"t": "b"})"), 7);
  const Json own = Json::parse(R"({"oneOf": [{"type": "object", "properties": {"t": false}, "required": ["t"]},
      {"allOf": [{"type": "string"}, {"type": "null"}]}, {"type": "string", "maxLength": 2}]})");
  g = compile(own);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"("ab")"), -1);
  EXPECT_EQ(match_at(*g, "{"), 0);
  walks_validate(*g, Json{{"type", "string"}, {"maxLength", 2}});
  EXPECT_TRUE(has(compile(Json::parse(R"({"anyOf": [{"const": 1, "type": "string"}, {"const": 2, "type": "string"}]})"))
                      .message(),
                  "unsatisfiable: every branch"));
  // A branch that is a $ref to a schema matching nothing; an optional property of a branch that
  // matches nothing is never written (the branch stays), a required one leaves the branch out.
  const Json none = Json::parse(R"({"allOf": [{"type": "string"}, {"type": "null"}]})");
  g = compile(Json{{"$defs", {{"u", none}}}, {"anyOf", Json::array({{{"$ref", "#/$defs/u"}}, {{"type", "integer"}}})}});
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "5"), -1);
  const Json nested = Json::parse(R"({"anyOf": [{"type": "object", "properties": {"x": {"type": "string",
      "minLength": 3, "maxLength": 1}, "y": {"type": "null"}}}, {"type": "null"}]})");
  g = compile(nested);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"x")"), 2);
  EXPECT_EQ(match_at(*g, R"({"y": null})"), -1);
  walks_validate(*g, nested);
  Json required = nested;
  required["anyOf"][0]["required"] = Json::array({"x"});
  g = compile(required);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "{"), 0);
  EXPECT_EQ(match_at(*g, "null"), -1);
}

TEST(SchemaCaps, PatternOutsideTheSubsetIsRelaxedWhenNotStrict) {
  const Json schema = Json::parse(R"({"type": "object", "properties": {"id": {"type": "string", "pattern":
      "^[a-z]+(?!x)$", "maxLength": 3}}, "required": ["id"]})");
  const std::string why = compile(schema).message();
  EXPECT_TRUE(has(why, "/properties/id") && has(why, "keyword 'pattern'") && has(why, "lookahead")) << why;
  Result<Grammar> g = compile(schema, false);
  ASSERT_TRUE(g.ok()) << g.message();
  ASSERT_EQ(g->relaxed.size(), 1u);
  EXPECT_EQ(g->relaxed[0], "/properties/id: pattern");
  EXPECT_EQ(match_at(*g, R"({"id": "x1"})"), -1);  // any string, its other keywords kept
  EXPECT_EQ(match_at(*g, R"({"id": "abcd"})"), 11);
}

// DSML tool parameters beyond 64: each reachable by its opening tag.
TEST(SchemaCaps, ToolWithMoreThan64Parameters) {
  Json props = Json::object();
  for (int i = 0; i < 100; ++i) props["a" + std::to_string(i)] = Json{{"type", "integer"}};
  Result<Grammar> g = compile_tool_call({ToolSpec{"t", Json{{"type", "object"}, {"properties", props}}}});
  ASSERT_TRUE(g.ok()) << g.message();
  const std::string text = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"t\">\n"
                           "<｜DSML｜parameter name=\"a9\" string=\"false\">1</｜DSML｜parameter>\n"
                           "<｜DSML｜parameter name=\"a99\" string=\"false\">2</｜DSML｜parameter>"
                           "\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  EXPECT_EQ(match_at(*g, text), -1);
}

}  // namespace
}  // namespace dsv4::grammar::caps_test
