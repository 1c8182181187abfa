// Shared by the AVX-512 tiles of the linear engine (linear_avx512.cc,
// linear_avx512_gemm.cc): the exact decoders of BF16, F32 and FP8 weights (see the
// header of linear_avx512.cc for the decoding and the VDPBF16PS range check; FP4
// weights take the tiles of linear_fp4.h), the bf16 exponent-range scan and the
// fold tree of 16 outputs. Everything is in an unnamed namespace: each ISA
// translation unit keeps its own copy (linear_tile.h).
#pragma once

#include <cstdint>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

constexpr int kOutTile = 16;  // outputs of one fold (a sub-tile)
constexpr int kChunks = kBlock / 16;  // 16-lane chunks per block

inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline __m512 add_ps(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
inline __mmask16 lanes_below(int n) { return static_cast<__mmask16>((1u << n) - 1u); }

// ue8m0 byte -> 2^(b-127), the scalar's scale_value (255: NaN, 0: 2^-127).
struct ScaleTable {
  float v[256];
};
constexpr ScaleTable make_scale_table() {
  ScaleTable t{};
  for (uint32_t b = 0; b < 256; ++b)
    t.v[b] = __builtin_bit_cast(float, b == 255 ? 0x7fc00000u : b == 0 ? 0x00400000u : b << 23);
  return t;
}
constexpr ScaleTable kScale = make_scale_table();

inline __m512 bf16_to_ps(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

inline void prefetch_lines(const void* p, int bytes) {
  for (int i = 0; i < bytes; i += 64) _mm_prefetch(static_cast<const char*>(p) + i, _MM_HINT_T0);
}

// Dot layout of 32 consecutive k (bf16 words): position 2l + 1 holds k = l,
// position 2l holds k = 16 + l (VDPBF16PS adds the odd product first).
inline __m512i dot_order() {
  return _mm512_set_epi16(15, 31, 14, 30, 13, 29, 12, 28, 11, 27, 10, 26, 9, 25, 8, 24, 7, 23, 6, 22, 5, 21, 4, 20, 3,
                          19, 2, 18, 1, 17, 0, 16);
}
// The same from two fp32 vectors a (k = 0..15) and b (k = 16..31): upper halves.
inline __m512i dot_order_f32() {
  return _mm512_set_epi16(31, 63, 29, 61, 27, 59, 25, 57, 23, 55, 21, 53, 19, 51, 17, 49, 15, 47, 13, 45, 11, 43, 9,
                          41, 7, 39, 5, 37, 3, 35, 1, 33);
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
  const uint16_t* data;
  int64_t in;
  explicit DecodeBf16(const LinearWeight& w) : data(static_cast<const uint16_t*>(w.data)), in(w.in) {}
  void prefetch(int64_t o, int64_t k) const { prefetch_lines(data + o * in + k, 2 * kBlock); }
  struct Prep {
    const uint16_t* p;
  };
  bool prep(int64_t o, int64_t k, Prep* pr) const {
    pr->p = data + o * in + k;
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
    const uint16_t* p = data + o * in + k;
    for (int c = 0; c < kChunks; ++c)
      out[c] = bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * c)));
  }
  void part(int64_t o, int64_t k, int n, __m512* out) const {
    const uint16_t* p = data + o * in + k;
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
  void prefetch(int64_t o, int64_t k) const { prefetch_lines(data + o * in + k, 4 * kBlock); }
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

struct DecodeFp8 {
  const uint8_t* data;
  const uint8_t* scale;
  int64_t in, nbk;
  explicit DecodeFp8(const LinearWeight& w)
      : data(static_cast<const uint8_t*>(w.data)), scale(w.scale), in(w.in), nbk(ceil_div64(w.in, kBlock)) {}
  void prefetch(int64_t o, int64_t k) const { prefetch_lines(data + o * in + k, kBlock); }
  // Codes of chunk c as fp32 bits sign | (b & 0x7F) << 20 (value·2^-120).
  static __m512 bits(__m128i b) {
    const __m512i sx = _mm512_cvtepi8_epi32(b);
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(sx, 20), _mm512_set1_epi32(int(0x87F00000u))));
  }
  // out[c] = bits·2^120·scale with the scalar's rounding, NaN lanes set to 0x7FC00000.
  static void scale_and_nan(uint8_t sb, __m512* out, int nc, uint64_t nan_lo, uint64_t nan_hi) {
    if (sb <= 134) {  // one rounding: bits·2^(sb-7), a normal multiplier
      const __m512 m = _mm512_castsi512_ps(_mm512_set1_epi32((sb + 120) << 23));
      for (int c = 0; c < nc; ++c) out[c] = _mm512_mul_ps(out[c], m);
    } else {  // exact ·2^120, then the scale (NaN for 255)
      const __m512 m1 = _mm512_castsi512_ps(_mm512_set1_epi32(247 << 23)), m2 = _mm512_set1_ps(kScale.v[sb]);
      for (int c = 0; c < nc; ++c) out[c] = _mm512_mul_ps(_mm512_mul_ps(out[c], m1), m2);
    }
    if ((nan_lo | nan_hi) != 0) {
      const __m512 qnan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000));
      for (int c = 0; c < nc; ++c) {
        const uint64_t m = c < 4 ? nan_lo >> (16 * c) : nan_hi >> (16 * (c - 4));
        out[c] = _mm512_mask_mov_ps(out[c], static_cast<__mmask16>(m), qnan);
      }
    }
  }
  static uint64_t nan_codes(__m512i v) {
    const __m512i mag = _mm512_set1_epi8(0x7F);
    return _mm512_cmpeq_epi8_mask(_mm512_and_si512(v, mag), mag);
  }
  struct Prep {
    const uint8_t* p;
    __m512 m;
    int sb;
  };
  // Fast path: scale byte <= 134 (one multiply) and no NaN code in the block.
  bool prep(int64_t o, int64_t k, Prep* pr) const {
    pr->p = data + o * in + k;
    const uint8_t sb = scale[(o / kBlock) * nbk + k / kBlock];
    pr->sb = sb;
    pr->m = _mm512_castsi512_ps(_mm512_set1_epi32((sb + 120) << 23));
    return sb <= 134 && (nan_codes(_mm512_loadu_si512(pr->p)) | nan_codes(_mm512_loadu_si512(pr->p + 64))) == 0;
  }
  static void chunk2(const Prep& pr, int g, __m512* out) {
    out[0] = _mm512_mul_ps(bits(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pr.p + 32 * g))), pr.m);
    out[1] = _mm512_mul_ps(bits(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pr.p + 32 * g + 16))), pr.m);
  }
  static constexpr bool kDot = true;
  static constexpr int kDotMinRows = 1;
  static XWindow dot_window(const Prep& pr) { return fp8_window(pr.sb); }
  static __m512i dot_chunk2(const Prep& pr, int g) {
    __m512 w[2];
    chunk2(pr, g, w);
    return _mm512_permutex2var_epi16(_mm512_castps_si512(w[0]), dot_order_f32(), _mm512_castps_si512(w[1]));
  }
  // The 128 codes at p of a block of scale byte sb, exactly.
  static void codes_full(const uint8_t* p, uint8_t sb, __m512* out) {
    const uint64_t nan_lo = nan_codes(_mm512_loadu_si512(p)), nan_hi = nan_codes(_mm512_loadu_si512(p + 64));
    for (int c = 0; c < kChunks; ++c) out[c] = bits(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * c)));
    scale_and_nan(sb, out, kChunks, nan_lo, nan_hi);
  }
  void full(int64_t o, int64_t k, __m512* out) const {
    codes_full(data + o * in + k, scale[(o / kBlock) * nbk + k / kBlock], out);
  }
  void part(int64_t o, int64_t k, int n, __m512* out) const {
    const uint8_t* p = data + o * in + k;
    const __m512i v0 = _mm512_maskz_loadu_epi8(n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1, p);
    const __m512i v1 = n > 64 ? _mm512_maskz_loadu_epi8((uint64_t{1} << (n - 64)) - 1, p + 64) : _mm512_setzero_si512();
    const int nc = (n + 15) / 16;
    for (int c = 0; c < nc; ++c)
      out[c] = bits(_mm_maskz_loadu_epi8(n - 16 * c >= 16 ? 0xFFFF : lanes_below(n - 16 * c), p + 16 * c));
    scale_and_nan(scale[(o / kBlock) * nbk + k / kBlock], out, nc, nan_codes(v0), nan_codes(v1));
    // Lanes from n on: zero (scaled zeros can be NaN).
    if (n % 16 != 0) out[nc - 1] = _mm512_maskz_mov_ps(lanes_below(n % 16), out[nc - 1]);
    for (int c = nc; c < kChunks; ++c) out[c] = _mm512_setzero_ps();
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
