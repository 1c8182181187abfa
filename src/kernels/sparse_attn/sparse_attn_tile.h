// The inner loops of the engine's sparse attention (sparse_attn.h order), compiled once per
// ISA: sparse_attn.cc (x86-64-v2), sparse_attn_avx2.cc, sparse_attn_avx512.cc.
// A pass takes up to `heads` heads of one row against a block of keys, so each key vector
// loaded from the block's scratch feeds every head of the pass (one head per pass re-read the
// block's 2 x 128 KiB of fp32 keys from L2 once per head: the loops were L2-bound).
// Logits vectorize across the block's 64 entries, P·V across 64 dims at a time. Every element
// keeps its operation order (separately rounded products and sums: no FMA contraction), so
// all variants give the same bits.
#pragma once

#include <cstdint>

#if defined(__AVX512F__)
#include "kernels/common/immintrin_quiet.h"
#endif

namespace dsv4::kernels::attn_tile {

constexpr int kBlock = 64;     // kAttnBlock
constexpr int kMaxHeads = 4;   // most heads of a pass in any variant

struct Fns {
  int heads;  // heads per pass, 1..kMaxHeads
  // s[g·kBlock + j] = Σ_d q[g·Dh + d]·kt[d·kBlock + j], ascending d from 0, for g < G and every
  // j < kBlock (lanes past the block's real entries are don't-care).
  void (*logits)(const float* q, int G, const float* kt, int Dh, float* s);
  // acc[g·Dh + d] = acc·alpha[g], then += p[g·kBlock + j]·kb[j·Dh + d] for j < n ascending.
  void (*accumulate_pv)(const float* p, const float* alpha, int G, const float* kb, int Dh, int n, float* acc);
  // kt[d·kBlock + j] = kb[j·Dh + d] for j < n, d < Dh.
  void (*transpose)(const float* kb, int Dh, int n, float* kt);
};
Fns fns_avx2();
Fns fns_avx512();

namespace {  // one copy per translation unit: each is compiled for its own ISA

// 64-byte vectors in every variant (4 SSE, 2 AVX2 or 1 AVX-512 register; internal linkage,
// so passing them by value fixes no ABI: CMakeLists.txt turns off -Wpsabi).
using V16 = float __attribute__((vector_size(64)));
using V16u = float __attribute__((vector_size(64), aligned(4)));  // unaligned access

inline V16 load16(const float* p) { return *reinterpret_cast<const V16u*>(p); }
inline void store16(float* p, V16 v) { *reinterpret_cast<V16u*>(p) = v; }
inline V16 splat(float x) { return V16{} + x; }

// The logits of G heads: G x 4 vectors of 16 entries, one product and one sum per element.
template <int G>
void logits_heads(const float* __restrict q, const float* __restrict kt, int Dh, float* __restrict s) {
  V16 acc[G][4];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < 4; ++c) acc[g][c] = V16{};
  for (int d = 0; d < Dh; ++d) {
    const float* row = kt + static_cast<int64_t>(d) * kBlock;
    const V16 k0 = load16(row), k1 = load16(row + 16), k2 = load16(row + 32), k3 = load16(row + 48);
    for (int g = 0; g < G; ++g) {
      const V16 qd = splat(q[static_cast<int64_t>(g) * Dh + d]);
      acc[g][0] = acc[g][0] + qd * k0;
      acc[g][1] = acc[g][1] + qd * k1;
      acc[g][2] = acc[g][2] + qd * k2;
      acc[g][3] = acc[g][3] + qd * k3;
    }
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < 4; ++c) store16(s + g * kBlock + 16 * c, acc[g][c]);
}

// P·V of G heads over NV vectors of dims [d0, d0 + 16·NV).
template <int G, int NV>
void pv_chunk(const float* __restrict p, const float* __restrict alpha, const float* __restrict kb, int Dh, int n,
              int d0, float* __restrict acc) {
  V16 a[G][NV];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) a[g][c] = load16(acc + static_cast<int64_t>(g) * Dh + d0 + 16 * c) * splat(alpha[g]);
  for (int j = 0; j < n; ++j) {
    const float* row = kb + static_cast<int64_t>(j) * Dh + d0;
    V16 k[NV];
    for (int c = 0; c < NV; ++c) k[c] = load16(row + 16 * c);
    for (int g = 0; g < G; ++g) {
      const V16 pj = splat(p[g * kBlock + j]);
      for (int c = 0; c < NV; ++c) a[g][c] = a[g][c] + pj * k[c];
    }
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) store16(acc + static_cast<int64_t>(g) * Dh + d0 + 16 * c, a[g][c]);
}

// Dims past the last whole vector (Dh % 16), one at a time in the same order.
inline void pv_tail(const float* p, const float* alpha, int G, const float* kb, int Dh, int n, int d0,
                    float* acc) {
  for (int g = 0; g < G; ++g)
    for (int d = d0; d < Dh; ++d) {
      float v = acc[static_cast<int64_t>(g) * Dh + d] * alpha[g];
      for (int j = 0; j < n; ++j) v = v + p[g * kBlock + j] * kb[static_cast<int64_t>(j) * Dh + d];
      acc[static_cast<int64_t>(g) * Dh + d] = v;
    }
}

template <int G>
void pv_heads(const float* p, const float* alpha, const float* kb, int Dh, int n, float* acc) {
  int d0 = 0;
  for (; d0 + 64 <= Dh; d0 += 64) pv_chunk<G, 4>(p, alpha, kb, Dh, n, d0, acc);
  for (; d0 + 16 <= Dh; d0 += 16) pv_chunk<G, 1>(p, alpha, kb, Dh, n, d0, acc);
  pv_tail(p, alpha, G, kb, Dh, n, d0, acc);
}

// Dispatch on G (1..kMaxG of the variant).
template <int kMaxG>
void logits_impl(const float* q, int G, const float* kt, int Dh, float* s) {
  if constexpr (kMaxG >= 4) if (G == 4) return logits_heads<4>(q, kt, Dh, s);
  if constexpr (kMaxG >= 3) if (G == 3) return logits_heads<3>(q, kt, Dh, s);
  if constexpr (kMaxG >= 2) if (G == 2) return logits_heads<2>(q, kt, Dh, s);
  logits_heads<1>(q, kt, Dh, s);
}
template <int kMaxG>
void accumulate_pv_impl(const float* p, const float* alpha, int G, const float* kb, int Dh, int n, float* acc) {
  if constexpr (kMaxG >= 4) if (G == 4) return pv_heads<4>(p, alpha, kb, Dh, n, acc);
  if constexpr (kMaxG >= 3) if (G == 3) return pv_heads<3>(p, alpha, kb, Dh, n, acc);
  if constexpr (kMaxG >= 2) if (G == 2) return pv_heads<2>(p, alpha, kb, Dh, n, acc);
  pv_heads<1>(p, alpha, kb, Dh, n, acc);
}

inline void transpose_plain(const float* kb, int Dh, int d0, int n, float* kt) {
  for (int j = 0; j < n; ++j)
    for (int d = d0; d < Dh; ++d) kt[static_cast<int64_t>(d) * kBlock + j] = kb[static_cast<int64_t>(j) * Dh + d];
}

#if defined(__AVX512F__)
// 16 keys x 16 dims from kb (rows j0.., dims d0..) into kt, in registers: pairs of rows
// interleaved, then 4-row groups per 128-bit lane, then the lanes gathered per column.
inline void transpose16(const float* kb, int Dh, int j0, int d0, float* kt) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(kb + static_cast<int64_t>(j0 + i) * Dh + d0);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + k], 128-bit lane L: rows 4i .. 4i + 3 at column 4L + k.
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 s0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x44), s1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xEE);
    const __m512 s2 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x44);
    const __m512 s3 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xEE);
    float* col = kt + static_cast<int64_t>(d0 + k) * kBlock + j0;  // column 4L + k at col + 4L·kBlock
    _mm512_storeu_ps(col, _mm512_shuffle_f32x4(s0, s2, 0x88));
    _mm512_storeu_ps(col + 4 * kBlock, _mm512_shuffle_f32x4(s0, s2, 0xDD));
    _mm512_storeu_ps(col + 8 * kBlock, _mm512_shuffle_f32x4(s1, s3, 0x88));
    _mm512_storeu_ps(col + 12 * kBlock, _mm512_shuffle_f32x4(s1, s3, 0xDD));
  }
}
// Whole 16-key groups (rows of kb up to the next multiple of 16 are scratch, their columns
// in kt don't-care), the dims past the last 16 one at a time.
inline void transpose_impl(const float* kb, int Dh, int n, float* kt) {
  const int d_whole = Dh & ~15;
  for (int j0 = 0; j0 < n; j0 += 16)
    for (int d0 = 0; d0 < d_whole; d0 += 16) transpose16(kb, Dh, j0, d0, kt);
  transpose_plain(kb, Dh, d_whole, n, kt);
}
#else
inline void transpose_impl(const float* kb, int Dh, int n, float* kt) { transpose_plain(kb, Dh, 0, n, kt); }
#endif

}  // namespace
}  // namespace dsv4::kernels::attn_tile
