// lm_head: engine vs reference (kF32Sum) at every T in [1, kCapacity] with 1 and
// 2 threads on tiny and tiny2 widths; vocabulary shards (tp = 2, 4 and uneven
// ranges) give the same bits as the columns of the unsharded call.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/lm_head/lm_head.h"
#include "support/poison.h"
#include "support/threads.h"
#include "support/quant_weights.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

using test::pool2;
using test::run;

TEST(LmHead, EveryTMatchesRefAndShards) {
  const int64_t V = 512;
  for (int64_t D : {128, 256}) {
    SCOPED_TRACE(D);
    const auto head = test::random_weight(WeightFormat::kBF16, V, D, 1);
    std::mt19937 rng(2);
    const auto y = test::random_bf16(rng, kCapacity * D, 1.0f);
    std::vector<float> want(kCapacity * V);
    lm_head_ref({0, V, V}, head.view(), y.data(), kCapacity, want.data());
    std::vector<float> full(kCapacity * V);
    lm_head({0, V, V}, head.view(), y.data(), kCapacity, full.data(), 0, 1);
    ASSERT_TRUE(test::all_close(full.data(), want.data(), full.size(), test::kF32Sum));

    RowBuffer<float> logits(kCapacity, V);
    for (int nthreads : {1, 2})
      for (int T = 1; T <= kCapacity; ++T) {
        logits.poison(T);
        run(nthreads, [&](int tid, int n) { lm_head({0, V, V}, head.view(), y.data(), T, logits.data(), tid, n); });
        ASSERT_TRUE(logits.sentinel_intact(T));
        ASSERT_TRUE(test::all_close(logits.data(), full.data(), T * V, test::kExact)) << "T=" << T;
      }
    // Shards: [v0, v1) into a compact [T, v1 − v0] buffer, and into the full-width buffer.
    const std::pair<int64_t, int64_t> shards[] = {{0, 256}, {256, 512}, {128, 256}, {384, 512}, {3, 130}, {511, 512}};
    for (auto [v0, v1] : shards) {
      const int64_t w = v1 - v0;
      for (int nthreads : {1, 2}) {
        const int T = 13;
        RowBuffer<float> part(kCapacity, w);
        part.poison(T);
        run(nthreads, [&](int tid, int n) { lm_head({v0, v1, w}, head.view(), y.data(), T, part.data(), tid, n); });
        ASSERT_TRUE(part.sentinel_intact(T));
        for (int t = 0; t < T; ++t)
          for (int64_t j = 0; j < w; ++j) ASSERT_EQ(part.row(t)[j], full[t * V + v0 + j]) << v0 << " " << j;
        std::vector<float> wide(T * V, -1.0f);
        run(nthreads, [&](int tid, int n) { lm_head({v0, v1, V}, head.view(), y.data(), T, wide.data() + v0, tid, n); });
        for (int t = 0; t < T; ++t)
          for (int64_t v = 0; v < V; ++v)
            ASSERT_EQ(wide[t * V + v], v >= v0 && v < v1 ? full[t * V + v] : -1.0f);
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels
