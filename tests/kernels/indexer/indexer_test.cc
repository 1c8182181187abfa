// indexer: index queries and head weights (engine pipeline vs reference, every T,
// FP8 and BF16 wq_b); the engine's streaming selection over packed keys against the
// reference's full score rows + top-k (every T, 1, 2 and 3 threads, rows at every
// 64-entry tile boundary, random and tie-heavy keys); the reference top-k's order
// (frequent ties); hand-computed cases: ties → lower index, fewer candidates than k,
// n = 0, ±0, the fp32 weight scale σi, one score by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attn_select/attn_select.h"
#include "kernels/hadamard/hadamard.h"
#include "kernels/indexer/indexer.h"
#include "kernels/linear/linear.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"
#include "support/poison.h"
#include "support/threads.h"
#include "support/quant_weights.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

struct Preset {
  const char* name;
  IndexerParams p;
  int hidden, q_lora_rank;
};
// model.md §14.1 / §14.1a: index_n_heads, index_head_dim, qk_rope_head_dim, index_topk.
const Preset kTiny{"tiny", {2, 32, 16, 4}, 128, 128};
const Preset kTiny2{"tiny2", {4, 128, 64, 8}, 256, 256};

using test::pool2;
using test::run;

// Compress profile (compress_rope_theta with YaRN), as both presets use.
std::vector<float> compress_inv_freq(int rope_dim) {
  RopeParams r;
  r.rope_dim = rope_dim;
  r.theta = 160000.0;
  r.yarn = true;
  return rope_inv_freq(r);
}

std::vector<int64_t> random_positions(uint32_t seed, int64_t max_pos) {
  std::mt19937 rng(seed);
  std::vector<int64_t> pos(kCapacity);
  for (auto& v : pos) v = std::uniform_int_distribution<int64_t>(0, max_pos)(rng);
  pos[0] = 0;
  pos[1] = 3;
  return pos;
}

// --- queries and head weights ---

class IndexerQueryTest : public ::testing::TestWithParam<std::tuple<Preset, WeightFormat>> {};

TEST_P(IndexerQueryTest, EngineMatchesRefEveryT) {
  const auto [pr, fmt] = GetParam();
  const IndexerParams& p = pr.p;
  const int64_t qw = static_cast<int64_t>(p.n_heads) * p.head_dim;
  const auto wq_b_owned = test::random_weight(fmt, qw, pr.q_lora_rank, 21);
  const auto wp_owned = test::random_weight(WeightFormat::kBF16, p.n_heads, pr.hidden, 22);
  const LinearWeight wq_b = wq_b_owned.view(), wp = wp_owned.view();
  std::mt19937 rng(23);
  const auto qr = test::random_bf16(rng, kCapacity * pr.q_lora_rank, 1.0f);
  const auto a = test::random_bf16(rng, kCapacity * pr.hidden, 1.0f);
  const auto pos = random_positions(24, 5000);
  const auto inv = compress_inv_freq(p.rope_dim);

  RowBuffer<bf16> want_q(kCapacity, qw), want_w(kCapacity, p.n_heads);
  indexer_queries_ref(p, wq_b, qr.data(), kCapacity, inv.data(), pos.data(), want_q.data());
  indexer_weights_ref(p, wp, a.data(), kCapacity, want_w.data());
  std::vector<bf16> want_omega(kCapacity * p.n_heads);
  linear_ref(wp, a.data(), kCapacity, want_omega.data(), /*apply_actq=*/false);
  const float sigma = indexer_weight_scale(p);
  for (int64_t i = 0; i < kCapacity * p.n_heads; ++i)
    ASSERT_EQ(want_w.v[i].bits, bf16::from_float(want_omega[i].to_float() * sigma).bits);

  RowBuffer<bf16> qr_q(kCapacity, pr.q_lora_rank), qi(kCapacity, qw), omega(kCapacity, p.n_heads),
      wgt(kCapacity, p.n_heads);
  std::vector<bf16> first_q, first_w;  // engine at T = kCapacity, 1 thread
  for (int64_t T = kCapacity; T >= 0; --T) {
    for (int nt : {1, 2}) {
      for (auto* b : {&qi, &omega, &wgt}) b->poison(T);
      qr_q.poison(T);
      const bf16* qr_in = qr.data();
      if (wq_b.quantized()) {
        run(nt, [&](int tid, int n) { actq_rows(qr.data(), T, pr.q_lora_rank, qr_q.data(), tid, n); });
        qr_in = qr_q.data();
      }
      run(nt, [&](int tid, int n) {
        indexer_project(p, wq_b, wp, qr_in, a.data(), T, qi.data(), omega.data(), tid, n);
      });
      run(nt, [&](int tid, int n) {
        indexer_finish(p, inv.data(), pos.data(), T, qi.data(), omega.data(), wgt.data(), tid, n);
      });
      ASSERT_TRUE(qi.sentinel_intact(T));
      ASSERT_TRUE(omega.sentinel_intact(T));
      ASSERT_TRUE(wgt.sentinel_intact(T));
      ASSERT_TRUE(test::all_close(qi.data(), want_q.data(), T * qw, test::kQuantized, "qi")) << "T=" << T;
      // ω is a linear output (summation order free: one bf16 ulp); wgt from the
      // engine's own ω is exact.
      ASSERT_TRUE(test::all_close(omega.data(), want_omega.data(), T * p.n_heads, test::kBf16Out, "omega"))
          << "T=" << T;
      for (int64_t i = 0; i < T * p.n_heads; ++i)
        ASSERT_EQ(wgt.v[i].bits, bf16::from_float(omega.v[i].to_float() * sigma).bits) << i;
      // Row independence: every row bit-identical to the full call's.
      if (first_q.empty()) {
        first_q.assign(qi.v.begin(), qi.v.end());
        first_w.assign(wgt.v.begin(), wgt.v.end());
      }
      ASSERT_EQ(std::memcmp(qi.data(), first_q.data(), T * qw * sizeof(bf16)), 0) << "T=" << T;
      ASSERT_EQ(std::memcmp(wgt.data(), first_w.data(), T * p.n_heads * sizeof(bf16)), 0);
    }
  }
}

std::string query_name(const ::testing::TestParamInfo<std::tuple<Preset, WeightFormat>>& info) {
  return std::string(std::get<0>(info.param).name) +
         (std::get<1>(info.param) == WeightFormat::kFP8 ? "_fp8" : "_bf16");
}
INSTANTIATE_TEST_SUITE_P(Presets, IndexerQueryTest,
                         ::testing::Combine(::testing::Values(kTiny, kTiny2),
                                            ::testing::Values(WeightFormat::kFP8, WeightFormat::kBF16)),
                         query_name);

// --- scores and top-k ---

constexpr int kSeqs = 3;
constexpr int kMaxEntries = 150;  // per sequence; > two 64-entry tiles

// Index entries as the indexer compressor leaves them: Hadamard then fp4sim_32. With
// `distinct` > 0 only that many different keys repeat (exact score ties everywhere).
std::vector<bf16> index_cache(const IndexerParams& p, uint32_t seed, int distinct = 0) {
  std::mt19937 rng(seed);
  auto v = test::random_bf16(rng, kMaxEntries * p.head_dim, 1.0f);
  hadamard_ref(v.data(), v.data(), kMaxEntries, 1, p.head_dim);
  for (int i = 0; i < kMaxEntries; ++i) fp4sim_row(v.data() + i * p.head_dim, p.head_dim);
  if (distinct > 0)
    for (int i = distinct; i < kMaxEntries; ++i) {
      const int src = std::uniform_int_distribution<int>(0, distinct - 1)(rng);
      std::copy_n(v.begin() + src * p.head_dim, p.head_dim, v.begin() + i * p.head_dim);
    }
  return v;
}

// Packed copy of a bf16 index cache (numeric/cache_rows.h).
std::vector<uint8_t> pack_cache(const IndexerParams& p, const std::vector<bf16>& v) {
  const IndexKeyFormat f{p.head_dim};
  const int64_t n = static_cast<int64_t>(v.size()) / p.head_dim;
  std::vector<uint8_t> out(static_cast<size_t>(n * f.bytes()));
  for (int64_t i = 0; i < n; ++i) index_key_pack(f, v.data() + i * p.head_dim, out.data() + i * f.bytes());
  return out;
}

struct ScoreInputs {
  std::vector<bf16> qi, wgt;
  std::vector<std::vector<bf16>> caches;
  std::vector<std::vector<uint8_t>> packed;
  const int32_t page0 = 0;  // one page holding the whole cache
  std::vector<PagedRows> rows;
  std::vector<PagedBytes> packed_rows;
  std::vector<int32_t> count;
  IndexKeyFormat format;
  ScoreInputs(const Preset& pr, uint32_t seed, int distinct = 0) : format{pr.p.head_dim} {
    const IndexerParams& p = pr.p;
    const auto wq_b_owned = test::random_weight(WeightFormat::kFP8, static_cast<int64_t>(p.n_heads) * p.head_dim,
                                                pr.q_lora_rank, seed);
    const auto wp_owned = test::random_weight(WeightFormat::kBF16, p.n_heads, pr.hidden, seed + 1);
    std::mt19937 rng(seed + 2);
    const auto qr = test::random_bf16(rng, kCapacity * pr.q_lora_rank, 1.0f);
    const auto a = test::random_bf16(rng, kCapacity * pr.hidden, 1.0f);
    const auto pos = random_positions(seed + 3, 4 * kMaxEntries - 1);
    const auto inv = compress_inv_freq(p.rope_dim);
    qi.resize(kCapacity * p.n_heads * p.head_dim);
    wgt.resize(kCapacity * p.n_heads);
    indexer_queries_ref(p, wq_b_owned.view(), qr.data(), kCapacity, inv.data(), pos.data(), qi.data());
    indexer_weights_ref(p, wp_owned.view(), a.data(), kCapacity, wgt.data());
    for (int s = 0; s < kSeqs; ++s) caches.push_back(index_cache(p, seed + 10 + s, distinct));
    for (int s = 0; s < kSeqs; ++s) packed.push_back(pack_cache(p, caches[s]));
    // Rows 0..9 end at and around the 64-entry tile boundaries; the rest at random positions.
    const int32_t edges[] = {0, 1, 63, 64, 65, 127, 128, 129, 149, 2};
    for (int t = 0; t < kCapacity; ++t) {
      rows.push_back({caches[t % kSeqs].data(), &page0, 1 << 30, 0, p.head_dim});
      packed_rows.push_back({packed[t % kSeqs].data(), &page0, 1 << 30, 0, format.bytes()});
      count.push_back(t < 10 ? edges[t] : static_cast<int32_t>(visible_entries(pos[t], 4)));
    }
  }
  IndexEntries entries() const { return {rows.data(), count.data()}; }
  IndexKeys keys() const { return {packed_rows.data(), count.data(), format}; }
};

// Engine selection (phases 4 and 5) with n threads into picks / n_picks.
void select_engine(const IndexerParams& p, const ScoreInputs& in, int64_t T, int nthreads, int32_t* picks,
                   int32_t* n_picks) {
  std::vector<uint8_t> scratch(static_cast<size_t>(indexer_select_scratch_bytes(p, nthreads) + 64), 0xA5);
  void* base = scratch.data();
  size_t space = scratch.size();
  base = std::align(64, scratch.size() - 64, base, space);
  const IndexKeys keys = in.keys();
  auto phases = [&](ThreadPool* pool) {
    auto run_n = [&](auto&& fn) {
      if (pool) pool->run([&](int tid, int n) { fn(tid, n); });
      else fn(0, 1);
    };
    run_n([&](int tid, int n) { indexer_select(p, in.qi.data(), in.wgt.data(), keys, T, picks, n_picks, base, tid, n); });
    run_n([&](int tid, int n) { indexer_select_merge(p, keys, T, picks, n_picks, base, tid, n); });
  };
  if (nthreads == 1) {
    phases(nullptr);
  } else if (nthreads == 2) {
    phases(&pool2());
  } else {
    ThreadPool pool(nthreads);
    phases(&pool);
  }
}

class IndexerScoreTest : public ::testing::TestWithParam<Preset> {};

// The streaming selection equals the reference's full scores + top-k, whatever the
// thread split (rows split mid-tile between threads at most T), random and tie-heavy keys.
TEST_P(IndexerScoreTest, StreamingSelectEqualsFullSortEveryT) {
  const Preset pr = GetParam();
  const IndexerParams& p = pr.p;
  for (int distinct : {0, 3}) {
    const ScoreInputs in(pr, 31 + distinct, distinct);
    RowBuffer<bf16> scores(kCapacity, kMaxEntries);
    scores.poison(kCapacity);
    indexer_scores_ref(p, in.qi.data(), in.wgt.data(), in.entries(), kCapacity, scores.data(), kMaxEntries);
    RowBuffer<int32_t> want(kCapacity, p.topk), got(kCapacity, p.topk);
    RowBuffer<int32_t> want_n(kCapacity, 1), got_n(kCapacity, 1);
    want.poison(kCapacity);
    want_n.poison(kCapacity);
    indexer_topk_ref(p, scores.data(), kMaxEntries, in.count.data(), kCapacity, want.data(), want_n.data());
    int ties = 0;
    for (int t = 0; t < kCapacity; ++t)
      for (int j = 0; j + 1 < want_n.row(t)[0]; ++j)
        ties += scores.row(t)[want.row(t)[j]] == scores.row(t)[want.row(t)[j + 1]];
    if (distinct > 0) {
      EXPECT_GT(ties, kCapacity) << "the tie-heavy keys tie";
    }
    for (int64_t T = 0; T <= kCapacity; ++T) {
      for (int nt : {1, 2, 3}) {
        if (nt == 3 && T % 7 != 0 && T != kCapacity) continue;
        // Every ISA variant of the score tiles at the largest T (and at a few others).
        const bool all_isas = T == kCapacity || T % 16 == 1;
        for (Isa isa : kAllIsas) {
          if (!isa_supported(isa) || (!all_isas && isa != detect_isa())) continue;
          set_indexer_isa(isa);
          got.poison(T);
          got_n.poison(T);
          select_engine(p, in, T, nt, got.data(), got_n.data());
          ASSERT_TRUE(got.sentinel_intact(T));
          ASSERT_TRUE(got_n.sentinel_intact(T));
          for (int64_t t = 0; t < T; ++t) {
            ASSERT_EQ(got_n.row(t)[0], want_n.row(t)[0]) << pr.name << " T=" << T << " threads=" << nt << " row " << t;
            ASSERT_EQ(std::memcmp(got.row(t), want.row(t), p.topk * sizeof(int32_t)), 0)
                << pr.name << " distinct=" << distinct << " T=" << T << " threads=" << nt << " row " << t
                << " count " << in.count[t] << " isa " << isa_name(isa);
          }
        }
      }
    }
  }
  set_indexer_isa(detect_isa());
}

// The reference top-k's order on real and coarse (tie-heavy) score rows.
TEST_P(IndexerScoreTest, ReferenceTopkOrder) {
  const Preset pr = GetParam();
  const IndexerParams& p = pr.p;
  const ScoreInputs in(pr, 41);
  RowBuffer<bf16> scores(kCapacity, kMaxEntries);
  scores.poison(kCapacity);
  indexer_scores_ref(p, in.qi.data(), in.wgt.data(), in.entries(), kCapacity, scores.data(), kMaxEntries);
  // Second set of scores with ties everywhere: a few distinct values (incl. ±0).
  RowBuffer<bf16> coarse(kCapacity, kMaxEntries);
  std::mt19937 rng(42);
  const float levels[] = {-1.0f, -0.0f, 0.0f, 0.5f, 0.5f, 1.0f, 2.0f};
  for (auto& v : coarse.v) v = bf16::from_float(levels[std::uniform_int_distribution<int>(0, 6)(rng)]);
  int n_ties = 0;
  for (RowBuffer<bf16>* sc : {&scores, &coarse}) {
    RowBuffer<int32_t> want(kCapacity, p.topk), want_n(kCapacity, 1);
    want.poison(kCapacity);
    want_n.poison(kCapacity);
    indexer_topk_ref(p, sc->data(), kMaxEntries, in.count.data(), kCapacity, want.data(), want_n.data());
    // The selection is the k best in order, with ties resolved to the lower index.
    for (int t = 0; t < kCapacity; ++t) {
      const bf16* s = sc->row(t);
      const int32_t* pk = want.row(t);
      ASSERT_EQ(want_n.row(t)[0], std::min(p.topk, in.count[t]));
      for (int j = 0; j + 1 < want_n.row(t)[0]; ++j) {
        const float a = s[pk[j]].to_float(), b = s[pk[j + 1]].to_float();
        ASSERT_TRUE(a > b || (a == b && pk[j] < pk[j + 1])) << "row " << t << " j " << j;
        n_ties += a == b;
      }
      if (want_n.row(t)[0] > 0) {
        const int32_t last = pk[want_n.row(t)[0] - 1];
        for (int i = 0; i < in.count[t]; ++i) {
          if (std::find(pk, pk + want_n.row(t)[0], i) != pk + want_n.row(t)[0]) continue;
          const float v = s[i].to_float(), w = s[last].to_float();
          ASSERT_TRUE(v < w || (v == w && i > last)) << "row " << t << " unpicked " << i;
        }
      }
    }
  }
  EXPECT_GT(n_ties, 0);  // the tie rule was exercised
}

INSTANTIATE_TEST_SUITE_P(Presets, IndexerScoreTest, ::testing::Values(kTiny, kTiny2),
                         [](const auto& info) { return std::string(info.param.name); });

// --- hand-computed cases ---

std::vector<int32_t> topk_one(int k, const std::vector<float>& s, int32_t* n_out = nullptr) {
  IndexerParams p{1, 32, 16, k};
  std::vector<bf16> sb(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i) sb[i] = bf16::from_float(s[i]);
  const int32_t count = static_cast<int32_t>(s.size());
  std::vector<int32_t> want(k, 99);
  int32_t want_n = -5;
  indexer_topk_ref(p, sb.data(), count + 1, &count, 1, want.data(), &want_n);
  if (n_out) *n_out = want_n;
  return want;
}

TEST(IndexerHand, TopkTiesToLowerIndex) {
  EXPECT_EQ(topk_one(2, {1, 3, 3, 2, 3}), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(topk_one(4, {1, 3, 3, 2, 3}), (std::vector<int32_t>{1, 2, 4, 3}));
  EXPECT_EQ(topk_one(3, {0.0f, -0.0f, -1.0f, 0.0f, -2.0f}), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(topk_one(2, {-3, -1, -2, -1}), (std::vector<int32_t>{1, 3}));
  // Values that differ below bf16 precision are the same bf16 score: a tie.
  EXPECT_EQ(topk_one(1, {1.0f, 1.001f}), (std::vector<int32_t>{0}));
  EXPECT_EQ(topk_one(1, {1.0f, 1.01f}), (std::vector<int32_t>{1}));
}

TEST(IndexerHand, TopkFewerCandidatesThanK) {
  int32_t n = -1;
  EXPECT_EQ(topk_one(4, {0.5f, 2.0f, 1.0f}, &n), (std::vector<int32_t>{1, 2, 0, -1}));
  EXPECT_EQ(n, 3);
  EXPECT_EQ(topk_one(4, {}, &n), (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_EQ(n, 0);
  EXPECT_EQ(topk_one(4, {7, 7, 7, 7}, &n), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(n, 4);
}

TEST(IndexerHand, WeightScaleIsFp32NotBf16) {
  // tiny2: σi = 128^-0.5 · 4^-0.5, one fp32 rounding of the double product.
  const IndexerParams p = kTiny2.p;
  const float sigma = indexer_weight_scale(p);
  EXPECT_EQ(sigma, static_cast<float>(1.0 / (std::sqrt(128.0) * 2.0)));
  EXPECT_NE(sigma, round_bf16(sigma));
  EXPECT_EQ(indexer_weight_scale(kTiny.p), 0.125f);  // 32^-0.5 · 2^-0.5 = 1/8
  // wgt = bf16(f32(ω·σi)) for every ω of a grid; some differ from the bf16(σi) form.
  std::vector<bf16> omega(kCapacity * p.n_heads), wgt(kCapacity * p.n_heads);
  for (size_t i = 0; i < omega.size(); ++i) omega[i] = bf16::from_float(0.37f + 0.173f * static_cast<float>(i));
  std::vector<bf16> qi(kCapacity * p.n_heads * p.head_dim, bf16::from_float(0.0f));
  std::vector<int64_t> pos(kCapacity, 0);
  const auto inv = compress_inv_freq(p.rope_dim);
  indexer_finish(p, inv.data(), pos.data(), kCapacity, qi.data(), omega.data(), wgt.data(), 0, 1);
  int differ = 0;
  for (size_t i = 0; i < omega.size(); ++i) {
    ASSERT_EQ(wgt[i].bits, bf16::from_float(omega[i].to_float() * sigma).bits);
    differ += wgt[i].bits != bf16::from_float(omega[i].to_float() * round_bf16(sigma)).bits;
  }
  EXPECT_GT(differ, 0);
}

TEST(IndexerHand, OneScoreByHand) {
  // Hi = 2, Di = 32. Head 0 query 2·e0, head 1 query e1 + e2; entry J = (1.5, −1, 0.25, 0, …).
  // d_0 = 3, d_1 = −0.75 → relu 0; wgt = (0.3, 5) as bf16: t_0 = bf16(3·bf16(0.3)), t_1 = 0.
  const IndexerParams p{2, 32, 16, 4};
  std::vector<bf16> qi(2 * 32, bf16::from_float(0.0f)), J(2 * 32, bf16::from_float(0.0f));
  qi[0] = bf16::from_float(2.0f);
  qi[32 + 1] = qi[32 + 2] = bf16::from_float(1.0f);
  J[0] = bf16::from_float(1.5f);
  J[1] = bf16::from_float(-1.0f);
  J[2] = bf16::from_float(0.25f);
  // Second entry: d_0 = 0.5, d_1 = 2 → both heads count.
  J[32 + 0] = bf16::from_float(0.25f);
  J[32 + 1] = bf16::from_float(1.0f);
  J[32 + 2] = bf16::from_float(1.0f);
  const std::vector<bf16> wgt = {bf16::from_float(0.3f), bf16::from_float(5.0f)};
  const int32_t page0 = 0, count = 2;
  const PagedRows rows{J.data(), &page0, 1 << 30, 0, p.head_dim};
  const IndexEntries e{&rows, &count};
  std::vector<bf16> want(2);
  indexer_scores_ref(p, qi.data(), wgt.data(), e, 1, want.data(), 2);
  const float w0 = round_bf16(0.3f);
  EXPECT_EQ(want[0].to_float(), round_bf16(3.0f * w0));
  EXPECT_EQ(want[1].to_float(), round_bf16(round_bf16(0.5f * w0) + 10.0f));
  // The engine reads the same entries packed (they are fp4 images) and ranks entry 1 first.
  const IndexKeyFormat f{32};
  std::vector<uint8_t> packed(2 * f.bytes());
  for (int i = 0; i < 2; ++i) index_key_pack(f, J.data() + i * 32, packed.data() + i * f.bytes());
  const PagedBytes prow{packed.data(), &page0, 1 << 30, 0, f.bytes()};
  const IndexKeys keys{&prow, &count, f};
  std::vector<uint8_t> scratch(static_cast<size_t>(indexer_select_scratch_bytes(p, 1)));
  std::vector<int32_t> picks(p.topk, 99);
  int32_t n_picks = -1;
  indexer_select(p, qi.data(), wgt.data(), keys, 1, picks.data(), &n_picks, scratch.data(), 0, 1);
  indexer_select_merge(p, keys, 1, picks.data(), &n_picks, scratch.data(), 0, 1);
  EXPECT_EQ(n_picks, 2);
  EXPECT_EQ(picks, (std::vector<int32_t>{1, 0, -1, -1}));
}

}  // namespace
}  // namespace dsv4::kernels
