// Step metadata: row tables of a ragged step, window lists (prompt rows use
// Wc = min(prompt_len, W), later rows W), slots against CacheGroup::slot, the
// capacity errors, and rows beyond T left untouched.
#include <gtest/gtest.h>

#include <set>

#include "cache/step_metadata.h"

namespace dsv4 {
namespace {

StepCapacity cap() {
  StepCapacity c;
  c.max_batch = 4;
  c.max_rows = 12;
  c.max_request_rows = 6;
  c.max_seqs = 5;
  c.max_context = 100;
  c.window = 8;
  c.vocab_size = 50;
  return c;
}

TEST(StepMetadata, RaggedStepRowsAndWindows) {
  const StepCapacity c = cap();
  CacheGroup ori({"ori", 4, ring_pages_for_span(c.window - 1 + c.max_request_rows, 4), 40, 0}, c.max_seqs);
  ASSERT_TRUE(ori.admit(3).ok());
  ASSERT_TRUE(ori.admit(1).ok());
  const int32_t toks_a[3] = {5, 6, 7}, toks_b[1] = {9};
  // Request a: prompt of 3 tokens, first chunk. Request b: decode at position 20.
  const StepRequest reqs[2] = {{3, 0, 3, 3, toks_a}, {1, 20, 1, 10, toks_b}};
  ASSERT_TRUE(validate_step(reqs, c).ok());
  StepMetadata md(c);
  for (auto& x : md.pos) x = -99;
  build_step_metadata(reqs, ori, md);
  EXPECT_EQ(md.B, 2);
  EXPECT_EQ(md.T, 4);
  EXPECT_EQ(md.row_begin[1], 3);
  EXPECT_EQ(md.pos[2], 2);
  EXPECT_EQ(md.pos[3], 20);
  EXPECT_EQ(md.pos[4], -99);  // beyond T untouched
  EXPECT_EQ(md.row_seq[3], 1);
  EXPECT_EQ(md.token[3], 9);
  EXPECT_EQ(md.window_len[0], 3);  // prompt row of a 3-token prompt: Wc = 3
  EXPECT_EQ(md.window_len[3], 8);  // decode row: Wc = W
  // Window KV slots of every row; the prompt rows of sequence 3 and the window of row 3
  // (positions 13..20 of sequence 1, which attention reads) never share a physical row.
  EXPECT_EQ(md.ori_slot[0], ori.slot(3, 0));
  EXPECT_EQ(md.ori_slot[1], ori.slot(3, 1));
  EXPECT_EQ(md.ori_slot[2], ori.slot(3, 2));
  std::set<int64_t> rows = {md.ori_slot[0], md.ori_slot[1], md.ori_slot[2]};
  for (int j = 0; j < 8; ++j) EXPECT_TRUE(rows.insert(ori.slot(1, 13 + j)).second) << "position " << 13 + j;
  EXPECT_EQ(md.ori_slot[3], ori.slot(1, 20));
}

TEST(StepMetadata, CapacityErrorsNameTheLimit) {
  const StepCapacity c = cap();
  const int32_t toks[7] = {1, 2, 3, 4, 5, 6, 7};
  auto msg = [&](std::vector<StepRequest> r) { return validate_step(r, c).message(); };
  EXPECT_NE(msg({{0, 0, 1, 1, toks}, {1, 0, 1, 1, toks}, {2, 0, 1, 1, toks}, {3, 0, 1, 1, toks},
                 {4, 0, 1, 1, toks}}).find("max_batch (B_MAX) = 4"), std::string::npos);
  EXPECT_NE(msg({{0, 0, 7, 7, toks}}).find("R_MAX = 6"), std::string::npos);
  EXPECT_NE(msg({{0, 0, 6, 6, toks}, {1, 0, 6, 6, toks}, {2, 0, 1, 1, toks}}).find("max_rows (T_MAX) = 12"),
            std::string::npos);
  EXPECT_NE(msg({{0, 98, 3, 1, toks}}).find("max_context = 100"), std::string::npos);
  const int32_t bad[1] = {50};
  EXPECT_NE(msg({{0, 0, 1, 1, bad}}).find("token id 50 at row 0 outside the vocabulary [0, 50)"),
            std::string::npos);
  EXPECT_NE(msg({{2, 0, 1, 1, toks}, {2, 5, 1, 1, toks}}).find("appears twice"), std::string::npos);
  EXPECT_NE(msg({{7, 0, 1, 1, toks}}).find("max_seqs = 5"), std::string::npos);
  EXPECT_TRUE(validate_step({}, c).ok());  // B = 0 is a valid step
}

}  // namespace
}  // namespace dsv4
