// Issue 39 item 4: JSON Schema as SchemaStore writes it. The $schema draft decides what a
// keyword means (2020-12 when absent); annotations and vendor keywords are ignored; a standard
// keyword the engine does not enforce is refused when strict and relaxed (and listed) when not;
// tuples (prefixItems, draft-07's array items + additionalItems); the compact layout.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/json_schema_check.h"
#include "support/schema_compile.h"

namespace dsv4::grammar::dialect_test {
namespace {

using Json = OrderedJson;

using test::has;

using test::compile_text;

using test::match_at;

// A random walk over the allowed bytes (leaning to close after 200 bytes) to a complete value;
// fails the test on a dead end. "": no complete value within the steps.
std::string walk(const Grammar& g, std::mt19937& rng) {
  JsonMatcher m(g);
  auto st = std::make_unique<MatchState>(), next = std::make_unique<MatchState>();
  m.start(*st);
  std::string text;
  for (int step = 0; step < 3000; ++step) {
    if (m.accepting(*st) && (rng() % 4 == 0 || text.size() > 200)) return text;
    std::vector<uint8_t> allowed;
    for (int c = 0; c < 256; ++c) {
      m.advance(*st, static_cast<uint8_t>(c), *next);
      if (next->n > 0) allowed.push_back(static_cast<uint8_t>(c));
    }
    if (allowed.empty()) {
      EXPECT_TRUE(m.accepting(*st)) << "dead end after " << text;
      return m.accepting(*st) ? text : "";
    }
    uint8_t c = allowed[rng() % allowed.size()];
    if (text.size() > 200)
      for (uint8_t b : allowed)
        if (b == '}' || b == ']' || b == '"') c = b;
    m.advance(*st, c, *next);
    std::swap(st, next);
    text.push_back(static_cast<char>(c));
  }
  return "";
}

// Walks of g end in values that `check` (a 2020-12 schema of the supported keywords) accepts.
void walks_validate(const Grammar& g, const Json& check, int n_walks = 60) {
  std::mt19937 rng(7);
  int done = 0;
  for (int i = 0; i < n_walks; ++i) {
    const std::string text = walk(g, rng);
    if (text.empty()) continue;
    ++done;
    const Json v = Json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    EXPECT_TRUE(test::schema_valid(v, check)) << text << " for " << check.dump();
  }
  EXPECT_GT(done, n_walks / 2);
}

TEST(SchemaDialect, AnnotationsAndVendorKeywordsAreIgnored) {
  const std::string schema = R"({"$schema": "http://json-schema.org/draft-04/schema#", "id": "https://x/y.json",
      "title": "t", "x-tagGroups": [1], "markdownDescription": "m", "errorMessage": {"a": "b"}, "$comment": "c",
      "type": "object", "properties": {"title": {"type": "integer", "x-intellij-html-description": "h",
      "markdownEnumDescriptions": ["a"], "deprecated": true, "readOnly": true, "writeOnly": false, "examples": [1],
      "default": 2, "defaultSnippets": [{}], "tsType": "number", "contentMediaType": "text/plain"}},
      "required": ["title"], "additionalProperties": false})";
  Result<Grammar> g = compile_text(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_TRUE(g->relaxed.empty());
  EXPECT_EQ(match_at(*g, R"({"title": 12})"), -1);  // a property named like an annotation is a property
  EXPECT_EQ(match_at(*g, R"({"title": "x"})"), 10);
}

TEST(SchemaDialect, RefSiblingsIgnoredUpToDraft07AndMergedFrom201909) {
  const std::string body = R"("definitions": {"n": {"type": "integer"}}, "$ref": "#/definitions/n", "type": "string"})";
  for (const char* draft : {"draft-04/schema#", "draft-06/schema#", "draft-07/schema#"}) {
    Result<Grammar> g = compile_text(std::string(R"({"$schema": "http://json-schema.org/)") + draft + "\", " + body);
    ASSERT_TRUE(g.ok()) << draft << ": " << g.message();
    EXPECT_EQ(match_at(*g, "42"), -1) << draft;
    EXPECT_EQ(match_at(*g, "\"s\""), 0) << draft;
  }
  for (const char* draft : {"https://json-schema.org/draft/2019-09/schema", "https://json-schema.org/draft/2020-12/schema"}) {
    const std::string why = compile_text(std::string(R"({"$schema": ")") + draft + "\", " + body).message();
    EXPECT_TRUE(has(why, "unsatisfiable") && has(why, "share no type")) << draft << ": " << why;
  }
  EXPECT_TRUE(has(compile_text("{" + body).message(), "share no type"));  // no $schema: 2020-12
  EXPECT_TRUE(has(compile_text(R"({"$schema": 7})").message(), "$schema must be a string"));
}

TEST(SchemaDialect, RefByTheDocumentsIdIsLocal) {
  Result<Grammar> g = compile_text(R"({"$id": "https://json.schemastore.org/x.json", "definitions": {"a":
      {"const": 1}}, "properties": {"p": {"$ref": "https://json.schemastore.org/x.json#/definitions/a"}},
      "required": ["p"]})");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"p": 1})"), -1);
  g = compile_text(R"({"$schema": "http://json-schema.org/draft-04/schema#", "id": "urn:x#", "definitions": {"a":
      {"const": 1}}, "$ref": "urn:x#/definitions/a"})");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, "1"), -1);
}

TEST(SchemaDialect, UnenforcedKeywordsRefusedWhenStrictRelaxedWhenNot) {
  struct Case {
    const char* schema;
    const char* keyword;
    const char* valid;  // a value of the relaxed grammar that the dropped keyword would refuse
  };
  const Case cases[] = {
      {R"({"type": "object", "properties": {"a": {"type": "integer", "not": {"const": 3}}}, "required": ["a"]})",
       "/properties/a: not", R"({"a": 3})"},
      {R"({"if": {"type": "integer"}, "then": {"const": 1}, "type": "integer"})", "/: if", "2"},
      {R"({"type": "array", "contains": {"const": 1}, "maxItems": 1})", "/: contains", "[]"},
      {R"({"type": "object", "unevaluatedProperties": false})", "/: unevaluatedProperties", R"({"x": 1})"},
      {R"({"$ref": "https://example.com/other.json#/a"})", "/: $ref", "true"},
      {R"({"$dynamicRef": "#meta"})", "/: $dynamicRef", "1"},
      {R"({"type": "array", "items": {"type": "number"}, "uniqueItems": true})", "/: uniqueItems", "[1, 1]"},
      {R"({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "dependencies": {"a":
          {"required": ["b"]}}})", "/: dependentSchemas", R"({"a": 1})"},
  };
  for (const Case& c : cases) {
    const std::string keyword = std::string(c.keyword).substr(std::string(c.keyword).find(": ") + 2);
    const std::string why = compile_text(c.schema).message();
    EXPECT_TRUE(has(why, "'" + keyword + "'") && has(why, "not supported")) << c.schema << ": " << why;
    Result<Grammar> g = compile_text(c.schema, false);
    ASSERT_TRUE(g.ok()) << c.schema << ": " << g.message();
    EXPECT_EQ(g->relaxed, std::vector<std::string>{c.keyword}) << c.schema;
    EXPECT_EQ(match_at(*g, c.valid), -1) << c.schema;
  }
  // An unknown format is an annotation in both modes, listed.
  for (bool strict : {true, false}) {
    Result<Grammar> colour = compile_text(R"({"type": "string", "format": "colour"})", strict);
    ASSERT_TRUE(colour.ok()) << colour.message();
    EXPECT_EQ(colour->relaxed, std::vector<std::string>{"/: format \"colour\" (unknown: an annotation)"});
    EXPECT_EQ(match_at(*colour, R"("#fff")"), -1);
  }
  // oneOf whose branches may overlap: refused when strict, generated as anyOf when not.
  const std::string overlap = R"({"type": "object", "properties": {"p": {"oneOf": [{"type": "string"},
      {"type": "string", "maxLength": 3}]}}, "required": ["p"]})";
  EXPECT_TRUE(has(compile_text(overlap).message(), "may match the same value"));
  Result<Grammar> any_of = compile_text(overlap, false);
  ASSERT_TRUE(any_of.ok()) << any_of.message();
  EXPECT_EQ(any_of->relaxed, std::vector<std::string>{"/properties/p: oneOf"});
  EXPECT_EQ(match_at(*any_of, R"({"p": "ab"})"), -1);
  // What is enforced still holds beside what is relaxed.
  Result<Grammar> g = compile_text(R"({"type": "object", "properties": {"a": {"type": "integer", "not": {}}},
      "required": ["a"], "additionalProperties": false})", false);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(match_at(*g, R"({"a": "x"})"), 6);
  EXPECT_EQ(match_at(*g, R"({})"), 1);
}

TEST(SchemaDialect, TuplesInEveryDraft) {
  const Json check = Json::parse(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"enum": ["a", "b"]}],
      "items": false, "minItems": 1})");
  const Grammar g2020 = *compile_json_schema(check);
  const Grammar g07 = *compile_text(R"({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
      "items": [{"type": "integer"}, {"enum": ["a", "b"]}], "additionalItems": false, "minItems": 1})");
  for (const Grammar* g : {&g2020, &g07}) {
    EXPECT_EQ(match_at(*g, R"([1, "a"])"), -1);
    EXPECT_EQ(match_at(*g, "[1]"), -1);
    EXPECT_EQ(match_at(*g, "[]"), 1);
    EXPECT_EQ(match_at(*g, R"(["a"])"), 1);
    EXPECT_EQ(match_at(*g, R"([1, "a", 2])"), 7);
    walks_validate(*g, check);
  }
  const Json rest = Json::parse(R"({"prefixItems": [{"type": "string"}], "items": {"type": "boolean"}})");
  const Grammar with_rest = *compile_json_schema(rest);
  EXPECT_EQ(match_at(with_rest, R"(["x", true, false])"), -1);
  EXPECT_EQ(match_at(with_rest, R"(["x", 1])"), 6);
  walks_validate(with_rest, rest);
  // additionalItems without an array `items` applies to nothing; prefixItems false ends the array.
  EXPECT_EQ(match_at(*compile_text(R"({"items": {"type": "integer"}, "additionalItems": false})"), "[1, 2]"), -1);
  EXPECT_EQ(match_at(*compile_text(R"({"prefixItems": [{}, false]})"), "[1, 2]"), 2);
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "prefixItems": [{}, false], "minItems": 2})").message(), "unsatisfiable"));
}

TEST(JsonLayout, CompactByDefaultOthersOnRequest) {
  const Json schema = Json::parse(R"({"type": "object", "properties": {"a": {"type": "array", "items":
      {"type": "integer"}}, "b": {"type": "object"}}, "required": ["a", "b"]})");
  const Grammar compact = *compile_json_schema(schema);
  EXPECT_EQ(match_at(compact, R"({"a": [1, 2], "b": {"k": [], "l": {}}})"), -1);
  EXPECT_EQ(match_at(compact, R"({ "a": [1, 2], "b": {}})"), 1);
  EXPECT_EQ(match_at(compact, R"({"a": [1,2], "b": {}})"), 9);
  EXPECT_EQ(match_at(compact, R"({"a": [1, 2] , "b": {}})"), 12);
  CompileOptions tight;
  tight.layout.item_separator = ",";
  tight.layout.key_separator = ":";
  const Grammar min = *compile_json_schema(schema, tight);
  EXPECT_EQ(match_at(min, R"({"a":[1,2],"b":{"k":1}})"), -1);
  EXPECT_EQ(match_at(min, R"({"a": [1,2],"b":{}})"), 5);
  CompileOptions wide;
  wide.layout.item_separator = ",\n  ";
  EXPECT_EQ(match_at(*compile_json_schema(schema, wide), "{\"a\": [1,\n  2],\n  \"b\": {}}"), -1);
  for (const char* bad : {"", ";", " ,", ",     ", ",x"}) {
    CompileOptions o;
    o.layout.item_separator = bad;
    EXPECT_TRUE(has(compile_json_schema(schema, o).message(), "item_separator must be ','")) << bad;
  }
  // Walks of the compact grammar hold no whitespace but the separators'.
  std::mt19937 rng(3);
  for (int i = 0; i < 40; ++i) {
    const std::string text = walk(compact, rng);
    if (text.empty()) continue;
    ASSERT_FALSE(Json::parse(text, nullptr, false).is_discarded()) << text;
    bool in_string = false, escaped = false;
    for (size_t k = 0; k < text.size(); ++k) {  // outside strings: ", " and ": ", no other space
      const char c = text[k];
      if (in_string) {
        in_string = escaped || c != '"';
        escaped = !escaped && c == '\\';
        continue;
      }
      in_string = c == '"';
      if (c == ',' || c == ':') {
        EXPECT_EQ(text[k + 1], ' ') << text;
      }
      if (c == ' ') {
        EXPECT_TRUE(k > 0 && (text[k - 1] == ',' || text[k - 1] == ':')) << text;
      }
      EXPECT_TRUE(c != '\n' && c != '\t' && c != '\r') << text;
    }
  }
}

// A 9th object branch (or the 9th tool of a forced call) was silently unreachable when the matcher
// kept 8 readings: now kMaxStacks are followed, and a grammar that may open more is refused by name.
TEST(Readings, EveryBranchReachableOrRefused) {
  Json branches = Json::array();
  for (int i = 0; i < kMaxStacks; ++i)
    branches.push_back(Json{{"type", "object"}, {"properties", {{"k" + std::to_string(i), {{"const", i}}}}},
                            {"required", Json::array({"k" + std::to_string(i)})}, {"additionalProperties", false}});
  Result<Grammar> g = compile_json_schema(Json{{"anyOf", branches}});
  ASSERT_TRUE(g.ok()) << g.message();
  for (int i = 0; i < kMaxStacks; ++i) {
    const std::string text = "{\"k" + std::to_string(i) + "\": " + std::to_string(i) + "}";
    EXPECT_EQ(match_at(*g, text), -1) << text;
  }
  // Nested anyOfs and type lists count the concrete branches that begin alike: 8 x 5 strings > 32
  // (schema_caps_test.cc: more cases).
  Json nested = Json::array();
  for (int i = 0; i < 8; ++i)
    nested.push_back(Json{{"anyOf", Json::array({{{"const", std::to_string(i)}},
                                                 {{"type", "string"}, {"maxLength", i + 1}},
                                                 {{"type", "string"}, {"minLength", i}}, {{"type", "string"}},
                                                 {{"type", "string"}, {"pattern", "a"}}})}});
  const std::string why = compile_json_schema(Json{{"anyOf", nested}}).message();
  EXPECT_TRUE(has(why, "read 40 ways at once")) << why;
  std::vector<ToolSpec> tools;
  for (int i = 0; i <= kMaxStacks; ++i) tools.push_back({"tool_" + std::to_string(i), Json::object()});
  EXPECT_TRUE(has(compile_tool_call(tools).message(), "read " + std::to_string(kMaxStacks + 1) + " ways at once"));
  tools.pop_back();
  EXPECT_TRUE(compile_tool_call(tools).ok());
}

TEST(PropertyCounts, MinAndMaxPropertiesHoldWithoutDeadEnds) {
  const Json listed = Json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type":
      "integer"}, "c": {"type": "integer"}, "d": {"type": "object", "properties": {"e": {"type": "integer"}},
      "minProperties": 1}}, "required": ["c"], "minProperties": 2, "maxProperties": 2, "additionalProperties": false})");
  Result<Grammar> g = compile_json_schema(listed);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"a": 1, "c": 1})"), -1);
  EXPECT_EQ(match_at(*g, R"({"c": 1, "d": {"e": 1}})"), -1);
  EXPECT_EQ(match_at(*g, R"({"c": 1})"), 7);                // one property: too few
  EXPECT_EQ(match_at(*g, R"({"a": 1, "b": 1, "c": 1})"), 10);  // a and b leave no room for c
  EXPECT_EQ(match_at(*g, R"({"c": 1, "d": {}})"), 15);
  walks_validate(*g, listed);
  const Json open = Json::parse(R"({"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}})");
  g = compile_json_schema(open);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"x": 1})"), -1);
  EXPECT_EQ(match_at(*g, R"({"x": 1, "y": 2})"), 7);
  walks_validate(*g, open);
  EXPECT_TRUE(has(compile_text(R"({"type": "object", "minProperties": 3})").message(), "'minProperties'"));
  Result<Grammar> relaxed = compile_text(R"({"type": "object", "minProperties": 3})", false);
  ASSERT_TRUE(relaxed.ok());
  EXPECT_EQ(relaxed->relaxed, std::vector<std::string>{"/: minProperties"});
  EXPECT_TRUE(has(compile_text(R"({"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"], "maxProperties": 1})")
                      .message(), "unsatisfiable: 2 required properties, maxProperties 1"));
  EXPECT_TRUE(has(compile_text(R"({"type": "object", "minProperties": 3, "maxProperties": 2})").message(), "unsatisfiable"));
}

TEST(UniqueItems, EnforcedOverEnumsOfStrings) {
  const Json schema = Json::parse(R"({"type": "array", "items": {"enum": ["a", "b", "ab", null]}, "uniqueItems": true,
      "minItems": 1})");
  Result<Grammar> g = compile_json_schema(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"(["a", "ab", null, "b"])"), -1);
  EXPECT_EQ(match_at(*g, R"(["a", "a"])"), 8);     // "a" used: only "ab" goes on
  EXPECT_EQ(match_at(*g, R"([null, null])"), 7);
  EXPECT_EQ(match_at(*g, R"(["a", "ab", null, "b", )"), 21);  // four values, four items at most
  walks_validate(*g, schema);
  EXPECT_TRUE(has(compile_text(R"({"items": {"enum": [1, 1.0]}, "uniqueItems": true})").message(), "'uniqueItems'"));
  EXPECT_TRUE(has(compile_text(R"({"type": "array", "items": {"enum": ["x"]}, "uniqueItems": true, "minItems": 2})").message(),
                  "unsatisfiable: minItems 2 with uniqueItems over 1 values"));
}

TEST(JsonLayout, XGuidanceOverridesPerSchema) {
  const Json schema = Json::parse(R"({"x-guidance": {"item_separator": ",", "key_separator": ":"}, "type": "array",
      "items": {"type": "object"}})");
  Result<Grammar> g = compile_json_schema(schema);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"([{"a":1},{}])"), -1);
  EXPECT_EQ(match_at(*g, R"([{"a": 1}])"), 6);
  g = compile_json_schema(Json::parse(R"({"x-guidance": {"whitespace_flexible": true}})"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(match_at(*g, "[ 1 ,\n 2 ]"), -1);
  EXPECT_TRUE(has(compile_json_schema(Json::parse(R"({"x-guidance": {"lenient": true}})")).message(),
                  "x-guidance: 'lenient' is not supported"));
  EXPECT_TRUE(has(compile_json_schema(Json::parse(R"({"x-guidance": {"key_separator": "="}})")).message(),
                  "key_separator must be ':'"));
}

}  // namespace
}  // namespace dsv4::grammar::dialect_test
