// Prefix caching (runtime.md §7.1): a prompt whose first blocks are cached starts at the
// cut − 4 and gives logits bit-identical to a cold run, for prefixes cut at and around
// block boundaries, on tiny (ratios 4, 8) and tiny2 (4, 128); concurrent requests sharing
// blocks; eviction under pool pressure takes only blocks nobody uses; blocks in use by a
// running request survive while the index drops them. The PrefixCache index on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cache/prefix_cache.h"
#include "model/runner.h"
#include "support/tiny_model.h"

namespace dsv4 {
namespace {

constexpr int kChunk = 24;

Limits limits_for(int page_tokens, int prefix_blocks, int64_t cache_blocks = 0) {
  Limits l;
  l.max_batch = 4;
  l.max_seqs = 4;
  l.max_chunk = kChunk;
  l.max_decode_rows = 2;
  l.max_rows = 4 * kChunk;
  l.max_context = 1024;
  l.page_tokens = page_tokens;
  l.prefix_blocks = prefix_blocks;
  l.cache_blocks = cache_blocks;
  l.n_threads = 2;
  return l;
}

// Feeds tokens [start, n) of a prompt of length n (the prompt is the whole sequence) into
// slot `seq` in chunks, registering prompt blocks after each step; returns the logits of
// every position >= start ([n, V], rows < start left 0).
std::vector<float> feed(ModelRunner& r, int32_t seq, const std::vector<int32_t>& toks, int64_t start) {
  const int64_t V = r.vocab_size(), n = static_cast<int64_t>(toks.size());
  std::vector<float> out(static_cast<size_t>(n * V), 0.0f), step(static_cast<size_t>(kChunk * V));
  for (int64_t p0 = start; p0 < n; p0 += kChunk) {
    const int32_t c = static_cast<int32_t>(std::min<int64_t>(kChunk, n - p0));
    const StepRequest q{seq, p0, c, n, toks.data() + p0};
    const Status st = r.forward({&q, 1}, step.data(), nullptr);
    EXPECT_TRUE(st.ok()) << st.message();
    std::copy_n(step.begin(), c * V, out.begin() + p0 * V);
    r.register_prefix(seq, toks.data(), n, false);
  }
  return out;
}

std::vector<float> cold(const test::TinyModel& m, int page_tokens, const std::vector<int32_t>& toks) {
  auto r = ModelRunner::create(m.cfg, *m.w, limits_for(page_tokens, 0));
  EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE((*r)->start_sequence(0).ok());
  return feed(**r, 0, toks, 0);
}

::testing::AssertionResult rows_equal_from(const std::vector<float>& a, const std::vector<float>& b, int64_t from,
                                           int64_t V) {
  for (size_t i = static_cast<size_t>(from * V); i < a.size(); ++i)
    if (a[i] != b[i]) return ::testing::AssertionFailure() << "position " << i / V << " column " << i % V;
  return ::testing::AssertionSuccess();
}

// B shares its first `shared` tokens with A; A is fed first (registering its blocks).
void check_hit(const char* preset, int P, int64_t shared, int64_t len_b, int64_t want_start) {
  const test::TinyModel& m = test::tiny_model(preset, TinyQuant::kFp8);
  const int64_t V = m.cfg.vocab_size;
  auto a = test::random_tokens(300, 5, V);
  auto b = test::random_tokens(static_cast<int>(len_b), 6, V);
  std::copy_n(a.begin(), std::min<int64_t>(shared, len_b), b.begin());
  auto r = ModelRunner::create(m.cfg, *m.w, limits_for(P, 16));
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_TRUE((*r)->start_sequence(0).ok());
  feed(**r, 0, a, 0);
  EXPECT_EQ((*r)->prefix_entries(), 300 / P);
  auto start = (*r)->start_sequence_cached(1, b.data(), len_b, false, "");
  ASSERT_TRUE(start.ok()) << start.message();
  EXPECT_EQ(*start, want_start) << preset << " shared " << shared;
  const auto hit = feed(**r, 1, b, *start);
  EXPECT_TRUE(rows_equal_from(hit, cold(m, P, b), *start, V)) << preset << " P " << P << " shared " << shared;
}

TEST(PrefixCache, HitEqualsColdAtAndAroundBlockBoundaries) {
  // tiny: P = 32 (ratios 4 and 8); cuts at whole blocks below the shared length.
  for (int64_t shared : {31, 32, 33, 63, 64, 65, 100}) {
    const int64_t blocks = shared / 32;
    check_hit("tiny", 32, shared, 200, blocks > 0 ? blocks * 32 - 4 : 0);
  }
  // The cut never passes the new prompt: a prompt of exactly two blocks.
  check_hit("tiny", 32, 64, 64, 60);
  // tiny2: P = 128 (ratios 4 and 128).
  for (int64_t shared : {127, 128, 129, 256, 290}) {
    const int64_t blocks = shared / 128;
    check_hit("tiny2", 128, shared, 290, blocks > 0 ? blocks * 128 - 4 : 0);
  }
}

// A slot registers its blocks in its salt's namespace: another salt (or none) misses them, the
// same salt hits, on the runner and in the owner's count the scheduler routes by.
TEST(PrefixCache, SaltedBlocksHitOnlyTheirSalt) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  auto a = test::random_tokens(100, 5, m.cfg.vocab_size);
  auto r = ModelRunner::create(m.cfg, *m.w, limits_for(32, 16));
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_TRUE((*r)->start_sequence(0, "tenant 1").ok());
  feed(**r, 0, a, 0);
  EXPECT_EQ((*r)->prefix_entries(), 3);
  EXPECT_EQ((*r)->cached_prefix_blocks(0, a.data(), 100, false, "tenant 1"), 3);
  for (const char* other : {"", "tenant 2"}) {
    EXPECT_EQ((*r)->cached_prefix_blocks(0, a.data(), 100, false, other), 0) << other;
    auto miss = (*r)->start_sequence_cached(1, a.data(), 100, false, other);
    ASSERT_TRUE(miss.ok()) << miss.message();
    EXPECT_EQ(*miss, 0) << other;
    (*r)->end_sequence(1);
  }
  auto hit = (*r)->start_sequence_cached(1, a.data(), 100, false, "tenant 1");
  ASSERT_TRUE(hit.ok()) << hit.message();
  EXPECT_EQ(*hit, 3 * 32 - 4);
}

// Two requests hit the same cached blocks in the same steps, each equal to its cold run;
// a prompt shorter than one block never hits.
TEST(PrefixCache, ConcurrentRequestsShareBlocks) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  const int64_t V = m.cfg.vocab_size;
  const int P = 32;
  auto a = test::random_tokens(160, 7, V);
  auto r = ModelRunner::create(m.cfg, *m.w, limits_for(P, 16));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->start_sequence(0).ok());
  feed(**r, 0, a, 0);
  (*r)->end_sequence(0);
  std::vector<std::vector<int32_t>> b(2);
  b[0] = test::random_tokens(150, 8, V);
  b[1] = test::random_tokens(170, 9, V);
  std::copy_n(a.begin(), 100, b[0].begin());
  std::copy_n(a.begin(), 130, b[1].begin());
  std::vector<int64_t> start(2), pos(2);
  for (int i = 0; i < 2; ++i) {
    auto s = (*r)->start_sequence_cached(i + 1, b[i].data(), static_cast<int64_t>(b[i].size()), false, "");
    ASSERT_TRUE(s.ok());
    start[i] = pos[i] = *s;
  }
  EXPECT_EQ(start[0], 92);
  EXPECT_EQ(start[1], 124);
  std::vector<std::vector<float>> got(2);
  for (int i = 0; i < 2; ++i) got[i].assign(b[i].size() * V, 0.0f);
  std::vector<float> step(static_cast<size_t>(2 * kChunk * V));
  while (pos[0] < 150 || pos[1] < 170) {
    std::vector<StepRequest> reqs;
    for (int i = 0; i < 2; ++i) {
      const int64_t n = static_cast<int64_t>(b[i].size());
      if (pos[i] >= n) continue;
      reqs.push_back({i + 1, pos[i], static_cast<int32_t>(std::min<int64_t>(kChunk, n - pos[i])), n, b[i].data() + pos[i]});
    }
    ASSERT_TRUE((*r)->forward(reqs, step.data(), nullptr).ok());
    int64_t row = 0;
    for (const StepRequest& q : reqs) {
      std::copy_n(step.begin() + row * V, q.n * V, got[q.seq - 1].begin() + q.p0 * V);
      pos[q.seq - 1] += q.n;
      row += q.n;
    }
  }
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(rows_equal_from(got[i], cold(m, P, b[i]), start[i], V)) << "request " << i;
  std::vector<int32_t> short_prompt(a.begin(), a.begin() + 31);
  auto s = (*r)->start_sequence_cached(3, short_prompt.data(), 31, false, "");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, 0);
}

// A small pool: registering and new requests evict least recently used blocks nobody
// holds; a running request's shared blocks stay alive (and correct) even when the index
// lets them go.
TEST(PrefixCache, EvictionUnderPressureKeepsBlocksInUse) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  const int64_t V = m.cfg.vocab_size;
  const int P = 32;
  auto r = ModelRunner::create(m.cfg, *m.w, limits_for(P, 6, /*cache_blocks=*/10));
  ASSERT_TRUE(r.ok()) << r.message();
  ModelRunner& R = **r;
  auto a = test::random_tokens(128, 10, V);  // 4 blocks
  ASSERT_TRUE(R.start_sequence(0).ok());
  feed(R, 0, a, 0);
  R.end_sequence(0);
  EXPECT_EQ(R.prefix_entries(), 4);
  EXPECT_EQ(R.free_blocks(), 10);  // 6 free + 4 held only by the cache
  // X hits 3 blocks of A and keeps them while it runs.
  auto x = test::random_tokens(140, 11, V);
  std::copy_n(a.begin(), 100, x.begin());
  auto sx = R.start_sequence_cached(1, x.data(), 140, false, "");
  ASSERT_TRUE(sx.ok());
  EXPECT_EQ(*sx, 92);
  // Y (a different prompt of 7 blocks) needs more than the 6 free blocks: the cache gives
  // up A's block 3 (unused); registering Y's blocks evicts index entries, never X's blocks.
  auto y = test::random_tokens(200, 12, V);
  ASSERT_TRUE(R.start_sequence(2).ok());
  const auto y_hit = feed(R, 2, y, 0);
  EXPECT_TRUE(rows_equal_from(y_hit, cold(m, P, y), 0, V));
  R.end_sequence(2);
  EXPECT_EQ(R.free_blocks(), 7);  // all but X's 3 shared blocks
  // X grows into blocks Y's cached entries gave back and equals its cold run.
  const auto x_hit = feed(R, 1, x, *sx);
  EXPECT_TRUE(rows_equal_from(x_hit, cold(m, P, x), *sx, V));
  EXPECT_LE(R.prefix_entries(), 6);
}

// Two running sequences register the same first block: one inserts it, the other chains
// onto it and holds it. With the index full and the inserter gone, the holder's next block
// cannot evict its parent (it stays uncached instead of linking under a dead or reused
// entry), and a later prompt still hits the first block with cold-run results. Rows may not
// start before a hit's start.
TEST(PrefixCache, ChainedEntryIsHeldWhileASequenceBuildsOnIt) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  const int64_t V = m.cfg.vocab_size;
  const int P = 32;
  auto r = ModelRunner::create(m.cfg, *m.w, limits_for(P, /*prefix_blocks=*/1));
  ASSERT_TRUE(r.ok()) << r.message();
  ModelRunner& R = **r;
  auto a = test::random_tokens(100, 40, V), c = test::random_tokens(40, 41, V);
  std::copy_n(a.begin(), 32, c.begin());
  ASSERT_TRUE(R.start_sequence(0).ok());
  ASSERT_TRUE(R.start_sequence(1).ok());
  std::vector<float> step(static_cast<size_t>(2 * kChunk * V));
  const StepRequest first[2] = {{0, 0, 40, 40, c.data()}, {1, 0, 40, 100, a.data()}};
  ASSERT_FALSE(R.forward({first, 2}, step.data(), nullptr).ok());  // 40 rows > max_chunk: rejected
  for (int64_t p0 = 0; p0 < 40; p0 += kChunk) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(kChunk, 40 - p0));
    const StepRequest q[2] = {{0, p0, n, 40, c.data() + p0}, {1, p0, n, 100, a.data() + p0}};
    ASSERT_TRUE(R.forward({q, 2}, step.data(), nullptr).ok());
    R.register_prefix(0, c.data(), 40, false);  // inserts block 0
    R.register_prefix(1, a.data(), 100, false);  // finds it and holds it
  }
  EXPECT_EQ(R.prefix_entries(), 1);
  R.end_sequence(0);
  for (int64_t p0 = 40; p0 < 100; p0 += kChunk) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(kChunk, 100 - p0));
    const StepRequest q{1, p0, n, 100, a.data() + p0};
    ASSERT_TRUE(R.forward({&q, 1}, step.data(), nullptr).ok());
    R.register_prefix(1, a.data(), 100, false);  // index full, parent held: block 1 uncached
  }
  EXPECT_EQ(R.prefix_entries(), 1);
  auto b = test::random_tokens(80, 42, V);
  std::copy_n(a.begin(), 50, b.begin());
  auto sb = R.start_sequence_cached(2, b.data(), 80, false, "");
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(*sb, 28);
  const StepRequest early{2, 27, 1, 80, b.data() + 27};
  EXPECT_NE(R.forward({&early, 1}, step.data(), nullptr).message().find("p0 must be in [28, 28]"), std::string::npos);
  const auto hit = feed(R, 2, b, *sb);
  EXPECT_TRUE(rows_equal_from(hit, cold(m, P, b), *sb, V));
}

TEST(PrefixCacheIndex, MatchInsertEvict) {
  PrefixCache c(4, 3);
  const int32_t t[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const int32_t b0 = c.insert(-1, t, 8, 100, false, "");
  const int32_t b1 = c.insert(b0, t + 4, 8, 101, false, "");
  EXPECT_EQ(c.find(-1, t, 8, ""), b0);
  EXPECT_EQ(c.find(-1, t, 7, ""), -1);       // another Wc: a different block
  EXPECT_EQ(c.find(b1, t + 4, 8, ""), -1);   // another parent
  const int32_t r0 = PrefixCache::root(0);
  EXPECT_EQ(r0, -1);
  EXPECT_EQ(c.match(r0, t, 12, 8, false, ""), (std::vector<int32_t>{b0, b1}));
  EXPECT_EQ(c.cached_blocks(r0, t, 12, 8, false, ""), 2);
  EXPECT_EQ(c.match(r0, t, 7, 8, false, ""), (std::vector<int32_t>{b0}));  // block 1 is not complete
  EXPECT_TRUE(c.match(r0, t, 12, 8, true, "").empty());                   // no MTP rows
  // Another rank's root sees none of rank 0's blocks, and keeps its own.
  EXPECT_EQ(c.cached_blocks(PrefixCache::root(1), t, 12, 8, false, ""), 0);
  EXPECT_EQ(c.find(PrefixCache::root(1), t, 8, ""), -1);
  // Leaves go first: b0 has a child.
  auto ev = c.evict([](int32_t) { return true; });
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->page, 101);
  EXPECT_FALSE(c.evict([](int32_t page) { return page != 100; }).has_value());
  EXPECT_EQ(c.size(), 1);
  // A held entry stays; evictable_count sees through chains.
  const int32_t c1 = c.insert(b0, t + 4, 8, 102, false, "");
  const int32_t c2 = c.insert(c1, t + 8, 8, 103, false, "");
  EXPECT_EQ(c.evictable_count([](int32_t) { return true; }), 3);
  c.hold(c1);
  EXPECT_EQ(c.evictable_count([](int32_t) { return true; }), 1);  // c2 only: c1 and its parent b0 stay
  ASSERT_TRUE(c.evict([](int32_t) { return true; }).has_value());  // c2
  EXPECT_FALSE(c.evict([](int32_t) { return true; }).has_value());
  c.release(c1);
  EXPECT_EQ(c.evictable_count([](int32_t) { return true; }), 2);
  (void)c2;
  ASSERT_TRUE(c.evict([](int32_t) { return true; }).has_value());  // c1
  const int32_t on1 = c.insert(PrefixCache::root(1), t, 8, 104, false, "");
  EXPECT_EQ(c.find(PrefixCache::root(1), t, 8, ""), on1);
  EXPECT_EQ(c.find(r0, t, 8, ""), b0);
  EXPECT_EQ(c.match(PrefixCache::root(1), t, 12, 8, false, ""), (std::vector<int32_t>{on1}));
}

// Tenant isolation: chains of different salts share no entry; the same salt shares its chain.
TEST(PrefixCacheIndex, SaltsNeverShareBlocks) {
  PrefixCache c(4, 8);
  const int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int32_t r0 = PrefixCache::root(0);
  const int32_t a0 = c.insert(r0, t, 8, 100, false, "tenant a");
  const int32_t a1 = c.insert(a0, t + 4, 8, 101, false, "tenant a");
  EXPECT_EQ(c.match(r0, t, 8, 8, false, "tenant a"), (std::vector<int32_t>{a0, a1}));  // the same salt hits
  EXPECT_EQ(c.cached_blocks(r0, t, 8, 8, false, "tenant a"), 2);
  for (const char* other : {"", "tenant b", "tenant a ", "tenant", "Tenant a"}) {
    EXPECT_EQ(c.cached_blocks(r0, t, 8, 8, false, other), 0) << other;
    EXPECT_TRUE(c.match(r0, t, 8, 8, false, other).empty()) << other;
    EXPECT_EQ(c.find(r0, t, 8, other), -1) << other;
  }
  // The same tokens under another salt get their own entries; each salt finds its own.
  const int32_t b0 = c.insert(r0, t, 8, 102, false, "tenant b");
  const int32_t s0 = c.insert(r0, t, 8, 103, false, "");
  EXPECT_NE(b0, a0);
  EXPECT_EQ(c.find(r0, t, 8, "tenant b"), b0);
  EXPECT_EQ(c.find(r0, t, 8, ""), s0);
  EXPECT_EQ(c.find(r0, t, 8, "tenant a"), a0);
  EXPECT_EQ(c.match(r0, t, 8, 8, false, "tenant b"), (std::vector<int32_t>{b0}));
  // Another rank's root with the same salt is still another chain.
  EXPECT_EQ(c.cached_blocks(PrefixCache::root(1), t, 8, 8, false, "tenant a"), 0);
  // An evicted salted entry leaves no salt behind: its slot is reused for another namespace.
  c.hold(a0);
  c.hold(s0);
  ASSERT_TRUE(c.evict([](int32_t page) { return page == 102; }).has_value());
  const int32_t b0_again = c.insert(r0, t, 8, 104, false, "tenant c");
  EXPECT_EQ(c.find(r0, t, 8, "tenant b"), -1);
  EXPECT_EQ(c.find(r0, t, 8, "tenant c"), b0_again);
}

}  // namespace
}  // namespace dsv4
