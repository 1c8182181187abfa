// Issue 39 (Deliver 1) and issue 40 row 1: the schema compiler's bounds on hostile input, and
// one test per correctness bug of the structured-output grammar: depth dead ends, oneOf
// generated as anyOf, keywords beside anyOf/$ref, constraints without type, enum/const against
// their siblings, $ref pointer escapes, escaped surrogates, repeated keys, valid schemas refused.
#include <gtest/gtest.h>
#include <pthread.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "support/grammar_match.h"
#include "support/json_schema_check.h"

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

std::string refusal_of(const Json& schema) {
  Result<Grammar> g = compile_json_schema(schema);
  return g.ok() ? std::string("ok") : g.message();
}
std::string refusal(const std::string& schema) { return refusal_of(Json::parse(schema)); }
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Grammar compile_ok(const std::string& schema) {
  Result<Grammar> g = compile_json_schema(Json::parse(schema));
  EXPECT_TRUE(g.ok()) << schema << ": " << g.message();
  return g.ok() ? std::move(*g) : Grammar{};
}

using test::match_at;

// Runs fn on a thread with a small stack (1 MiB; 8 MiB under the sanitizers, whose frames
// carry redzones): a walk whose native depth follows the input crashes.
#if defined(DSV4_SANITIZE)
constexpr size_t kSmallStack = size_t{8} << 20;
#else
constexpr size_t kSmallStack = size_t{1} << 20;
#endif
template <class Fn>
void on_small_stack(Fn fn) {
  struct Call {
    static void* run(void* p) {
      (*static_cast<Fn*>(p))();
      return nullptr;
    }
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kSmallStack);
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, &attr, &Call::run, &fn), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
}

// Issue 40 row 1: 400 $defs, each 20 levels deep, each ending in a $ref to the next (the
// compiler recursed ~16,000 levels and the server died with SIGSEGV).
TEST(SchemaLimits, RefChainIsRefusedNamingTheLimitAndPath) {
  Json defs = Json::object();
  for (int d = 0; d < 400; ++d) {
    Json s = d + 1 < 400 ? Json{{"$ref", "#/$defs/d" + std::to_string(d + 1)}} : Json{{"type", "string"}};
    for (int level = 0; level < 20; ++level) s = Json{{"type", "object"}, {"properties", {{"a", s}}}};
    defs["d" + std::to_string(d)] = s;
  }
  const Json schema = {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
  std::string got;
  on_small_stack([&] { got = refusal_of(schema); });
  EXPECT_TRUE(has(got, std::to_string(kMaxSchemaDepth) + " levels")) << got;
  EXPECT_TRUE(has(got, "/$defs/d")) << got;
}

TEST(SchemaLimits, DeepPlainNestingIsRefused) {
  std::string text;
  const int levels = 100000;
  for (int i = 0; i < levels; ++i) text += R"({"items": )";
  text += "{}";
  for (int i = 0; i < levels; ++i) text += "}";
  const Json schema = Json::parse(text);  // nlohmann's parser is iterative
  std::string got;
  on_small_stack([&] { got = refusal_of(schema); });
  EXPECT_TRUE(has(got, std::to_string(kMaxSchemaDepth) + " levels")) << got.substr(0, 200);
  // Many nodes: 64 properties of 64 properties each (4,160 schemas) are refused before the work.
  Json inner = Json::object(), outer = Json::object();
  for (int i = 0; i < 64; ++i) inner["p" + std::to_string(i)] = Json{{"type", "integer"}};
  for (int i = 0; i < 64; ++i) outer["q" + std::to_string(i)] = Json{{"type", "object"}, {"properties", inner}};
  EXPECT_TRUE(has(refusal_of(Json{{"type", "object"}, {"properties", outer}}), std::to_string(kMaxNodes)));
}

// Wide input is refused before work proportional to its product: a type list, required names
// beyond the properties, enums merged by allOf.
TEST(SchemaLimits, WideInputsAreRefusedBeforeTheWork) {
  Json types = Json::array(), names = Json::array(), values = Json::array();
  for (int i = 0; i < 100000; ++i) {
    types.push_back("string");
    names.push_back("k" + std::to_string(i));
    values.push_back(i);
  }
  EXPECT_TRUE(has(refusal_of(Json{{"type", types}}), "7 JSON types"));
  EXPECT_TRUE(has(refusal_of(Json{{"type", "object"}, {"required", names}}),
                  "more than " + std::to_string(kMaxProperties) + " properties"));
  EXPECT_TRUE(has(refusal_of(Json{{"enum", values}}), "at most " + std::to_string(kMaxLiterals)));
  EXPECT_TRUE(has(refusal_of(Json{{"allOf", Json::array({Json{{"enum", values}}, Json{{"enum", values}}})}}),
                  "compares more than"));
}

// Bug 1: after 31 nested objects the key "a" was still allowed, though no value could open.
// Every prefix the matcher takes must leave a byte to go on with, or be a whole value.
// (Whitespace alone is no way out: the old matcher allowed 16 spaces, then nothing.)
bool dead_end(const JsonMatcher& m, const MatchState& from) {
  auto st = std::make_unique<MatchState>(), next = std::make_unique<MatchState>();
  *st = from;
  for (int gap = 0; gap <= kMaxWhitespace + 1; ++gap) {
    if (m.accepting(*st)) return false;
    for (int c = 0; c < 256; ++c) {
      m.advance(*st, static_cast<uint8_t>(c), *next);
      if (next->n > 0 && c != ' ' && c != '\n' && c != '\t' && c != '\r') return false;
    }
    m.advance(*st, ' ', *next);
    if (next->n == 0) return true;
    std::swap(st, next);
  }
  return true;
}

TEST(DeadEnds, NestingAlwaysLeavesAWayOut) {
  const Grammar rec = compile_ok(R"({"type": "object", "properties": {"a": {"$ref": "#"}}})");
  JsonMatcher m(rec);
  auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
  m.start(*st);
  int depth = 0;
  const std::string step = R"({"a": )";
  while (m.feed(*st, step.data(), static_cast<int64_t>(step.size()), *out, *tmp)) {
    std::swap(st, out);
    ++depth;
    ASSERT_FALSE(dead_end(m, *st)) << "after " << depth << " levels";
  }
  EXPECT_GT(depth, 20);
  // Deep-biased random walks over recursive schemas (objects, open objects, arrays, any value).
  std::mt19937 rng(11);
  for (const char* schema : {R"({"type": "object", "properties": {"a": {"$ref": "#"}, "b": {"type": "integer"}}})",
                             R"({"type": "object", "additionalProperties": {"$ref": "#"}})",
                             R"({"type": "array", "items": {"$ref": "#"}})", "true",
                             R"({"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "object",
                                 "properties": {"k": {"$ref": "#"}}, "required": ["k"]}, {"type": "null"}]})"}) {
    const Grammar g = compile_ok(schema);
    JsonMatcher walk(g);
    for (int trial = 0; trial < 20; ++trial) {
      walk.start(*st);
      std::string text;
      for (int i = 0; i < 600 && !(walk.accepting(*st) && i > 400); ++i) {
        std::vector<uint8_t> allowed, opening;
        for (int c = 0; c < 256; ++c) {
          walk.advance(*st, static_cast<uint8_t>(c), *out);
          if (out->n == 0) continue;
          allowed.push_back(static_cast<uint8_t>(c));
          if (std::string("{[\"ak:,").find(static_cast<char>(c)) != std::string::npos) opening.push_back(c);
        }
        if (allowed.empty() && walk.accepting(*st)) break;
        ASSERT_FALSE(allowed.empty()) << "dead end after " << text << " for " << schema;
        const bool deep = i < 400 && !opening.empty() && rng() % 8 != 0;
        const uint8_t c = deep ? opening[rng() % opening.size()] : allowed[rng() % allowed.size()];
        walk.advance(*st, c, *out);
        std::swap(st, out);
        text.push_back(static_cast<char>(c));
      }
    }
  }
}

// Bug 6: $ref is a URI fragment holding a JSON Pointer: percent-decoded, then ~1 and ~0.
TEST(SchemaRef, PointersAreUnescapedAndMayNameAnyPlace) {
  const Grammar slash = compile_ok(R"({"definitions": {"a/b": {"type": "string"}}, "$ref": "#/definitions/a~1b"})");
  EXPECT_EQ(match_at(slash, R"("x")"), -1);
  const Grammar both = compile_ok(R"({"definitions": {"a/b": {"type": "string"}, "a~1b": {"type": "integer"}},
      "$ref": "#/definitions/a~1b"})");
  EXPECT_EQ(match_at(both, R"("x")"), -1);
  EXPECT_EQ(match_at(both, "1"), 0);
  const Grammar tilde = compile_ok(R"({"$defs": {"a~b": {"const": 1}, "a b": {"const": 2}}, "type": "array",
      "items": {"anyOf": [{"$ref": "#/$defs/a~0b"}, {"$ref": "#/$defs/a%20b"}]}})");
  EXPECT_EQ(match_at(tilde, "[1, 2]"), -1);
  EXPECT_EQ(match_at(tilde, "[3]"), 1);
  const Grammar props = compile_ok(R"({"type": "object", "properties": {"x": {"type": "integer"},
      "y": {"$ref": "#/properties/x"}}})");
  EXPECT_EQ(match_at(props, R"({"x": 1, "y": 2})"), -1);
  EXPECT_EQ(match_at(props, R"({"y": "s"})"), 6);
  EXPECT_EQ(refusal(R"({"$defs": {"outer": {"$defs": {"inner": true}}}, "$ref": "#/$defs/outer/$defs/inner"})"), "ok");
  EXPECT_TRUE(has(refusal(R"({"$defs": {"a": true}, "$ref": "#/$defs/a~2"})"), "'~'"));
  EXPECT_TRUE(has(refusal(R"({"$ref": "#/$defs/missing"})"), "$ref '#/$defs/missing'"));
  EXPECT_TRUE(has(refusal(R"({"$ref": "other.json#/a"})"), "not local"));
}

// Bug 2: oneOf only where no value can match two branches.
TEST(OneOf, GeneratedOnlyWhereBranchesAreProvablyDisjoint) {
  const std::string overlap = refusal(R"({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 1000}]})");
  EXPECT_TRUE(has(overlap, "/oneOf") && has(overlap, "branches 0 and 1")) << overlap;
  // tldr.json: "linux" matches both, so only the other strings are generated (narrow_strings).
  const Grammar platform = compile_ok(R"({"oneOf": [{"enum": ["linux"]}, {"type": "string"}]})");
  EXPECT_EQ(match_at(platform, R"("linux")"), 6);
  EXPECT_EQ(match_at(platform, R"("linuxes")"), -1);
  EXPECT_TRUE(has(refusal(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})"), "oneOf"));
  EXPECT_EQ(refusal(R"({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})"), "ok");
  EXPECT_EQ(refusal(R"({"oneOf": [{"const": "a"}, {"enum": ["b", 1]}, {"type": "string", "minLength": 2}]})"), "ok");
  EXPECT_EQ(refusal(R"({"oneOf": [{"type": "string", "maxLength": 2}, {"type": "string", "minLength": 3}]})"), "ok");
  const char* tagged = R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "string"}}, "required": ["kind"]},
      {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}, "x": {"type": "integer"}},
       "required": ["kind", "x"]}]})";
  EXPECT_EQ(refusal(tagged), "ok");
  const Grammar g = compile_ok(tagged);
  EXPECT_EQ(match_at(g, R"({"kind": "b", "x": 1})"), -1);
  const std::string untagged = refusal(R"({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}}},
      {"type": "object", "properties": {"kind": {"const": "b"}}}]})");  // {} matches both
  EXPECT_TRUE(has(untagged, "oneOf")) << untagged;
  // The proof's work is bounded: 16 branches of 16 enums of 64 values each run out of its budget.
  Json branches = Json::array();
  for (int b = 0; b < 16; ++b) {
    Json enums = Json::array();
    for (int e = 0; e < 16; ++e) {
      Json values = Json::array();
      for (int k = 0; k < 64; ++k) values.push_back(b * 100000 + e * 100 + k);
      enums.push_back(Json{{"enum", values}});
    }
    branches.push_back(Json{{"anyOf", enums}});
  }
  EXPECT_TRUE(has(refusal_of(Json{{"oneOf", branches}}), "budget"));
  // A $ref branch is checked once the reference is compiled.
  const Grammar referred = compile_ok(R"({"$defs": {"s": {"type": "string"}}, "oneOf": [{"$ref": "#/$defs/s"},
      {"const": "x"}]})");
  EXPECT_EQ(match_at(referred, R"("x")"), 2);
  EXPECT_TRUE(has(refusal(R"({"$defs": {"s": {"type": "integer"}}, "oneOf": [{"$ref": "#/$defs/s"}, {"const": 1}]})"),
                  "oneOf"));
}

// Bug 3: keywords beside anyOf/oneOf/$ref were dropped. They are merged into each branch
// (schema_merge.h), as allOf is; what the merge cannot combine is refused by name.
TEST(Siblings, KeywordsBesideAnyOfAndRefAreMerged) {
  const Grammar required = compile_ok(R"({"anyOf": [{"type": "object"}, {"type": "null"}], "required": ["a"]})");
  EXPECT_EQ(match_at(required, "null"), -1);
  EXPECT_EQ(match_at(required, "{}"), 1);
  EXPECT_EQ(match_at(required, R"({"a": [1]})"), -1);
  const Grammar closed = compile_ok(R"({"anyOf": [{"type": "object"}], "additionalProperties": false})");
  EXPECT_EQ(match_at(closed, "{}"), -1);
  EXPECT_EQ(match_at(closed, R"({"a": 1})"), 1);
  EXPECT_EQ(match_at(compile_ok(R"({"anyOf": [{"type": "array"}], "minItems": 2})"), "[1]"), 2);
  EXPECT_EQ(match_at(compile_ok(R"({"anyOf": [{"type": "string"}], "maxLength": 3})"), R"("abcd")"), 4);
  const Grammar above = compile_ok(R"({"oneOf": [{"type": "integer"}], "minimum": 3})");
  EXPECT_EQ(match_at(above, "3"), -1);
  EXPECT_EQ(match_at(above, "-1"), 0);
  const Grammar ref = compile_ok(R"({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a", "maxLength": 2})");
  EXPECT_EQ(match_at(ref, R"("ab")"), -1);
  EXPECT_EQ(match_at(ref, R"("abc")"), 3);
  const Grammar literals = compile_ok(R"({"enum": ["a", "bb", 1], "anyOf": [{"type": "string", "maxLength": 1},
      {"type": "integer"}]})");
  EXPECT_EQ(match_at(literals, R"("a")"), -1);
  EXPECT_EQ(match_at(literals, "1"), -1);
  EXPECT_EQ(match_at(literals, R"("bb")"), 1);
  // oneOf branches disjoint once the keywords beside them are merged in.
  EXPECT_EQ(refusal(R"({"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"],
      "oneOf": [{"properties": {"kind": {"const": "a"}}}, {"properties": {"kind": {"const": "b"}}}]})"), "ok");
}

TEST(AllOf, MergedWhereTheMergeIsExact) {
  const Grammar g = compile_ok(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
      "required": ["a"]}, {"properties": {"b": {"type": "string", "maxLength": 2}}, "required": ["b"]}]})");
  EXPECT_EQ(match_at(g, R"({"a": 1, "b": "xy"})"), -1);
  EXPECT_EQ(match_at(g, R"({"a": 1})"), 7);
  EXPECT_EQ(match_at(g, R"({"a": 1, "b": "xyz"})"), 17);
  EXPECT_TRUE(has(refusal(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})"), "unsatisfiable"));
  const Grammar narrow = compile_ok(R"({"allOf": [{"type": "number"}, {"type": ["integer", "string"]}]})");
  EXPECT_EQ(match_at(narrow, "1.5"), 1);
  EXPECT_EQ(match_at(narrow, R"("s")"), 0);
  // additionalProperties: false in one schema removes the other's extra properties.
  const Grammar closed = compile_ok(R"({"allOf": [{"properties": {"a": true}, "additionalProperties": false},
      {"properties": {"b": true}}]})");
  EXPECT_EQ(match_at(closed, R"({"a": 1})"), -1);
  EXPECT_EQ(match_at(closed, R"({"b": 1})"), 2);
  const Grammar bounds =
      compile_ok(R"({"allOf": [{"minLength": 2, "maxLength": 5}, {"maxLength": 3}], "type": "string"})");
  EXPECT_EQ(match_at(bounds, R"("abcd")"), 4);
  EXPECT_EQ(match_at(bounds, R"("a")"), 2);
  EXPECT_TRUE(has(refusal(R"({"allOf": [{"enum": [1, 2]}, {"enum": [3]}]})"), "unsatisfiable"));
  EXPECT_EQ(match_at(compile_ok(R"({"allOf": [{"enum": [1, 2, "x"]}, {"enum": [2.0, "x"]}]})"), "1"), 0);
  // A recursive $ref beside keywords, and a merge that would not end, stay bounded.
  const Grammar rec = compile_ok(R"({"type": "object", "properties": {"next": {"$ref": "#", "required": ["v"]},
      "v": {"type": "integer"}}})");
  EXPECT_EQ(match_at(rec, R"({"next": {"next": {"v": 2}, "v": 1}})"), -1);
  EXPECT_EQ(match_at(rec, R"({"next": {}})"), 10);
  const std::string loop = refusal(R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})");
  EXPECT_TRUE(has(loop, "levels") || has(loop, "merges")) << loop;
}

// Two patterns in one merge (claude-code-marketplace.json: "^\\./.*" and ".*\\.md$"): the string
// matches both. A pattern that does not parse alone is refused, not joined into another meaning.
TEST(AllOf, TwoPatternsMergeIntoTheirConjunction) {
  const std::string schema = R"({"type": "string", "allOf": [{"pattern": "^\\./.*"}, {"pattern": ".*\\.md$"}]})";
  const Grammar g = compile_ok(schema);
  EXPECT_EQ(match_at(g, R"("./a.md")"), -1);
  EXPECT_EQ(match_at(g, R"("a.md")"), 1);
  EXPECT_EQ(match_at(g, R"("./a.json")"), 9);
  const Grammar named = compile_ok(R"j({"allOf": [{"pattern": "^(?!x)"}, {"pattern": "\\bb"}], "type": "string"})j");
  EXPECT_EQ(match_at(named, R"("a b")"), -1);
  EXPECT_EQ(match_at(named, R"("xb")"), 1);
  EXPECT_TRUE(has(refusal(R"({"allOf": [{"pattern": "a)|(b"}, {"pattern": "c"}]})"), "unmatched ')'"));
}

// Two oneOf in one merge (web-types.json): oneOf [a_i & oneOf B], each value in exactly one a_i
// and exactly one b_j.
TEST(AllOf, TwoOneOfMergeIntoNestedOneOf) {
  const std::string schema = R"({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf":
      [{"type": "string", "maxLength": 2}, {"type": "string", "minLength": 4}, {"type": "integer", "minimum": 5}]}]})";
  const Grammar g = compile_ok(schema);
  EXPECT_EQ(match_at(g, R"("ab")"), -1);
  EXPECT_EQ(match_at(g, R"("abcd")"), -1);
  EXPECT_EQ(match_at(g, R"("abc")"), 4);
  EXPECT_EQ(match_at(g, "7"), -1);
  EXPECT_EQ(match_at(g, "3"), 1);  // a prefix of 30 and more, not a value
  EXPECT_EQ(match_at(g, "true"), 0);
}

// Bug 4: keywords without `type` constrain their own type and leave the others free.
TEST(Untyped, ConstraintsApplyToTheirType) {
  const Grammar max1 = compile_ok(R"({"maxLength": 1})");
  EXPECT_EQ(match_at(max1, R"("ab")"), 2);
  EXPECT_EQ(match_at(max1, R"("a")"), -1);
  EXPECT_EQ(match_at(max1, "12345"), -1);
  EXPECT_EQ(match_at(max1, "[1]"), -1);
  EXPECT_EQ(match_at(compile_ok(R"({"minLength": 5})"), R"("")"), 1);
  const Grammar items = compile_ok(R"({"maxItems": 1, "properties": {"a": {"type": "integer"}}})");
  EXPECT_EQ(match_at(items, "[1,2]"), 2);
  EXPECT_EQ(match_at(items, R"({"a": 1})"), -1);
  EXPECT_EQ(match_at(items, R"("s")"), -1);
  const Grammar min1000 = compile_ok(R"({"minimum": 1000})");
  EXPECT_EQ(match_at(min1000, "3"), 1);  // a prefix of 3000, not a value
  EXPECT_EQ(match_at(min1000, "-3"), 0);
  EXPECT_EQ(match_at(min1000, "1000"), -1);
}

// Bug 5: enum/const keep only the values their siblings allow.
TEST(Literals, FilteredByTheirSiblings) {
  EXPECT_TRUE(has(refusal(R"({"type": "integer", "const": 1.5})"), "unsatisfiable"));
  // Nested: an optional property that matches nothing is never written; a required one refuses.
  EXPECT_EQ(match_at(compile_ok(R"({"properties": {"p": {"type": "integer", "const": 1.5}}})"), R"({"p")"), 1);
  EXPECT_TRUE(has(refusal(R"({"type": "object", "properties": {"p": {"type": "integer", "const": 1.5}}, "required": ["p"]})"),
                  "schema /: unsatisfiable: required 'p' has no value (schema /properties/p: unsatisfiable"));
  const Grammar mixed = compile_ok(R"({"type": "string", "enum": ["a", 1]})");
  EXPECT_EQ(match_at(mixed, "1"), 0);
  EXPECT_EQ(match_at(mixed, R"("a")"), -1);
  const Grammar len = compile_ok(R"({"enum": ["ab", "abc", 7, 2.0], "maxLength": 2, "maximum": 5,
      "type": ["string", "integer"]})");
  EXPECT_EQ(match_at(len, R"("ab")"), -1);
  EXPECT_EQ(match_at(len, R"("abc")"), 3);
  EXPECT_EQ(match_at(len, "7"), 0);
  EXPECT_EQ(match_at(len, "2.0"), -1);
  EXPECT_EQ(match_at(compile_ok(R"({"const": "x", "enum": ["x", "y"]})"), R"("y")"), 1);
  EXPECT_TRUE(has(refusal(R"({"const": "z", "enum": ["x", "y"]})"), "unsatisfiable"));
  EXPECT_TRUE(has(refusal(R"({"enum": [{"a": 1}], "properties": {"a": {"type": "string"}}})"), "'properties'"));
  EXPECT_EQ(refusal(R"({"enum": [{"a": 1}], "required": ["a"]})"), "ok");
  EXPECT_TRUE(has(refusal(R"({"enum": [{"a": 1}], "required": ["b"]})"), "unsatisfiable"));
}

// Bug 7: \uD800-\uDBFF only before \uDC00-\uDFFF; the pair is one code point.
TEST(Surrogates, PairsOnlyAndCountedOnce) {
  const Grammar min2 = compile_ok(R"({"type": "string", "minLength": 2})");
  EXPECT_EQ(match_at(min2, R"("\ud888\udddd")"), 13);  // one code point
  EXPECT_EQ(match_at(min2, R"("\ud888\uddddx")"), -1);
  EXPECT_EQ(match_at(min2, R"("\uDBFF\uDFFFx")"), -1);
  EXPECT_EQ(match_at(min2, R"("\uddd8\u8888")"), 4);  // a lone low half
  EXPECT_EQ(match_at(min2, R"("\ud888\u8888")"), 9);  // a high half not followed by a low one
  EXPECT_EQ(match_at(min2, R"("\ud888x")"), 7);
  EXPECT_EQ(match_at(min2, R"("\ud888")"), 7);
  EXPECT_EQ(match_at(min2, R"("\ud7ffx")"), -1);
  const Grammar max1 = compile_ok(R"({"type": "string", "maxLength": 1})");
  EXPECT_EQ(match_at(max1, R"("\ud83d\ude00")"), -1);
  EXPECT_EQ(match_at(max1, R"("\ud83d\ude00a")"), 13);
  EXPECT_FALSE(JsonMatcher::string_text("\\udc00", 6));
  EXPECT_TRUE(JsonMatcher::string_text("\\ud800", 6));  // a pair may complete in the next token
}

// Bug 8: an open object never repeats a key (I-JSON); each object has its own keys.
TEST(OpenObjects, NeverRepeatAKey) {
  const Grammar any = any_object_grammar();
  EXPECT_EQ(match_at(any, R"({"a": 1, "a": 2})"), 11);
  EXPECT_EQ(match_at(any, R"({"": 1, "": 2})"), 9);
  EXPECT_EQ(match_at(any, R"({"a": 1, "ab": 2, "b": {"a": {"a": 0}, "b": 1}})"), -1);
  EXPECT_EQ(match_at(any, R"({"a": {"b": 1}, "b": 2})"), -1);
  EXPECT_EQ(match_at(any, R"({"a": {"b": 1}, "a": 2})"), 18);
  EXPECT_EQ(match_at(any, R"({"\u0061": 1})"), 2);  // keys without escapes: their bytes are the key
  std::string many = "{";
  for (int k = 0; k < kMaxOpenKeys; ++k) many += (k ? ", \"k" : "\"k") + std::to_string(k) + "\": 0";
  EXPECT_EQ(match_at(any, many + "}"), -1);
  EXPECT_EQ(match_at(any, many + ", \"x\": 0}"), static_cast<int64_t>(many.size()));  // full: it may only close
}

// Also refused although valid: items false, a property schema false, 2.0 as a count,
// uniqueItems false, $ref to #/properties/... (above).
TEST(ValidSchemas, AreAccepted) {
  const Grammar no_items = compile_ok(R"({"type": "array", "items": false})");
  EXPECT_EQ(match_at(no_items, "[]"), -1);
  EXPECT_EQ(match_at(no_items, "[1]"), 1);
  EXPECT_TRUE(has(refusal(R"({"type": "array", "items": false, "minItems": 1})"), "unsatisfiable"));
  const Grammar no_a = compile_ok(R"({"type": "object", "properties": {"a": false, "b": {"type": "integer"}}})");
  EXPECT_EQ(match_at(no_a, R"({"b": 1})"), -1);
  EXPECT_EQ(match_at(no_a, R"({"a": 1})"), 2);
  EXPECT_TRUE(has(refusal(R"({"type": "object", "properties": {"a": false}, "required": ["a"]})"), "unsatisfiable"));
  const Grammar two = compile_ok(R"({"type": "string", "minLength": 2.0, "maxLength": 3.0})");
  EXPECT_EQ(match_at(two, R"("ab")"), -1);
  EXPECT_EQ(match_at(two, R"("a")"), 2);
  EXPECT_TRUE(has(refusal(R"({"type": "string", "minLength": 2.5})"), "minLength"));
  EXPECT_EQ(refusal(R"({"type": "array", "uniqueItems": false})"), "ok");
  EXPECT_EQ(refusal(R"({"type": "array", "uniqueItems": true, "maxItems": 1})"), "ok");
  EXPECT_EQ(refusal(R"({"type": "array", "uniqueItems": true})"), "ok");  // distinct strings (unique_items.h)
  EXPECT_TRUE(has(refusal(R"({"type": "array", "uniqueItems": true, "items": {"type": "number"}})"), "'uniqueItems'"));
  EXPECT_EQ(refusal(R"({"anyOf": [false, {"type": "null"}]})"), "ok");
}

// Random schemas of the keywords this issue added (merges, oneOf with discriminators, keywords
// without type, enum beside keywords, $ref beside keywords) around the base random schemas.
Json rich_schema(std::mt19937& rng, int depth) {
  auto sub = [&] { return depth > 2 ? test::random_schema(rng, 3) : rich_schema(rng, depth + 1); };
  switch (rng() % (depth > 2 ? 1 : 7)) {
    case 0: return test::random_schema(rng, depth + 1);
    case 1: {
      const Json options[] = {{{"maxLength", rng() % 3}}, {{"minLength", 1}, {"maxItems", 1}},
                              {{"items", {{"type", "integer"}}}, {"maxItems", 2}}};
      return options[rng() % 3];
    }
    case 2: {
      const Json types[] = {"string", Json::array({"string", "integer"}), "number"};
      return {{"enum", Json::array({"a", "bb", "ccc", 1, 2.5, nullptr, true})}, {"type", types[rng() % 3]},
              {"maxLength", 2}};
    }
    case 3: {
      Json a = {{"type", "object"}, {"properties", {{"a", sub()}, {"b", sub()}}}};
      Json b = {{"properties", {{"a", sub()}, {"c", sub()}}}};
      if (rng() % 2) a["required"] = Json::array({"a"});
      if (rng() % 2) b["required"] = Json::array({"c"});
      if (rng() % 2) b["additionalProperties"] = false;
      return {{"allOf", Json::array({a, b})}};
    }
    case 4:
      return {{"type", "object"},
              {"required", Json::array({"kind"})},
              {"properties", {{"kind", {{"type", "string"}}}}},
              {"oneOf", Json::array({Json{{"properties", {{"kind", {{"const", "x"}}}, {"v", sub()}}}},
                                     Json{{"properties", {{"kind", {{"enum", {"y", "z"}}}}, {"w", sub()}}},
                                          {"required", Json::array({"w"})}}})}};
    case 5:
      return {{"anyOf", Json::array({Json{{"type", "string"}}, Json{{"type", "array"}, {"items", sub()}}})},
              {"maxLength", 3},
              {"minItems", 1}};
    default:
      return {{"oneOf", Json::array({Json{{"type", "string"}, {"maxLength", 2}}, Json{{"type", "integer"}},
                                     Json{{"const", nullptr}}, Json{{"type", "array"}, {"items", sub()}}})}};
  }
}

// Whether a JSON text repeats a key in one object (I-JSON; nlohmann keeps the last silently).
bool repeats_a_key(const std::string& text) {
  std::vector<std::set<std::string>> open;
  bool repeated = false;
  const nlohmann::json::parser_callback_t check = [&](int, nlohmann::json::parse_event_t e, nlohmann::json& v) {
    using E = nlohmann::json::parse_event_t;
    if (e == E::object_start) open.emplace_back();
    if (e == E::object_end) open.pop_back();
    if (e == E::key) repeated |= !open.back().insert(v.get<std::string>()).second;
    return true;
  };
  const nlohmann::json parsed = nlohmann::json::parse(text, check, false);
  return repeated || parsed.is_discarded();
}

// Random walks over the allowed bytes end in values that validate (independent validator) and
// are I-JSON (parse: no lone surrogate; no repeated key); no walk meets a dead end.
TEST(RichSchemas, RandomWalksGiveValidIJsonValues) {
  std::mt19937 rng(17);
  int done = 0, refused = 0;
  const int trials = std::getenv("DSV4_GRAMMAR_TRIALS") ? std::atoi(std::getenv("DSV4_GRAMMAR_TRIALS")) : 400;
  auto st = std::make_unique<MatchState>(), next = std::make_unique<MatchState>();
  for (int trial = 0; trial < trials; ++trial) {
    const Json schema = trial % 5 == 4 ? Json{{"type", "object"}, {"additionalProperties", rich_schema(rng, 2)}}
                                       : rich_schema(rng, 0);
    Result<Grammar> g = compile_json_schema(schema);
    if (!g.ok()) {
      ++refused;
      if (std::getenv("DSV4_SHOW_REFUSALS")) std::printf("%s\n  %s\n", schema.dump().c_str(), g.message().c_str());
      const std::string& why = g.message();
      EXPECT_TRUE(has(why, "unsatisfiable") || has(why, "oneOf") || has(why, "not supported"))
          << schema.dump() << ": " << why;
      continue;
    }
    JsonMatcher m(*g);
    m.start(*st);
    std::string text;
    for (int step = 0; step < 2000; ++step) {
      if (m.accepting(*st) && (rng() % 4 == 0 || text.size() > 300)) break;
      std::vector<uint8_t> allowed;
      for (int c = 0; c < 256; ++c) {
        m.advance(*st, static_cast<uint8_t>(c), *next);
        if (next->n > 0) allowed.push_back(static_cast<uint8_t>(c));
      }
      if (allowed.empty() && m.accepting(*st)) break;
      ASSERT_FALSE(allowed.empty()) << "dead end after " << text << " for " << schema.dump();
      uint8_t c = allowed[rng() % allowed.size()];
      if (text.size() > 300)
        for (uint8_t b : allowed)
          if (b == '}' || b == ']' || b == '"') c = b;
      m.advance(*st, c, *next);
      std::swap(st, next);
      text.push_back(static_cast<char>(c));
    }
    if (!m.accepting(*st)) continue;
    ++done;
    const Json v = Json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text << " for " << schema.dump();
    EXPECT_TRUE(test::schema_valid(v, schema)) << text << " for " << schema.dump();
    EXPECT_FALSE(repeats_a_key(text)) << text;
  }
  EXPECT_GT(done, (trials - refused) * 3 / 4);
  EXPECT_LT(refused, trials / 3) << "refusals: unsatisfiable merges, oneOf branches that may overlap";
}

// Inside an open object's key the mask is the key-text set (no '\\') plus the quote trie; it
// equals feeding each token's bytes, repeated keys and escapes refused.
TEST(TokenMask, OpenObjectKeysEqualBruteForce) {
  const std::vector<std::string> vocab = {"{", "}", "\"", "\":", "{\"", "a", "ab", "b\"", "\\", "\\u0061", ":", "1",
                                          ",", ", \"", "\":1", "\xc3", "\xa9", "é", "\"a\"", "[", "]", "null"};
  const Grammar g = any_object_grammar();
  const MaskVocab prepared(static_cast<int32_t>(vocab.size()), [&](int32_t id) { return std::string_view(vocab[id]); },
                           [](int32_t) { return false; });
  TokenMasker masker(prepared);
  JsonMatcher m(g);
  std::mt19937 rng(9);
  auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
  std::vector<uint64_t> mask(1);
  int in_key = 0;
  for (int walk = 0; walk < 60; ++walk) {
    m.start(*st);
    for (int step = 0; step < 24; ++step) {
      const int64_t n = masker.fill(m, *st, mask.data());
      in_key += m.in_key_text(*st);
      std::vector<int32_t> want, got;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
        if (m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp)) want.push_back(id);
        if (mask[0] >> id & 1) got.push_back(id);
      }
      ASSERT_EQ(got, want) << "walk " << walk << " step " << step;
      EXPECT_EQ(n, static_cast<int64_t>(want.size()));
      if (want.empty()) break;
      const int32_t id = want[rng() % want.size()];
      ASSERT_TRUE(m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp));
      std::swap(st, out);
    }
  }
  EXPECT_GT(in_key, 20) << "the fast path inside open keys was taken";
}

}  // namespace
}  // namespace dsv4::grammar
