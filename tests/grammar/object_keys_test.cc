// Object keywords on keys: patternProperties (listed keys merged with the patterns they match,
// and open objects whose keys run a key automaton), propertyNames and dependentRequired (and
// draft-07 `dependencies` with arrays). Hand cases accepted and refused at the right byte,
// refusals naming the keyword and path, random walks that end in valid values with no dead end,
// and the JSON Schema Test Suite's cases (Debian json-schema-test-suite; skipped when absent):
// every invalid instance refused, valid ones accepted unless outside what is generated.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/json_schema_check.h"
#include "support/schema_compile.h"

namespace dsv4::grammar {
namespace object_keys_test {  // named: the grammar tests build as one unity translation unit

using Json = OrderedJson;
using test::match_at;

using test::compile;
using test::compile_text;

std::string refusal(const std::string& schema) {
  Result<Grammar> g = compile_text(schema);
  return g.ok() ? std::string("ok") : g.message();
}
using test::has;

// Walks of the schema's grammar end in values the independent validator accepts, never in a
// dead end; returns the values.
std::vector<Json> walks_validate(const std::string& schema, int n_walks = 80) {
  return test::valid_walks(compile(schema), Json::parse(schema), n_walks, 5);
}

TEST(ObjectKeys, PatternPropertiesOnListedKeys) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}, "x-b": {"type":
      "string"}}, "patternProperties": {"^x-": {"maxLength": 2}, "a": {"minimum": 3}}, "additionalProperties":
      false, "required": ["x-b"]})";
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"a": 3, "x-b": "ab"})"), -1);
  EXPECT_EQ(match_at(g, R"({"a": 2, "x-b": "ab"})"), 7);       // "a" matches the pattern a: minimum 3
  EXPECT_EQ(match_at(g, R"({"x-b": "abc"})"), 11);             // ^x- caps it at 2 code points
  EXPECT_EQ(match_at(g, R"({"x-c": "a"})"), 4);                // neither listed nor generated
  walks_validate(schema);
  // A required name among no properties takes the schemas of the patterns it matches.
  const Grammar required = compile(R"({"required": ["n1"], "patternProperties": {"^n": {"type": "integer"}},
      "additionalProperties": false})");
  EXPECT_EQ(match_at(required, R"({"n1": 4})"), -1);
  EXPECT_EQ(match_at(required, R"({"n1": "s"})"), 7);
  EXPECT_TRUE(has(refusal(R"({"type": "object", "properties": {"p": {"type": "object", "required": ["q"],
      "additionalProperties": false, "patternProperties": {"^r": {}}}}, "required": ["p"]})"), "/properties/p: unsatisfiable: required 'q'"));
  EXPECT_TRUE(has(refusal(R"j({"patternProperties": {"(?=a)": {}}})j"), "schema /: patternProperties '(?=a)'"));
  // Bounds, checked before the work and named.
  Json many = Json::object(), seven = Json::object();
  for (int i = 0; i < 16; ++i) many[std::string(1, static_cast<char>('a' + i))] = Json::object();
  for (int i = 0; i < 7; ++i) seven[std::string(1, static_cast<char>('a' + i))] = {{"type", "integer"}};
  EXPECT_TRUE(has(refusal(Json{{"patternProperties", many}}.dump()), "schema /: patternProperties has 16 patterns, "
                                                                    "at most 15"));
  EXPECT_TRUE(has(refusal(Json{{"type", "object"}, {"patternProperties", seven}}.dump()),
                  "schema /: keyword 'patternProperties': keys match more than 64 different sets of patterns"));
}

TEST(ObjectKeys, PatternPropertiesOnOpenObjects) {
  const std::string schema = R"({"type": "object", "patternProperties": {"^[a-c]+$": {"type": "integer"}, "^b":
      {"minimum": 5}}, "additionalProperties": false})";
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"a": 1, "cc": 2, "bé": "s"})"), -1);
  EXPECT_EQ(match_at(g, R"({"bb": 7})"), -1);
  EXPECT_EQ(match_at(g, R"({"bb": 3})"), 8);   // bb matches both: an integer of at least 5
  EXPECT_EQ(match_at(g, R"({"d": 1})"), 2);    // matches no pattern, and no key begins d
  EXPECT_EQ(match_at(g, R"({"": 1})"), 2);     // the empty key matches none
  EXPECT_EQ(match_at(g, R"({"a": 1, "a": 2})"), 11);  // never a repeated key
  EXPECT_EQ(match_at(g, R"({"a": 1.5})"), 7);
  walks_validate(schema);
  // Keys outside the patterns take additionalProperties.
  const std::string mixed = R"({"patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties":
      {"type": "string"}})";
  const Grammar m = compile(mixed);
  EXPECT_EQ(match_at(m, R"({"n_x": 1, "y": "s", "é": "t"})"), -1);
  EXPECT_EQ(match_at(m, R"({"n_x": "s"})"), 8);
  EXPECT_EQ(match_at(m, R"({"y": 1})"), 6);
  walks_validate(mixed);
  // A pattern whose schema is false: keys matching it are never generated.
  const Grammar no_x = compile(R"({"type": "object", "patternProperties": {"^x": false}})");
  EXPECT_EQ(match_at(no_x, R"({"y": 1})"), -1);
  EXPECT_EQ(match_at(no_x, R"({"x)"), 2);
  walks_validate(R"({"type": "object", "patternProperties": {"^x": false, "é$": {"type": "null"}}})");
  // Finitely many keys allowed: they are listed (in code point order, at most 64).
  const std::string finite = R"({"patternProperties": {"^(a|bé)$": {"type": "integer"}, "^b[é-ê]$": {"minimum":
      2}}, "additionalProperties": false})";
  const Grammar f = compile(finite);
  EXPECT_EQ(match_at(f, "{}"), -1);
  EXPECT_EQ(match_at(f, R"({"a": 1, "bé": 2})"), -1);
  EXPECT_EQ(match_at(f, R"({"bé": 1})"), 9);  // both: an integer of at least 2
  EXPECT_EQ(match_at(f, R"({"bê": 2.5})"), -1);
  EXPECT_EQ(match_at(f, R"({"c": 1})"), 2);
  walks_validate(finite);
}

TEST(ObjectKeys, PatternKeysNestWithinTheDepthBound) {
  // Each key's value is the schema again: no key may begin where its value could not close.
  const std::string schema = R"({"type": "object", "patternProperties": {"^k": {"$ref": "#"}},
      "additionalProperties": false})";
  walks_validate(schema, 40);
  std::string deep;  // the root frame, then kMaxDepth - 1 objects at most: the last one empty
  for (int i = 0; i < kMaxDepth - 2; ++i) deep += R"({"k": )";
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, deep + "{}" + std::string(kMaxDepth - 2, '}')), -1);
  EXPECT_EQ(match_at(g, deep + R"({"k)"), static_cast<int64_t>(deep.size()) + 1);  // no room for a value
  // Per label: where an object value no longer fits, a key whose value is a string still may.
  const Grammar labels = compile(R"({"type": "object", "patternProperties": {"^o": {"$ref": "#"}, "^s": {"type":
      "string"}}, "additionalProperties": false})");
  std::string nested;
  for (int i = 0; i < kMaxDepth - 2; ++i) nested += R"({"o": )";
  EXPECT_EQ(match_at(labels, nested + R"({"s": "x"})" + std::string(kMaxDepth - 2, '}')), -1);
  EXPECT_EQ(match_at(labels, nested + R"({"o)"), static_cast<int64_t>(nested.size()) + 2);
}

// The mask inside pattern keys (the key-text fast path where the automaton's state loops on all
// key text, the trie walk elsewhere) equals the per-token brute force over a small vocabulary.
TEST(ObjectKeys, PatternKeyMaskMatchesBruteForce) {
  std::vector<std::string> vocab = {"\"", "x", "x-", "-", "a", "ab", "\\", "é", "\xc3", "\xa9", "\":", "\": ",
                                    "1", "{", "}", ", ", " ", "\"}", "a\"", "b", ":", ": "};
  for (int k = 0; k < 100; ++k) vocab.push_back(std::string(1, static_cast<char>('a' + k % 26)) + std::to_string(k));
  const MaskVocab prepared(
      static_cast<int32_t>(vocab.size()), [&](int32_t id) { return std::string_view(vocab[id]); },
      [](int32_t) { return false; });
  TokenMasker masker(prepared);
  for (const char* text :
       {R"({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": false})",
        R"({"type": "object", "patternProperties": {"^[a-c]+$": {"type": "integer"}}, "additionalProperties": false})",
        R"({"type": "object", "propertyNames": {"pattern": "b"}, "additionalProperties": {"type": "integer"}})"}) {
    const Grammar g = compile(text);
    JsonMatcher m(g);
    std::mt19937 rng(3);
    auto st = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>(), out = std::make_unique<MatchState>();
    m.start(*st);
    std::vector<uint64_t> allowed((vocab.size() + 63) / 64);
    std::string walked;
    for (int step = 0; step < 40; ++step) {
      masker.fill(m, *st, allowed.data());
      std::vector<int32_t> ids;
      for (size_t id = 0; id < vocab.size(); ++id) {
        const bool brute = m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp);
        EXPECT_EQ(brute, (allowed[id >> 6] >> (id & 63) & 1) != 0)
            << text << " step " << step << " token " << vocab[id];
        if (brute && vocab[id].find('}') == std::string::npos) ids.push_back(static_cast<int32_t>(id));
      }
      if (ids.empty()) break;  // stays in the object (its keys and values) as long as it can
      const std::string& t = vocab[ids[rng() % ids.size()]];
      walked += t;
      ASSERT_TRUE(m.feed(*st, t.data(), static_cast<int64_t>(t.size()), *out, *tmp));
      std::swap(st, out);
    }
    EXPECT_GT(walked.size(), 20u) << text << ": " << walked;
  }
}

TEST(ObjectKeys, PropertyNames) {
  const std::string open = R"({"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 100000}})";
  EXPECT_TRUE(has(refusal(open), "schema /propertyNames: keyword 'minLength'/'maxLength' above 1024"));
  const std::string lower = R"({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}})";
  const Grammar g = compile(lower);
  EXPECT_EQ(match_at(g, R"({"abc": 1, "d": [true]})"), -1);
  EXPECT_EQ(match_at(g, R"({"abD": 1})"), 4);
  EXPECT_EQ(match_at(g, R"({"A": 1})"), 2);
  walks_validate(lower);
  // Finitely many names (here at most 2 letters): the first 64 (kMaxFiniteKeys, below the 1,024
  // listed properties: each listed key is a value node, 1,024 of them blew SchemaStore's
  // sigmacv.json past the 4,096 nodes) are listed.
  const Grammar finite = compile(R"({"type": "object", "propertyNames": {"pattern": "^[a-z]{1,2}$"}})");
  EXPECT_EQ(match_at(finite, R"({"a": 1, "aa": 2})"), -1);
  EXPECT_EQ(match_at(finite, R"({"aa": 1, "a": 2})"), 12);  // listed: in code point order
  EXPECT_EQ(match_at(finite, R"({"zz": 1})"), 2);
  const std::string listed = R"({"properties": {"ok": {"type": "integer"}, "Bad": {}}, "propertyNames":
      {"$ref": "#/$defs/lower"}, "$defs": {"lower": {"type": "string", "pattern": "^[a-z]+$"}}})";
  const Grammar l = compile(listed);
  EXPECT_EQ(match_at(l, R"({"ok": 1})"), -1);
  EXPECT_EQ(match_at(l, R"({"Bad": 1})"), 2);  // dropped: propertyNames refuses it
  walks_validate(listed);
  const Grammar names = compile(R"({"propertyNames": {"enum": ["x", "y", 3]}, "additionalProperties":
      {"type": "integer"}})");
  EXPECT_EQ(match_at(names, R"({"x": 1, "y": 2})"), -1);
  EXPECT_EQ(match_at(names, R"({"z": 1})"), 2);
  EXPECT_EQ(match_at(names, R"({"x": "s"})"), 6);
  EXPECT_TRUE(has(refusal(R"({"type": "object", "properties": {"Q": {}}, "required": ["Q"], "propertyNames": {"maxLength": 0}})"),
                  "schema /: unsatisfiable: required 'Q'"));
  EXPECT_TRUE(has(refusal(R"({"properties": {"a": {"propertyNames": {"minimum": 1}}}})"),
                  "schema /properties/a/propertyNames: keyword 'minimum' is not supported in propertyNames"));
  EXPECT_TRUE(has(refusal(R"({"propertyNames": {"pattern": "\\1"}})"), "/propertyNames: keyword 'pattern'"));
  const Grammar none = compile(R"({"propertyNames": false})");
  EXPECT_EQ(match_at(none, "{}"), -1);
  EXPECT_EQ(match_at(none, R"({"a": 1})"), 1);
}

TEST(ObjectKeys, DependentRequired) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type":
      "integer"}, "c": {"type": "integer"}}, "dependentRequired": {"a": ["c"], "c": ["b"]}})";
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"a": 1, "b": 2, "c": 3})"), -1);
  EXPECT_EQ(match_at(g, R"({"b": 2})"), -1);
  EXPECT_EQ(match_at(g, R"({"b": 2, "c": 3})"), -1);
  EXPECT_EQ(match_at(g, R"({"a": 1, "c": 3})"), 10);   // a needs c, c needs b: b must come
  EXPECT_EQ(match_at(g, R"({"a": 1, "b": 2})"), 15);  // then c, not the end
  EXPECT_EQ(match_at(g, R"({"c": 3})"), 2);            // c needs b, which comes before it
  walks_validate(schema);
  // The properties a required one needs count in the object's depth: near the bound it is not
  // begun where the needed one could not open (was a dead end: "a" required, "b" not fitting).
  const Grammar deep = compile(R"({"type": "object", "properties": {"r": {"$ref": "#"}, "b": {"$ref": "#/$defs/b"},
      "a": {"type": "integer"}}, "required": ["a"], "dependentRequired": {"a": ["b"]}, "$defs": {"b": {"type":
      "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "object", "properties": {"z":
      {"type": "integer"}}, "required": ["z"]}}, "required": ["y"]}}, "required": ["x"]}}})");
  JsonMatcher m(deep);
  auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
  m.start(*st);
  const std::string open = R"({"r": )", close = R"(, "b": {"x": {"y": {"z": 1}}}, "a": 1})";
  int levels = 0;
  while (m.feed(*st, open.data(), static_cast<int64_t>(open.size()), *out, *tmp)) std::swap(st, out), ++levels;
  std::string text;
  for (int i = 0; i < levels; ++i) text += open;
  text += R"({"b": {"x": {"y": {"z": 1}}}, "a": 1})";
  for (int i = 0; i < levels; ++i) text += close;
  EXPECT_EQ(match_at(deep, text), -1) << levels << " levels";
  // draft-07 `dependencies` with arrays, a cycle, and a dependency on an unlisted key.
  const std::string draft7 = R"({"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {},
      "b": {}}, "dependencies": {"a": ["b"], "b": ["a"], "z": ["a"]}})";
  const Grammar d = compile(draft7);
  EXPECT_EQ(match_at(d, R"({"a": 1, "b": 2})"), -1);
  EXPECT_EQ(match_at(d, R"({"a": 1})"), 7);
  EXPECT_EQ(match_at(d, R"({"b": 1})"), 2);
  EXPECT_EQ(match_at(d, "{}"), -1);
  walks_validate(R"({"properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"], "b": ["a"]}})");
  // A key whose dependency can never be present is never generated (refused when required).
  const Grammar lost = compile(R"({"properties": {"a": {}}, "additionalProperties": false, "dependentRequired":
      {"a": ["q"]}})");
  EXPECT_EQ(match_at(lost, R"({"a)"), 1);  // no key left
  EXPECT_TRUE(has(refusal(R"({"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": false,
      "dependentRequired": {"a": ["q"]}})"), "schema /: unsatisfiable: required 'a' needs 'q' (dependentRequired)"));
  EXPECT_TRUE(has(refusal(R"({"properties": {"a": {}}, "maxProperties": 1, "dependentRequired": {"a": ["b"]}})"),
                  "schema /: keyword 'dependentRequired' is not supported (beside minProperties/maxProperties)"));
  EXPECT_TRUE(has(refusal(R"({"dependentRequired": {"a": "b"}})"), "schema /: dependentRequired must be"));
}

// With wip/store's key ranges (keys matched as a range of their sorted order): dependentRequired
// over properties listed out of byte order, and its 64-bit masks' bound (a refusal naming it, or
// relaxed under strict: false, never a shift past 64 bits).
TEST(ObjectKeys, DependentRequiredBesideSortedKeys) {
  const std::string schema = R"({"type": "object", "properties": {"z": {"type": "integer"}, "m": {"type":
      "integer"}, "a": {"type": "integer"}}, "dependentRequired": {"z": ["a"]}})";
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"z": 1, "a": 2})"), -1);
  EXPECT_EQ(match_at(g, R"({"z": 1, "m": 2, "a": 3})"), -1);
  EXPECT_EQ(match_at(g, R"({"m": 2})"), -1);
  EXPECT_EQ(match_at(g, R"({"z": 1})"), 7);           // z needs a
  EXPECT_EQ(match_at(g, R"({"z": 1, "m": 2})"), 15);  // a may still follow m, not the end
  walks_validate(schema);
  std::string many = R"({"type": "object", "properties": {)";
  for (int k = 0; k < 70; ++k) many += (k ? ", " : "") + fmt::format(R"("p{}": {{"type": "integer"}})", k);
  many += R"(}, "dependentRequired": {"p0": ["p69"]}})";
  EXPECT_TRUE(has(refusal(many), "schema /: keyword 'dependentRequired' is not supported on an object of 70 "
                                 "properties (at most 64)"));
  Result<Grammar> relaxed = compile_text(many, false);
  ASSERT_TRUE(relaxed.ok()) << relaxed.message();
  EXPECT_EQ(relaxed->relaxed, std::vector<std::string>{"/: dependentRequired"});
  EXPECT_EQ(match_at(*relaxed, R"({"p0": 1})"), -1);
}

// The values a pattern key's label picks count in the readings bound (was: only the unused
// Node::values, so 40 readings reached the matcher, past its 32, and failed its check).
TEST(ObjectKeys, LabelValuesCountInTheReadingsBound) {
  std::string branches;
  for (int k = 1; k <= 40; ++k) branches += (k > 1 ? ", " : "") + fmt::format(R"({{"type": "string", "pattern": "^a{{{}}}$"}})", k);
  const std::string schema = R"({"type": "object", "patternProperties": {"^x": {"anyOf": [)" + branches +
                             R"(]}}, "additionalProperties": false})";
  EXPECT_TRUE(has(refusal(schema), "ways at once")) << refusal(schema);
}

TEST(ObjectKeys, MergesKeepPatternsExact) {
  const Grammar g = compile(R"({"allOf": [{"patternProperties": {"^x": {"type": "integer"}}}, {"properties":
      {"xa": {"minimum": 3}}, "required": ["xa"]}]})");
  EXPECT_EQ(match_at(g, R"({"xa": 3})"), -1);
  EXPECT_EQ(match_at(g, R"({"xa": 2})"), 8);
  EXPECT_EQ(match_at(g, R"({"xa": 3.5})"), 8);
  // A key the patterns of one side exempt from its additionalProperties.
  const Grammar exempt = compile(R"({"allOf": [{"patternProperties": {"^x": {}}, "additionalProperties": false},
      {"patternProperties": {"^x": {}}, "properties": {"xb": {"type": "null"}}, "required": ["xb"]}]})");
  EXPECT_EQ(match_at(exempt, R"({"xb": null})"), -1);
  // A pattern in one side only takes the other side's additionalProperties too (keys it does not list).
  const Grammar folded = compile(R"({"allOf": [{"type": "object", "additionalProperties": {"type": "integer"},
      "patternProperties": {"^a": {"type": "integer"}}}, {"additionalProperties": {"minimum": 3}}]})");
  EXPECT_EQ(match_at(folded, R"({"ab": 3, "z": 4})"), -1);
  EXPECT_EQ(match_at(folded, R"({"ab": 2})"), 8);
  EXPECT_EQ(match_at(folded, R"({"z": 2})"), 7);
  const Grammar none = compile(R"({"allOf": [{"patternProperties": {"^x": {}}}, {"additionalProperties": false}],
      "type": "object"})");
  EXPECT_EQ(match_at(none, "{}"), -1);
  EXPECT_EQ(match_at(none, R"({"x)"), 1);
  // Beside additionalProperties false, the pattern's schema goes into the listed keys it matches.
  const Grammar inlined = compile(R"({"allOf": [{"type": "object", "properties": {"ig": {"type": "string"}},
      "additionalProperties": false}, {"patternProperties": {"^[a-z]+$": {"maxLength": 2}}, "additionalProperties":
      false}]})");
  EXPECT_EQ(match_at(inlined, R"({"ig": "ab"})"), -1);
  EXPECT_EQ(match_at(inlined, R"({"ig": "abc"})"), 10);
  EXPECT_EQ(match_at(inlined, R"({"x)"), 2);
  const Grammar listed_only = compile(R"({"allOf": [{"patternProperties": {"^x": {"type": "integer"}}}, {"properties":
      {"xa": {}}, "additionalProperties": false}]})");
  EXPECT_EQ(match_at(listed_only, R"({"xa": 1})"), -1);
  EXPECT_EQ(match_at(listed_only, R"({"xa": "s"})"), 7);
  // Not exact where the other side lists a key the pattern matches (beside an additionalProperties
  // schema): refused, or relaxed.
  const std::string listed = R"({"allOf": [{"patternProperties": {"^x": {"type": "integer"}}}, {"properties": {"xa":
      {}}, "additionalProperties": {"type": "string"}}]})";
  EXPECT_TRUE(has(refusal(listed), "schema /allOf/1: keyword 'patternProperties' in one schema of a merge beside "
                                   "additionalProperties"));
  Result<Grammar> relaxed = compile_text(listed, false);  // strict: false drops the patterns and says so
  ASSERT_TRUE(relaxed.ok()) << relaxed.message();
  EXPECT_EQ(relaxed->relaxed, std::vector<std::string>{"/allOf/1: patternProperties"});
  // Both sides' patterns: per pattern, both schemas.
  const Grammar two = compile(R"({"allOf": [{"patternProperties": {"^x": {"type": "integer"}}}, {"patternProperties":
      {"^x": {"minimum": 3}, "y$": {"maximum": 5}}}], "type": "object"})");
  EXPECT_EQ(match_at(two, R"({"xy": 4})"), -1);
  EXPECT_EQ(match_at(two, R"({"xy": 6})"), 7);
  EXPECT_EQ(match_at(two, R"({"x": 2})"), 7);
}

// JSON Schema Test Suite (draft7 and draft4): patternProperties, propertyNames, dependencies
// (array forms), additionalProperties, properties. Objects are matched in the compact layout
// of the suite's text; a valid instance may be refused only where it lies outside what is
// generated (keys in another order than the schema's, keys the generator leaves out).
TEST(ObjectKeys, JsonSchemaTestSuite) {
  const std::string root = "/usr/share/json-schema-test-suite/tests/";
  if (!std::ifstream(root + "draft7/patternProperties.json"))
    GTEST_SKIP() << root << " not installed (scripts/setup.sh installs json-schema-test-suite)";
  CompileOptions options;
  options.layout.item_separator = ",";
  options.layout.key_separator = ":";
  int compiled = 0, refused_invalid = 0, accepted_valid = 0;
  for (const char* draft : {"draft7", "draft4"})
    for (const char* k : {"patternProperties", "propertyNames", "dependencies", "additionalProperties", "properties"}) {
      std::ifstream in(root + draft + "/" + k + ".json");
      if (!in) continue;
      for (const auto& group : Json::parse(in)) {
        Json schema = group["schema"];
        if (schema.is_object())
          schema["$schema"] = std::string("http://json-schema.org/draft-0") + draft[5] + "/schema#";
        Result<Grammar> g = compile_json_schema(schema, options);
        if (!g.ok()) continue;
        ++compiled;
        for (const auto& test : group["tests"]) {
          const std::string data = test["data"].dump();
          const bool accepted = match_at(*g, data) == -1;
          if (test["valid"].get<bool>()) {
            accepted_valid += accepted;
          } else {
            EXPECT_FALSE(accepted) << draft << "/" << k << ": " << group["description"] << " / "
                                   << test["description"] << ": " << data;
            ++refused_invalid;
          }
        }
      }
    }
  RecordProperty("schemas_compiled", compiled);
  RecordProperty("invalid_refused", refused_invalid);
  RecordProperty("valid_accepted", accepted_valid);
  EXPECT_GT(compiled, 20);
  EXPECT_GT(refused_invalid, 20);
  EXPECT_GT(accepted_valid, 20);
}

}  // namespace object_keys_test
}  // namespace dsv4::grammar
