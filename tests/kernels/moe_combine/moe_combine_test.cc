// MoE combine (model.md §9.3, §0.4.5 A13): the engine reading a permuted output layout through
// route_row against the reference on the per-slot layout, at every T in [1, kCapacity] with 1
// and 2 threads (bit-identical: same adds in the same order); hand cases where the ascending-id
// order, the shared-last rule and a repeated hash id change the result.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "base/math.h"
#include "base/thread_pool.h"
#include "kernels/moe_combine/moe_combine.h"
#include "support/poison.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

struct Case {
  const char* name;
  int64_t D, E, K;
};
// tiny (§14.1), tiny2 (§14.1a), and Flash's E/K with a D that clips the last 256-chunk.
const Case kCases[] = {{"tiny", 128, 8, 2}, {"tiny2", 256, 8, 2}, {"flashk", 384, 256, 6}};

class CombineCase : public ::testing::TestWithParam<int> {};

TEST_P(CombineCase, EngineMatchesReferenceAtEveryT) {
  const Case c = kCases[GetParam()];
  const MoeCombineParams p{c.D, c.K};
  std::mt19937 rng(13 + GetParam());
  std::normal_distribution<float> n01(0.0f, 1.0f);
  const int64_t S = kCapacity * c.K;
  // ids: distinct per row, except every 5th row repeats its first id (a hash row).
  std::vector<int32_t> ids(S), perm(c.E);
  for (int64_t t = 0; t < kCapacity; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t k = 0; k < c.K; ++k) ids[t * c.K + k] = perm[k];
    if (t % 5 == 0) ids[t * c.K + c.K - 1] = ids[t * c.K];
  }
  // Per-slot outputs (a repeated id's slots carry the same output, as the expert ran once).
  std::vector<bf16> per_slot(S * c.D);
  for (auto& v : per_slot) v = bf16::from_float(n01(rng));
  for (int64_t t = 0; t < kCapacity; t += 5)
    std::copy_n(&per_slot[t * c.K * c.D], c.D, &per_slot[(t * c.K + c.K - 1) * c.D]);
  std::vector<bf16> shared(kCapacity * c.D);
  for (auto& v : shared) v = bf16::from_float(n01(rng));
  // The same outputs in a permuted layout; route_row maps each slot to its row.
  std::vector<int32_t> route_row(S);
  std::iota(route_row.begin(), route_row.end(), 0);
  std::shuffle(route_row.begin(), route_row.end(), rng);
  std::vector<bf16> permuted(S * c.D);
  for (int64_t s = 0; s < S; ++s)
    std::copy_n(&per_slot[s * c.D], c.D, &permuted[route_row[s] * c.D]);
  for (int64_t t = 0; t < kCapacity; t += 5)  // a repeated id's second slot is not read
    std::fill_n(&permuted[route_row[t * c.K + c.K - 1] * c.D], c.D, test::nan_value<bf16>());

  RowBuffer<bf16> want(kCapacity, c.D), m(kCapacity, c.D);
  moe_combine_ref(per_slot.data(), nullptr, ids.data(), shared.data(), p, kCapacity, want.data());
  RowBuffer<bf16> want_perm(kCapacity, c.D);
  moe_combine_ref(permuted.data(), route_row.data(), ids.data(), shared.data(), p, kCapacity,
                  want_perm.data());
  ASSERT_TRUE(
      test::all_close(want_perm.data(), want.data(), kCapacity * c.D, test::kExact, "ref layouts"));
  for (int nthreads : {1, 2, 3}) {
    ThreadPool pool(nthreads);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      for (int layout = 0; layout < 2; ++layout) {
        m.poison(T);
        const bf16* src = layout ? permuted.data() : per_slot.data();
        const int32_t* rr = layout ? route_row.data() : nullptr;
        pool.run([&](int tid, int n) {
          moe_combine(src, rr, ids.data(), shared.data(), p, T, m.data(), tid, n);
        });
        ASSERT_TRUE(test::all_close(m.data(), want.data(), T * c.D, test::kExact, "m")) << T;
        ASSERT_TRUE(m.sentinel_intact(T)) << T;
        m.poison(T);  // by hidden columns (the model's fused MoE-down run), ragged units
        pool.run([&](int tid, int n) {
          const Range cols = split_aligned(c.D, 48, tid, n);
          moe_combine_cols(src, rr, ids.data(), shared.data(), p, T, cols.begin, cols.end, m.data());
        });
        ASSERT_TRUE(test::all_close(m.data(), want.data(), T * c.D, test::kExact, "m by columns")) << T;
        ASSERT_TRUE(m.sentinel_intact(T)) << T;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CombineCase, ::testing::Values(0, 1, 2),
                         [](const auto& info) { return kCases[info.param].name; });

TEST(CombineHand, AscendingIdSharedLastRepeatedOnce) {
  // K = 3, D = 1. Slot order differs from id order; the values make the order visible in bf16.
  const MoeCombineParams p{1, 3};
  const float big = 16777216.0f;  // 2^24: big + 1 rounds back to big in fp32
  // row 0: ids [2, 0, 1] → outputs [1, 2^24, −2^24], shared 0.
  //        ascending id: ((2^24 − 2^24) + 1) + 0 = 1  (slot order would give 0)
  // row 1: ids [0, 1, 4] → outputs [2^24, 1, 0], shared −2^24.
  //        ((2^24 + 1) + 0) − 2^24 = 0                (shared first would give 1)
  // row 2: ids [3, 3, 1] → outputs [1.5, 1.5, 0.25], shared 0: expert 3 once → 1.75
  const std::vector<int32_t> ids{2, 0, 1, 0, 1, 4, 3, 3, 1};
  std::vector<bf16> out;
  for (float v : {1.0f, big, -big, big, 1.0f, 0.0f, 1.5f, 1.5f, 0.25f})
    out.push_back(bf16::from_float(v));
  std::vector<bf16> shared{bf16::from_float(0.0f), bf16::from_float(-big), bf16::from_float(0.0f)};
  for (bool engine : {false, true}) {
    std::vector<bf16> m(3);
    if (engine)
      moe_combine(out.data(), nullptr, ids.data(), shared.data(), p, 3, m.data(), 0, 1);
    else
      moe_combine_ref(out.data(), nullptr, ids.data(), shared.data(), p, 3, m.data());
    EXPECT_EQ(m[0].to_float(), 1.0f) << engine;
    EXPECT_EQ(m[1].to_float(), 0.0f) << engine;
    EXPECT_EQ(m[2].to_float(), 1.75f) << engine;
  }
}

}  // namespace
}  // namespace dsv4::kernels
