// Masks of patterned bodies near their maxLength (mask_room.cc: the far mask less the tokens
// body_byte refuses) equal the per-token brute force on random walks: a looping pattern, one
// whose shortest accepting continuation is long (so the room refuses tokens well before their
// own code points reach the bound), minLength beside maxLength, and DSML raw patterns; with a
// roomy cache and with one of two masks (the far mask and the near one evict each other).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "support/mask_walk.h"

namespace dsv4::grammar {
namespace mask_room_test {  // named: the grammar tests build as one unity translation unit

using Json = dsv4::OrderedJson;

void expect_equals_walk(const Grammar& g, uint32_t seed, int walks = 30, int steps = 40) {
  const std::vector<std::string> vocab = test::random_vocab(seed);
  const MaskVocab prepared(static_cast<int32_t>(vocab.size()), [&](int32_t id) { return std::string_view(vocab[id]); },
                           [](int32_t) { return false; });
  const int64_t words = static_cast<int64_t>((vocab.size() + 63) / 64);
  TokenMasker roomy(prepared), two(prepared, 2 * words * 8);
  test::Walker{vocab, g, {&roomy, &two}}.run(seed, walks, steps);
  EXPECT_GT(roomy.cache().misses(), 3);
}

TEST(MaskRoom, PatternsNearMaxLength) {
  Result<Grammar> g = compile_json_schema(Json::parse(R"({"type": "object", "properties": {
      "a": {"type": "string", "pattern": "^[a-z ]+$", "maxLength": 20},
      "b": {"type": "string", "pattern": "^[a-z]+-[0-9]{5}$", "maxLength": 12},
      "c": {"type": "string", "pattern": "^[a-c0-9]*$", "minLength": 3, "maxLength": 7},
      "d": {"type": "string", "pattern": "é|a+", "maxLength": 4}},
      "required": ["a", "b", "c", "d"], "additionalProperties": false})"));
  ASSERT_TRUE(g.ok()) << g.message();
  expect_equals_walk(*g, 41, 30, 60);
}

TEST(MaskRoom, DsmlRawPatternsNearMaxLength) {
  std::vector<ToolSpec> tools = {{"find", Json::parse(R"({"type": "object", "properties": {
      "id": {"type": "string", "pattern": "^[a-z]+-[0-9]{1,3}$", "maxLength": 9},
      "w": {"type": "string", "pattern": "^[a-z1 ]*$", "maxLength": 15}}, "required": ["id", "w"]})")}};
  Result<Grammar> g = compile_tool_call(tools);
  ASSERT_TRUE(g.ok()) << g.message();
  expect_equals_walk(*g, 42, 12, 250);
}

}  // namespace mask_room_test
}  // namespace dsv4::grammar
