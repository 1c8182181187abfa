// The string-body mask cache (mask_cache.h, string_body.h): masks filled through it equal a
// per-token brute force on random states of several grammars (plain strings near maxLength,
// patterns and formats with length bounds, open objects' keys, anyOf of patterned strings, DSML
// raw strings, uniqueItems strings, keys under patternProperties, whole-output regex / choice /
// GBNF texts), with a roomy cache and with one that evicts at every step; the LRU keeps the
// recent keys; apply_token_mask equals the per-id rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/mask_cache.h"
#include "grammar/text_constraint.h"
#include "grammar/token_mask.h"
#include "support/mask_walk.h"

namespace dsv4::grammar {
namespace mask_cache_test {  // named: the grammar tests build as one unity translation unit

using Json = dsv4::OrderedJson;
using test::random_vocab;
using test::Walker;

Grammar compile(const std::string& schema) {
  Result<Grammar> g = compile_json_schema(Json::parse(schema));
  EXPECT_TRUE(g.ok()) << schema << ": " << g.message();
  return g.ok() ? std::move(*g) : Grammar{};
}

// steps: at most per walk (a DSML call's preamble takes about 100 single bytes).
void expect_cache_equals_walk(const Grammar& g, uint32_t seed, int walks = 25, int steps = 40) {
  const std::vector<std::string> vocab = random_vocab(seed);
  const MaskVocab prepared(static_cast<int32_t>(vocab.size()), [&](int32_t id) { return std::string_view(vocab[id]); },
                           [](int32_t) { return false; });
  const int64_t words = static_cast<int64_t>((vocab.size() + 63) / 64);
  TokenMasker roomy(prepared), tiny(prepared, 2 * words * 8);  // tiny: two masks, evicting
  Walker{vocab, g, {&roomy, &tiny}}.run(seed, walks, steps);
  EXPECT_GT(roomy.cache().misses(), 5) << "the string-body path was taken";
  EXPECT_GT(roomy.cache().hits(), 5) << "and its masks were reused";
  EXPECT_EQ(tiny.cache().capacity(), 2);
}

TEST(MaskCache, PlainStringsNearMaxLengthAndOpenKeys) {
  expect_cache_equals_walk(compile(R"({"type": "object", "properties": {"s": {"type": "string", "maxLength": 30},
      "o": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 6}}},
      "required": ["s", "o"], "additionalProperties": false})"), 1);
}

TEST(MaskCache, PatternsWithLengthBounds) {
  expect_cache_equals_walk(compile(R"({"type": "object", "properties": {
      "p": {"type": "string", "pattern": "^[a-z]{2,6}-[0-9]+$", "minLength": 5, "maxLength": 14},
      "q": {"type": "string", "pattern": "\\u00e9|a\\n|€+", "maxLength": 9}},
      "required": ["p", "q"], "additionalProperties": false})"), 2);
}

TEST(MaskCache, Formats) {
  expect_cache_equals_walk(compile(R"({"type": "array", "items": {"anyOf": [{"type": "string", "format": "date-time"},
      {"type": "string", "format": "email", "maxLength": 12}, {"type": "string", "format": "uuid"}]}, "maxItems": 3})"), 3);
}

TEST(MaskCache, AnyOfPatternedStrings) {
  expect_cache_equals_walk(compile(R"({"anyOf": [{"type": "string", "pattern": "^a+$"},
      {"type": "string", "pattern": "^[ab]*c$", "maxLength": 7}, {"type": "string", "minLength": 3, "maxLength": 8}]})"),
                           4);
}

TEST(MaskCache, DsmlRawStrings) {
  std::vector<ToolSpec> tools;
  for (const auto& [name, params] : std::vector<std::pair<std::string, std::string>>{
           {"lookup", R"({"type": "object", "properties": {"q": {"type": "string", "maxLength": 10},
               "id": {"type": "string", "pattern": "^[a-z]+-[0-9]{1,3}$", "maxLength": 8}}, "required": ["q", "id"]})"}})
    tools.push_back({name, Json::parse(params)});
  Result<Grammar> g = compile_tool_call(tools);
  ASSERT_TRUE(g.ok()) << g.message();
  expect_cache_equals_walk(*g, 5, 12, 250);
}

// uniqueItems strings (wip/store) keep a hash in their frame and take no escape: their bodies
// must replay that (a plain string body here allowed '\\' and left the hash behind).
TEST(MaskCache, UniqueStringItems) {
  expect_cache_equals_walk(compile(R"({"type": "array", "uniqueItems": true, "maxItems": 6,
      "items": {"type": "string"}})"), 6, 60);
}

// Keys under patternProperties/propertyNames (wip/keys): the automaton's state, UTF-8 payload
// and the labels that fit key the body; its hash goes on through the walk to the quote.
TEST(MaskCache, PatternKeys) {
  expect_cache_equals_walk(compile(R"({"type": "object", "patternProperties": {
      "^x-[a-z]+$": {"type": "integer"}, "^[a-c]{2,4}$": {"type": "string", "maxLength": 5},
      "é|€+": {"type": "boolean"}}, "additionalProperties": false, "maxProperties": 4})"), 7);
}

// Whole-output texts (regex, choice, GBNF: Kind::kText) have no end byte: the body is the whole
// vocabulary, keyed by the automaton's state and UTF-8 payload.
TEST(MaskCache, WholeOutputTexts) {
  Result<Grammar> re = compile_regex_output("[a-c]{1,4}(-[0-9]+)?(@[a-z]+\\.(z|é|€)+)?");
  ASSERT_TRUE(re.ok()) << re.message();
  expect_cache_equals_walk(*re, 8, 25, 30);
  Result<Grammar> choice = compile_choice_output({"abc", "ab-12", "é€", "a\"b", "</｜DSML｜parameter>"});
  ASSERT_TRUE(choice.ok()) << choice.message();
  expect_cache_equals_walk(*choice, 9, 25, 30);
  Result<Grammar> gbnf = compile_gbnf_output("root ::= word (\", \" word){0,3}\nword ::= [a-z]+ | [0-9]{1,2} \":\" [a-z]");
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  expect_cache_equals_walk(*gbnf, 10, 25, 30);
}

// Least recently used out first; keys probed past removed ones are still found.
TEST(MaskCache, EvictsTheLeastRecent) {
  MaskCache cache(2, 4 * 2 * 8);  // four masks of two words
  ASSERT_EQ(cache.capacity(), 4);
  std::map<int, bool> stored;  // model: key room -> stored
  std::vector<int> order;      // least recent first
  std::mt19937 rng(7);
  for (int op = 0; op < 2000; ++op) {
    StringMaskKey key;
    key.room = static_cast<int64_t>(rng() % 9);
    const uint64_t* found = cache.find(key);
    auto it = std::find(order.begin(), order.end(), static_cast<int>(key.room));
    ASSERT_EQ(found != nullptr, it != order.end()) << "op " << op;
    if (found) {
      EXPECT_EQ(found[0], static_cast<uint64_t>(key.room));
      order.erase(it);
    } else {
      uint64_t* bits = cache.insert(key, nullptr);
      bits[0] = static_cast<uint64_t>(key.room);
      if (order.size() == 4) order.erase(order.begin());
    }
    order.push_back(static_cast<int>(key.room));
  }
  EXPECT_EQ(cache.size(), 4);
}

TEST(ApplyTokenMask, EqualsThePerIdRule) {
  std::mt19937 rng(3);
  for (int64_t n_ids : {1, 63, 64, 65, 200, 1000}) {
    const int64_t n_row = n_ids + static_cast<int64_t>(rng() % 70);
    std::vector<uint64_t> allowed(static_cast<size_t>((n_ids + 63) / 64));
    for (uint64_t& w : allowed) {  // all, none, half the ids, or a sparse few (the saved-around-a-fill path)
      const uint32_t kind = rng() % 4;
      w = kind == 0 ? ~uint64_t{0} : kind == 1 ? 0 : kind == 2 ? (uint64_t{rng()} << 32 | rng())
                                                               : uint64_t{1} << (rng() % 64) | uint64_t{1} << (rng() % 64);
    }
    std::vector<float> row(static_cast<size_t>(n_row)), want;
    for (int64_t v = 0; v < n_row; ++v) row[v] = static_cast<float>(v) - 0.5f;  // each id its own logit
    want = row;
    for (int64_t v = 0; v < n_row; ++v)
      if (v >= n_ids || !(allowed[v >> 6] >> (v & 63) & 1)) want[v] = -INFINITY;
    apply_token_mask(allowed.data(), n_ids, row.data(), n_row);
    EXPECT_EQ(row, want) << n_ids;
  }
}

}  // namespace mask_cache_test
}  // namespace dsv4::grammar
