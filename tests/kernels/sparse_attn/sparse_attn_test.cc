// sparse_attn: engine vs reference at every T (mixed list lengths up to 200,
// empty entries, all-empty blocks, window rings), row independence, and
// hand-computed Level-A cases: uniform logits over lists of 73 and 130 entries,
// the sink joining once, a two-block case written out step by step, and a
// constructed case where a single-block (global max) evaluation differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "numeric/quant.h"
#include "support/poison.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

struct Preset {
  const char* name;
  int H, Dh, W, Dr;
};
constexpr Preset kTiny{"tiny", 4, 80, 8, 16};      // model.md §14.1
constexpr Preset kTiny2{"tiny2", 4, 192, 16, 64};  // model.md §14.1a
// Heads that leave a partial pass at every thread split, dims that end off a 16-wide vector.
constexpr Preset kOdd{"odd", 7, 72, 8, 8};

// Packed copy (numeric/cache_rows.h) of bf16 KV rows [n, f.dim].
std::vector<uint8_t> pack_rows(const KvRowFormat& f, const std::vector<bf16>& v) {
  const int64_t n = static_cast<int64_t>(v.size()) / f.dim;
  std::vector<uint8_t> out(static_cast<size_t>(n * f.bytes()));
  for (int64_t i = 0; i < n; ++i) kv_pack_row(f, v.data() + i * f.dim, out.data() + i * f.bytes());
  return out;
}

constexpr int kSeqs = 3;
constexpr int kCmpRows = 160;  // compressed entries per test sequence
constexpr int kStride = 200;   // list capacity per row

bf16 rand_bf16(std::mt19937& rng, float sd) {
  return bf16::from_float(std::normal_distribution<float>(0.0f, sd)(rng));
}

// Keys, queries, sinks and lists for kCapacity rows; row t belongs to sequence t % kSeqs.
struct World {
  SparseAttnParams p;
  int ring;
  std::vector<bf16> q;                       // [cap, H, Dh]
  std::vector<std::vector<bf16>> win, cmp;   // per sequence: [ring, Dh], [kCmpRows, Dh]
  // Paged views with reversed page tables, so address arithmetic errors show.
  std::vector<int32_t> win_table, cmp_table;
  std::vector<PagedRows> win_rows, cmp_rows;
  // The same keys packed, as the engine reads them (the values are FP8 images).
  KvRowFormat format;
  std::vector<std::vector<uint8_t>> win_packed, cmp_packed;
  std::vector<PagedBytes> win_bytes, cmp_bytes;
  RowBuffer<int32_t> list{kCapacity, kStride};
  std::vector<int32_t> len, n_win;
  std::vector<float> sink;

  World(const Preset& pr, uint32_t seed) : ring(pr.W), format{pr.Dh, pr.Dr} {
    p.n_heads = pr.H;
    p.head_dim = pr.Dh;
    std::mt19937 rng(seed);
    q.resize(static_cast<size_t>(kCapacity) * pr.H * pr.Dh);
    for (auto& v : q) v = rand_bf16(rng, 2.5f);
    win.assign(kSeqs, std::vector<bf16>(static_cast<size_t>(ring) * pr.Dh));
    cmp.assign(kSeqs, std::vector<bf16>(static_cast<size_t>(kCmpRows) * pr.Dh));
    for (auto& s : win) for (auto& v : s) v = rand_bf16(rng, 1.0f);
    for (auto& s : cmp) for (auto& v : s) v = rand_bf16(rng, 1.0f);
    // Operands around attn_operand's 2^-56 (read as 0 below it) and bf16 subnormals: in some
    // query values, in whole key rows' first nope block (a tiny FP8 scale) and rope dims.
    const float tiny[] = {0x1p-50f, 0x1p-56f, 0x1p-57f, 0x1p-70f, 0x1p-130f};
    for (size_t i = 0; i < q.size(); i += 37) q[i] = bf16::from_float(tiny[i % 5] * (i % 2 ? -1.0f : 1.0f));
    for (auto& s : cmp)
      for (size_t r = 3; r < s.size() / pr.Dh; r += 7) {
        bf16* row = s.data() + r * pr.Dh;
        for (int d = 0; d < 64; ++d) row[d] = bf16::from_float(row[d].to_float() * tiny[r % 5]);
        for (int d = pr.Dh - pr.Dr; d < pr.Dh; d += 3) row[d] = bf16::from_float(tiny[(r + d) % 5]);
      }
    for (auto* set : {&win, &cmp})
      for (auto& s : *set) {
        for (size_t r = 0; r < s.size() / pr.Dh; ++r) fp8sim_row(s.data() + r * pr.Dh, format.nope());
        (set == &win ? win_packed : cmp_packed).push_back(pack_rows(format, s));
      }
    sink.resize(pr.H);
    for (auto& v : sink) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
    const int lengths[] = {1, 2, 8, 16, 63, 64, 65, 73, 100, 127, 128, 129, 130, 150, 200};
    len.resize(kCapacity);
    n_win.resize(kCapacity);
    const int32_t win_page = ring % 4 == 0 ? 4 : 1, cmp_page = 16;
    for (int32_t i = ring / win_page - 1; i >= 0; --i) win_table.push_back(i);
    for (int32_t i = kCmpRows / cmp_page - 1; i >= 0; --i) cmp_table.push_back(i);
    for (int t = 0; t < kCapacity; ++t) {
      win_rows.push_back({win[t % kSeqs].data(), win_table.data(), win_page, ring / win_page, pr.Dh});
      cmp_rows.push_back({cmp[t % kSeqs].data(), cmp_table.data(), cmp_page, 0, pr.Dh});
      win_bytes.push_back({win_packed[t % kSeqs].data(), win_table.data(), win_page, ring / win_page, format.bytes()});
      cmp_bytes.push_back({cmp_packed[t % kSeqs].data(), cmp_table.data(), cmp_page, 0, format.bytes()});
      len[t] = t < 15 ? lengths[t] : std::uniform_int_distribution<int>(1, kStride)(rng);
      n_win[t] = std::min(len[t], std::uniform_int_distribution<int>(1, pr.W)(rng));
      int32_t* row = list.row(t);
      const int32_t p0 = std::uniform_int_distribution<int32_t>(0, 300)(rng);
      std::bernoulli_distribution empty(0.2);
      for (int j = 0; j < len[t]; ++j) {
        if (j < n_win[t]) row[j] = (j == 0 || !empty(rng)) ? p0 + j : -1;
        else row[j] = empty(rng) ? -1 : std::uniform_int_distribution<int32_t>(0, kCmpRows - 1)(rng);
      }
      // Whole empty blocks: the middle block of row 14 (200 entries), the trailing
      // block of row 12 (130 entries: entries 128, 129).
      if (t == 14) for (int j = 64; j < 128; ++j) row[j] = -1;
      if (t == 12) row[128] = row[129] = -1;
    }
  }
  AttnList view() const { return {list.v.data(), kStride, len.data(), n_win.data()}; }
  AttnKeys keys() const { return {win_rows.data(), cmp_rows.data()}; }
  PackedAttnKeys packed() const { return {win_bytes.data(), cmp_bytes.data(), format}; }
};

void run_engine(ThreadPool* pool, const World& w, int64_t T, bf16* o, float* scratch) {
  const AttnList l = w.view();
  const PackedAttnKeys k = w.packed();
  if (pool) {
    pool->run([&](int tid, int n) { sparse_attn(w.p, w.q.data(), T, l, k, w.sink.data(), o, scratch, tid, n); });
  } else {
    sparse_attn(w.p, w.q.data(), T, l, k, w.sink.data(), o, scratch, 0, 1);
  }
}

class SparseAttnTest : public ::testing::TestWithParam<Preset> {};

TEST_P(SparseAttnTest, EngineMatchesRefEveryT) {
  const Preset pr = GetParam();
  const World w(pr, 1234u);
  const int64_t width = static_cast<int64_t>(pr.H) * pr.Dh;
  ThreadPool pool(2);
  std::vector<float> scratch(sparse_attn_scratch_floats(w.p, 2));
  RowBuffer<bf16> want(kCapacity, width), got(kCapacity, width);
  want.poison(kCapacity);
  sparse_attn_ref(w.p, w.q.data(), kCapacity, w.view(), w.keys(), w.sink.data(), want.data());
  for (int64_t T = 0; T <= kCapacity; ++T) {
    for (ThreadPool* pl : {static_cast<ThreadPool*>(nullptr), &pool}) {
      for (Isa isa : kAllIsas) {  // every ISA variant of the inner loops
        if (!isa_supported(isa)) continue;
        set_sparse_attn_isa(isa);
        got.poison(T);
        std::fill(scratch.begin(), scratch.end(), std::numeric_limits<float>::quiet_NaN());
        run_engine(pl, w, T, got.data(), scratch.data());
        ASSERT_TRUE(got.sentinel_intact(T)) << "T=" << T;
        ASSERT_TRUE(test::all_close(got.data(), want.data(), T * width, test::kExact, "o"))
            << pr.name << " T=" << T << " threads=" << (pl ? 2 : 1) << " isa " << isa_name(isa);
      }
    }
  }
  set_sparse_attn_isa(detect_isa());
  // The reference at a smaller T gives the same rows (its rows are independent too).
  RowBuffer<bf16> want5(kCapacity, width);
  want5.poison(5);
  sparse_attn_ref(w.p, w.q.data(), 5, w.view(), w.keys(), w.sink.data(), want5.data());
  EXPECT_TRUE(want5.sentinel_intact(5));
  EXPECT_EQ(std::memcmp(want5.data(), want.data(), 5 * width * sizeof(bf16)), 0);
}

TEST_P(SparseAttnTest, RowIndependence) {
  const Preset pr = GetParam();
  const World w(pr, 777u);
  const int64_t width = static_cast<int64_t>(pr.H) * pr.Dh;
  ThreadPool pool(2);
  std::vector<float> scratch(sparse_attn_scratch_floats(w.p, 2));
  RowBuffer<bf16> all(kCapacity, width);
  all.poison(kCapacity);
  run_engine(&pool, w, kCapacity, all.data(), scratch.data());
  for (int t = 0; t < kCapacity; ++t) {
    std::vector<bf16> one(width);
    const int32_t l = w.len[t], nw = w.n_win[t];
    const AttnList view{w.list.v.data() + t * kStride, kStride, &l, &nw};
    const PackedAttnKeys keys{&w.win_bytes[t], &w.cmp_bytes[t], w.format};
    sparse_attn(w.p, w.q.data() + t * width, 1, view, keys, w.sink.data(), one.data(),
                scratch.data(), 0, 1);
    ASSERT_EQ(std::memcmp(one.data(), all.row(t), width * sizeof(bf16)), 0) << "row " << t;
  }
}

// A dense tail (AttnList::n_dense, HCA without a list) reads the same keys as the
// explicit list 0, 1, …, n − 1 after the window part: same bits, engine and reference.
TEST_P(SparseAttnTest, DenseTailEqualsExplicitList) {
  const Preset pr = GetParam();
  const World w(pr, 99u);
  const int64_t width = static_cast<int64_t>(pr.H) * pr.Dh;
  RowBuffer<int32_t> explicit_list(kCapacity, kStride);
  std::vector<int32_t> len(kCapacity), win_len(kCapacity), dense(kCapacity);
  for (int t = 0; t < kCapacity; ++t) {
    win_len[t] = w.n_win[t];
    dense[t] = std::min(kCmpRows, kStride - w.n_win[t]) - t % 3;  // ends in every block position
    len[t] = win_len[t] + dense[t];
    std::copy_n(w.list.v.data() + t * kStride, w.n_win[t], explicit_list.row(t));
    for (int i = 0; i < dense[t]; ++i) explicit_list.row(t)[w.n_win[t] + i] = i;
  }
  const AttnList full{explicit_list.v.data(), kStride, len.data(), w.n_win.data()};
  const AttnList tail{w.list.v.data(), kStride, win_len.data(), w.n_win.data(), dense.data()};
  RowBuffer<bf16> want(kCapacity, width), ref_tail(kCapacity, width), got(kCapacity, width);
  sparse_attn_ref(w.p, w.q.data(), kCapacity, full, w.keys(), w.sink.data(), want.data());
  sparse_attn_ref(w.p, w.q.data(), kCapacity, tail, w.keys(), w.sink.data(), ref_tail.data());
  ThreadPool pool(2);
  std::vector<float> scratch(sparse_attn_scratch_floats(w.p, 2));
  const PackedAttnKeys k = w.packed();
  pool.run([&](int tid, int n) {
    sparse_attn(w.p, w.q.data(), kCapacity, tail, k, w.sink.data(), got.data(), scratch.data(), tid, n);
  });
  EXPECT_EQ(std::memcmp(ref_tail.data(), want.data(), kCapacity * width * sizeof(bf16)), 0);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), kCapacity * width * sizeof(bf16)), 0);
}

INSTANTIATE_TEST_SUITE_P(Presets, SparseAttnTest, ::testing::Values(kTiny, kTiny2, kOdd),
                         [](const auto& info) { return std::string(info.param.name); });

// --- hand-computed cases (one row, one head unless stated) ---

// Runs ref and engine (2 threads, every ISA variant) on one row; checks they agree bit for bit.
std::vector<bf16> attend_one(const SparseAttnParams& p, const std::vector<bf16>& q,
                             const std::vector<int32_t>& entries, int32_t n_win,
                             const std::vector<bf16>& win, int64_t ring,
                             const std::vector<bf16>& cmp, const std::vector<float>& sink) {
  const int32_t len = static_cast<int32_t>(entries.size());
  const AttnList l{entries.data(), len, &len, &n_win};
  const int32_t page0 = 0;
  const PagedRows wr{win.data(), &page0, static_cast<int32_t>(ring), 1, p.head_dim};
  const PagedRows cr{cmp.data(), &page0, 1 << 30, 0, p.head_dim};
  const AttnKeys k{&wr, &cr};
  // The engine reads the keys packed with every dim in bf16 (any value is exact).
  const KvRowFormat f{p.head_dim, p.head_dim};
  const auto win_packed = pack_rows(f, win), cmp_packed = pack_rows(f, cmp);
  const PagedBytes wb{win_packed.data(), &page0, static_cast<int32_t>(ring), 1, f.bytes()};
  const PagedBytes cb{cmp_packed.data(), &page0, 1 << 30, 0, f.bytes()};
  const PackedAttnKeys kp{&wb, &cb, f};
  const int64_t width = static_cast<int64_t>(p.n_heads) * p.head_dim;
  std::vector<bf16> want(width), got(width);
  sparse_attn_ref(p, q.data(), 1, l, k, sink.data(), want.data());
  std::vector<float> scratch(sparse_attn_scratch_floats(p, 2));
  ThreadPool pool(2);
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_sparse_attn_isa(isa);
    pool.run([&](int tid, int n) { sparse_attn(p, q.data(), 1, l, kp, sink.data(), got.data(), scratch.data(), tid, n); });
    EXPECT_EQ(std::memcmp(got.data(), want.data(), width * sizeof(bf16)), 0) << isa_name(isa);
  }
  set_sparse_attn_isa(detect_isa());
  return want;
}

// q = 0: every real logit is 0, so m = 0, p_j = 1, α = 1 after block 0, and
// o = bf16( f32( ΣK_j / f32(n_real + exp(sink)) ) ) with ΣK_j exact (small integers).
void uniform_case(int Dh, int n_list, const std::vector<int>& empty, float sink_value) {
  const SparseAttnParams p{1, Dh};
  const int ring = 8;
  std::vector<bf16> q(Dh, bf16::from_float(0.0f));
  std::vector<bf16> win(static_cast<size_t>(ring) * Dh), cmp(static_cast<size_t>(n_list) * Dh);
  for (int r = 0; r < ring; ++r)
    for (int d = 0; d < Dh; ++d) win[r * Dh + d] = bf16::from_float(static_cast<float>((r * 7 + d) % 11 - 5));
  for (int r = 0; r < n_list; ++r)
    for (int d = 0; d < Dh; ++d) cmp[r * Dh + d] = bf16::from_float(static_cast<float>((r * 3 + d * 5) % 13 - 6));
  // Window part: positions 20..27 (ring slots 4..7, 0..3); compressed part: entry j-8 -> row j-8.
  std::vector<int32_t> entries(n_list);
  for (int j = 0; j < n_list; ++j) entries[j] = j < ring ? 20 + j : j - ring;
  for (int j : empty) entries[j] = -1;
  std::vector<double> sum(Dh, 0.0);
  int n_real = 0;
  for (int j = 0; j < n_list; ++j) {
    if (entries[j] < 0) continue;
    ++n_real;
    const bf16* k = j < ring ? &win[((20 + j) % ring) * Dh] : &cmp[(j - ring) * Dh];
    for (int d = 0; d < Dh; ++d) sum[d] += k[d].to_float();
  }
  const float S = static_cast<float>(n_real) + std::exp(sink_value);
  const auto o = attend_one(p, q, entries, ring, win, ring, cmp, {sink_value});
  for (int d = 0; d < Dh; ++d)
    ASSERT_EQ(o[d].bits, bf16::from_float(static_cast<float>(sum[d]) / S).bits) << "d=" << d;
}

TEST(SparseAttnHand, Uniform73WithEmptyEntries) { uniform_case(80, 73, {3, 9, 40, 63, 64, 70}, 0.0f); }
TEST(SparseAttnHand, Uniform130TrailingEmptyBlock) {
  // Block 2 (entries 128, 129) is all empty; the sink joins once (S = 128 + e^1.5, not + 3·e^1.5).
  uniform_case(192, 130, {128, 129}, 1.5f);
}
TEST(SparseAttnHand, UniformLargeSink) { uniform_case(80, 65, {1}, 9.0f); }

// Two blocks written out: block 0 has 64 keys with logit 0 (K[0] = 0, q = c·e_0),
// block 1 has 9 keys with logits s_j = f32(f32(c·x_j)·σa) > 0.
struct TwoBlock {
  static constexpr int Dh = 80;
  std::vector<bf16> q, cmp;
  std::vector<int32_t> entries;
  std::vector<float> s1;  // block-1 logits
  float sink = 0.25f;
  TwoBlock() {
    std::mt19937 rng(5);
    q.assign(Dh, bf16::from_float(0.0f));
    q[0] = bf16::from_float(16.0f);
    cmp.resize(73 * Dh);
    for (int r = 0; r < 73; ++r)
      for (int d = 0; d < Dh; ++d) cmp[r * Dh + d] = rand_bf16(rng, 1.0f);
    for (int r = 0; r < 64; ++r) cmp[r * Dh] = bf16::from_float(0.0f);
    const float sa = attn_softmax_scale(Dh);
    for (int r = 64; r < 73; ++r) {
      cmp[r * Dh] = bf16::from_float(0.5f + 0.25f * static_cast<float>(r - 64));
      s1.push_back(f32mul(f32mul(16.0f, cmp[r * Dh].to_float()), sa));
    }
    entries.resize(73);
    for (int j = 0; j < 73; ++j) entries[j] = j;  // n_win = 0: all compressed entries
  }
  static float f32mul(float a, float b) { return a * b; }
};

TEST(SparseAttnHand, TwoBlocksStepByStep) {
  const TwoBlock c;
  constexpr int Dh = TwoBlock::Dh;
  // Block 0: m = 0, p = 1, S = 64, acc = ΣK in pair order (1, 0, 3, 2, ...).
  std::vector<float> acc(Dh, 0.0f);
  for (int e = 0; e < 64; ++e)
    for (int d = 0; d < Dh; ++d) acc[d] = acc[d] + 1.0f * c.cmp[(e ^ 1) * Dh + d].to_float();
  float S = 64.0f;
  // Block 1.
  float m1 = 0.0f;
  for (float s : c.s1) m1 = s > m1 ? s : m1;
  const float alpha = attn_exp(0.0f - m1);
  std::vector<float> pj;
  float lanes[16] = {};  // Σp: entry j in lane j % 16 (9 entries: one each), then attn_sum16
  for (float s : c.s1) {
    pj.push_back(attn_exp(s - m1));
    lanes[pj.size() - 1] = pj.back();
  }
  const float psum = attn_sum16(lanes);
  S = S * alpha + psum;
  // u from 0 over the entries in pairs, the odd one first (1, 0, 3, 2, ..., 7, 6, 8), then added.
  for (int d = 0; d < Dh; ++d) {
    float u = 0.0f;
    for (int e = 0; e < 9; ++e) {
      const int j = e == 8 ? 8 : e ^ 1;
      u = u + round_bf16(pj[j]) * c.cmp[(64 + j) * Dh + d].to_float();
    }
    acc[d] = acc[d] * alpha + u;
  }
  S = S + std::exp(c.sink - m1);
  const auto o = attend_one({1, Dh}, c.q, c.entries, 0, c.cmp, 1, c.cmp, {c.sink});
  for (int d = 0; d < Dh; ++d) ASSERT_EQ(o[d].bits, bf16::from_float(acc[d] / S).bits) << "d=" << d;
}

// The engine's summation order (sparse_attn.h), pinned where it decides the result: dims
// (logits) and entries (P·V) in pairs, the odd one first. Values 2^24, 0, 1, −2^24 sum to 1
// in that order ((0 + 2^24) + (−2^24 + 1)) and to 0 ascending ((2^24 + 1) rounds to 2^24).
TEST(SparseAttnHand, PairOrder) {
  const float big = 16777216.0f;
  const float v[4] = {big, 0.0f, 1.0f, -big};
  {  // Logits: one key K = v, q = 1: the dot is 1, s = 1·σa.
    constexpr int Dh = 4;
    std::vector<bf16> q(Dh, bf16::from_float(1.0f)), cmp(Dh);
    for (int d = 0; d < Dh; ++d) cmp[d] = bf16::from_float(v[d]);
    const auto o = attend_one({1, Dh}, q, {0}, 0, cmp, 1, cmp, {0.0f});
    const float s = 1.0f * attn_softmax_scale(Dh);
    const float S = 1.0f + std::exp(0.0f - s);
    for (int d = 0; d < Dh; ++d) ASSERT_EQ(o[d].bits, bf16::from_float(v[d] / S).bits) << "d=" << d;
  }
  {  // P·V: q = 0, four keys whose dim 0 holds v: p = 1, u[0] = 1, S = 4 + e^0.
    constexpr int Dh = 2;
    std::vector<bf16> q(Dh, bf16::from_float(0.0f)), cmp(4 * Dh, bf16::from_float(0.0f));
    for (int j = 0; j < 4; ++j) cmp[j * Dh] = bf16::from_float(v[j]);
    const auto o = attend_one({1, Dh}, q, {0, 1, 2, 3}, 0, cmp, 1, cmp, {0.0f});
    EXPECT_EQ(o[0].bits, bf16::from_float(1.0f / 5.0f).bits);
    EXPECT_EQ(o[1].bits, bf16::from_float(0.0f).bits);
  }
}

// Operands below 2^-56 read as 0 (attn_operand), on every variant: key dims of 2^-60 and 2^-130
// (a bf16 subnormal, which VDPBF16PS would read as 0 and fp32 code would not) give the same
// bits as key dims of 0.
TEST(SparseAttnHand, TinyOperandsReadAsZero) {
  constexpr int Dh = 4;
  std::vector<bf16> q(Dh, bf16::from_float(3.0f));
  std::vector<bf16> tiny = {bf16::from_float(1.0f), bf16::from_float(0x1p-60f), bf16::from_float(-2.0f),
                            bf16::from_float(0x1p-130f)};
  std::vector<bf16> zero = {tiny[0], bf16::from_float(0.0f), tiny[2], bf16::from_float(0.0f)};
  const auto a = attend_one({1, Dh}, q, {0}, 0, tiny, 1, tiny, {0.5f});
  const auto b = attend_one({1, Dh}, q, {0}, 0, zero, 1, zero, {0.5f});
  EXPECT_EQ(a[0].bits, b[0].bits);
  EXPECT_EQ(a[2].bits, b[2].bits);
  EXPECT_EQ(a[1].bits, bf16::from_float(0.0f).bits);
  EXPECT_EQ(a[3].bits, bf16::from_float(0.0f).bits);
}

// attn_exp: within 2 ulp of exp (correctly rounded from double) on [ln 2^-126, 0]; 0 below it.
TEST(SparseAttnExp, WithinTwoUlp) {
  const auto ulps = [](float a, float b) {
    const int64_t ia = std::bit_cast<int32_t>(a), ib = std::bit_cast<int32_t>(b);
    return ia > ib ? ia - ib : ib - ia;
  };
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits(0x80000000u, std::bit_cast<uint32_t>(attn_exp_const::kMin));
  int64_t worst = 0;
  for (int i = 0; i < 2000000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    worst = std::max(worst, ulps(attn_exp(x), want));
  }
  for (float x : {0.0f, -0.0f, -1e-30f, -0.5f, -1.0f, -87.0f, attn_exp_const::kMin})
    worst = std::max(worst, ulps(attn_exp(x), static_cast<float>(std::exp(static_cast<double>(x)))));
  EXPECT_LE(worst, 2);
  EXPECT_EQ(attn_exp(0.0f), 1.0f);
  EXPECT_EQ(attn_exp(std::nextafter(attn_exp_const::kMin, -100.0f)), 0.0f);
  EXPECT_EQ(attn_exp(-1000.0f), 0.0f);
  EXPECT_EQ(attn_exp(-std::numeric_limits<float>::infinity()), 0.0f);
}

TEST(SparseAttnHand, GlobalMaxSingleBlockDiffers) {
  // The same inputs evaluated as one block with the global maximum (Level B form):
  // block 0's probabilities become exp(−m1), rounded to bf16 before P·V, instead of 1
  // later scaled by α in fp32. The outputs differ in some elements.
  const TwoBlock c;
  constexpr int Dh = TwoBlock::Dh;
  float m = 0.0f;
  for (float s : c.s1) m = s > m ? s : m;
  std::vector<float> acc(Dh, 0.0f);
  float S = 0.0f;
  for (int j = 0; j < 73; ++j) {
    const float s = j < 64 ? 0.0f : c.s1[j - 64];
    const float pj = std::exp(s - m);
    S += pj;
    for (int d = 0; d < Dh; ++d) acc[d] = acc[d] + round_bf16(pj) * c.cmp[j * Dh + d].to_float();
  }
  S = S + std::exp(c.sink - m);
  const auto o = attend_one({1, Dh}, c.q, c.entries, 0, c.cmp, 1, c.cmp, {c.sink});
  int differ = 0;
  for (int d = 0; d < Dh; ++d) differ += o[d].bits != bf16::from_float(acc[d] / S).bits;
  EXPECT_GT(differ, 0);
  // Level A with the blocks in the other order (block of 9 first) differs as well:
  // the block layout of the list is part of Level A.
  std::vector<int32_t> swapped(73);
  for (int j = 0; j < 73; ++j) swapped[j] = j < 9 ? 64 + j : j - 9;
  const auto o2 = attend_one({1, Dh}, c.q, swapped, 0, c.cmp, 1, c.cmp, {c.sink});
  int differ2 = 0;
  for (int d = 0; d < Dh; ++d) differ2 += o2[d].bits != o[d].bits;
  EXPECT_GT(differ2, 0);
}

TEST(SparseAttnHand, EmptyEntriesAndOrderInsideABlock) {
  // Inside one block the entry order and interleaved empty entries change nothing
  // in exact arithmetic; with the fixed ascending order the result is also stable
  // under inserting empties (they contribute exactly 0).
  const TwoBlock c;
  constexpr int Dh = TwoBlock::Dh;
  std::vector<int32_t> a = {64, 65, 66, 67}, b = {64, -1, 65, -1, 66, 67, -1};
  const auto oa = attend_one({1, Dh}, c.q, a, 0, c.cmp, 1, c.cmp, {c.sink});
  const auto ob = attend_one({1, Dh}, c.q, b, 0, c.cmp, 1, c.cmp, {c.sink});
  EXPECT_EQ(std::memcmp(oa.data(), ob.data(), Dh * sizeof(bf16)), 0);
}

}  // namespace
}  // namespace dsv4::kernels
