// SequenceState on its own (no model): slot start and end, the block demand a scheduler
// reads, the rollback window a step's p0 must respect (main and MTP positions apart, never
// below a prefix hit's start), and the prefix cache: blocks registered as a prompt's steps
// complete them, a later slot with the same prompt adopting their pages and getting the
// window rows before its cut copied into its ring, misses on a different block or on
// missing MTP rows, eviction of blocks only the cache holds, and a chain that stops for good
// once its window rows left the ring.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/sequence_state.h"
#include "numeric/paged_rows.h"

namespace dsv4 {
namespace {

constexpr int32_t kWindow = 8;
constexpr int64_t kRowBytes = 4;

Limits test_limits(int32_t prefix_blocks, int64_t cache_blocks = 0) {
  Limits l;
  l.max_batch = 2;
  l.max_seqs = 3;
  l.max_chunk = 16;
  l.max_decode_rows = 3;
  l.max_rows = 32;
  l.max_context = 256;
  l.page_rows = 8;
  l.page_tokens = 16;
  l.prefix_blocks = prefix_blocks;
  l.cache_blocks = cache_blocks;
  return l;
}

// A sequence state with one window layer whose ring rows the test writes and reads.
struct SlotsFixture {
  std::unique_ptr<SequenceState> seqs;
  std::vector<uint8_t> ring, tail;

  explicit SlotsFixture(const Limits& l, int min_ratio = 4) {
    auto r = SequenceState::create(l, kWindow, min_ratio, kRowBytes);
    EXPECT_TRUE(r.ok()) << r.message();
    seqs = std::move(*r);
    ring.assign(static_cast<size_t>(seqs->window().physical_rows() * kRowBytes), 0);
    tail.assign(static_cast<size_t>(l.prefix_blocks * (kWindow - 1) * kRowBytes), 0);
    seqs->add_window_layer(ring.data(), tail.data(), false);
  }
  uint8_t* row(int32_t seq, int64_t p) {
    const CacheGroupSpec& os = seqs->window().spec();
    return PagedRowsT<uint8_t>{ring.data(), seqs->window().table(seq).data(), os.page_rows, os.ring_pages, kRowBytes}
        .row(p);
  }
  static uint8_t mark(int32_t seq, int64_t p) { return static_cast<uint8_t>(1 + seq * 64 + p % 61); }
  // A step of positions [p0, p0 + n): checked, its window rows marked, recorded.
  Status step(int32_t seq, int64_t p0, int32_t n, bool mtp = false) {
    const StepRequest q{seq, p0, n, 0, nullptr};
    DSV4_RETURN_IF_ERROR(seqs->check_step({&q, 1}, mtp));
    for (int64_t p = p0; p < p0 + n; ++p) std::fill_n(row(seq, p), kRowBytes, mark(seq, p));
    seqs->advance({&q, 1}, mtp);
    return Status();
  }
};

std::vector<int32_t> prompt(int64_t n, int32_t salt = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 7 + salt) % 50);
  return t;
}

TEST(SequenceState, SlotsStartEndAndBlockDemand) {
  SlotsFixture f(test_limits(0));
  SequenceState& s = *f.seqs;
  EXPECT_EQ(s.total_blocks(), 48);  // max_seqs · max_context / page_tokens
  EXPECT_FALSE(s.start(-1).ok());
  EXPECT_FALSE(s.start(3).ok());
  ASSERT_TRUE(s.start(0).ok());
  EXPECT_TRUE(s.active(0));
  EXPECT_FALSE(s.active(1));
  EXPECT_FALSE(s.active(-1));
  EXPECT_NE(s.start(0).message().find("already in use"), std::string::npos);
  EXPECT_EQ(s.blocks_short(-1, 40), 3);
  EXPECT_EQ(s.blocks_short(0, 40), 3);
  ASSERT_TRUE(s.reserve_blocks(0, 40).ok());
  EXPECT_EQ(s.blocks_short(0, 40), 0);
  EXPECT_EQ(s.blocks_short(0, 49), 1);
  EXPECT_EQ(s.free_blocks(), 45);
  EXPECT_FALSE(s.reserve_blocks(1, 16).ok());  // not started
  EXPECT_NE(s.reserve_blocks(0, 257).message().find("max_context"), std::string::npos);
  s.end(0);
  EXPECT_FALSE(s.active(0));
  EXPECT_EQ(s.free_blocks(), 48);
  s.end(0);  // ending twice is a no-op
  ASSERT_TRUE(s.start(0).ok());

  SlotsFixture swa(test_limits(0), /*min_ratio=*/0);  // no compressed family: no blocks at all
  EXPECT_EQ(swa.seqs->total_blocks(), INT64_MAX);
  EXPECT_EQ(swa.seqs->free_blocks(), INT64_MAX);
  EXPECT_EQ(swa.seqs->blocks_short(-1, 200), 0);
}

TEST(SequenceState, StepsContinueWithinTheRollbackWindow) {
  SlotsFixture f(test_limits(0));
  SequenceState& s = *f.seqs;
  EXPECT_NE(f.step(0, 0, 4).message().find("not started"), std::string::npos);
  ASSERT_TRUE(s.start(0).ok());
  EXPECT_FALSE(f.step(0, 1, 4).ok());  // a new slot starts at 0
  ASSERT_TRUE(f.step(0, 0, 10).ok());
  EXPECT_EQ(s.blocks().table(0).size(), 1u);  // the step's blocks are taken
  // p0 in [max(floor, high − (S_MAX − 1)), length] = [8, 10].
  EXPECT_FALSE(f.step(0, 11, 1).ok());
  const Status behind = f.step(0, 7, 1);
  EXPECT_NE(behind.message().find("must be in [8, 10]"), std::string::npos) << behind.message();
  ASSERT_TRUE(f.step(0, 8, 1).ok());  // rolls back rows 9, 10 (length 9, high still 10)
  EXPECT_FALSE(f.step(0, 10, 1).ok());
  EXPECT_FALSE(f.step(0, 7, 1).ok());
  ASSERT_TRUE(f.step(0, 9, 2).ok());
  // The MTP layer's positions are tracked apart.
  EXPECT_NE(f.step(0, 11, 1, true).message().find("MTP layer"), std::string::npos);
  ASSERT_TRUE(f.step(0, 0, 11, true).ok());
  ASSERT_TRUE(f.step(0, 9, 1, true).ok());
}

TEST(SequenceState, AStepShortOfBlocksFails) {
  SlotsFixture f(test_limits(0, /*cache_blocks=*/2));
  ASSERT_TRUE(f.seqs->start(0).ok());
  ASSERT_TRUE(f.step(0, 0, 16).ok());
  ASSERT_TRUE(f.step(0, 16, 16).ok());
  const Status full = f.step(0, 32, 1);
  EXPECT_NE(full.message().find("compressed cache exhausted"), std::string::npos) << full.message();
}

TEST(SequenceState, PrefixBlocksRegisterAndALaterSlotReusesThem) {
  SlotsFixture f(test_limits(4));
  SequenceState& s = *f.seqs;
  const std::vector<int32_t> t = prompt(40);
  ASSERT_TRUE(s.start(0).ok());
  for (int64_t p0 = 0; p0 < 40; p0 += 16) {
    ASSERT_TRUE(f.step(0, p0, static_cast<int32_t>(std::min<int64_t>(16, 40 - p0))).ok());
    s.register_prefix(0, t.data(), 40, false);
  }
  EXPECT_EQ(s.prefix_entries(), 2);  // blocks 0 and 1 are complete, block 2 is not
  s.register_prefix(0, t.data(), 40, false);
  EXPECT_EQ(s.prefix_entries(), 2);

  // Same prompt: both blocks hit, the slot starts at the cut − 4 with the window rows before it.
  ASSERT_TRUE(s.start(1).ok());
  Result<int64_t> start = s.reuse_prefix(1, t.data(), 40, false);
  ASSERT_TRUE(start.ok()) << start.message();
  EXPECT_EQ(*start, 28);
  EXPECT_EQ(s.floor(1), 28);
  EXPECT_EQ(s.shared_end(1), 32);
  ASSERT_EQ(s.blocks().table(1).size(), 2u);
  EXPECT_EQ(s.blocks().table(1)[0], s.blocks().table(0)[0]);
  EXPECT_EQ(s.blocks().table(1)[1], s.blocks().table(0)[1]);
  for (int64_t p = 28 - (kWindow - 1); p < 28; ++p) EXPECT_EQ(*f.row(1, p), SlotsFixture::mark(0, p)) << p;
  EXPECT_NE(f.step(1, 27, 2).message().find("slot's start"), std::string::npos);
  ASSERT_TRUE(f.step(1, 28, 12).ok());

  // A different second block hits block 0 only; MTP rows the cache does not hold: no hit.
  ASSERT_TRUE(s.start(2).ok());
  std::vector<int32_t> other = t;
  other[20] += 1;
  Result<int64_t> one = s.reuse_prefix(2, other.data(), 40, false);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, 12);
  s.end(2);
  ASSERT_TRUE(s.start(2).ok());
  Result<int64_t> mtp = s.reuse_prefix(2, t.data(), 40, true);
  ASSERT_TRUE(mtp.ok());
  EXPECT_EQ(*mtp, 0);
}

TEST(SequenceState, BlocksOnlyTheCacheHoldsAreEvictedOnDemand) {
  SlotsFixture f(test_limits(4, /*cache_blocks=*/4));
  SequenceState& s = *f.seqs;
  const std::vector<int32_t> t = prompt(40);
  ASSERT_TRUE(s.start(0).ok());
  for (int64_t p0 = 0; p0 < 40; p0 += 16) {
    ASSERT_TRUE(f.step(0, p0, static_cast<int32_t>(std::min<int64_t>(16, 40 - p0))).ok());
    s.register_prefix(0, t.data(), 40, false);
  }
  ASSERT_EQ(s.prefix_entries(), 2);
  EXPECT_EQ(s.free_blocks(), 1);  // the slot holds its 3 blocks, so no cached block can go
  s.end(0);
  EXPECT_EQ(s.free_blocks(), 4);  // 2 free, 2 held by the cache alone
  ASSERT_TRUE(s.start(1).ok());
  ASSERT_TRUE(s.reserve_blocks(1, 64).ok());
  EXPECT_EQ(s.prefix_entries(), 0);
  EXPECT_EQ(s.free_blocks(), 0);
}

TEST(SequenceState, AChainWhoseWindowRowsLeftTheRingStops) {
  SlotsFixture f(test_limits(4));
  SequenceState& s = *f.seqs;
  const std::vector<int32_t> t = prompt(64);
  ASSERT_TRUE(s.start(0).ok());
  // Registering only after 48 positions: block 0's window rows (from position 5) are gone.
  for (int64_t p0 = 0; p0 < 48; p0 += 16) ASSERT_TRUE(f.step(0, p0, 16).ok());
  s.register_prefix(0, t.data(), 64, false);
  EXPECT_EQ(s.prefix_entries(), 0);
  ASSERT_TRUE(f.step(0, 48, 16).ok());
  s.register_prefix(0, t.data(), 64, false);  // nothing registers later either
  EXPECT_EQ(s.prefix_entries(), 0);
}

}  // namespace
}  // namespace dsv4
