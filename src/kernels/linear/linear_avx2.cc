// AVX2 + FMA tile of the linear engine (linear_tile.h), 32 outputs per tile in
// sub-tiles of 8. FP8 weights with bf16 x: 1-4 rows, the small-row tile
// (small_tile: SmallFp8); 5 rows or more, the GEMM tile at the end of
// this file. FP4 weights never come here: run_fp4 (linear.cc) takes them to the FP4
// tiles of linear_fp4.h (linear_fp4_avx2.cc). Otherwise (BF16/F32 weights, fp32 x,
// partial K blocks) the span tile: same scheme as linear_avx512.cc with a block's 16
// lanes in two 8-lane vectors (lanes 0..7 and 8..15): K runs in spans of up to 8 / nt
// blocks of 128; per span and output pair, each block's weights are decoded 16 at a time and every
// row's lane vectors (lane l sums the products k ≡ l mod 16 in ascending k,
// separate vmulps / vaddps — no FMA, see linear_tile.h) are kept; then per block
// the 8 outputs' lane vectors are folded together by the tree of linear.h,
// transposed (level h adds lane l and lane l+h of every output in one vaddps),
// and chained in ascending blocks, so each result has the scalar variant's bits.
// Decoding, exact and equal to the scalar decode_block bit for bit:
//   BF16: bits << 16.   F32: as stored.
//   FP8 : e4m3 byte b -> fp32 bits sign | (b & 0x7F) << 20 = value·2^-120 (the
//         e4m3 fields land in the fp32 ones, subnormals included), times
//         2^(s-7) (one rounding of value·2^(s-127), as the scalar's) for scale
//         byte s <= 134, else times 2^120 (exact) and the scale; NaN codes
//         0x7F/0xFF give the scalar's 0x7FC00000.
// Only intrinsics (isa_intrinsics.h) and linear_tile.h here (see linear_tile.h).
#include <cstdint>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

constexpr int kOutTile = 8;   // outputs of one fold (a sub-tile)
constexpr int kTileOut = 32;  // outputs per tile call: sub-tiles sharing the converted x
constexpr int kChunks = kBlock / 16;  // 16-lane chunks per block
constexpr int kSpan = 8;              // blocks x rows of one K span

inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A block's 16 lanes: lo = lanes 0..7, hi = lanes 8..15.
struct V2 {
  __m256 lo, hi;
};

inline V2 zero2() { return V2{_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline __m256 add_ps(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }

// ue8m0 byte -> 2^(b-127) (the scalar's scale_value: 255 NaN, 0 2^-127).
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

// Lanes [n, 8) of v set to zero (0 <= n <= 8).
inline __m256 keep_below(__m256 v, int n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane)));
}

inline __m256 bf16x8_to_ps(const uint16_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

inline void prefetch_lines(const void* p, int bytes) {
  for (int i = 0; i < bytes; i += 64) _mm_prefetch(static_cast<const char*>(p) + i, _MM_HINT_T0);
}

// Up to 16 elements [0, n) of p into a zeroed buffer (partial blocks only).
template <class E>
inline void copy_tail(const E* p, int n, E* buf) {
  for (int i = 0; i < 16; ++i) buf[i] = i < n ? p[i] : E{};
}

// Row of x, columns [k, k + n) -> xb[0, 128·ceil(n/128)) as fp32, zero from n on.
inline void load_x(const uint16_t* x, int n, float* xb) {
  for (int c = 0; c < ceil_div64(n, kBlock) * kBlock; c += 8) {
    const int rem = n - c;
    __m256 v = _mm256_setzero_ps();
    if (rem >= 8) {
      v = bf16x8_to_ps(x + c);
    } else if (rem > 0) {
      uint16_t buf[16];
      copy_tail(x + c, rem, buf);
      v = bf16x8_to_ps(buf);
    }
    _mm256_store_ps(xb + c, v);
  }
}
inline void load_x(const float* x, int n, float* xb) {
  for (int c = 0; c < ceil_div64(n, kBlock) * kBlock; c += 8) {
    const int rem = n - c;
    __m256 v = _mm256_setzero_ps();
    if (rem >= 8) {
      v = _mm256_loadu_ps(x + c);
    } else if (rem > 0) {
      float buf[16];
      copy_tail(x + c, rem, buf);
      v = _mm256_loadu_ps(buf);
    }
    _mm256_store_ps(xb + c, v);
  }
}

// Decoders of one weight, as in linear_avx512.cc: prep(o, k, pr) readies the
// fast path for the block at column k of row o (false: use full()), chunk(pr, c)
// gives its 16 weights [16c, 16c+16); full(o, k, out) the whole block exactly in
// every case; part(o, k, n, out) the partial last block of width n, zero from n on.
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
  static V2 chunk(const Prep& pr, int c) { return V2{bf16x8_to_ps(pr.p + 16 * c), bf16x8_to_ps(pr.p + 16 * c + 8)}; }
  void full(int64_t o, int64_t k, V2* out) const {
    Prep pr;
    prep(o, k, &pr);
    for (int c = 0; c < kChunks; ++c) out[c] = chunk(pr, c);
  }
  void part(int64_t o, int64_t k, int n, V2* out) const {
    const uint16_t* p = data + o * in + k;
    for (int c = 0; c < kChunks; ++c) {
      uint16_t buf[16];
      copy_tail(p + 16 * c, n - 16 * c, buf);
      out[c] = V2{bf16x8_to_ps(buf), bf16x8_to_ps(buf + 8)};
    }
  }
};

struct DecodeF32 {
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
  static V2 chunk(const Prep& pr, int c) {
    return V2{_mm256_loadu_ps(pr.p + 16 * c), _mm256_loadu_ps(pr.p + 16 * c + 8)};
  }
  void full(int64_t o, int64_t k, V2* out) const {
    Prep pr;
    prep(o, k, &pr);
    for (int c = 0; c < kChunks; ++c) out[c] = chunk(pr, c);
  }
  void part(int64_t o, int64_t k, int n, V2* out) const {
    const float* p = data + o * in + k;
    for (int c = 0; c < kChunks; ++c) {
      float buf[16];
      copy_tail(p + 16 * c, n - 16 * c, buf);
      out[c] = V2{_mm256_loadu_ps(buf), _mm256_loadu_ps(buf + 8)};
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
  // 8 codes as fp32 bits sign | (b & 0x7F) << 20 (value·2^-120).
  static __m256 bits(const uint8_t* p) {
    const __m256i sx = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_slli_epi32(sx, 20), _mm256_set1_epi32(static_cast<int>(0x87F00000u))));
  }
  // Exact decode of 8 codes at p with scale byte sb (any byte, NaN codes included).
  static __m256 exact8(const uint8_t* p, uint8_t sb) {
    __m256 f = bits(p);
    if (sb <= 134) {
      f = _mm256_mul_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32((sb + 120) << 23)));
    } else {
      f = _mm256_mul_ps(_mm256_mul_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(247 << 23))),
                        _mm256_set1_ps(kScale.v[sb]));
    }
    const __m256i sx = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i mag = _mm256_set1_epi32(0x7F);
    const __m256i nan = _mm256_cmpeq_epi32(_mm256_and_si256(sx, mag), mag);
    return _mm256_blendv_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), _mm256_castsi256_ps(nan));
  }
  static bool has_nan_code(const uint8_t* p) {
    const __m256i mag = _mm256_set1_epi8(0x7F);
    int any = 0;
    for (int i = 0; i < kBlock; i += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
      any |= _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(v, mag), mag));
    }
    return any != 0;
  }
  struct Prep {
    const uint8_t* p;
    __m256 m;
  };
  // Fast path: scale byte <= 134 (one multiply) and no NaN code in the block.
  bool prep(int64_t o, int64_t k, Prep* pr) const {
    pr->p = data + o * in + k;
    const uint8_t sb = scale[(o / kBlock) * nbk + k / kBlock];
    pr->m = _mm256_castsi256_ps(_mm256_set1_epi32((sb + 120) << 23));
    return sb <= 134 && !has_nan_code(pr->p);
  }
  static V2 chunk(const Prep& pr, int c) {
    return V2{_mm256_mul_ps(bits(pr.p + 16 * c), pr.m), _mm256_mul_ps(bits(pr.p + 16 * c + 8), pr.m)};
  }
  void full(int64_t o, int64_t k, V2* out) const {
    const uint8_t* p = data + o * in + k;
    const uint8_t sb = scale[(o / kBlock) * nbk + k / kBlock];
    for (int c = 0; c < kChunks; ++c) out[c] = V2{exact8(p + 16 * c, sb), exact8(p + 16 * c + 8, sb)};
  }
  void part(int64_t o, int64_t k, int n, V2* out) const {
    const uint8_t* p = data + o * in + k;
    const uint8_t sb = scale[(o / kBlock) * nbk + k / kBlock];
    for (int c = 0; c < kChunks; ++c) {
      uint8_t buf[16];
      copy_tail(p + 16 * c, n - 16 * c, buf);
      // Lanes from n on: zero (scaled zero codes can be NaN).
      out[c] = V2{keep_below(exact8(buf, sb), n - 16 * c), keep_below(exact8(buf + 8, sb), n - 16 * c - 8)};
    }
  }
};

// beta of 8 outputs: acc[j] is output j's 16 lanes; the fold tree of linear.h on
// all of them at once (lane l + lane l+h per level), then back to output order.
// [a.lo + a.hi | b.lo + b.hi]: insert and extract, not vperm2f128 (microcoded on Zen 1).
inline __m256 add_halves(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_insertf128_ps(a, _mm256_castps256_ps128(b), 1),
                       _mm256_insertf128_ps(b, _mm256_extractf128_ps(a, 1), 0));
}

inline __m256 fold8(const V2* acc) {
  __m256 v[8], s[4], u[2];
  for (int j = 0; j < 8; ++j) v[j] = _mm256_add_ps(acc[j].lo, acc[j].hi);  // l += l+8
  for (int p = 0; p < 4; ++p)  // l += l+4: one 128-bit half per output
    s[p] = add_halves(v[2 * p], v[2 * p + 1]);
  for (int q = 0; q < 2; ++q)  // l += l+2
    u[q] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * q], s[2 * q + 1], 0x44),
                         _mm256_shuffle_ps(s[2 * q], s[2 * q + 1], 0xEE));
  const __m256 f = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], 0x88),  // l += l+1
                                 _mm256_shuffle_ps(u[0], u[1], 0xDD));
  // f[4h + i] is output 2i + h.
  return _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline void add_product(V2& a, const float* x, const V2& w) {
  a.lo = _mm256_add_ps(a.lo, _mm256_mul_ps(_mm256_load_ps(x), w.lo));
  a.hi = _mm256_add_ps(a.hi, _mm256_mul_ps(_mm256_load_ps(x + 8), w.hi));
}

// Fast path: lanes of R rows x NO outputs over one block, decoded 16 weights at
// a time (each used by all R rows); 2·NO·R chains interleaved. Row r's block
// is xb + ((i0 + r)·x_blocks + bb)·128; its lanes go to lanes[(i0 + r)·x_blocks + bb][j + q].
template <class Dec, int NO, int R>
inline void lanes_fast(const typename Dec::Prep (&pr)[NO], const float* xb, int x_blocks, int i0, int bb,
                       V2 (*lanes)[kOutTile], int j) {
  V2 a[R][NO];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < NO; ++q) a[r][q] = zero2();
  for (int c = 0; c < kChunks; ++c) {
    V2 w[NO];
    for (int q = 0; q < NO; ++q) w[q] = Dec::chunk(pr[q], c);
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < NO; ++q) add_product(a[r][q], xb + ((i0 + r) * x_blocks + bb) * kBlock + 16 * c, w[q]);
  }
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < NO; ++q) lanes[(i0 + r) * x_blocks + bb][j + q] = a[r][q];
}

// General path for one block (scale bytes > 134, NaN codes, the partial block).
template <class Dec, int NO>
void block_general(const Dec& dec, int64_t o, int64_t k, int width, bool partial, int nt, const float* xb,
                   int x_blocks, int bb, V2 (*lanes)[kOutTile], int j) {
  V2 w[NO][kChunks];
  for (int q = 0; q < NO; ++q) {
    if (partial) dec.part(o + q, k, width, w[q]);
    else dec.full(o + q, k, w[q]);
  }
  for (int i = 0; i < nt; ++i)
    for (int q = 0; q < NO; ++q) {
      V2 a = zero2();
      for (int c = 0; c < kChunks; ++c) add_product(a, xb + (i * x_blocks + bb) * kBlock + 16 * c, w[q][c]);
      lanes[i * x_blocks + bb][j + q] = a;
    }
}

// Lanes of outputs j .. j+NO-1, blocks [0, nb) of the span at column kb, every
// row. Weight rows are prefetched one pair ahead (as linear_avx512.cc).
template <class Dec, int NO>
void span_lanes(const Dec& dec, const Tile& tl, int64_t o_sub, int j, int64_t kb, int nb, int width, bool partial,
                const float* xb, V2 (*lanes)[kOutTile]) {
  const int nt = tl.nt;
  const int64_t o = o_sub + j, jt = o - tl.o;  // jt: output index within the tile
  if (partial) {
    block_general<Dec, NO>(dec, o, kb, width, true, nt, xb, nb, 0, lanes, j);
    return;
  }
  const bool next_pair = jt + 2 < tl.no;
  const int64_t pf_o = next_pair ? o + 2 : tl.o, pf_dk = next_pair ? 0 : int64_t{nb} * kBlock;
  const int pf_n = next_pair ? (jt + 4 <= tl.no ? 2 : 1) : (tl.no >= 2 ? 2 : 1);
  for (int bb = 0; bb < nb; ++bb) {
    const int64_t k = kb + bb * kBlock;
    if (k + pf_dk + kBlock <= tl.k1)
      for (int q = 0; q < pf_n; ++q) dec.prefetch(pf_o + q, k + pf_dk);
    typename Dec::Prep pr[NO];
    bool fast = true;
    for (int q = 0; q < NO; ++q) fast = dec.prep(o + q, k, &pr[q]) && fast;
    if (!fast) {
      block_general<Dec, NO>(dec, o, k, width, false, nt, xb, nb, bb, lanes, j);
      continue;
    }
    int i = 0;
    for (; i + 2 <= nt; i += 2) lanes_fast<Dec, NO, 2>(pr, xb, nb, i, bb, lanes, j);
    if (i < nt) lanes_fast<Dec, NO, 1>(pr, xb, nb, i, bb, lanes, j);
  }
}

// Per span: x converted once, then every 8-output sub-tile: lanes, fold, chain.
template <class Dec, class XT>
void tile(const Tile& tl) {
  constexpr int kSubs = kTileOut / kOutTile;
  const Dec dec(*tl.w);
  const XT* x = static_cast<const XT*>(tl.x);
  const int nt = tl.nt, no = tl.no;
  const int64_t n_blk = ceil_div64(tl.k1 - tl.k0, kBlock);
  const int64_t n_full = (tl.k1 - tl.k0) / kBlock;  // the last block may be partial
  const int span = kSpan / nt;                         // blocks per span, >= 1
  alignas(32) float xb[kSpan * kBlock];                // row i, block bb at (i·nb + bb)·128
  V2 lanes[kSpan][kOutTile];                           // row i, block bb at [i·nb + bb][j]
  __m256 part[kRowTile][kSubs], total[kRowTile][kSubs];
  for (int64_t b0 = 0; b0 < n_blk;) {
    const bool partial = b0 == n_full;
    const int nb = partial ? 1 : static_cast<int>(n_full - b0 < span ? n_full - b0 : span);
    const int64_t kb = tl.k0 + b0 * kBlock;
    const int width = partial ? static_cast<int>(tl.k1 - kb) : nb * kBlock;
    for (int i = 0; i < nt; ++i) load_x(x + i * tl.x_stride + kb, width, xb + i * nb * kBlock);
    for (int sub = 0; sub * kOutTile < no; ++sub) {
      const int ns = no - sub * kOutTile < kOutTile ? no - sub * kOutTile : kOutTile;
      const int64_t o_sub = tl.o + sub * kOutTile;
      if (ns < kOutTile)
        for (int s = 0; s < kSpan; ++s)
          for (int j = ns; j < kOutTile; ++j) lanes[s][j] = zero2();
      int j = 0;
      for (; j + 2 <= ns; j += 2) span_lanes<Dec, 2>(dec, tl, o_sub, j, kb, nb, width, partial, xb, lanes);
      if (j < ns) span_lanes<Dec, 1>(dec, tl, o_sub, j, kb, nb, width, partial, xb, lanes);
      for (int bb = 0; bb < nb; ++bb) {
        const int64_t b = b0 + bb;
        const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
        for (int i = 0; i < nt; ++i) {
          const __m256 beta = fold8(lanes[i * nb + bb]);
          chain_beta(chain, beta, part[i][sub], total[i][sub], add_ps);
        }
      }
    }
    b0 += nb;
  }
  for (int i = 0; i < nt; ++i)
    for (int sub = 0; sub * kOutTile < no; ++sub)
      _mm256_storeu_ps(tl.y + i * kMaxOutTile + sub * kOutTile, total[i][sub]);
}

template <class XT>
void tile_any(const Tile& tl) {
  switch (tl.w->format) {
    case WeightFormat::kBF16: return tile<DecodeBf16, XT>(tl);
    case WeightFormat::kF32: return tile<DecodeF32, XT>(tl);
    case WeightFormat::kFP8: return tile<DecodeFp8, XT>(tl);
    case WeightFormat::kFP4: break;  // never here: run_fp4 (linear_fp4.h)
  }
}

// --- GEMM tile: FP8 / BF16 weights, bf16 x, up to kMaxRowTile rows ---
// Each block of 8 outputs is decoded once (exactly, fp32, 4 KiB) for all rows.
// Where the range check of linear_avx512.cc passes for (row block, weight block)
// (every product of bf16 x and the bf16-exact weight is exact in fp32: normal or
// zero, finite), a lane step is one FMA, which then equals the multiply and add;
// elsewhere the separate multiply and add.

// Exponent range of 128 bf16 values (linear_avx512.cc's bf16_range): *lo =
// smallest biased exponent of a non-zero value (0 if any is subnormal, Inf or
// NaN), *hi = largest; all zero: lo = 512, hi = 0.
inline void bf16_range(const uint16_t* p, int* lo, int* hi) {
  const __m256i mag = _mm256_set1_epi16(0x7FFF), one = _mm256_set1_epi16(1);
  __m256i mx = _mm256_setzero_si256(), mn = _mm256_set1_epi16(-1);
  for (int h = 0; h < 8; ++h) {
    const __m256i m = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * h)), mag);
    mx = _mm256_max_epu16(mx, m);
    mn = _mm256_min_epu16(mn, _mm256_sub_epi16(m, one));  // zero wraps to 0xFFFF
  }
  const __m128i a = _mm_max_epu16(_mm256_castsi256_si128(mx), _mm256_extracti128_si256(mx, 1));
  const __m128i b = _mm_min_epu16(_mm256_castsi256_si128(mn), _mm256_extracti128_si256(mn, 1));
  const __m128i not_a = _mm_xor_si128(a, _mm_set1_epi16(-1));
  const uint32_t max_mag = 0xFFFFu - (static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_minpos_epu16(not_a))) & 0xFFFF);
  const uint32_t min_mag = (static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_minpos_epu16(b))) & 0xFFFF) + 1;
  *lo = max_mag >= 0x7F80 ? 0 : static_cast<int>(min_mag >> 7);
  *hi = static_cast<int>(max_mag >> 7);
}

// The x exponent window of a full weight block (linear_tile.h; empty: none, e.g.
// NaN codes, extreme scales, subnormal weights).
inline XWindow fma_window(const DecodeFp8& d, int64_t o, int64_t k) {
  if (DecodeFp8::has_nan_code(d.data + o * d.in + k)) return kNoWindow;
  return fp8_window(d.scale[(o / kBlock) * d.nbk + k / kBlock]);
}
inline XWindow fma_window(const DecodeBf16& d, int64_t o, int64_t k) {
  int wl = 0, wh = 0;
  bf16_range(d.data + o * d.in + k, &wl, &wh);
  return bf16_window(wl, wh);
}

// beta of 8 outputs for one row block xr (fp32) against w (8 outputs' blocks).
template <bool kFma>
inline __m256 row_beta(const float* xr, const V2 (*w)[kChunks]) {
  V2 a[kOutTile];
  for (int q = 0; q < kOutTile; ++q) a[q] = zero2();
  for (int c = 0; c < kChunks; ++c) {
    const __m256 x0 = _mm256_load_ps(xr + 16 * c), x1 = _mm256_load_ps(xr + 16 * c + 8);
    for (int q = 0; q < kOutTile; ++q) {
      if constexpr (kFma) {
        a[q].lo = _mm256_fmadd_ps(x0, w[q][c].lo, a[q].lo);
        a[q].hi = _mm256_fmadd_ps(x1, w[q][c].hi, a[q].hi);
      } else {
        a[q].lo = _mm256_add_ps(a[q].lo, _mm256_mul_ps(x0, w[q][c].lo));
        a[q].hi = _mm256_add_ps(a[q].hi, _mm256_mul_ps(x1, w[q][c].hi));
      }
    }
  }
  return fold8(a);
}

template <class Dec>
void gemm_tile(const Tile& tl) {
  constexpr int kSubs = kTileOut / kOutTile;
  constexpr int kPrefetchBlocks = 2;  // weight rows prefetched this many blocks ahead
  const Dec dec(*tl.w);
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int nt = tl.nt, no = tl.no;
  const int64_t n_blk = ceil_div64(tl.k1 - tl.k0, kBlock);
  alignas(32) float xb[kMaxRowTile * kBlock];  // row i's block, fp32
  int xlo[kMaxRowTile], xhi[kMaxRowTile];
  alignas(32) V2 w[kOutTile][kChunks];  // 8 outputs' block, exact fp32
  __m256 part[kMaxRowTile][kSubs], total[kMaxRowTile][kSubs];
  for (int64_t b = 0; b < n_blk; ++b) {
    const int64_t k = tl.k0 + b * kBlock;
    const int width = tl.k1 - k < kBlock ? static_cast<int>(tl.k1 - k) : kBlock;
    const bool partial = width < kBlock;
    for (int i = 0; i < nt; ++i) {
      load_x(x + i * tl.x_stride + k, width, xb + i * kBlock);
      if (!partial) bf16_range(x + i * tl.x_stride + k, &xlo[i], &xhi[i]);
    }
    const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
    const bool pf = k + (kPrefetchBlocks + 1) * kBlock <= tl.k1;
    for (int s = 0; s * kOutTile < no; ++s) {
      const int ns = no - s * kOutTile < kOutTile ? no - s * kOutTile : kOutTile;
      const int64_t o = tl.o + s * kOutTile;
      XWindow win = partial ? kNoWindow : XWindow{1, 1 << 20};
      for (int q = 0; q < kOutTile; ++q) {
        if (q >= ns) {
          for (int c = 0; c < kChunks; ++c) w[q][c] = zero2();
          continue;
        }
        if (pf) dec.prefetch(o + q, k + kPrefetchBlocks * kBlock);
        if (partial) {
          dec.part(o + q, k, width, w[q]);
          continue;
        }
        dec.full(o + q, k, w[q]);
        win = intersect(win, fma_window(dec, o + q, k));
      }
      for (int i = 0; i < nt; ++i) {
        const bool row_fma = !win.empty() && xlo[i] >= win.lo && xhi[i] <= win.hi;
        const __m256 beta = row_fma ? row_beta<true>(xb + i * kBlock, w) : row_beta<false>(xb + i * kBlock, w);
        chain_beta(chain, beta, part[i][s], total[i][s], add_ps);
      }
    }
  }
  for (int i = 0; i < nt; ++i)
    for (int s = 0; s * kOutTile < no; ++s) _mm256_storeu_ps(tl.y + i * kMaxOutTile + s * kOutTile, total[i][s]);
}

// A tile of up to kMaxRowTile rows as span tiles of kRowTile rows.
template <class XT>
void tile_rows(const Tile& tl) {
  Tile t = tl;
  const XT* x = static_cast<const XT*>(tl.x);
  for (int i0 = 0; i0 < tl.nt; i0 += kRowTile) {
    t.nt = tl.nt - i0 < kRowTile ? tl.nt - i0 : kRowTile;
    t.x = x + i0 * tl.x_stride;
    t.y = tl.y + i0 * kMaxOutTile;
    tile_any<XT>(t);
  }
}

// --- Small-row FP8 tile: 1, 2 or 4 rows of bf16 x, FP8 weights in the stored layout ---
// The K order of linear.h in its natural lanes (a chunk's 16 bytes widen to lanes 0..7 and
// 8..15). Per block and output, the fast decode (fp32 bits sign | (b & 0x7F) << 20, times
// 2^(s-7)) feeds every row by FMA where the range check passes; a block pair that holds a NaN
// code (seen while decoding: the pair is then redone) or a scale byte above 134, or fails the
// check, runs the exact decode with separate multiply and add, as the span tile does.

// Four lane sets (lo: lanes 0..7, hi: 8..15 of set j) folded by the tree of linear.h; lane j of
// the result is set j's beta (lanes 4..7: copies).
inline __m256 fold4_natural(const V2 (&a)[4]) {
  __m256 v[4];
  for (int j = 0; j < 4; ++j) v[j] = _mm256_add_ps(a[j].lo, a[j].hi);  // l += l+8
  const __m256 s01 = add_halves(v[0], v[1]), s23 = add_halves(v[2], v[3]);  // l += l+4
  // l += l+2: [set0 l0, l1, set2 l0, l1 | set1 .., set3 ..]
  const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, 0x44), _mm256_shuffle_ps(s01, s23, 0xEE));
  const __m256 f = _mm256_add_ps(u, _mm256_shuffle_ps(u, u, 0xB1));  // l += l+1: lanes 0, 4, 2, 6
  return _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 4, 2, 6, 0, 4, 2, 6));
}

// Lane sets j = (block b < BS, row r, output q) of R rows x NO outputs x BS blocks (R·NO·BS <=
// 4), the betas in lanes j = (b·R + r)·NO + q of the result: wp[q] output q's first
// block's 128 code bytes (the second follows at +128 when `second`; else the first is
// computed twice), sb[q][b] its scale bytes, xs[r] row r's first block as fp32 (the second
// at +128). kExact: exact8 decode, multiply and add (any code and scale); else the fast
// decode, FMA when kFma, and *nan set when a code is a NaN (the result is then to be
// discarded).
template <int R, int NO, int BS, bool kFma, bool kExact>
inline __m256 fp8_small_blocks(const uint8_t* const (&wp)[NO], const uint8_t (&sb)[NO][2],
                               const float* const (&xs)[R], bool second, bool* nan) {
  const __m128i mag = _mm_set1_epi8(0x7F);
  const __m256i keep = _mm256_set1_epi32(static_cast<int>(0x87F00000u));
  __m128i nan_any = _mm_setzero_si128();
  V2 acc[4];
  for (int j = 0; j < 4; ++j) acc[j] = zero2();
  float mf[NO][2];  // the fast decode's multiplier 2^(s-7), broadcast from memory in the loop
  for (int q = 0; q < NO; ++q)
    for (int b = 0; b < 2; ++b) mf[q][b] = kScale.v[sb[q][b] + 120 < 255 ? sb[q][b] + 120 : 254];
  // Every set's chains interleaved (blocks and outputs inside the chunk loop): 8 FMA chains.
#pragma GCC unroll 8
  for (int c = 0; c < kChunks; ++c) {
#pragma GCC unroll 2
    for (int b = 0; b < BS; ++b) {
      const int bo = second ? b : 0;  // a lone block computes twice; the copy is not chained
#pragma GCC unroll 2
      for (int q = 0; q < NO; ++q) {
        const uint8_t s = sb[q][bo];
        const uint8_t* p = wp[q] + bo * kBlock + 16 * c;
        V2 w;
        if constexpr (kExact) {
          w = V2{DecodeFp8::exact8(p, s), DecodeFp8::exact8(p + 8, s)};
        } else {
          const __m256 m = _mm256_broadcast_ss(&mf[q][bo]);
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
          nan_any = _mm_or_si128(nan_any, _mm_cmpeq_epi8(_mm_and_si128(v, mag), mag));
          w.lo = _mm256_mul_ps(
              _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(_mm256_cvtepi8_epi32(v), 20), keep)), m);
          w.hi = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(
                                   _mm256_slli_epi32(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(v, v)), 20), keep)),
                               m);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          V2& a = acc[(b * R + r) * NO + q];
          const float* xc = xs[r] + bo * kBlock + 16 * c;
          if constexpr (kFma) {
            a.lo = _mm256_fmadd_ps(_mm256_load_ps(xc), w.lo, a.lo);
            a.hi = _mm256_fmadd_ps(_mm256_load_ps(xc + 8), w.hi, a.hi);
          } else {
            add_product(a, xc, w);
          }
        }
      }
    }
  }
  if constexpr (!kExact) *nan = _mm_movemask_epi8(nan_any) != 0;
  return fold4_natural(acc);
}

// The FP8 side of small_tile: R rows x 1 output (one weight row streamed at a time).
struct SmallFp8 {
  static constexpr int outputs(int) { return 1; }
  static constexpr int kScaleLo = 10, kScaleHi = 134;   // fp8_window's scale range
  static constexpr int kLoBase = 144, kHiBase = 368;     // x exponents in [144 - s, 368 - s]
  static constexpr int kBlockBytes = kBlock, kAhead = 2;  // bytes per block row; prefetch distance
  const DecodeFp8 dec;
  explicit SmallFp8(const LinearWeight& w) : dec(w) {}
  static void load_x(const uint16_t* x, int nb, float* xs) { linear_tile::load_x(x, nb * kBlock, xs); }
  const uint8_t* codes(int64_t o, int64_t k) const { return dec.data + o * dec.in + k; }
  const uint8_t* scales(int64_t o, int64_t k) const { return dec.scale + (o / kBlock) * dec.nbk + k / kBlock; }
  static void prefetch(const uint8_t* p) { prefetch_lines(p, kBlockBytes); }
  // Betas of the sets over blocks bb (and bb + 1 when second); [lo, hi]: the rows' scale
  // bounds. FMA where the range check passes, the fast decode while every scale byte is
  // <= 134, and the exact decode when a NaN code turns up (or a scale byte is larger).
  template <int R, int NO, int BS>
  static __m256 blocks(const uint8_t* const (&wp)[NO], const uint8_t* const (&sp)[NO], int bb,
                       const float* const (&xr)[R], bool second, int lo, int hi) {
    const uint8_t* wb[NO];
    uint8_t sb[NO][2];
    bool fma = lo <= hi, plain = true;
    for (int q = 0; q < NO; ++q) {
      wb[q] = wp[q] + bb * kBlockBytes;
      for (int b = 0; b < 2; ++b) {
        sb[q][b] = sp[q][bb + (second ? b : 0)];
        fma = fma && sb[q][b] >= lo && sb[q][b] <= hi;
        plain = plain && sb[q][b] <= kScaleHi;
      }
    }
    bool nan = true;
    __m256 beta = _mm256_setzero_ps();
    if (fma) beta = fp8_small_blocks<R, NO, BS, true, false>(wb, sb, xr, second, &nan);
    else if (plain) beta = fp8_small_blocks<R, NO, BS, false, false>(wb, sb, xr, second, &nan);
    if (nan) beta = fp8_small_blocks<R, NO, BS, false, true>(wb, sb, xr, second, &nan);
    return beta;
  }
};

// The small-row tile of a format (SmallFp8): R rows (1, 2 or 4; rows from nt on
// repeat the last and are not stored), NO = F::outputs(R) outputs and BS blocks per fold
// (R·NO·BS <= 4 lane sets); K a whole number of blocks. Per span of blocks, x is converted
// once and each block gets the scale-byte bounds [lo, hi] for which every row's products
// are exact (the range check of linear_tile.h solved for the scale byte); then per output
// group the block pairs are computed, folded and chained.
template <class F, int R>
void small_tile(const Tile& tl) {
  constexpr int NO = F::outputs(R), BS = R * NO == 4 ? 1 : 2, kSets = R * NO;
  constexpr int kSecond = kSets == 1 ? 0x01 : 0xEE;  // the second block's betas to lanes 0..
  constexpr int kGroups = kTileOut / NO, kSpanBlocks = 32 / R;  // x of a span: 16 KiB
  const F f(*tl.w);
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock;
  const int groups = (tl.no + NO - 1) / NO;
  alignas(32) float xs[R][kSpanBlocks * kBlock];
  int s_lo[kSpanBlocks], s_hi[kSpanBlocks];  // per block: scale bytes admitting FMA for every row
  __m256 part[kGroups], total[kGroups];
  for (int64_t b0 = 0; b0 < n_blk; b0 += kSpanBlocks) {
    const int nb = static_cast<int>(n_blk - b0 < kSpanBlocks ? n_blk - b0 : kSpanBlocks);
    const int64_t kb = tl.k0 + b0 * kBlock;
    for (int bb = 0; bb < nb; ++bb) s_lo[bb] = F::kScaleLo, s_hi[bb] = F::kScaleHi;
    for (int r = 0; r < R && r < tl.nt; ++r) {
      const uint16_t* xr = x + r * tl.x_stride + kb;
      F::load_x(xr, nb, xs[r]);
      for (int bb = 0; bb < nb; ++bb) {
        int xlo = 0, xhi = 0;
        bf16_range(xr + bb * kBlock, &xlo, &xhi);
        const int lo = F::kLoBase - xlo, hi = F::kHiBase - xhi;
        s_lo[bb] = xlo < 1 ? 256 : lo > s_lo[bb] ? lo : s_lo[bb];  // xlo 0: subnormal, Inf or NaN
        s_hi[bb] = hi < s_hi[bb] ? hi : s_hi[bb];
      }
    }
    const float* xrow[R];
    for (int r = 0; r < R; ++r) xrow[r] = xs[r < tl.nt || tl.nt < 1 ? r : tl.nt - 1];
    for (int g = 0; g < groups; ++g) {
      const uint8_t* wp[NO];
      const uint8_t* sp[NO];
      for (int q = 0; q < NO; ++q) {
        const int64_t o = tl.o + (g * NO + q < tl.no ? g * NO + q : tl.no - 1);  // a short group repeats its last
        wp[q] = f.codes(o, kb);
        sp[q] = f.scales(o, kb);
      }
      for (int bb = 0; bb < nb; bb += BS) {
        if (bb + F::kAhead + BS <= nb)
          for (int q = 0; q < NO; ++q)
            for (int a = 0; a < BS; ++a) F::prefetch(wp[q] + (bb + F::kAhead + a) * F::kBlockBytes);
        const bool second = BS == 2 && bb + 1 < nb;
        const int lo = second && s_lo[bb + 1] > s_lo[bb] ? s_lo[bb + 1] : s_lo[bb];
        const int hi = second && s_hi[bb + 1] < s_hi[bb] ? s_hi[bb + 1] : s_hi[bb];
        const float* xr[R];
        for (int r = 0; r < R; ++r) xr[r] = xrow[r] + bb * kBlock;
        const __m256 beta = F::template blocks<R, NO, BS>(wp, sp, bb, xr, second, lo, hi);
        chain_beta(block_chain(b0 + bb, n_blk, tl.g_blk), beta, part[g], total[g], add_ps);
        if (second)
          chain_beta(block_chain(b0 + bb + 1, n_blk, tl.g_blk), _mm256_shuffle_ps(beta, beta, kSecond), part[g],
                     total[g], add_ps);
      }
    }
  }
  for (int g = 0; g < groups; ++g) {
    alignas(32) float v[8];
    _mm256_store_ps(v, total[g]);
    for (int j = 0; j < kSets; ++j) {
      const int r = j / NO, jo = g * NO + j % NO;
      if (r < tl.nt && jo < tl.no) tl.y[r * kMaxOutTile + jo] = v[j];
    }
  }
}

template <class F>
void small_rows(const Tile& tl) {
  return tl.nt == 1 ? small_tile<F, 1>(tl) : tl.nt == 2 ? small_tile<F, 2>(tl) : small_tile<F, 4>(tl);
}

// FP8 up to kSmallRows rows: the small-row tile; FP8 / BF16 with kGemmMinRows rows or more:
// the GEMM tile; else span tiles (FP4 never comes here: linear_fp4.h).
constexpr int kGemmMinRows = 3;
constexpr int kSmallRows = 4;  // FP8 up to this many rows: the small-row tile
void tile_bf16(const Tile& tl) {
  const int nt = tl.nt;
  const bool whole_blocks = (tl.k1 - tl.k0) % kBlock == 0;
  if (nt <= kSmallRows && whole_blocks && tl.w->format == WeightFormat::kFP8) return small_rows<SmallFp8>(tl);
  if (nt >= kGemmMinRows && tl.w->format == WeightFormat::kFP8) return gemm_tile<DecodeFp8>(tl);
  if (nt >= kGemmMinRows && tl.w->format == WeightFormat::kBF16) return gemm_tile<DecodeBf16>(tl);
  tile_rows<uint16_t>(tl);
}

}  // namespace

Kernels avx2_kernels() { return Kernels{kTileOut, kMaxRowTile, tile_bf16, tile_rows<float>, false, avx2_fp4_tile}; }

}  // namespace dsv4::kernels::linear_tile
