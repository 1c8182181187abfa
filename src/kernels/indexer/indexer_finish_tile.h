// The index queries' finish (indexer.h: RoPE, Hadamard, fp4sim_32 per head) on one row's run
// of heads, compiled once per ISA: indexer.cc (x86-64-v2: rope_rotate, hadamard_vec and
// fp4sim_row one after the other, the spec of the others), indexer_finish_avx2.cc and
// indexer_finish_avx512.cc (a head in registers: the same elementwise fp32 operations, the
// butterflies in the same stage order, each 32-block's scale from e2m1_scale_exponent),
// so every variant gives the same bits (no FMA contraction: CMakeLists.txt).
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/hadamard/hadamard.h"
#include "kernels/rope/rope.h"
#include "numeric/bf16.h"
#include "numeric/quant.h"

namespace dsv4::kernels::indexer_finish_tile {

// q [n_heads, Di] of one row in place; cs, sn [Dr/2] the row's RoPE tables; scale =
// hadamard_scale(Di).
using HeadsFn = void (*)(bf16* q, int64_t n_heads, int Di, int Dr, const float* cs, const float* sn, float scale);
HeadsFn heads_avx2();
HeadsFn heads_avx512();

namespace {  // one copy per translation unit: each is compiled for its own ISA

inline void heads_portable(bf16* q, int64_t n_heads, int Di, int Dr, const float* cs, const float* sn, float) {
  for (int64_t h = 0; h < n_heads; ++h) {
    bf16* v = q + h * Di;
    rope_rotate(v + (Di - Dr), Dr, cs, sn);
    hadamard_vec(v, v, Di);
    fp4sim_row(v, Di, kFp4SimBlock);
  }
}

// 2^k as fp32 for |k| <= 126 (the e2m1 scales of fp4sim: quant.h floors and clamps amax).
inline float pow2_bits(int k) { return std::bit_cast<float>(static_cast<uint32_t>(127 + k) << 23); }

// The vector forms' preconditions: whole vectors of width w, whole fp4 blocks (others take
// the portable form, whose kernels check their shapes).
inline bool vector_shape_ok(int Di, int Dr, int w) {
  return std::has_single_bit(static_cast<unsigned>(Di)) && Di % kFp4SimBlock == 0 && Di % w == 0 && Dr % w == 0 &&
         Dr <= Di && Di <= kHadamardMaxN;
}

}  // namespace
}  // namespace dsv4::kernels::indexer_finish_tile
