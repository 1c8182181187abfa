// kv_path: engine vs reference at every T in [1, kCapacity] with 1 and 2
// threads, tiny and tiny2 dims, FP8 and BF16 storage; stage by stage (wkv,
// then kv_norm + RoPE + fp8sim_64 on the nope dims only); rows bit-identical
// across T and thread counts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kv_path/kv_path.h"
#include "kernels/linear/linear.h"
#include "kernels/rmsnorm/rmsnorm.h"
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

constexpr float kEps = 1e-6f;

using test::pool2;
using test::run;

struct Dims {
  const char* name;
  KvPathParams p;
  bool yarn;
};
const Dims kDims[] = {{"tiny", {128, 80, 16, kEps}, false}, {"tiny2", {256, 192, 64, kEps}, true}};

TEST(KvPath, EveryTMatchesRef) {
  for (const Dims& d : kDims)
    for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kBF16}) {
      const KvPathParams& p = d.p;
      SCOPED_TRACE(::testing::Message() << d.name << (f == WeightFormat::kFP8 ? " fp8" : " bf16"));
      const auto wkv = test::random_weight(f, p.head_dim, p.hidden, 1);
      const auto kv_norm = test::random_norm_weight(p.head_dim, 2);
      RopeParams rp;
      rp.rope_dim = p.rope_dim;
      rp.theta = d.yarn ? 160000.0 : 10000.0;
      rp.yarn = d.yarn;
      const auto inv = rope_inv_freq(rp);
      const KvPathWeights w{wkv.view(), kv_norm.data(), inv.data()};
      std::mt19937 rng(3);
      const auto a = test::random_bf16(rng, kCapacity * p.hidden, 1.0f);
      std::vector<int64_t> pos(kCapacity);
      for (int64_t t = 0; t < kCapacity; ++t) pos[t] = 5 * t + 1;
      std::vector<bf16> want(kCapacity * p.head_dim);
      kv_path_ref(p, w, a.data(), kCapacity, pos.data(), want.data());

      // Stage by stage at T = kCapacity.
      {
        const int64_t T = kCapacity;
        std::vector<bf16> kv(T * p.head_dim), scratch(kv_path_scratch_elems(p, T), test::nan_value<bf16>());
        const KvPathIO io{T, a.data(), pos.data(), kv.data(), scratch.data()};
        kv_path(0, p, w, io, 0, 1);
        kv_path(1, p, w, io, 0, 1);
        std::vector<bf16> s(T * p.head_dim);
        linear_ref(w.wkv, a.data(), T, s.data(), w.wkv.quantized());
        EXPECT_TRUE(test::all_close(kv.data(), s.data(), s.size(), test::kBf16Out));
        // Tail on the engine's projection: norm (lane order: kBf16Out), RoPE, fp8sim on nope only.
        std::vector<bf16> normed(T * p.head_dim);
        rmsnorm(kv.data(), w.kv_norm, normed.data(), T, p.head_dim, kEps, 0, 1);
        rope_ref(w.inv_freq, p.rope_dim, normed.data(), T, 1, p.head_dim, pos.data(), false);
        kv_path(2, p, w, io, 0, 1);
        for (int64_t t = 0; t < T; ++t) {
          const bf16* g = kv.data() + t * p.head_dim;
          std::vector<bf16> nope(normed.begin() + t * p.head_dim, normed.begin() + t * p.head_dim + p.nope_dim());
          fp8sim_row(nope.data(), p.nope_dim(), 64);
          for (int i = 0; i < p.nope_dim(); ++i) ASSERT_EQ(g[i].bits, nope[i].bits) << "t=" << t << " i=" << i;
          for (int i = p.nope_dim(); i < p.head_dim; ++i)
            ASSERT_EQ(g[i].bits, normed[t * p.head_dim + i].bits) << "rope dim " << i << " touched by fp8sim";
          // fp8sim output is on the e4m3 grid: a second pass changes nothing.
          std::vector<bf16> again(g, g + p.nope_dim());
          fp8sim_row(again.data(), p.nope_dim(), 64);
          for (int i = 0; i < p.nope_dim(); ++i) ASSERT_EQ(again[i].bits, g[i].bits);
        }
        EXPECT_TRUE(test::all_close(kv.data(), want.data(), kv.size(), test::kQuantized));
      }

      RowBuffer<bf16> kv(kCapacity, p.head_dim);
      std::vector<bf16> scratch(kv_path_scratch_elems(p, kCapacity)), full;
      for (int nthreads : {1, 2})
        for (int T = kCapacity; T >= 1; --T) {
          kv.poison(T);
          std::fill(scratch.begin(), scratch.end(), test::nan_value<bf16>());
          const KvPathIO io{T, a.data(), pos.data(), kv.data(), scratch.data()};
          for (int ph = 0; ph < kKvPathPhases; ++ph)
            run(nthreads, [&](int tid, int n) { kv_path(ph, p, w, io, tid, n); });
          ASSERT_TRUE(kv.sentinel_intact(T));
          if (full.empty()) full.assign(kv.v.begin(), kv.v.end());
          ASSERT_TRUE(test::all_close(kv.data(), full.data(), T * p.head_dim, test::kExact)) << "T=" << T;
        }
      EXPECT_TRUE(test::all_close(full.data(), want.data(), want.size(), test::kQuantized));
    }
}

}  // namespace
}  // namespace dsv4::kernels
