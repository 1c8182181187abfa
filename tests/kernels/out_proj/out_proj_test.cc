// out_proj: engine vs reference at every T in [1, kCapacity] with 1 and 2 threads
// on tiny, tiny2, two heads per group and o_lora_rank % 128 != 0 (plain tree);
// wo_a stored FP8 (no actq) or BF16; stage by stage (inverse RoPE exact, wo_a,
// wo_b); the wo_b result equals the runtime.md §6.7 chain of per-group fp32
// partials bit for bit; rows bit-identical across T and thread counts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/math.h"
#include "base/thread_pool.h"
#include "kernels/linear/linear.h"
#include "kernels/out_proj/out_proj.h"
#include "kernels/rope/rope.h"
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

struct Case {
  const char* name;
  OutProjParams p;
  WeightFormat wo_a, wo_b;
  bool yarn;
};
const Case kCases[] = {
    {"tiny", {4, 80, 16, 4, 128, 128}, WeightFormat::kFP8, WeightFormat::kFP8, false},
    {"tiny-bf16", {4, 80, 16, 4, 128, 128}, WeightFormat::kBF16, WeightFormat::kBF16, true},
    {"tiny2", {4, 192, 64, 4, 128, 256}, WeightFormat::kFP8, WeightFormat::kFP8, true},
    {"2-heads-per-group", {4, 80, 16, 2, 128, 128}, WeightFormat::kFP8, WeightFormat::kFP8, false},
    {"Ro64-plain-fp8", {4, 80, 16, 4, 64, 128}, WeightFormat::kFP8, WeightFormat::kFP8, false},
    {"Ro96-plain-bf16", {4, 80, 16, 4, 96, 128}, WeightFormat::kBF16, WeightFormat::kBF16, false},
};

TEST(OutProj, EveryTMatchesRef) {
  for (const Case& c : kCases) {
    const OutProjParams& p = c.p;
    SCOPED_TRACE(c.name);
    const int64_t hd = int64_t{p.n_heads} * p.head_dim, uw = p.u_width();
    const auto wo_a = test::random_weight(c.wo_a, uw, p.group_in(), 1);
    const auto wo_b = test::random_weight(c.wo_b, p.hidden, uw, 2);
    RopeParams rp;
    rp.rope_dim = p.rope_dim;
    rp.theta = c.yarn ? 160000.0 : 10000.0;
    rp.yarn = c.yarn;
    const auto inv = rope_inv_freq(rp);
    const OutProjWeights w{wo_a.view(), wo_b.view(), inv.data()};
    std::mt19937 rng(3);
    const auto o_in = test::random_bf16(rng, kCapacity * hd, 0.5f);
    std::vector<int64_t> pos(kCapacity);
    for (int64_t t = 0; t < kCapacity; ++t) pos[t] = 7 * t + 2;
    std::vector<bf16> o_ref(o_in), want(kCapacity * p.hidden);
    out_proj_ref(p, w, o_ref.data(), kCapacity, pos.data(), want.data());

    {  // Stage by stage at T = kCapacity, one thread.
      const int64_t T = kCapacity;
      std::vector<bf16> o(o_in), out(T * p.hidden), scratch(out_proj_scratch_elems(p, T), test::nan_value<bf16>());
      const OutProjIO io{T, o.data(), pos.data(), out.data(), scratch.data()};
      for (int ph = 0; ph < kOutProjPhases; ++ph) out_proj(ph, p, w, io, 0, 1);
      ASSERT_TRUE(test::all_close(o.data(), o_ref.data(), o.size(), test::kExact)) << "inverse RoPE";
      const bf16* u = scratch.data();
      const bf16* uq = u + T * uw;
      // wo_a: plain per-group loops (no actq) against the engine.
      std::vector<bf16> u_want(T * uw);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < uw; ++j) {
          const int64_t g = j / p.o_lora_rank;
          float acc = 0.0f;
          for (int64_t d = 0; d < p.group_in(); ++d)
            acc += weight_at(w.wo_a, j, d) * o[t * hd + g * p.group_in() + d].to_float();
          u_want[t * uw + j] = bf16::from_float(acc);
        }
      EXPECT_TRUE(test::all_close(u, u_want.data(), T * uw, test::kBf16Out));
      std::vector<bf16> out_want(T * p.hidden);
      linear_ref(w.wo_b, u, T, out_want.data(), w.wo_b.quantized());
      EXPECT_TRUE(test::all_close(out.data(), out_want.data(), out.size(), test::kBf16Out));
      EXPECT_TRUE(test::all_close(out.data(), want.data(), out.size(), test::kQuantized));
      // runtime.md §6.7: per-group partials π_g (fp32) chained in ascending g, or the
      // plain chain of 128-wide K blocks when Ro % 128 != 0.
      const bf16* x = w.wo_b.quantized() ? uq : u;
      const int64_t step = p.wo_b_k_group() ? p.o_lora_rank : 128;
      const int64_t n_part = ceil_div<int64_t>(uw, step);
      std::vector<float> part(n_part * T * p.hidden);
      for (int64_t i = 0; i < n_part; ++i) {
        LinearSlice s;
        s.k0 = i * step;
        s.k1 = std::min(uw, s.k0 + step);
        linear_slice(w.wo_b, s, x, T, part.data() + i * T * p.hidden, 0, 1);
      }
      for (int64_t e = 0; e < T * p.hidden; ++e) {
        float acc = part[e];
        for (int64_t i = 1; i < n_part; ++i) acc = acc + part[i * T * p.hidden + e];
        ASSERT_EQ(out[e].bits, bf16::from_float(acc).bits) << "element " << e;
      }
    }

    RowBuffer<bf16> o(kCapacity, hd), out(kCapacity, p.hidden);
    std::vector<bf16> scratch(out_proj_scratch_elems(p, kCapacity)), full;
    for (int nthreads : {1, 2, 3})
      for (int T = kCapacity; T >= 1; --T) {
        o.poison(T);
        std::copy(o_in.begin(), o_in.begin() + T * hd, o.v.begin());
        out.poison(T);
        std::fill(scratch.begin(), scratch.end(), test::nan_value<bf16>());
        const OutProjIO io{T, o.data(), pos.data(), out.data(), scratch.data()};
        for (int ph = 0; ph < kOutProjPhases; ++ph)
          run(nthreads, [&](int tid, int n) { out_proj(ph, p, w, io, tid, n); });
        ASSERT_TRUE(o.sentinel_intact(T));
        ASSERT_TRUE(out.sentinel_intact(T));
        if (full.empty()) full.assign(out.v.begin(), out.v.end());
        ASSERT_TRUE(test::all_close(out.data(), full.data(), T * p.hidden, test::kExact)) << "T=" << T;
        out.poison(T);  // wo_a + actq(u) by u columns, wo_b by hidden columns (the model's runs)
        std::fill(scratch.begin(), scratch.end(), test::nan_value<bf16>());
        run(nthreads, [&](int tid, int n) {
          const Range c = split_aligned(p.u_width(), 128, tid, n);
          out_proj_wo_a_cols(p, w, io, c.begin, c.end);
        });
        run(nthreads, [&](int tid, int n) {
          const Range c = split_aligned(p.hidden, 48, tid, n);
          out_proj_wo_b_cols(p, w, io, c.begin, c.end);
        });
        ASSERT_TRUE(out.sentinel_intact(T));
        ASSERT_TRUE(test::all_close(out.data(), full.data(), T * p.hidden, test::kExact)) << "cols T=" << T;
      }
  }
}

}  // namespace
}  // namespace dsv4::kernels
