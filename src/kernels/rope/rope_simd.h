// rope_rotate (rope.h) on vector registers, for the ISA translation units of kernels that
// rotate inside a fused loop (the AVX-512 form where __AVX512F__ and __AVX512BW__ are
// defined, the AVX2 form where __AVX2__ is; both in the emulated test build). A register holds whole pairs (a, b) of the last
// Dr dims; with c, s each pair's table entries (duplicated per lane: rope_pair_tables):
//   even lanes a·c − b·s, odd lanes a·s + b·c, each product and sum as rope_rotate, then bf16.
#pragma once

#include "kernels/common/bf16_simd.h"

namespace dsv4::kernels::simd {
namespace {  // one copy per translation unit: each is compiled for its own ISA

// cd[i] = cs[i/2], sd[i] = sn[i/2] for i < Dr.
inline void rope_pair_tables(const float* cs, const float* sn, int rope_dim, float* cd, float* sd) {
  for (int i = 0; i < rope_dim; ++i) {
    cd[i] = cs[i / 2];
    sd[i] = sn[i / 2];
  }
}

#if (defined(__AVX512F__) && defined(__AVX512BW__)) || defined(DSV4_ISA_EMULATED)
inline __m512 rope_rotate16(__m512 x, const float* cd, const float* sd) {
  const __m512 partner = _mm512_permute_ps(x, 0xB1);
  const __m512 p = _mm512_mul_ps(x, _mm512_loadu_ps(cd));
  const __m512 q = _mm512_mul_ps(partner, _mm512_loadu_ps(sd));
  return round_bf16(_mm512_mask_blend_ps(0xAAAA, _mm512_sub_ps(p, q), _mm512_add_ps(q, p)));
}
#endif

#if defined(__AVX2__) || defined(DSV4_ISA_EMULATED)
inline __m256 rope_rotate8(__m256 x, const float* cd, const float* sd) {
  const __m256 partner = _mm256_permute_ps(x, 0xB1);
  const __m256 p = _mm256_mul_ps(x, _mm256_loadu_ps(cd));
  const __m256 q = _mm256_mul_ps(partner, _mm256_loadu_ps(sd));
  return round_bf16(_mm256_blend_ps(_mm256_sub_ps(p, q), _mm256_add_ps(q, p), 0xAA));
}
#endif

}  // namespace
}  // namespace dsv4::kernels::simd
