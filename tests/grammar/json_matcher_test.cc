// The JSON Schema grammar and its byte matcher: hand cases accepted and refused at the right
// byte; random walks over the allowed bytes of random schemas end in values that parse and
// validate (an independent validator below); the token mask equals a per-token brute force.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "support/grammar_match.h"
#include "support/json_schema_check.h"

namespace dsv4::grammar {
namespace {

using Json = dsv4::OrderedJson;

Grammar compile(const std::string& schema) {
  Result<Grammar> g = compile_json_schema(Json::parse(schema));
  EXPECT_TRUE(g.ok()) << schema << ": " << g.message();
  return g.ok() ? std::move(*g) : Grammar{};
}

using test::match_at;

TEST(JsonMatcher, HandCases) {
  const Grammar obj = compile(R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 3},
      "age": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "bc", 1]}, "maxItems": 2}},
      "required": ["age"], "additionalProperties": false})");
  EXPECT_EQ(match_at(obj, R"({"name": "Bob", "age": 42, "tags": ["a", 1]})"), -1);
  EXPECT_EQ(match_at(obj, R"({"age": -0})"), -1);
  EXPECT_EQ(match_at(obj, "{\n  \"age\": 7\n}"), 1);  // compact: the separators ", " and ": " only
  EXPECT_EQ(match_at(obj, R"({"age":1})"), 7);
  EXPECT_EQ(match_at(obj, R"({"age": 1 ,"tags": []})"), 9);
  EXPECT_EQ(match_at(obj, R"({"age": 1,"tags": []})"), 10);
  EXPECT_EQ(match_at(obj, R"({"tags": []})"), 2);                   // required age comes before tags
  EXPECT_EQ(match_at(obj, R"({"name": "Bobby", "age": 1})"), 13);   // maxLength 3
  EXPECT_EQ(match_at(obj, R"({"age": 1.5})"), 9);                    // integer
  EXPECT_EQ(match_at(obj, R"({"age": 01})"), 9);
  EXPECT_EQ(match_at(obj, R"({"age": 1, "tags": ["a", "bc", 1]})"), 29);  // maxItems 2
  EXPECT_EQ(match_at(obj, R"({"age": 1, "tags": ["b"]})"), 22);   // "b" is a prefix of "bc"
  EXPECT_EQ(match_at(obj, R"({"age": 1})"), -1);
  EXPECT_EQ(match_at(obj, R"({"age": 1)"), 9);                       // a prefix, not complete
  EXPECT_EQ(match_at(obj, R"( {"age": 1})"), 0);                     // no whitespace before the value
  EXPECT_EQ(match_at(obj, "{\"age\": 1}\n"), 10);                    // nor after it
  CompileOptions flexible;
  flexible.layout.whitespace_flexible = true;
  const Grammar loose = *compile_json_schema(Json::parse(R"({"type": "object", "properties": {"age": {"type":
      "integer"}, "tags": {"items": {"type": "integer"}}}, "required": ["age"]})"), flexible);
  EXPECT_EQ(match_at(loose, "{\n  \"age\" :7 ,\"tags\":[ 1,2\t]\n}"), -1);
  EXPECT_EQ(match_at(loose, "{" + std::string(kMaxWhitespace + 1, ' ') + "\"age\": 1}"), 1 + kMaxWhitespace);

  const Grammar str = compile(R"({"type": "string", "minLength": 2})");
  EXPECT_EQ(match_at(str, R"("é\n\u00e9")"), -1);
  EXPECT_EQ(match_at(str, R"("a")"), 2);
  EXPECT_EQ(match_at(str, "\"a\x01\""), 2);            // control characters must be escaped
  EXPECT_EQ(match_at(str, "\"\xc3\x28\""), 2);         // not UTF-8
  EXPECT_EQ(match_at(str, "\"\xed\xa0\x80\""), 2);     // a UTF-16 surrogate in UTF-8
  EXPECT_EQ(match_at(str, R"("\x")"), 2);

  const Grammar num = compile(R"({"type": ["number", "null", "boolean"]})");
  for (const char* ok : {"0", "-1.25e+10", "3E5", "null", "true", "false", "12.0"}) EXPECT_EQ(match_at(num, ok), -1) << ok;
  EXPECT_EQ(match_at(num, "1."), 2);
  EXPECT_EQ(match_at(num, "+1"), 0);
  EXPECT_EQ(match_at(num, "nul"), 3);
  EXPECT_EQ(match_at(num, std::string(kMaxDigits + 1, '7')), kMaxDigits);

  const Grammar any_obj = any_object_grammar();
  EXPECT_EQ(match_at(any_obj, R"({"x": [1, {"y": null}, "z"], "": {}})"), -1);
  EXPECT_EQ(match_at(any_obj, R"([1])"), 0);

  const Grammar rec = compile(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
      "next": {"$ref": "#/$defs/node"}}, "required": ["v"]}}, "$ref": "#/$defs/node"})");
  EXPECT_EQ(match_at(rec, R"({"v": 1, "next": {"v": 2, "next": {"v": 3}}})"), -1);

  const Grammar alt = compile(R"({"anyOf": [{"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]},
      {"type": "object", "properties": {"ab": {"type": "string"}}, "required": ["ab"]}]})");
  EXPECT_EQ(match_at(alt, R"({"a": 1})"), -1);
  EXPECT_EQ(match_at(alt, R"({"ab": "x"})"), -1);
  EXPECT_EQ(match_at(alt, R"({"a": "x"})"), 6);
}

TEST(JsonSchema, ErrorsNameTheKeywordAndPlace) {
  auto message = [](const std::string& schema) {
    Result<Grammar> g = compile_json_schema(Json::parse(schema));
    return g.ok() ? std::string("ok") : g.message();
  };
  EXPECT_NE(message(R"({"type": "string", "pattern": "(?=a)b"})").find("keyword 'pattern'"), std::string::npos);
  EXPECT_EQ(message(R"({"properties": {"a": {"format": "colour"}}})"), "ok");  // unknown: an annotation
  EXPECT_NE(message(R"({"properties": {"a": {"format": 1}}})").find("/properties/a: format must be a string"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "strin"})").find("'strin'"), std::string::npos);
  EXPECT_NE(message(R"({"$ref": "#/$defs/missing"})").find("$ref"), std::string::npos);
  EXPECT_NE(message(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})").find("no finite"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "object", "required": ["x"], "additionalProperties": false})").find("'x'"),
            std::string::npos);
  EXPECT_NE(message(R"({"type": "string", "minLength": 3, "maxLength": 2})").find("maxLength"), std::string::npos);
  std::string deep = R"({"type": "string"})";
  for (int i = 0; i < kMaxDepth; ++i) deep = R"({"type": "array", "minItems": 1, "items": )" + deep + "}";
  EXPECT_NE(message(deep).find("nest"), std::string::npos);
  EXPECT_EQ(message(R"({"title": "t", "description": "d", "$schema": "x", "default": 1, "examples": []})"), "ok");
  EXPECT_EQ(message(R"({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991})"), "ok");
  EXPECT_EQ(message(R"({"type": "number", "maximum": 1e300})"), "ok");
  EXPECT_NE(message(R"({"type": "integer", "minimum": 1e20})").find("unsatisfiable"), std::string::npos);
  EXPECT_NE(message(R"({"type": "number", "multipleOf": 1e-9})").find("keyword 'multipleOf'"), std::string::npos);
}

// Random walks: at each step one of the allowed bytes (all 256 tried), ending where the value
// is complete (with probability 1/4, or always after 400 bytes, taking the bytes that close it).
TEST(JsonMatcher, RandomWalksGiveValidValues) {
  std::mt19937 rng(3);
  int done = 0;
  const int trials = std::getenv("DSV4_GRAMMAR_TRIALS") ? std::atoi(std::getenv("DSV4_GRAMMAR_TRIALS")) : 300;
  for (int trial = 0; trial < trials; ++trial) {
    const Json schema = test::random_schema(rng);
    Result<Grammar> g = compile_json_schema(schema);
    ASSERT_TRUE(g.ok()) << schema.dump() << ": " << g.message();
    JsonMatcher m(*g);
    auto st = std::make_unique<MatchState>(), next = std::make_unique<MatchState>();
    m.start(*st);
    std::string text;
    for (int step = 0; step < 2000; ++step) {
      if (m.accepting(*st) && (rng() % 4 == 0 || text.size() > 400)) break;
      std::vector<uint8_t> allowed;
      for (int c = 0; c < 256; ++c) {
        m.advance(*st, static_cast<uint8_t>(c), *next);
        if (next->n > 0) allowed.push_back(static_cast<uint8_t>(c));
      }
      if (allowed.empty() && m.accepting(*st)) break;  // a closed value takes no more bytes
      ASSERT_FALSE(allowed.empty()) << "dead end after " << Json(text).dump(-1, ' ', true, Json::error_handler_t::replace) << " for " << schema.dump();
      // Past 400 bytes prefer closing bytes so the walk ends.
      uint8_t c = allowed[rng() % allowed.size()];
      if (text.size() > 400)
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
  }
  EXPECT_GT(done, trials * 5 / 6);
}

// The mask over a small vocabulary (JSON pieces, multi-byte tokens, a special token) equals
// feeding each token's bytes, inside string text (plain-text set + quote trie) and elsewhere.
TEST(TokenMask, EqualsBruteForce) {
  const std::vector<std::string> vocab = {"{", "}", "\"", "\":", " \"", "name", "na", "me\"", ": ", "1", "12", "-",
                                          ".5", "e", "true", "tr", "ue", "null", ",", ", \"", "[", "]", "a", "é",
                                          "\xc3", "\xa9", "\\n", "\\", "<special>", "", "\"}", "0}", "age\": "};
  const Grammar g = compile(R"({"type": "object", "properties": {"name": {"type": "string"},
      "age": {"type": "number"}, "list": {"type": "array", "items": {"type": ["boolean", "null"]}}}})");
  const MaskVocab prepared(static_cast<int32_t>(vocab.size()), [&](int32_t id) { return std::string_view(vocab[id]); },
                           [&](int32_t id) { return vocab[id] == "<special>"; });
  TokenMasker masker(prepared);
  int in_text = 0;
  JsonMatcher m(g);
  std::mt19937 rng(5);
  auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
  std::vector<uint64_t> mask(1);
  for (int walk = 0; walk < 40; ++walk) {
    m.start(*st);
    for (int step = 0; step < 30; ++step) {
      const int64_t n = masker.fill(m, *st, mask.data());
      in_text += m.in_string_text(*st, prepared.all.max_length());
      std::vector<int32_t> want;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id)
        if (vocab[id] != "<special>" && !vocab[id].empty() &&
            m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp))
          want.push_back(id);
      std::vector<int32_t> got;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id)
        if (mask[0] >> id & 1) got.push_back(id);
      ASSERT_EQ(got, want) << "walk " << walk << " step " << step;
      EXPECT_EQ(n, static_cast<int64_t>(want.size()));
      if (want.empty()) break;
      const int32_t id = want[rng() % want.size()];
      ASSERT_TRUE(m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp));
      std::swap(st, out);
    }
  }
  EXPECT_GT(in_text, 20) << "the fast path inside string text was taken";
}

}  // namespace
}  // namespace dsv4::grammar
