// MoE router: engine scores against the reference at every T in [1, kCapacity] (1 and 2
// threads), engine routing fed the reference's scores (ids and weights exact), top-K ties,
// hash routing with int32/int64 tables and a repeated id, sqrt(softplus) by hand
// (model.md §9.1, §0.4.5 A11).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/moe_gate/moe_gate.h"
#include "support/poison.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

constexpr int64_t kVocab = 512;
// model.md §14.1 / §14.1a: D 128 / 256, E 8, K 2, routed_scaling_factor 1.5.
const MoeGateParams kTiny{128, 8, 2, 1.5f};
const MoeGateParams kTiny2{256, 8, 2, 1.5f};

struct GateData {
  MoeGateParams p;
  std::vector<bf16> weight;
  std::vector<float> bias;
  std::vector<int64_t> table64;
  std::vector<int32_t> table32;
  std::vector<int32_t> tokens;
  RowBuffer<bf16> f;
  GateData(const MoeGateParams& params, uint32_t seed) : p(params), f(kCapacity, params.hidden) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    const float sd = 1.0f / std::sqrt(static_cast<float>(p.hidden));
    for (int64_t i = 0; i < p.n_routed_experts * p.hidden; ++i)
      weight.push_back(bf16::from_float(sd * n01(rng)));
    for (int64_t e = 0; e < p.n_routed_experts; ++e) bias.push_back(0.1f * n01(rng));
    for (auto& v : f.v) v = bf16::from_float(n01(rng));
    // Distinct ids per row (§14.2).
    std::vector<int32_t> perm(p.n_routed_experts);
    for (int64_t v = 0; v < kVocab; ++v) {
      for (int64_t e = 0; e < p.n_routed_experts; ++e) perm[e] = static_cast<int32_t>(e);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t k = 0; k < p.num_experts_per_tok; ++k) {
        table64.push_back(perm[k]);
        table32.push_back(perm[k]);
      }
    }
    std::uniform_int_distribution<int32_t> tok(0, kVocab - 1);
    for (int t = 0; t < kCapacity; ++t) tokens.push_back(tok(rng));
  }
  LinearWeight lw() const {
    return {WeightFormat::kBF16, p.n_routed_experts, p.hidden, weight.data(), nullptr};
  }
  MoeGateWeights score_layer() const { return {lw(), bias.data(), {}}; }
  MoeGateWeights hash_layer(bool i64) const {
    return {lw(),
            nullptr,
            {i64 ? static_cast<const void*>(table64.data()) : table32.data(), i64, kVocab}};
  }
};

class GatePreset : public ::testing::TestWithParam<int> {
 protected:
  const MoeGateParams& params() const { return GetParam() == 0 ? kTiny : kTiny2; }
};

TEST_P(GatePreset, ScoresMatchReferenceAtEveryT) {
  GateData d(params(), 5 + GetParam());
  const int64_t E = d.p.n_routed_experts;
  const MoeGateWeights w = d.score_layer();
  RowBuffer<float> ref(kCapacity, E), full(kCapacity, E), s(kCapacity, E);
  moe_gate_scores_ref(d.f.data(), w, d.p, kCapacity, ref.data());
  {
    full.poison(kCapacity);
    ThreadPool pool(1);
    pool.run([&](int tid, int n) {
      moe_gate_scores(d.f.data(), w, d.p, kCapacity, full.data(), tid, n);
    });
  }
  ASSERT_TRUE(test::all_close(full.data(), ref.data(), kCapacity * E, test::kF32Sum, "scores"));
  for (int nthreads : {1, 2}) {
    ThreadPool pool(nthreads);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      s.poison(T);
      pool.run([&](int tid, int n) { moe_gate_scores(d.f.data(), w, d.p, T, s.data(), tid, n); });
      ASSERT_TRUE(test::all_close(s.data(), full.data(), T * E, test::kExact, "scores")) << T;
      ASSERT_TRUE(s.sentinel_intact(T)) << T;
    }
  }
  ThreadPool pool(2);
  for (int64_t t = 0; t < kCapacity; ++t) {
    s.poison(1);
    pool.run([&](int tid, int n) { moe_gate_scores(d.f.row(t), w, d.p, 1, s.data(), tid, n); });
    ASSERT_TRUE(test::all_close(s.data(), full.row(t), E, test::kExact, "row alone")) << t;
  }
}

TEST_P(GatePreset, RouteFromReferenceScoresIsExact) {
  GateData d(params(), 7 + GetParam());
  const int64_t E = d.p.n_routed_experts, K = d.p.num_experts_per_tok;
  RowBuffer<float> scores(kCapacity, E);
  moe_gate_scores_ref(d.f.data(), d.score_layer(), d.p, kCapacity, scores.data());
  for (int layer = 0; layer < 3; ++layer) {  // score, hash int64, hash int32
    const MoeGateWeights w = layer == 0 ? d.score_layer() : d.hash_layer(layer == 1);
    RowBuffer<int32_t> ids_ref(kCapacity, K), ids(kCapacity, K);
    RowBuffer<float> wt_ref(kCapacity, K), wt(kCapacity, K);
    moe_gate_route_ref(scores.data(), w, d.tokens.data(), d.p, kCapacity, ids_ref.data(),
                       wt_ref.data());
    for (int nthreads : {1, 2}) {
      ThreadPool pool(nthreads);
      for (int64_t T = 1; T <= kCapacity; ++T) {
        ids.poison(T);
        wt.poison(T);
        pool.run([&](int tid, int n) {
          moe_gate_route(scores.data(), w, d.tokens.data(), d.p, T, ids.data(), wt.data(), tid, n);
        });
        for (int64_t i = 0; i < T * K; ++i)
          ASSERT_EQ(ids.v[i], ids_ref.v[i]) << "layer " << layer << " T " << T;
        ASSERT_TRUE(test::all_close(wt.data(), wt_ref.data(), T * K, test::kExact, "weights")) << T;
        ASSERT_TRUE(ids.sentinel_intact(T)) << T;
        ASSERT_TRUE(wt.sentinel_intact(T)) << T;
      }
    }
    for (int64_t t = 0; t < kCapacity; ++t) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += wt_ref.v[t * K + k];
      ASSERT_NEAR(sum, 1.5, 1e-5);  // normalized, times routed_scaling_factor
      if (layer > 0) {
        for (int64_t k = 0; k < K; ++k)
          ASSERT_EQ(ids_ref.v[t * K + k], d.table64[d.tokens[t] * K + k]);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, GatePreset, ::testing::Values(0, 1),
                         [](const auto& info) { return info.param == 0 ? "tiny" : "tiny2"; });

// Flash-sized selection (E 256, K 6) on keys with many exact ties: engine == reference.
TEST(GateTopK, ExactTiesGoToLowerIdFlashSize) {
  const MoeGateParams p{128, 256, 6, 2.5f};
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> level(0, 9);
  const int64_t T = 200;
  std::vector<float> scores(T * p.n_routed_experts), bias(p.n_routed_experts);
  for (auto& s : scores) s = 0.25f * static_cast<float>(level(rng));  // few distinct values
  for (auto& b : bias) b = 0.125f * static_cast<float>(level(rng) % 3);
  std::vector<bf16> wdummy(p.n_routed_experts * p.hidden);
  const MoeGateWeights w{{WeightFormat::kBF16, 256, 128, wdummy.data(), nullptr}, bias.data(), {}};
  std::vector<int32_t> ids_ref(T * 6), ids(T * 6);
  std::vector<float> wt_ref(T * 6), wt(T * 6);
  moe_gate_route_ref(scores.data(), w, nullptr, p, T, ids_ref.data(), wt_ref.data());
  moe_gate_route(scores.data(), w, nullptr, p, T, ids.data(), wt.data(), 0, 1);
  EXPECT_EQ(ids, ids_ref);
  for (int64_t i = 0; i < T * 6; ++i) EXPECT_EQ(wt[i], wt_ref[i]);
}

TEST(GateTopK, HandTies) {
  // keys = scores + bias = [1, 3, 3, 2, 3, 0.5]: top-3 = 1, 2, 4 (ties to the lower id);
  // top-4 adds 3; with all keys equal the first K ids in order.
  const std::vector<float> s{1, 2.5f, 3, 2, 3, 0.5f}, b{0, 0.5f, 0, 0, 0, 0};
  int32_t ids[4];
  moe_topk(s.data(), b.data(), 6, 3, ids);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], 4);
  moe_topk(s.data(), b.data(), 6, 4, ids);
  EXPECT_EQ(ids[3], 3);
  const std::vector<float> flat(6, 0.75f);
  moe_topk(flat.data(), nullptr, 6, 4, ids);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ids[k], k);
  // Bias decides the selection; the weights use the unbiased scores.
  const MoeGateParams p{128, 6, 2, 1.5f};
  std::vector<bf16> wdummy(6 * 128);
  const std::vector<float> s2{1, 2, 3, 6, 0.5f, 1}, b2{10, 0, 0, 0, 0, 0};
  const MoeGateWeights w{{WeightFormat::kBF16, 6, 128, wdummy.data(), nullptr}, b2.data(), {}};
  int32_t sel[2];
  float wt[2];
  moe_gate_route(s2.data(), w, nullptr, p, 1, sel, wt, 0, 1);
  EXPECT_EQ(sel[0], 0);
  EXPECT_EQ(sel[1], 3);
  EXPECT_EQ(wt[0], 1.0f / 7.0f * 1.5f);
  EXPECT_EQ(wt[1], 6.0f / 7.0f * 1.5f);
}

TEST(GateHash, TableLookupAndRepeatedId) {
  // V = 4, K = 2, E = 8. Row 1 repeats expert 5: both slots weigh s5 / (2·s5) · 1.5 = 0.75.
  const MoeGateParams p{128, 8, 2, 1.5f};
  const std::vector<int64_t> t64{0, 1, 5, 5, 3, 1, 7, 6};
  const std::vector<int32_t> t32(t64.begin(), t64.end());
  const std::vector<float> s{9, 6, 9, 2, 9, 4, 9, 9};  // the same scores for every row
  std::vector<float> scores;
  for (int t = 0; t < 3; ++t) scores.insert(scores.end(), s.begin(), s.end());
  const std::vector<int32_t> tokens{2, 1, 3};
  std::vector<bf16> wdummy(8 * 128);
  for (bool i64 : {true, false}) {
    const MoeGateWeights w{{WeightFormat::kBF16, 8, 128, wdummy.data(), nullptr},
                           nullptr,
                           {i64 ? static_cast<const void*>(t64.data()) : t32.data(), i64, 4}};
    for (bool engine : {false, true}) {
      std::vector<int32_t> ids(6);
      std::vector<float> wt(6);
      if (engine)
        moe_gate_route(scores.data(), w, tokens.data(), p, 3, ids.data(), wt.data(), 0, 1);
      else
        moe_gate_route_ref(scores.data(), w, tokens.data(), p, 3, ids.data(), wt.data());
      EXPECT_EQ(ids, (std::vector<int32_t>{3, 1, 5, 5, 7, 6}));  // table order, not score order
      EXPECT_EQ(wt[0], 2.0f / 8.0f * 1.5f);                      // s3 = 2, s1 = 6
      EXPECT_EQ(wt[1], 6.0f / 8.0f * 1.5f);
      EXPECT_EQ(wt[2], 0.75f);
      EXPECT_EQ(wt[3], 0.75f);
      EXPECT_EQ(wt[4], 9.0f / 18.0f * 1.5f);
      EXPECT_EQ(wt[5], 9.0f / 18.0f * 1.5f);
    }
  }
}

TEST(GateScores, SqrtSoftplusByHand) {
  // F32 one-hot gate rows: l_e = f[e]. softplus is the identity above 20.
  const MoeGateParams p{128, 6, 2, 1.5f};
  const std::vector<float> logits{-3.0f, 0.0f, 1.5f, 20.0f, 20.5f, 64.0f};
  std::vector<float> w(6 * 128, 0.0f);
  std::vector<bf16> f(128, bf16::from_float(0.0f));
  for (int e = 0; e < 6; ++e) {
    w[e * 128 + e] = 1.0f;
    f[e] = bf16::from_float(logits[e]);
  }
  const std::vector<float> bias(6, 0.0f);
  const MoeGateWeights gw{{WeightFormat::kF32, 6, 128, w.data(), nullptr}, bias.data(), {}};
  std::vector<float> s_ref(6), s(6);
  moe_gate_scores_ref(f.data(), gw, p, 1, s_ref.data());
  moe_gate_scores(f.data(), gw, p, 1, s.data(), 0, 1);
  for (int e = 0; e < 6; ++e) {
    const double z = logits[e];
    const double want = std::sqrt(z > 20 ? z : std::log1p(std::exp(z)));
    EXPECT_NEAR(s[e], want, 1e-6 * want) << e;
    EXPECT_EQ(s[e], s_ref[e]) << e;
  }
  EXPECT_EQ(s[4], std::sqrt(20.5f));
  EXPECT_EQ(s[5], 8.0f);
}

}  // namespace
}  // namespace dsv4::kernels
