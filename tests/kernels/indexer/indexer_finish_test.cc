// indexer_finish on every ISA variant against the chain it promises, bit for bit: RoPE,
// hadamard_vec and fp4sim_row per head (the x86-64-v2 form), then the head weights; every T
// with 1 and 2 threads (split rows), head dims on and off the vector widths, values over many
// binades with zeros, subnormals, an Inf and a NaN (whose 32-block turns NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/hadamard/hadamard.h"
#include "kernels/indexer/indexer.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"
#include "support/poison.h"
#include "support/threads.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;
using test::run;

std::vector<bf16> wide_queries(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-8, 8), kind(0, 99);
  std::vector<bf16> v(n);
  for (auto& x : v) {
    const int k = kind(rng);
    const float f = k == 0 ? 0.0f : k == 1 ? std::ldexp(n01(rng), -128) : std::ldexp(n01(rng), e(rng));
    x = bf16::from_float(f);
  }
  return v;
}

// The chain of indexer.h on qi [T, Hi, Di] and the weights, with the engine's pieces.
void finish_chain(const IndexerParams& p, const float* inv, const int64_t* pos, int64_t T, bf16* qi,
                  const bf16* omega, bf16* wgt) {
  rope(inv, p.rope_dim, qi, T, p.n_heads, p.head_dim, pos, false, 0, 1);
  for (int64_t v = 0; v < T * p.n_heads; ++v) {
    hadamard_vec(qi + v * p.head_dim, qi + v * p.head_dim, p.head_dim);
    fp4sim_row(qi + v * p.head_dim, p.head_dim, kFp4SimBlock);
  }
  const float scale = indexer_weight_scale(p);
  for (int64_t i = 0; i < T * p.n_heads; ++i) wgt[i] = bf16::from_float(omega[i].to_float() * scale);
}

TEST(IndexerFinish, EveryIsaMatchesTheChainBitForBit) {
  const IndexerParams shapes[] = {{64, 128, 64, 8}, {2, 32, 16, 4}, {4, 128, 64, 8}, {5, 64, 8, 4},
                                  {3, 256, 32, 4},  {7, 32, 24, 4}, {17, 512, 64, 4}};
  for (const IndexerParams& p : shapes) {
    const int Hi = p.n_heads, Di = p.head_dim;
    const int64_t T_max = Di >= 512 ? 5 : kCapacity;
    std::mt19937 rng(Hi * 977 + Di);
    auto x = wide_queries(rng, T_max * Hi * Di);
    x[3] = bf16::from_bits(0x7fc1);                                       // NaN: row 0, head 0, block 0
    x[Di + 40] = bf16::from_float(std::numeric_limits<float>::infinity());  // Inf: row 0, head 1
    const auto omega = wide_queries(rng, T_max * Hi);
    RopeParams rp;
    rp.rope_dim = p.rope_dim;
    rp.theta = 160000.0;
    rp.yarn = true;
    const auto inv = rope_inv_freq(rp);
    std::vector<int64_t> pos(T_max);
    for (int64_t t = 0; t < T_max; ++t) pos[t] = 37 * t * t + 5;
    std::vector<bf16> want(x), want_w(T_max * Hi);
    finish_chain(p, inv.data(), pos.data(), T_max, want.data(), omega.data(), want_w.data());
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      set_indexer_isa(isa);
      for (int nthreads : {1, 2})
        for (int64_t T = 1; T <= T_max; ++T) {
          RowBuffer<bf16> q(T_max, int64_t{Hi} * Di), w(T_max, Hi);
          q.poison(T);
          w.poison(T);
          std::copy(x.begin(), x.begin() + T * Hi * Di, q.v.begin());
          run(nthreads, [&](int tid, int n) {
            indexer_finish(p, inv.data(), pos.data(), T, q.data(), omega.data(), w.data(), tid, n);
          });
          ASSERT_TRUE(q.sentinel_intact(T));
          ASSERT_TRUE(w.sentinel_intact(T));
          ASSERT_EQ(0, std::memcmp(q.data(), want.data(), sizeof(bf16) * T * Hi * Di))
              << isa_name(isa) << " Hi=" << Hi << " Di=" << Di << " Dr=" << p.rope_dim << " T=" << T;
          ASSERT_EQ(0, std::memcmp(w.data(), want_w.data(), sizeof(bf16) * T * Hi)) << isa_name(isa);
        }
    }
    set_indexer_isa(detect_isa());
  }
}

}  // namespace
}  // namespace dsv4::kernels
