// AVX-512 (F/BW/VL) tile of the linear engine (linear_tile.h), 64 outputs per
// tile in sub-tiles of 16. K runs in spans of up to 8 / nt blocks of 128 (T = 1: 1024 columns, so
// each weight row is read in long runs); per span and output pair, each block's
// weights are decoded 32 at a time and every row's lane vector (lane l sums the
// products k ≡ l mod 16 in ascending k) is kept; then per block the 16
// outputs' lane vectors are folded together by the tree of linear.h, transposed
// (level h adds lane l and lane l+h of every output in one vaddps), and chained
// in ascending blocks, so each result has the scalar variant's bits.
// Lane sums: separate vmulps / vaddps, or (kAvx512Bf16, bf16 x, BF16/FP8/FP4
// weights) VDPBF16PS. VDPBF16PS lane i computes acc += a[2i+1]·b[2i+1], then
// acc += a[2i]·b[2i], each an FMA rounded to fp32 with subnormal inputs and
// results flushed to zero; both operands are laid out so that lane l gets
// k = l + 32m at the odd and k = l + 32m + 16 at the even position, i.e. the
// scalar order. Products of two bf16 values are exact in fp32 unless they
// underflow or overflow, so the FMA equals the separate multiply and add; the
// dot is used for a (row block, weight block) only when a range check shows
// that every input is normal or zero, every non-zero product and partial sum is
// at least 2^-126 (all are multiples of ulp(x_min)·ulp(w_min)) and no partial
// sum reaches 2^127 (model.md §0.4.4 "Caveat: subnormals"); otherwise the
// multiply-add path runs. Either way the bits are the scalar variant's.
// Decoding, exact and equal to the scalar decode_block bit for bit:
//   BF16: bits << 16.   F32: as stored.
//   FP8 : e4m3 byte b -> fp32 bits sign | (b & 0x7F) << 20, which is the value
//         times 2^-120 (the e4m3 fields land in the fp32 ones, subnormals
//         included); then one multiply by 2^(s-7) for scale byte s <= 134 (one
//         rounding of value·2^(s-127), as the scalar's), else by 2^120 (exact)
//         and by the scale; NaN codes 0x7F/0xFF give the scalar's 0x7FC00000.
//   FP4 : nibble -> (kE2M1Signed·scale)[nibble] by vpermps from the 16-entry
//         table multiplied by the group's scale (the scalar's product).
//   For the dot, decoded FP8/FP4 values (bf16-exact when the range check
//   passes) are truncated to their upper 16 bits.
// Only intrinsics and linear_tile.h here (see linear_tile.h).
// GCC 12 warns on its own _mm512_undefined_* inside the AVX-512 intrinsics
// (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#include <cstdint>

#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

constexpr int kOutTile = 16;  // outputs of one fold (a sub-tile)
constexpr int kTileOut = 64;  // outputs per tile call: sub-tiles sharing the converted x
constexpr int kChunks = kBlock / 16;  // 16-lane chunks per block
constexpr int kSpan = 8;              // blocks x rows of one K span (lane buffer 8 KiB)
constexpr int kPrefetchPairs = 1;     // weight rows prefetched this many output pairs ahead

inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }
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
inline void bf16_range(const uint16_t* p, int* lo, int* hi) {
  const __m512i mag = _mm512_set1_epi16(0x7FFF), one = _mm512_set1_epi16(1);
  __m512i mx = _mm512_setzero_si512(), mn = _mm512_set1_epi16(-1);
  for (int h = 0; h < 4; ++h) {
    const __m512i m = _mm512_and_si512(_mm512_loadu_si512(p + 32 * h), mag);
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
// of width n < 128, zero from n on. For the dot (kDot): dot_window(pr, lo, hi),
// the x exponent range [lo, hi] the block's range check admits, and
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
  // Dot: w is a multiple of 2^(wl-134), |w| < 2^(wh-126) (biased exponents).
  static constexpr bool kDot = true;
  static constexpr int kDotMinRows = 2;  // one row: the range scan costs what the dot saves
  static constexpr bool kDecodeFirst = false;
  static void dot_window(const Prep& pr, int* lo, int* hi) {
    int wl = 0, wh = 0;
    bf16_range(pr.p, &wl, &wh);
    *lo = wl >= 1 ? (142 - wl > 1 ? 142 - wl : 1) : 1000;  // ulp(x)·ulp(w) >= 2^-126, w normal
    *hi = 376 - wh;                                          // 8·|x|·|w| < 2^127
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
  static constexpr bool kDecodeFirst = false;
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
  // Dot (fast-path blocks): ŵ is a multiple of 2^(sb-136), |ŵ| < 2^(sb-118).
  static constexpr bool kDot = true;
  static constexpr int kDotMinRows = 1;
  static constexpr bool kDecodeFirst = false;
  static void dot_window(const Prep& pr, int* lo, int* hi) {
    *lo = pr.sb >= 10 ? (144 - pr.sb > 1 ? 144 - pr.sb : 1) : 1000;
    *hi = 368 - pr.sb;
  }
  static __m512i dot_chunk2(const Prep& pr, int g) {
    __m512 w[2];
    chunk2(pr, g, w);
    return _mm512_permutex2var_epi16(_mm512_castps_si512(w[0]), dot_order_f32(), _mm512_castps_si512(w[1]));
  }
  void full(int64_t o, int64_t k, __m512* out) const {
    const uint8_t* p = data + o * in + k;
    const uint64_t nan_lo = nan_codes(_mm512_loadu_si512(p)), nan_hi = nan_codes(_mm512_loadu_si512(p + 64));
    for (int c = 0; c < kChunks; ++c) out[c] = bits(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * c)));
    scale_and_nan(scale[(o / kBlock) * nbk + k / kBlock], out, kChunks, nan_lo, nan_hi);
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

struct DecodeFp4 {  // in % 32 == 0, so n % 32 == 0
  const uint8_t* data;
  const uint8_t* scale;
  int64_t in;
  explicit DecodeFp4(const LinearWeight& w) : data(static_cast<const uint8_t*>(w.data)), scale(w.scale), in(w.in) {}
  void prefetch(int64_t o, int64_t k) const {
    prefetch_lines(data + o * (in / 2) + k / 2, kBlock / 2);
    _mm_prefetch(reinterpret_cast<const char*>(scale + o * (in / 32) + k / 32), _MM_HINT_T0);
  }
  // 32 weights of one scale group: nibble -> (kE2M1Signed·scale)[nibble].
  static void group(const uint8_t* p, uint8_t sb, __m512* out) {
    const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                        -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    // Even k (low nibble) and odd k (high nibble) values interleaved.
    const __m512i even = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i odd = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512 ts = _mm512_mul_ps(table, _mm512_set1_ps(kScale.v[sb]));
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512 lo = _mm512_permutexvar_ps(d, ts);  // vpermps reads index bits 0..3
    const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), ts);
    out[0] = _mm512_permutex2var_ps(lo, even, hi);
    out[1] = _mm512_permutex2var_ps(lo, odd, hi);
  }
  struct Prep {
    const uint8_t* p;
    const uint8_t* sc;
  };
  bool prep(int64_t o, int64_t k, Prep* pr) const {
    pr->p = data + o * (in / 2) + k / 2;
    pr->sc = scale + o * (in / 32) + k / 32;
    return true;
  }
  static void chunk2(const Prep& pr, int g, __m512* out) { group(pr.p + 16 * g, pr.sc[g], out); }
  // Dot: ŵ is a multiple of 2^(s-128), |ŵ| < 2^(s-124) for group scale byte s.
  static constexpr bool kDot = true;
  static constexpr int kDotMinRows = 1;
  static constexpr bool kDecodeFirst = true;
  static void dot_window(const Prep& pr, int* lo, int* hi) {
    int mn = pr.sc[0], mx = pr.sc[0];
    for (int g = 1; g < kBlock / 32; ++g) {
      mn = pr.sc[g] < mn ? pr.sc[g] : mn;
      mx = pr.sc[g] > mx ? pr.sc[g] : mx;
    }
    *lo = mn >= 2 && mx <= 254 ? (136 - mn > 1 ? 136 - mn : 1) : 1000;
    *hi = 374 - mx;
  }
  // Values of the even-k (low nibble) and odd-k (high nibble) codes, then the
  // upper halves in dot layout: k = 2j from lo[j], k = 2j + 1 from hi[j].
  static __m512i dot_chunk2(const Prep& pr, int g) {
    const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                        -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    const __m512i order = _mm512_set_epi16(47, 63, 15, 31, 45, 61, 13, 29, 43, 59, 11, 27, 41, 57, 9, 25, 39, 55, 7, 23,
                                           37, 53, 5, 21, 35, 51, 3, 19, 33, 49, 1, 17);
    const __m512 ts = _mm512_mul_ps(table, _mm512_set1_ps(kScale.v[pr.sc[g]]));
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pr.p + 16 * g)));
    const __m512 lo = _mm512_permutexvar_ps(d, ts);
    const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), ts);
    return _mm512_permutex2var_epi16(_mm512_castps_si512(lo), order, _mm512_castps_si512(hi));
  }
  void full(int64_t o, int64_t k, __m512* out) const {
    const uint8_t* p = data + o * (in / 2) + k / 2;
    const uint8_t* sc = scale + o * (in / 32) + k / 32;
    for (int g = 0; g < kBlock / 32; ++g) group(p + 16 * g, sc[g], out + 2 * g);
  }
  void part(int64_t o, int64_t k, int n, __m512* out) const {
    const uint8_t* p = data + o * (in / 2) + k / 2;
    const uint8_t* sc = scale + o * (in / 32) + k / 32;
    for (int g = 0; g < kBlock / 32; ++g) {
      if (32 * g < n) {
        group(p + 16 * g, sc[g], out + 2 * g);
      } else {
        out[2 * g] = _mm512_setzero_ps();
        out[2 * g + 1] = _mm512_setzero_ps();
      }
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

// One K span of a tile: blocks [0, nb) from column kb (width columns; the
// partial last block alone). Row i's block bb: x at xb + (i·nb + bb)·128 (fp32),
// for the dot also at xd + (i·nb + bb)·128 (bf16 in dot layout) with exponent
// range [xlo, xhi][i·nb + bb] (bf16_range); lane vectors to lanes[i·nb + bb][j].
struct Span {
  const Tile* tl;
  int64_t o_sub;  // first output of the sub-tile (lane column j is output o_sub + j)
  int64_t kb;
  int nb, width;
  bool partial;
  const float* xb;
  const uint16_t* xd;  // nullptr: no dot
  const int* xlo;
  const int* xhi;
  __m512 (*lanes)[kOutTile];
};

// Fast path: lane vectors of R rows (from i0) x NO outputs (from j) x NB blocks
// (from bb0), decoded 32 weights at a time (each used by all R rows);
// NO·NB·R chains interleaved.
template <class Dec, int NO, int NB, int R>
inline void lanes_fast(const typename Dec::Prep (&pr)[NO][NB], const Span& sp, int i0, int bb0, int j) {
  // One block for 8 rows, or an FP4 block for several: all of it decoded first
  // (measured faster when streaming from memory), else chunk pair by chunk pair.
  constexpr int kPre = NB == 1 && (R >= 8 || (Dec::kDecodeFirst && R >= 2)) ? kChunks / 2 : 1;
  __m512 a[R][NB][NO];
  for (int r = 0; r < R; ++r)
    for (int bb = 0; bb < NB; ++bb)
      for (int q = 0; q < NO; ++q) a[r][bb][q] = _mm512_setzero_ps();
  __m512 w[kPre][NB][NO][2];
  if constexpr (kPre > 1)
    for (int g = 0; g < kPre; ++g)
      for (int q = 0; q < NO; ++q) Dec::chunk2(pr[q][0], g, w[g][0][q]);
  for (int g = 0; g < kChunks / 2; ++g) {
    const int gw = kPre > 1 ? g : 0;
    if constexpr (kPre == 1)
      for (int bb = 0; bb < NB; ++bb)
        for (int q = 0; q < NO; ++q) Dec::chunk2(pr[q][bb], g, w[0][bb][q]);
    for (int r = 0; r < R; ++r)
      for (int bb = 0; bb < NB; ++bb) {
        const float* xr = sp.xb + ((i0 + r) * sp.nb + bb0 + bb) * kBlock + 32 * g;
        const __m512 x0 = _mm512_load_ps(xr), x1 = _mm512_load_ps(xr + 16);
        for (int q = 0; q < NO; ++q) {
          a[r][bb][q] = _mm512_add_ps(a[r][bb][q], _mm512_mul_ps(x0, w[gw][bb][q][0]));
          a[r][bb][q] = _mm512_add_ps(a[r][bb][q], _mm512_mul_ps(x1, w[gw][bb][q][1]));
        }
      }
  }
  for (int r = 0; r < R; ++r)
    for (int bb = 0; bb < NB; ++bb)
      for (int q = 0; q < NO; ++q) sp.lanes[(i0 + r) * sp.nb + bb0 + bb][j + q] = a[r][bb][q];
}

// The same lane vectors by VDPBF16PS (range check passed for every row and block).
template <class Dec, int NO, int NB, int R>
inline void lanes_dot(const typename Dec::Prep (&pr)[NO][NB], const Span& sp, int i0, int bb0, int j) {
  __m512 a[R][NB][NO];
  for (int r = 0; r < R; ++r)
    for (int bb = 0; bb < NB; ++bb)
      for (int q = 0; q < NO; ++q) a[r][bb][q] = _mm512_setzero_ps();
  for (int g = 0; g < kChunks / 2; ++g) {
    __m512i w[NB][NO];
    for (int bb = 0; bb < NB; ++bb)
      for (int q = 0; q < NO; ++q) w[bb][q] = Dec::dot_chunk2(pr[q][bb], g);
    for (int r = 0; r < R; ++r)
      for (int bb = 0; bb < NB; ++bb) {
        const __m512i xv = _mm512_load_si512(sp.xd + ((i0 + r) * sp.nb + bb0 + bb) * kBlock + 32 * g);
        for (int q = 0; q < NO; ++q) a[r][bb][q] = _mm512_dpbf16_ps(a[r][bb][q], (__m512bh)xv, (__m512bh)w[bb][q]);
      }
  }
  for (int r = 0; r < R; ++r)
    for (int bb = 0; bb < NB; ++bb)
      for (int q = 0; q < NO; ++q) sp.lanes[(i0 + r) * sp.nb + bb0 + bb][j + q] = a[r][bb][q];
}

// Rows [0, nt) in groups of 8, 4 (NB = 1), 2 and 1; a group takes the dot when
// its rows' exponent ranges lie inside every block's window.
template <class Dec, int NO, int NB>
inline void rows_fast(const typename Dec::Prep (&pr)[NO][NB], const Span& sp, int bb0, int j) {
  const int nt = sp.tl->nt;
  bool dot = false;
  int lo = 1, hi = 1 << 20;
  if constexpr (Dec::kDot) {
    if (sp.xd != nullptr && nt >= Dec::kDotMinRows) {
      dot = true;
      for (int q = 0; q < NO; ++q)
        for (int bb = 0; bb < NB; ++bb) {
          int l = 0, h = 0;
          Dec::dot_window(pr[q][bb], &l, &h);
          lo = l > lo ? l : lo;
          hi = h < hi ? h : hi;
        }
    }
  }
  auto use_dot = [&](int i0, int rows) {
    if (!dot) return false;
    for (int r = 0; r < rows; ++r)
      for (int bb = 0; bb < NB; ++bb) {
        const int idx = (i0 + r) * sp.nb + bb0 + bb;
        if (sp.xlo[idx] < lo || sp.xhi[idx] > hi) return false;
      }
    return true;
  };
  auto group = [&]<int R>(int i0) {
    if constexpr (Dec::kDot) {
      if (use_dot(i0, R)) return lanes_dot<Dec, NO, NB, R>(pr, sp, i0, bb0, j);
    }
    lanes_fast<Dec, NO, NB, R>(pr, sp, i0, bb0, j);
  };
  int i = 0;
  if constexpr (NB == 1) {
    for (; i + 8 <= nt; i += 8) group.template operator()<8>(i);
    for (; i + 4 <= nt; i += 4) group.template operator()<4>(i);
  }
  for (; i + 2 <= nt; i += 2) group.template operator()<2>(i);
  for (; i < nt; ++i) group.template operator()<1>(i);
}

// General path for one block (scale bytes > 134, NaN codes, the partial block):
// decoded into memory, then every row.
template <class Dec, int NO>
void block_general(const Dec& dec, const Span& sp, int bb, int j) {
  const int64_t o = sp.o_sub + j, k = sp.kb + bb * kBlock;
  __m512 w[NO][kChunks];
  for (int q = 0; q < NO; ++q) {
    if (sp.partial) dec.part(o + q, k, sp.width, w[q]);
    else dec.full(o + q, k, w[q]);
  }
  for (int i = 0; i < sp.tl->nt; ++i) {
    const float* xr = sp.xb + (i * sp.nb + bb) * kBlock;
    for (int q = 0; q < NO; ++q) {
      __m512 a = _mm512_setzero_ps();
      for (int c = 0; c < kChunks; ++c) a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_load_ps(xr + 16 * c), w[q][c]));
      sp.lanes[i * sp.nb + bb][j + q] = a;
    }
  }
}

// Lane vectors of outputs j .. j+NO-1, every block of the span and every row.
// Weight rows are prefetched kPrefetchPairs output pairs ahead in the order they
// are read: while a pair reads block k, the rows of the later pair at block k
// (past the tile's last pair: the first pairs' rows in the next span).
template <class Dec, int NO>
void span_lanes(const Dec& dec, const Span& sp, int j) {
  const Tile& tl = *sp.tl;
  const int64_t o = sp.o_sub + j, jt = o - tl.o;  // jt: output index within the tile
  if (sp.partial) {
    block_general<Dec, NO>(dec, sp, 0, j);
    return;
  }
  const int n_pairs = (tl.no + 1) / 2;
  const int pf_pair = static_cast<int>(jt / 2) + kPrefetchPairs;
  const bool same_span = pf_pair < n_pairs;
  const int64_t pf_j = 2 * (same_span ? pf_pair : pf_pair - n_pairs);
  const int64_t pf_o = tl.o + pf_j, pf_dk = same_span ? 0 : int64_t{sp.nb} * kBlock;
  const int pf_n = pf_j + 2 <= tl.no ? 2 : pf_j < tl.no ? 1 : 0;
  auto prefetch = [&](int64_t k) {
    if (k + pf_dk + kBlock > tl.k1) return;
    for (int q = 0; q < pf_n; ++q) dec.prefetch(pf_o + q, k + pf_dk);
  };
  constexpr int NB = 2;  // blocks per step when nt <= 2 (more chains for one row)
  int bb = 0;
  if (tl.nt <= 2) {
    for (; bb + NB <= sp.nb; bb += NB) {
      typename Dec::Prep pr[NO][NB];
      bool fast = true;
      for (int h = 0; h < NB; ++h) prefetch(sp.kb + (bb + h) * kBlock);
      for (int q = 0; q < NO; ++q)
        for (int h = 0; h < NB; ++h) fast = dec.prep(o + q, sp.kb + (bb + h) * kBlock, &pr[q][h]) && fast;
      if (fast) {
        rows_fast<Dec, NO, NB>(pr, sp, bb, j);
      } else {
        for (int h = 0; h < NB; ++h) block_general<Dec, NO>(dec, sp, bb + h, j);
      }
    }
  }
  for (; bb < sp.nb; ++bb) {
    const int64_t k = sp.kb + bb * kBlock;
    typename Dec::Prep pr[NO][1];
    bool fast = true;
    prefetch(k);
    for (int q = 0; q < NO; ++q) fast = dec.prep(o + q, k, &pr[q][0]) && fast;
    if (fast) rows_fast<Dec, NO, 1>(pr, sp, bb, j);
    else block_general<Dec, NO>(dec, sp, bb, j);
  }
}

// kDot: x is bf16 and VDPBF16PS may be used (kAvx512Bf16). Per span: x
// converted once, then every 16-output sub-tile: lane vectors, fold, chain.
template <class Dec, class XT, bool kDot>
void tile(const Tile& tl) {
  constexpr int kSubs = kTileOut / kOutTile;
  const Dec dec(*tl.w);
  const XT* x = static_cast<const XT*>(tl.x);
  const int nt = tl.nt, no = tl.no;
  const int64_t n_blk = ceil_div64(tl.k1 - tl.k0, kBlock);
  const int64_t n_full = (tl.k1 - tl.k0) / kBlock;  // the last block may be partial
  const int span = kSpan / nt;                         // blocks per span, >= 1
  alignas(64) float xb[kSpan * kBlock];
  alignas(64) uint16_t xd[kDot ? kSpan * kBlock : 1];
  int xlo[kSpan], xhi[kSpan];
  alignas(64) __m512 lanes[kSpan][kOutTile];
  __m512 part[kRowTile][kSubs], total[kRowTile][kSubs];
  Span sp{&tl, tl.o, 0, 0, 0, false, xb, nullptr, xlo, xhi, lanes};
  int64_t g_pos0 = 0;  // index within its K group of the span's first block
  for (int64_t b0 = 0; b0 < n_blk;) {
    sp.partial = b0 == n_full;
    sp.nb = sp.partial ? 1 : static_cast<int>(n_full - b0 < span ? n_full - b0 : span);
    sp.kb = tl.k0 + b0 * kBlock;
    sp.width = sp.partial ? static_cast<int>(tl.k1 - sp.kb) : sp.nb * kBlock;
    for (int i = 0; i < nt; ++i) load_x(x + i * tl.x_stride + sp.kb, sp.width, xb + i * sp.nb * kBlock);
    if constexpr (kDot) {
      sp.xd = sp.partial ? nullptr : xd;
      if (!sp.partial)
        for (int i = 0; i < nt; ++i)
          for (int bb = 0; bb < sp.nb; ++bb) {
            const uint16_t* xs = x + i * tl.x_stride + sp.kb + bb * kBlock;
            uint16_t* xo = xd + (i * sp.nb + bb) * kBlock;
            for (int g = 0; g < kBlock / 32; ++g)
              _mm512_store_si512(xo + 32 * g, _mm512_permutexvar_epi16(dot_order(), _mm512_loadu_si512(xs + 32 * g)));
            bf16_range(xs, &xlo[i * sp.nb + bb], &xhi[i * sp.nb + bb]);
          }
    }
    for (int sub = 0; sub * kOutTile < no; ++sub) {
      const int ns = no - sub * kOutTile < kOutTile ? no - sub * kOutTile : kOutTile;
      sp.o_sub = tl.o + sub * kOutTile;
      if (ns < kOutTile)
        for (int s = 0; s < kSpan; ++s)
          for (int j = ns; j < kOutTile; ++j) lanes[s][j] = _mm512_setzero_ps();
      int j = 0;
      for (; j + 2 <= ns; j += 2) span_lanes<Dec, 2>(dec, sp, j);
      if (j < ns) span_lanes<Dec, 1>(dec, sp, j);
      int64_t g_pos = g_pos0;
      for (int bb = 0; bb < sp.nb; ++bb) {
        const int64_t b = b0 + bb;
        const bool g_first = g_pos == 0;
        if (++g_pos == tl.g_blk) g_pos = 0;
        const bool g_last = g_pos == 0 || b + 1 == n_blk;
        const bool first_group = b < tl.g_blk;
        for (int i = 0; i < nt; ++i) {
          const __m512 beta = fold16(lanes[i * sp.nb + bb]);
          __m512& pa = part[i][sub];
          pa = g_first ? beta : _mm512_add_ps(pa, beta);
          if (g_last) total[i][sub] = first_group ? pa : _mm512_add_ps(total[i][sub], pa);
        }
      }
    }
    g_pos0 = (g_pos0 + sp.nb) % tl.g_blk;
    b0 += sp.nb;
  }
  for (int i = 0; i < nt; ++i)
    for (int sub = 0; sub * kOutTile < no; ++sub)
      _mm512_storeu_ps(tl.y + i * kMaxOutTile + sub * kOutTile, total[i][sub]);
}

template <class XT, bool kDot>
void tile_any(const Tile& tl) {
  switch (tl.w->format) {
    case WeightFormat::kBF16: return tile<DecodeBf16, XT, kDot>(tl);
    case WeightFormat::kF32: return tile<DecodeF32, XT, false>(tl);
    case WeightFormat::kFP8: return tile<DecodeFp8, XT, kDot>(tl);
    case WeightFormat::kFP4: return tile<DecodeFp4, XT, kDot>(tl);
  }
}

}  // namespace

Kernels avx512_kernels() { return Kernels{kTileOut, tile_any<uint16_t, false>, tile_any<float, false>}; }
Kernels avx512_bf16_kernels() { return Kernels{kTileOut, tile_any<uint16_t, true>, tile_any<float, false>}; }

}  // namespace dsv4::kernels::linear_tile
