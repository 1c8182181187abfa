// indexer: index queries and head weights (engine pipeline vs reference, every T,
// FP8 and BF16 wq_b), scores (bit-exact vs reference on the same queries, every T,
// row lists longer than a 64-entry tile), top-k (exact on the reference's scores,
// frequent ties), and hand-computed cases: ties → lower index, fewer candidates
// than k, n = 0, ±0, the fp32 weight scale σi, one score by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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

template <class Fn>
void run(int nthreads, Fn&& fn) {
  if (nthreads == 1) fn(0, 1);
  else pool2().run([&fn](int tid, int n) { fn(tid, n); });
}

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

// Index entries as the indexer compressor leaves them: Hadamard then fp4sim_32.
std::vector<bf16> index_cache(const IndexerParams& p, uint32_t seed) {
  std::mt19937 rng(seed);
  auto v = test::random_bf16(rng, kMaxEntries * p.head_dim, 1.0f);
  hadamard_ref(v.data(), v.data(), kMaxEntries, 1, p.head_dim);
  for (int i = 0; i < kMaxEntries; ++i) fp4sim_row(v.data() + i * p.head_dim, p.head_dim);
  return v;
}

struct ScoreInputs {
  std::vector<bf16> qi, wgt;
  std::vector<std::vector<bf16>> caches;
  const int32_t page0 = 0;  // one page holding the whole cache
  std::vector<PagedRows> rows;
  std::vector<int32_t> count;
  ScoreInputs(const Preset& pr, uint32_t seed) {
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
    for (int s = 0; s < kSeqs; ++s) caches.push_back(index_cache(p, seed + 10 + s));
    for (int t = 0; t < kCapacity; ++t) {
      rows.push_back({caches[t % kSeqs].data(), &page0, 1 << 30, 0, p.head_dim});
      count.push_back(static_cast<int32_t>(visible_entries(pos[t], 4)));
    }
  }
  IndexEntries entries() const { return {rows.data(), count.data()}; }
};

class IndexerScoreTest : public ::testing::TestWithParam<Preset> {};

TEST_P(IndexerScoreTest, ScoresExactEveryT) {
  const Preset pr = GetParam();
  const IndexerParams& p = pr.p;
  const ScoreInputs in(pr, 31);
  RowBuffer<bf16> want(kCapacity, kMaxEntries), got(kCapacity, kMaxEntries);
  want.poison(kCapacity);
  indexer_scores_ref(p, in.qi.data(), in.wgt.data(), in.entries(), kCapacity, want.data(), kMaxEntries);
  std::vector<float> scratch(indexer_scores_scratch_floats(p, 2));
  const bf16 marker = bf16::from_float(777.0f);
  for (int64_t T = 0; T <= kCapacity; ++T) {
    for (int nt : {1, 2}) {
      got.poison(T);
      for (int64_t t = 0; t < T; ++t)
        for (int i = in.count[t]; i < kMaxEntries; ++i) got.row(t)[i] = marker;
      std::fill(scratch.begin(), scratch.end(), std::numeric_limits<float>::quiet_NaN());
      run(nt, [&](int tid, int n) {
        indexer_scores(p, in.qi.data(), in.wgt.data(), in.entries(), T, got.data(), kMaxEntries,
                       scratch.data(), tid, n);
      });
      ASSERT_TRUE(got.sentinel_intact(T));
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(std::memcmp(got.row(t), want.row(t), in.count[t] * sizeof(bf16)), 0)
            << pr.name << " T=" << T << " threads=" << nt << " row " << t;
        for (int i = in.count[t]; i < kMaxEntries; ++i) ASSERT_EQ(got.row(t)[i], marker);
      }
    }
  }
}

TEST_P(IndexerScoreTest, TopkExactOnRefScoresEveryT) {
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
    RowBuffer<int32_t> want(kCapacity, p.topk), got(kCapacity, p.topk);
    RowBuffer<int32_t> want_n(kCapacity, 1), got_n(kCapacity, 1);
    want.poison(kCapacity);
    want_n.poison(kCapacity);
    indexer_topk_ref(p, sc->data(), kMaxEntries, in.count.data(), kCapacity, want.data(), want_n.data());
    for (int64_t T = 0; T <= kCapacity; ++T) {
      for (int nt : {1, 2}) {
        got.poison(T);
        got_n.poison(T);
        run(nt, [&](int tid, int n) {
          indexer_topk(p, sc->data(), kMaxEntries, in.count.data(), T, got.data(), got_n.data(), tid, n);
        });
        ASSERT_TRUE(got.sentinel_intact(T));
        ASSERT_TRUE(got_n.sentinel_intact(T));
        ASSERT_EQ(std::memcmp(got.data(), want.data(), T * p.topk * sizeof(int32_t)), 0) << "T=" << T;
        ASSERT_EQ(std::memcmp(got_n.data(), want_n.data(), T * sizeof(int32_t)), 0) << "T=" << T;
      }
    }
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
  std::vector<int32_t> want(k, 99), got(k, 99);
  int32_t want_n = -5, got_n = -5;
  indexer_topk_ref(p, sb.data(), count + 1, &count, 1, want.data(), &want_n);
  indexer_topk(p, sb.data(), count + 1, &count, 1, got.data(), &got_n, 0, 1);
  EXPECT_EQ(got, want);
  EXPECT_EQ(got_n, want_n);
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
  std::vector<bf16> want(2), got(2);
  indexer_scores_ref(p, qi.data(), wgt.data(), e, 1, want.data(), 2);
  std::vector<float> scratch(indexer_scores_scratch_floats(p, 1));
  indexer_scores(p, qi.data(), wgt.data(), e, 1, got.data(), 2, scratch.data(), 0, 1);
  const float w0 = round_bf16(0.3f);
  EXPECT_EQ(want[0].to_float(), round_bf16(3.0f * w0));
  EXPECT_EQ(want[1].to_float(), round_bf16(round_bf16(0.5f * w0) + 10.0f));
  EXPECT_EQ(got[0].bits, want[0].bits);
  EXPECT_EQ(got[1].bits, want[1].bits);
}

}  // namespace
}  // namespace dsv4::kernels
