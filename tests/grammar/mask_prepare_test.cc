// TokenMasker::prepare (mask_prepare.cc): the masks it computes ahead equal the per-token brute
// force on random walks of regex / choice / GBNF texts, patterned and formatted strings and DSML
// raw patterns; a whole-output ASCII text then never misses the cache; the budget and the mask
// bound hold, a walk cut by the budget keeps nothing, keys stored already are not computed again.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/text_constraint.h"
#include "grammar/token_mask.h"
#include "support/mask_walk.h"

namespace dsv4::grammar {
namespace mask_prepare_test {  // named: the grammar tests build as one unity translation unit

using Json = dsv4::OrderedJson;

struct Prepared {
  std::vector<std::string> vocab;
  MaskVocab mask_vocab;
  explicit Prepared(uint32_t seed)
      : vocab(test::random_vocab(seed)),
        mask_vocab(static_cast<int32_t>(vocab.size()), [this](int32_t id) { return std::string_view(vocab[id]); },
                   [](int32_t) { return false; }) {}
};

Grammar text(Result<Grammar> g) {
  EXPECT_TRUE(g.ok()) << g.message();
  return g.ok() ? std::move(*g) : Grammar{};
}

Grammar schema(const std::string& s) { return text(compile_json_schema(Json::parse(s))); }

// A prepared masker and a lazy one both equal the brute force on the walks.
void expect_prepared_equals_walk(const Grammar& g, uint32_t seed, int walks = 25, int steps = 40) {
  const Prepared p(seed);
  TokenMasker prepared(p.mask_vocab), lazy(p.mask_vocab);
  EXPECT_GT(prepared.prepare(g), 0);
  test::Walker{p.vocab, g, {&prepared, &lazy}}.run(seed, walks, steps);
}

TEST(MaskPrepare, WholeOutputTexts) {
  expect_prepared_equals_walk(text(compile_regex_output("[a-c]{1,4}(-[0-9]+)?(@[a-z]+\\.(z|é|€)+)?")), 21);
  expect_prepared_equals_walk(text(compile_choice_output({"abc", "ab-12", "é€", "a\"b", "</｜DSML｜parameter>"})), 22);
  expect_prepared_equals_walk(
      text(compile_gbnf_output("root ::= word (\", \" word){0,3}\nword ::= [a-z]+ | [0-9]{1,2} \":\" [a-z]")), 23);
}

TEST(MaskPrepare, PatternsAndFormats) {
  expect_prepared_equals_walk(schema(R"({"type": "object", "properties": {
      "p": {"type": "string", "pattern": "^[a-z]{2,6}-[0-9]+$", "minLength": 5},
      "q": {"type": "string", "pattern": "\\u00e9|a\\n|€+"}, "d": {"type": "string", "format": "date"},
      "u": {"type": "string", "format": "uuid", "maxLength": 400}, "e": {"type": "string", "format": "email"}},
      "required": ["p", "q", "d", "u", "e"], "additionalProperties": false})"), 24, 25, 60);
}

TEST(MaskPrepare, DsmlRawPatterns) {
  std::vector<ToolSpec> tools = {{"lookup", Json::parse(R"({"type": "object", "properties": {
      "id": {"type": "string", "pattern": "^[a-z]+-[0-9]{1,3}$"}, "q": {"type": "string"}}, "required": ["id", "q"]})")}};
  expect_prepared_equals_walk(text(compile_tool_call(tools)), 25, 12, 250);
}

// Every state of an ASCII automaton is prepared: its walks never miss (the lazy masker does),
// and its first mask walks nothing.
TEST(MaskPrepare, AsciiTextNeverMisses) {
  const Grammar g = text(compile_regex_output("[A-Z][a-z]{2,8}( [A-Z][a-z]{2,8}){0,2}, [0-9]{5}(-[0-9]{4})?"));
  const Prepared p(26);
  TokenMasker prepared(p.mask_vocab), lazy(p.mask_vocab);
  const int64_t added = prepared.prepare(g);
  EXPECT_GT(added, 20);
  EXPECT_EQ(prepared.cache().size(), added);
  test::Walker{p.vocab, g, {&prepared, &lazy}}.run(26, 25, 40);
  EXPECT_EQ(prepared.cache().misses(), 0);
  EXPECT_GT(lazy.cache().misses(), 5);
  EXPECT_EQ(prepared.prepare(g), 0) << "stored keys are not computed again";
  // Before the first byte too (the bottom frame alone: the text's start state) no node is walked.
  const JsonMatcher m(g);
  auto st = std::make_unique<MatchState>();
  m.start(*st);
  std::vector<uint64_t> mask((p.vocab.size() + 63) / 64);
  EXPECT_GT(prepared.fill(m, *st, mask.data()), 0);
  EXPECT_EQ(prepared.nodes_visited(), 0);
}

// Bounds: a budget too small keeps nothing (the walk's masks would be partial), max_masks caps
// the masks; a partly prepared masker is still exact.
TEST(MaskPrepare, BudgetAndBounds) {
  const Grammar g = text(compile_regex_output("[a-c]{1,4}(-[0-9]+)?"));
  const Prepared p(27);
  TokenMasker cut(p.mask_vocab), capped(p.mask_vocab);
  EXPECT_EQ(cut.prepare(g, 100), 0);
  EXPECT_GT(cut.prepare_steps(), 100);
  EXPECT_EQ(cut.cache().size(), 0);
  EXPECT_EQ(capped.prepare(g, TokenMasker::kPrepareBudget, 2), 2);
  EXPECT_EQ(capped.cache().size(), 2);
  test::Walker{p.vocab, g, {&cut, &capped}}.run(27, 20, 30);
  TokenMasker none(p.mask_vocab, 0);  // no cache: nothing to prepare into
  EXPECT_EQ(none.prepare(g), 0);
}

// A maxLength within a token's reach: the far masks are prepared, and each room's mask, derived
// from them, equals the brute force; the walks then never walk the trie for the pattern.
TEST(MaskPrepare, FarMasksOfBoundedPatterns) {
  const Grammar g = schema(R"({"type": "string", "pattern": "^[a-z]+(-[a-z0-9]+)*$", "maxLength": 9})");
  const Prepared p(28);
  TokenMasker prepared(p.mask_vocab), lazy(p.mask_vocab);
  EXPECT_GT(prepared.prepare(g), 0);
  const int64_t stored = prepared.cache().size();
  test::Walker{p.vocab, g, {&prepared, &lazy}}.run(28, 25, 30);
  EXPECT_EQ(prepared.cache().size() - stored, prepared.cache().misses()) << "each miss derived, no far mask walked";
}

}  // namespace mask_prepare_test
}  // namespace dsv4::grammar
