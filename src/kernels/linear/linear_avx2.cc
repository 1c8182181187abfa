// AVX2 + FMA tile of the linear engine (linear_tile.h), 32 outputs per tile in
// sub-tiles of 8: BF16 weights with bf16 x from 3 rows, the GEMM tile; otherwise
// (BF16/F32 weights, fp32 x, partial K blocks) the span tile. FP4 and FP8 weights never
// come here: run_quant (linear.cc) takes them to the tiles of linear_fp4.h / linear_fp8.h
// (linear_fp4_avx2.cc, linear_fp8_avx2.cc). The span tile: same scheme as
// linear_avx512.cc with a block's 16 lanes in two 8-lane vectors (lanes 0..7 and 8..15):
// K runs in spans of up to 8 / nt blocks of 128; per span and output pair, each block's
// weights are decoded 16 at a time and every row's lane vectors (lane l sums the products k ≡ l mod 16 in ascending k,
// separate vmulps / vaddps — no FMA, see linear_tile.h) are kept; then per block
// the 8 outputs' lane vectors are folded together by the tree of linear.h,
// transposed (level h adds lane l and lane l+h of every output in one vaddps),
// and chained in ascending blocks, so each result has the scalar variant's bits.
// Decoding, exact and equal to the scalar decode_block bit for bit:
//   BF16: bits << 16.   F32: as stored.
// Only intrinsics (isa_intrinsics.h), linear_prefetch.h and linear_tile.h here (see linear_tile.h).
#include <cstdint>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_prefetch.h"
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

// Lanes [n, 8) of v set to zero (0 <= n <= 8).
inline __m256 keep_below(__m256 v, int n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane)));
}

inline __m256 bf16x8_to_ps(const uint16_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
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
  static V2 chunk(const Prep& pr, int c) { return V2{bf16x8_to_ps(pr.p + 16 * c), bf16x8_to_ps(pr.p + 16 * c + 8)}; }
  void full(int64_t o, int64_t k, V2* out) const {
    Prep pr;
    prep(o, k, &pr);
    for (int c = 0; c < kChunks; ++c) out[c] = chunk(pr, c);
  }
  void part(int64_t o, int64_t k, int n, V2* out) const {
    const uint16_t* p = w.at(o, k);
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
  DSV4_PREFETCH_FN void prefetch(int64_t o, int64_t k) const { prefetch_lines(data + o * in + k, 4 * kBlock); }
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
    case WeightFormat::kFP8:
    case WeightFormat::kFP4: break;  // never here: run_quant (linear_fp4.h, linear_fp8.h)
  }
}

// --- GEMM tile: BF16 weights, bf16 x, up to kMaxRowTile rows ---
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
inline XWindow fma_window(const DecodeBf16& d, int64_t o, int64_t k) {
  int wl = 0, wh = 0;
  bf16_range(d.w.at(o, k), &wl, &wh);
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

// BF16 with kGemmMinRows rows or more: the GEMM tile; else span tiles (FP4 and FP8 never
// come here: linear_fp4.h, linear_fp8.h).
constexpr int kGemmMinRows = 3;
void tile_bf16(const Tile& tl) {
  if (tl.nt >= kGemmMinRows && tl.w->format == WeightFormat::kBF16) return gemm_tile<DecodeBf16>(tl);
  tile_rows<uint16_t>(tl);
}

}  // namespace

Kernels avx2_kernels() {
  return Kernels{kTileOut, kMaxRowTile, tile_bf16, tile_rows<float>, avx2_fp4_tile, avx2_fp8_tile};
}

}  // namespace dsv4::kernels::linear_tile
