// mtp_proj: engine vs reference at every T in [1, kCapacity] with 1 and 2 threads
// on tiny and tiny2 widths, FP8 and BF16 projections; stage by stage (enorm /
// hnorm, e_proj / h_proj, the bf16 sum Z_k = bf16(f32(ep + hp_k)) exactly); rows
// bit-identical across T and thread counts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/linear/linear.h"
#include "kernels/mtp_proj/mtp_proj.h"
#include "kernels/rmsnorm/rmsnorm.h"
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

TEST(MtpProj, EveryTMatchesRef) {
  for (int64_t D : {128, 256})
    for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kBF16}) {
      SCOPED_TRACE(::testing::Message() << "D=" << D << (f == WeightFormat::kFP8 ? " fp8" : " bf16"));
      const MtpProjParams p{512, D, 4, 1e-6f};
      const int64_t N = p.hc_mult;
      std::mt19937 rng(static_cast<uint32_t>(D));
      const auto table = test::random_bf16(rng, 512 * D, 1.0f);
      const auto enorm = test::random_norm_weight(D, 1), hnorm = test::random_norm_weight(D, 2);
      const auto e_proj = test::random_weight(f, D, D, 3), h_proj = test::random_weight(f, D, D, 4);
      const MtpProjWeights w{table.data(), enorm.data(), hnorm.data(), e_proj.view(), h_proj.view()};
      std::vector<int32_t> tok(kCapacity);
      for (auto& t : tok) t = std::uniform_int_distribution<int32_t>(0, 511)(rng);
      const auto X = test::random_bf16(rng, kCapacity * N * D, 2.0f);
      std::vector<bf16> want(kCapacity * N * D);
      mtp_proj_ref(p, w, tok.data(), X.data(), kCapacity, want.data());

      {  // Stage by stage at T = kCapacity, one thread (scratch layout of mtp_proj.h).
        const int64_t T = kCapacity;
        std::vector<bf16> Z(T * N * D), scratch(mtp_proj_scratch_elems(p, T), test::nan_value<bf16>());
        const MtpProjIO io{T, tok.data(), X.data(), Z.data(), scratch.data()};
        for (int ph = 0; ph < kMtpProjPhases; ++ph) mtp_proj(ph, p, w, io, 0, 1);
        const bf16* e = scratch.data();
        const bf16* h = e + 2 * T * D;
        const bf16* ep = h + 2 * T * N * D;
        const bf16* hp = ep + T * D;
        std::vector<bf16> s_e(T * D), s_h(T * N * D), s_ep(T * D), s_hp(T * N * D);
        for (int64_t t = 0; t < T; ++t) std::copy_n(&table[tok[t] * D], D, &s_e[t * D]);
        rmsnorm_ref(s_e.data(), w.enorm, s_e.data(), T, D, p.eps);
        EXPECT_TRUE(test::all_close(e, s_e.data(), T * D, test::kBf16Out));
        rmsnorm_ref(X.data(), w.hnorm, s_h.data(), T * N, D, p.eps);
        EXPECT_TRUE(test::all_close(h, s_h.data(), T * N * D, test::kBf16Out));
        linear_ref(w.e_proj, e, T, s_ep.data(), w.e_proj.quantized());
        EXPECT_TRUE(test::all_close(ep, s_ep.data(), T * D, test::kBf16Out));
        linear_ref(w.h_proj, h, T * N, s_hp.data(), w.h_proj.quantized());
        EXPECT_TRUE(test::all_close(hp, s_hp.data(), T * N * D, test::kBf16Out));
        for (int64_t t = 0; t < T; ++t)
          for (int64_t k = 0; k < N; ++k)
            for (int64_t d = 0; d < D; ++d) {
              const float sum = ep[t * D + d].to_float() + hp[(t * N + k) * D + d].to_float();
              ASSERT_EQ(Z[(t * N + k) * D + d].bits, bf16::from_float(sum).bits);
            }
        EXPECT_TRUE(test::all_close(Z.data(), want.data(), Z.size(), test::kQuantized));
      }

      RowBuffer<bf16> Z(kCapacity, N * D);
      std::vector<bf16> scratch(mtp_proj_scratch_elems(p, kCapacity)), full;
      for (int nthreads : {1, 2})
        for (int T = kCapacity; T >= 1; --T) {
          Z.poison(T);
          std::fill(scratch.begin(), scratch.end(), test::nan_value<bf16>());
          const MtpProjIO io{T, tok.data(), X.data(), Z.data(), scratch.data()};
          for (int ph = 0; ph < kMtpProjPhases; ++ph)
            run(nthreads, [&](int tid, int n) { mtp_proj(ph, p, w, io, tid, n); });
          ASSERT_TRUE(Z.sentinel_intact(T));
          if (full.empty()) full.assign(Z.v.begin(), Z.v.end());
          ASSERT_TRUE(test::all_close(Z.data(), full.data(), T * N * D, test::kExact)) << "T=" << T;
        }
    }
}

}  // namespace
}  // namespace dsv4::kernels
