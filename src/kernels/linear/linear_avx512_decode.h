// Shared by the AVX-512 tiles of the linear engine (linear_avx512.cc,
// linear_avx512_gemm.cc): the exact decoders of BF16 and F32 weights (see the
// header of linear_avx512.cc for the decoding and the VDPBF16PS range check; FP4 and
// FP8 weights take the tiles of linear_fp4.h / linear_fp8.h), the bf16 exponent-range
// scan and the fold tree of 16 outputs. Everything is in an unnamed namespace: each ISA
// translation unit keeps its own copy (linear_tile.h).
#pragma once

#include <cstdint>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_prefetch.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

constexpr int kOutTile = 16;  // outputs of one fold (a sub-tile)
constexpr int kChunks = kBlock / 16;  // 16-lane chunks per block

inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline __m512 add_ps(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
inline __mmask16 lanes_below(int n) { return static_cast<__mmask16>((1u << n) - 1u); }

inline __m512 bf16_to_ps(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

// Dot layout of 32 consecutive k (bf16 words): position 2l + 1 holds k = l,
// position 2l holds k = 16 + l (VDPBF16PS adds the odd product first).
inline __m512i dot_order() {
  return _mm512_set_epi16(15, 31, 14, 30, 13, 29, 12, 28, 11, 27, 10, 26, 9, 25, 8, 24, 7, 23, 6, 22, 5, 21, 4, 20, 3,
                          19, 2, 18, 1, 17, 0, 16);
}

inline uint32_t hmax_epu16(__m512i v) {
  const __m256i a = _mm256_max_epu16(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  const __m128i b = _mm_max_epu16(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  return 0xFFFFu - static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_minpos_epu16(_mm_xor_si128(b, _mm_set1_epi16(-1)))) &
                                         0xFFFF);
}
inline uint32_t hmin_epu16(__m512i v) {
  const __m256i a = _mm256_min_epu16(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  const __m128i b = _mm_min_epu16(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_minpos_epu16(b)) & 0xFFFF);
}

// Exponent range of 128 bf16 values (the dot's range check): *lo = smallest
// biased exponent of a non-zero value (0 if any is subnormal, or if any is Inf /
// NaN, which fails every check), *hi = largest; all zero: lo = 512, hi = 0.
// The same over n blocks of 128 at p, p + stride, ... (one range for all).
inline void bf16_range(const uint16_t* p, int* lo, int* hi, int n = 1, int64_t stride = 0) {
  const __m512i mag = _mm512_set1_epi16(0x7FFF), one = _mm512_set1_epi16(1);
  __m512i mx = _mm512_setzero_si512(), mn = _mm512_set1_epi16(-1);
  for (int b = 0; b < n; ++b)
    for (int h = 0; h < 4; ++h) {
      const __m512i m = _mm512_and_si512(_mm512_loadu_si512(p + b * stride + 32 * h), mag);
      mx = _mm512_max_epu16(mx, m);
      mn = _mm512_min_epu16(mn, _mm512_sub_epi16(m, one));  // zero wraps to 0xFFFF
    }
  const uint32_t max_mag = hmax_epu16(mx), min_mag = hmin_epu16(mn) + 1;
  *lo = max_mag >= 0x7F80 ? 0 : static_cast<int>(min_mag >> 7);
  *hi = static_cast<int>(max_mag >> 7);
}

// Row of x, columns [k, k + n) -> xb[0, 128·ceil(n/128)) as fp32, zero from n on.
inline void load_x(const uint16_t* x, int n, float* xb) {
  for (int c = 0; c < ceil_div64(n, kBlock) * kChunks; ++c) {
    const int rem = n - 16 * c;
    __m512 v = _mm512_setzero_ps();
    if (rem >= 16) v = bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 * c)));
    else if (rem > 0) v = bf16_to_ps(_mm256_maskz_loadu_epi16(lanes_below(rem), x + 16 * c));
    _mm512_store_ps(xb + 16 * c, v);
  }
}
inline void load_x(const float* x, int n, float* xb) {
  for (int c = 0; c < ceil_div64(n, kBlock) * kChunks; ++c) {
    const int rem = n - 16 * c;
    __m512 v = _mm512_setzero_ps();
    if (rem >= 16) v = _mm512_loadu_ps(x + 16 * c);
    else if (rem > 0) v = _mm512_maskz_loadu_ps(lanes_below(rem), x + 16 * c);
    _mm512_store_ps(xb + 16 * c, v);
  }
}

// Decoders of one weight, for the block at column k of row o: prep(o, k, pr)
// readies the fast path (false: the block needs full()), chunk2(pr, g) gives
// its weights [32g, 32g + 32) as two vectors; full(o, k, out) the whole block
// exactly in every case as out[0, 8); part(o, k, n, out) the partial last block
// of width n < 128, zero from n on. For the dot (kDot): dot_window(pr),
// the x exponent window the block's range check admits (linear_tile.h XWindow), and
// dot_chunk2(pr, g), the chunk pair in dot layout.
struct DecodeBf16 {
  Bf16Layout w;
  explicit DecodeBf16(const LinearWeight& lw) : w(lw) {}
  DSV4_PREFETCH_FN void prefetch(int64_t o, int64_t k) const { prefetch_lines(w.at(o, k), 2 * kBlock); }
  struct Prep {
    const uint16_t* p;
  };
  bool prep(int64_t o, int64_t k, Prep* pr) const {
    pr->p = w.at(o, k);
    return true;
  }
  static void chunk2(const Prep& pr, int g, __m512* out) {
    out[0] = bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pr.p + 32 * g)));
    out[1] = bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pr.p + 32 * g + 16)));
  }
  static constexpr bool kDot = true;
  static constexpr int kDotMinRows = 2;  // one row: the range scan costs what the dot saves
  static XWindow dot_window(const Prep& pr) {
    int wl = 0, wh = 0;
    bf16_range(pr.p, &wl, &wh);
    return bf16_window(wl, wh);
  }
  static __m512i dot_chunk2(const Prep& pr, int g) {
    return _mm512_permutexvar_epi16(dot_order(), _mm512_loadu_si512(pr.p + 32 * g));
  }
  void full(int64_t o, int64_t k, __m512* out) const {
    const uint16_t* p = w.at(o, k);
    for (int c = 0; c < kChunks; ++c)
      out[c] = bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * c)));
  }
  void part(int64_t o, int64_t k, int n, __m512* out) const {
    const uint16_t* p = w.at(o, k);
    for (int c = 0; c < kChunks; ++c) {
      const int rem = n - 16 * c;
      out[c] = rem >= 16  ? bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * c)))
               : rem > 0 ? bf16_to_ps(_mm256_maskz_loadu_epi16(lanes_below(rem), p + 16 * c))
                         : _mm512_setzero_ps();
    }
  }
};

struct DecodeF32 {
  static constexpr bool kDot = false;  // fp32 weights are not bf16-exact
  static constexpr int kDotMinRows = 0;
  const float* data;
  int64_t in;
  explicit DecodeF32(const LinearWeight& w) : data(static_cast<const float*>(w.data)), in(w.in) {}
  DSV4_PREFETCH_FN void prefetch(int64_t o, int64_t k) const { prefetch_lines(data + o * in + k, 4 * kBlock); }
  struct Prep {
    const float* p;
  };
  bool prep(int64_t o, int64_t k, Prep* pr) const {
    pr->p = data + o * in + k;
    return true;
  }
  static void chunk2(const Prep& pr, int g, __m512* out) {
    out[0] = _mm512_loadu_ps(pr.p + 32 * g);
    out[1] = _mm512_loadu_ps(pr.p + 32 * g + 16);
  }
  void full(int64_t o, int64_t k, __m512* out) const {
    const float* p = data + o * in + k;
    for (int c = 0; c < kChunks; ++c) out[c] = _mm512_loadu_ps(p + 16 * c);
  }
  void part(int64_t o, int64_t k, int n, __m512* out) const {
    const float* p = data + o * in + k;
    for (int c = 0; c < kChunks; ++c) {
      const int rem = n - 16 * c;
      out[c] = rem >= 16  ? _mm512_loadu_ps(p + 16 * c)
               : rem > 0 ? _mm512_maskz_loadu_ps(lanes_below(rem), p + 16 * c)
                         : _mm512_setzero_ps();
    }
  }
};

// beta of 16 outputs: acc[j] is output j's lane vector; the fold tree of linear.h
// on all of them at once (lane l + lane l+h per level), then back to output order.
inline __m512 fold16(const __m512* acc) {
  __m512 c[8], d[4], e[2];
  for (int m = 0; m < 8; ++m)  // l += l+8: [A 0..7 | B 0..7] + [A 8..15 | B 8..15]
    c[m] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * m], acc[2 * m + 1], 0x44),
                         _mm512_shuffle_f32x4(acc[2 * m], acc[2 * m + 1], 0xEE));
  for (int p = 0; p < 4; ++p)  // l += l+4: one 128-bit chunk per output
    d[p] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], 0x88),
                         _mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], 0xDD));
  for (int q = 0; q < 2; ++q)  // l += l+2
    e[q] = _mm512_add_ps(_mm512_shuffle_ps(d[2 * q], d[2 * q + 1], 0x44),
                         _mm512_shuffle_ps(d[2 * q], d[2 * q + 1], 0xEE));
  const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], 0x88),  // l += l+1
                                 _mm512_shuffle_ps(e[0], e[1], 0xDD));
  // f[4c + i] is output 4i + c.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, f);
}

}  // namespace
}  // namespace dsv4::kernels::linear_tile
