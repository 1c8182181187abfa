// SwiGLU experts (model.md §9.2, §0.4.5 A12): the grouped engine (dispatch + in/up/act/down
// phases over all experts and the shared expert) against moe_expert_ref per route slot, at
// every T in [1, kCapacity] with 1 and 2 threads, released (routed FP4, shared FP8) and BF16
// weights, inputs by moe_experts_in or moe_experts_gather (some rows read in place); row independence; dispatch layout by hand (repeated hash id, expert range);
// the clamp by hand (swiglu_limit 1.0 tiny, 2.0 tiny2) and actq on both GEMM inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/math.h"
#include "base/thread_pool.h"
#include "kernels/moe_expert/moe_expert.h"
#include "numeric/quant.h"
#include "support/poison.h"
#include "support/quant_weights.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::OwnedWeight;

struct Preset {
  const char* name;
  MoeExpertParams p;
  int64_t E, K;
};
// §14.1 tiny: D 128, F 128, L 1.0; §14.1a tiny2: D 256, F 256, L 2.0; E 8, K 2.
const Preset kPresets[] = {{"tiny", {128, 128, 1.0f}, 8, 2}, {"tiny2", {256, 256, 2.0f}, 8, 2}};

struct OwnedExpert {
  OwnedWeight w1, w3, w2;
  ExpertWeights view() const { return {w1.view(), w3.view(), w2.view()}; }
};

OwnedExpert random_expert(WeightFormat f, const MoeExpertParams& p, uint32_t seed) {
  const int64_t D = p.hidden, F = p.moe_intermediate_size;
  return {test::random_weight(f, F, D, seed), test::random_weight(f, F, D, seed + 1),
          test::random_weight(f, D, F, seed + 2)};
}

// 64-byte aligned scratch.
struct Scratch {
  std::vector<uint64_t> v;
  int64_t bytes;
  explicit Scratch(int64_t b) : v(b / 8 + 16), bytes(b) {}
  void* data() {
    auto a = reinterpret_cast<uintptr_t>(v.data());
    return reinterpret_cast<void*>((a + 63) / 64 * 64);
  }
};

// Engine run of one MoE layer's experts on rows [0, T); returns the work view. gather: the
// inputs by moe_experts_gather from a per-row actq (the model's path: the shared expert and
// one-entry experts read it in place), else by moe_experts_in's run.
MoeWork run_engine(ThreadPool& pool, const bf16* f, const int32_t* ids, const float* rw, int64_t T,
                   const std::vector<ExpertWeights>& experts, const ExpertWeights& shared,
                   const MoeExpertParams& p, const MoeDispatchParams& d, Scratch& s, bool poison,
                   bool gather = false) {
  if (poison) std::memset(s.data(), 0xFF, s.bytes);  // NaN bf16, −1 int32
  MoeWork w = moe_expert_scratch_carve(p, d, s.data(), s.bytes);
  const int64_t D = p.hidden, F = p.moe_intermediate_size, K = d.num_experts_per_tok;
  const int64_t R = d.capacity * (K + 1);
  const bf16 sent = test::sentinel_value<bf16>();
  if (poison) std::fill(w.slot_entry + T * K, w.slot_entry + d.capacity * K, test::kSentinelI32);
  moe_dispatch_build(ids, T, d, &w);
  const int64_t used = w.n_entries + T;
  if (poison) {
    std::fill(w.x + used * D, w.x + R * D, sent);
    std::fill(w.g + used * F, w.g + R * F, sent);
    std::fill(w.u + used * F, w.u + R * F, sent);
  }
  std::vector<bf16> fq(static_cast<size_t>(T * D));
  if (gather) {
    for (int64_t t = 0; t < T; ++t) actq_dequant_row(f + t * D, D, &fq[t * D]);
    moe_experts_gather(f, fq.data(), experts.data(), shared, p, d, &w);
  } else {
    pool.run([&](int tid, int n) { moe_experts_in(f, experts.data(), shared, p, d, w, tid, n); });
  }
  if (T % 3 != 1) {
    pool.run([&](int tid, int n) { moe_experts_up(experts.data(), shared, p, d, w, tid, n); });
    pool.run([&](int tid, int n) { moe_experts_act(rw, experts.data(), shared, p, d, w, tid, n); });
  } else {  // by intermediate columns in whole actq blocks (the model's one run for both)
    pool.run([&](int tid, int n) {
      const Range c = split_aligned(F, 128, tid, n);
      moe_experts_up_act_cols(rw, experts.data(), shared, p, d, w, c.begin, c.end);
    });
  }
  if (T % 2 == 0) {
    pool.run([&](int tid, int n) { moe_experts_down(experts.data(), shared, p, d, w, tid, n); });
  } else {  // by hidden columns (the model's run with moe_combine_cols and hc_post), ragged units
    pool.run([&](int tid, int n) {
      const Range c = split_aligned(D, 48, tid, n);
      moe_experts_down_cols(experts.data(), shared, p, d, w, c.begin, c.end);
    });
  }
  if (poison) {
    for (int64_t i = used * D; i < R * D; ++i)
      EXPECT_EQ(w.x[i].bits, sent.bits) << "x row " << i / D;
    for (int64_t i = used * F; i < R * F; ++i) {
      EXPECT_EQ(w.g[i].bits, sent.bits) << "g row " << i / F;
      EXPECT_EQ(w.u[i].bits, sent.bits) << "u row " << i / F;
    }
    for (int64_t i = T * K; i < d.capacity * K; ++i) EXPECT_EQ(w.slot_entry[i], test::kSentinelI32);
  }
  return w;
}

struct Layer {
  std::vector<OwnedExpert> owned;
  OwnedExpert shared_owned;
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;
  test::RowBuffer<bf16> f;
  std::vector<int32_t> ids;
  std::vector<float> rw;
  Layer(const Preset& pr, WeightFormat routed, WeightFormat shared_f, uint32_t seed)
      : f(kCapacity, pr.p.hidden) {
    for (int64_t e = 0; e < pr.E; ++e) owned.push_back(random_expert(routed, pr.p, seed + 10 * e));
    shared_owned = random_expert(shared_f, pr.p, seed + 999);
    for (auto& o : owned) experts.push_back(o.view());
    shared = shared_owned.view();
    std::mt19937 rng(seed);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    for (auto& v : f.v) v = bf16::from_float(n01(rng));
    std::vector<int32_t> perm(pr.E);
    std::uniform_real_distribution<float> uw(0.05f, 1.5f);
    for (int64_t t = 0; t < kCapacity; ++t) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t k = 0; k < pr.K; ++k) {
        ids.push_back(perm[k]);
        rw.push_back(uw(rng));
      }
      if (t % 7 == 3) {  // hash row repeating its first id: one entry, the first slot's weight
        ids.back() = ids[t * pr.K];
        rw.back() = rw[t * pr.K];
      }
    }
  }
};

class ExpertPreset : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ExpertPreset, GroupedEngineMatchesReferenceAtEveryT) {
  const Preset& pr = kPresets[std::get<0>(GetParam())];
  const bool released = std::get<1>(GetParam()) == 0;
  const MoeExpertParams& p = pr.p;
  const int64_t D = p.hidden, K = pr.K;
  Layer L(pr, released ? WeightFormat::kFP4 : WeightFormat::kBF16,
          released ? WeightFormat::kFP8 : WeightFormat::kBF16, 100 + std::get<0>(GetParam()));
  const MoeDispatchParams d{K, 0, pr.E, kCapacity};

  // Reference per route slot (a repeated id: the expert once, with the first slot's weight).
  std::vector<bf16> want(kCapacity * K * D), want_shared(kCapacity * D);
  for (int64_t t = 0; t < kCapacity; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t s = t * K + k;
      moe_expert_ref(L.experts[L.ids[s]], p, L.f.row(t), 1, &L.rw[s], &want[s * D]);
    }
  moe_expert_ref(L.shared, p, L.f.data(), kCapacity, nullptr, want_shared.data());

  Scratch full_s(moe_expert_scratch_bytes(p, d));
  ThreadPool pool1(1);
  const MoeWork full = run_engine(pool1, L.f.data(), L.ids.data(), L.rw.data(), kCapacity,
                                  L.experts, L.shared, p, d, full_s, true);
  std::vector<bf16> got(kCapacity * K * D);
  for (int64_t s = 0; s < kCapacity * K; ++s)
    std::copy_n(full.x + full.slot_entry[s] * D, D, &got[s * D]);
  std::vector<bf16> got_shared(shared_out(full, p), shared_out(full, p) + kCapacity * D);
  ASSERT_TRUE(
      test::all_close(got.data(), want.data(), kCapacity * K * D, test::kQuantized, "routed"));
  ASSERT_TRUE(test::all_close(got_shared.data(), want_shared.data(), kCapacity * D,
                              test::kQuantized, "shared"));

  Scratch s(moe_expert_scratch_bytes(p, d));
  for (int nthreads : {1, 2, 3}) {
    ThreadPool pool(nthreads);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      const MoeWork w = run_engine(pool, L.f.data(), L.ids.data(), L.rw.data(), T, L.experts,
                                   L.shared, p, d, s, true, T % 4 >= 2);
      for (int64_t sl = 0; sl < T * K; ++sl)
        ASSERT_TRUE(
            test::all_close(w.x + w.slot_entry[sl] * D, &got[sl * D], D, test::kExact, "routed"))
            << "T " << T << " slot " << sl;
      ASSERT_TRUE(
          test::all_close(shared_out(w, p), got_shared.data(), T * D, test::kExact, "shared"))
          << T;
    }
  }
  // Each row alone, 2 threads.
  ThreadPool pool2(2);
  for (int64_t t = 0; t < kCapacity; ++t) {
    const MoeWork w = run_engine(pool2, L.f.row(t), &L.ids[t * K], &L.rw[t * K], 1, L.experts,
                                 L.shared, p, d, s, true, t % 2 == 1);
    for (int64_t k = 0; k < K; ++k)
      ASSERT_TRUE(test::all_close(w.x + w.slot_entry[k] * D, &got[(t * K + k) * D], D, test::kExact,
                                  "alone"))
          << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, ExpertPreset,
                         ::testing::Combine(::testing::Values(0, 1), ::testing::Values(0, 1)),
                         [](const auto& info) {
                           return std::string(kPresets[std::get<0>(info.param)].name) +
                                  (std::get<1>(info.param) == 0 ? "_fp4_fp8" : "_bf16");
                         });

TEST(MoeDispatch, LayoutByHand) {
  // K = 2, E = 4; rows: [3, 1], [1, 1] (repeated hash id), [0, 3].
  const std::vector<int32_t> ids{3, 1, 1, 1, 0, 3};
  const MoeExpertParams p{128, 128, 1.0f};
  {
    const MoeDispatchParams d{2, 0, 4, 3};
    Scratch s(moe_expert_scratch_bytes(p, d));
    MoeWork w = moe_expert_scratch_carve(p, d, s.data(), s.bytes);
    moe_dispatch_build(ids.data(), 3, d, &w);
    EXPECT_EQ(w.n_entries, 5);
    EXPECT_EQ(std::vector<int32_t>(w.expert_begin, w.expert_begin + 5),
              (std::vector<int32_t>{0, 1, 3, 3, 5}));
    EXPECT_EQ(std::vector<int32_t>(w.entry_slot, w.entry_slot + 5),
              (std::vector<int32_t>{4, 1, 2, 0, 5}));
    EXPECT_EQ(std::vector<int32_t>(w.slot_entry, w.slot_entry + 6),
              (std::vector<int32_t>{3, 1, 2, 2, 0, 4}));
  }
  {
    // Local experts 2..3 only (an expert-parallel rank): other slots get −1.
    const MoeDispatchParams d{2, 2, 2, 3};
    Scratch s(moe_expert_scratch_bytes(p, d));
    MoeWork w = moe_expert_scratch_carve(p, d, s.data(), s.bytes);
    moe_dispatch_build(ids.data(), 3, d, &w);
    EXPECT_EQ(w.n_entries, 2);
    EXPECT_EQ(std::vector<int32_t>(w.expert_begin, w.expert_begin + 3),
              (std::vector<int32_t>{0, 0, 2}));
    EXPECT_EQ(std::vector<int32_t>(w.entry_slot, w.entry_slot + 2), (std::vector<int32_t>{0, 5}));
    EXPECT_EQ(std::vector<int32_t>(w.slot_entry, w.slot_entry + 6),
              (std::vector<int32_t>{0, -1, -1, -1, -1, 1}));
  }
}

// Diagonal weight c·I stored in format f.
OwnedWeight diagonal(WeightFormat f, int64_t n, float c) {
  std::vector<float> m(n * n, 0.0f);
  for (int64_t i = 0; i < n; ++i) m[i * n + i] = c;
  return test::quantize_weight(f, n, n, m);
}

double silu_d(double g) { return g / (1.0 + std::exp(-g)); }

TEST(ExpertHand, ClampBothPresets) {
  // w1 = I, w3 = −2·I, w2 = I (BF16, exact): g = x, u = −2x, out = bf16(h).
  for (const Preset& pr : kPresets) {
    const MoeExpertParams& p = pr.p;
    const int64_t D = p.hidden;
    const double L = p.swiglu_limit;
    OwnedExpert e{diagonal(WeightFormat::kBF16, D, 1.0f), diagonal(WeightFormat::kBF16, D, -2.0f),
                  diagonal(WeightFormat::kBF16, D, 1.0f)};
    std::vector<bf16> x(D);
    const float picks[] = {-3.0f, -1.5f, -1.0f, -0.5f, -0.25f, 0.0f, 0.25f,
                           0.5f,  0.75f, 1.0f,  1.25f, 2.0f,   4.0f, 10.0f};
    for (int64_t i = 0; i < D; ++i)
      x[i] = bf16::from_float(i < 14 ? picks[i] : static_cast<float>(i % 32) / 8 - 2);
    for (float wk : {0.375f, -1.0f}) {  // −1: the shared expert (no route weight)
      const bool routed = wk > 0;
      std::vector<double> want(D);
      for (int64_t i = 0; i < D; ++i) {
        const double xv = x[i].to_float();
        const double g = std::min(xv, L);                     // upper clamp only
        const double u = std::min(std::max(-2 * xv, -L), L);  // both sides
        want[i] = silu_d(g) * u * (routed ? wk : 1.0);
      }
      std::vector<bf16> out_ref(D);
      moe_expert_ref(e.view(), p, x.data(), 1, routed ? &wk : nullptr, out_ref.data());
      // Engine: one row, routed to expert 0 (K = 1) or the shared expert.
      const MoeDispatchParams d{1, 0, 1, 1};
      Scratch s(moe_expert_scratch_bytes(p, d));
      ThreadPool pool(2);
      const int32_t id = routed ? 0 : 5;  // 5: not a local expert, only the shared one runs
      const std::vector<ExpertWeights> experts{e.view()};
      const MoeWork w = run_engine(pool, x.data(), &id, &wk, 1, experts, e.view(), p, d, s, true);
      const bf16* got = routed ? w.x : shared_out(w, p);
      std::vector<float> want_f(want.begin(), want.end());
      EXPECT_TRUE(test::all_close(out_ref.data(), want_f.data(), D, test::kBf16Out, "ref"));
      EXPECT_TRUE(test::all_close(got, want_f.data(), D, test::kBf16Out, "engine"));
      for (int64_t i = 0; i < D; ++i) EXPECT_EQ(got[i].bits, out_ref[i].bits) << i;
      const double wgt = routed ? wk : 1.0;
      // x = −3: g stays −3 (no lower clamp on g), u = 6 → L.
      EXPECT_NEAR(got[0].to_float(), silu_d(-3.0) * L * wgt,
                  1e-2 * std::fabs(silu_d(-3.0) * L * wgt));
      // x = 2: g = min(2, L), u = clamp(−4) = −L.
      EXPECT_NEAR(got[11].to_float(), silu_d(std::min(2.0, L)) * -L * wgt, 1e-2 * L);
    }
  }
}

TEST(ExpertHand, ActqOnBothInputs) {
  // FP8 identity weights (exact): g = u = actq(x); out = actq(bf16(h)) — per-128 blocks
  // (tiny2 has two blocks per row, one of them with a 64× larger range).
  const Preset& pr = kPresets[1];
  const MoeExpertParams& p = pr.p;
  const int64_t D = p.hidden;
  OwnedExpert e{diagonal(WeightFormat::kFP8, D, 1.0f), diagonal(WeightFormat::kFP8, D, 1.0f),
                diagonal(WeightFormat::kFP8, D, 1.0f)};
  std::mt19937 rng(2);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<bf16> x(D);
  for (int64_t i = 0; i < D; ++i) x[i] = bf16::from_float(n01(rng) * (i < 128 ? 0.03f : 2.0f));
  std::vector<bf16> xq(D), hb(D), want(D);
  actq_dequant_row(x.data(), D, xq.data());
  const float L = p.swiglu_limit, wk = 0.5f;
  for (int64_t i = 0; i < D; ++i) {
    const float v = xq[i].to_float();
    const float g = std::min(v, L), u = std::min(std::max(v, -L), L);
    const float silu = g / (1.0f + std::exp(-g));
    const float h = silu * u;
    hb[i] = bf16::from_float(wk * h);
  }
  actq_dequant_row(hb.data(), D, want.data());
  std::vector<bf16> out_ref(D);
  moe_expert_ref(e.view(), p, x.data(), 1, &wk, out_ref.data());
  const MoeDispatchParams d{1, 0, 1, 1};
  Scratch s(moe_expert_scratch_bytes(p, d));
  ThreadPool pool(1);
  const int32_t id = 0;
  const std::vector<ExpertWeights> experts{e.view()};
  const MoeWork w = run_engine(pool, x.data(), &id, &wk, 1, experts, e.view(), p, d, s, true);
  int changed = 0;
  for (int64_t i = 0; i < D; ++i) {
    EXPECT_EQ(out_ref[i].bits, want[i].bits) << i;
    EXPECT_EQ(w.x[i].bits, want[i].bits) << i;
    changed += want[i].bits != hb[i].bits;
  }
  EXPECT_GT(changed, 0);  // the w2-input actq did round something
}

}  // namespace
}  // namespace dsv4::kernels
