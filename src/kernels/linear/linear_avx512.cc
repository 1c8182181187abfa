// AVX-512 (F/BW/VL) tile of the linear engine (linear_tile.h), 64 outputs per
// tile in sub-tiles of 16. BF16 weights with bf16 x go to a GEMM tile (each
// weight block decoded once for up to 64 rows): linear_avx512_gemm.cc on
// kAvx512Bf16 with VBMI, else from kFmaGemmMinRows rows fma_gemm_tile below.
// FP4 and FP8 weights never come here: run_quant (linear.cc) takes them to the tiles of
// linear_fp4.h / linear_fp8.h (linear_fp4_avx512.cc, linear_fp8_avx512*.cc).
// Otherwise the span tile: K runs in spans of up to 8 / nt blocks of 128 (T = 1: 1024 columns, so
// each weight row is read in long runs); per span and output pair, each block's
// weights are decoded 32 at a time and every row's lane vector (lane l sums the
// products k ≡ l mod 16 in ascending k) is kept; then per block the 16
// outputs' lane vectors are folded together by the tree of linear.h, transposed
// (level h adds lane l and lane l+h of every output in one vaddps), and chained
// in ascending blocks, so each result has the scalar variant's bits.
// Lane sums: separate vmulps / vaddps, or (kAvx512Bf16, bf16 x, BF16
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
// Only intrinsics (isa_intrinsics.h) and linear_tile.h here (see linear_tile.h).
#include <cstdint>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_avx512_decode.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

constexpr int kTileOut = 64;       // outputs per tile call: sub-tiles sharing the converted x
constexpr int kSpan = 8;           // blocks x rows of one K span (lane buffer 8 KiB)
constexpr int kPrefetchPairs = 1;  // weight rows prefetched this many output pairs ahead

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
  // One block for 8 rows: all of it decoded first (measured faster when streaming
  // from memory), else chunk pair by chunk pair.
  constexpr int kPre = NB == 1 && R >= 8 ? kChunks / 2 : 1;
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
  XWindow win{1, 1 << 20};
  if constexpr (Dec::kDot) {
    if (sp.xd != nullptr && nt >= Dec::kDotMinRows) {
      for (int q = 0; q < NO; ++q)
        for (int bb = 0; bb < NB; ++bb) win = intersect(win, Dec::dot_window(pr[q][bb]));
      dot = !win.empty();
    }
  }
  auto use_dot = [&](int i0, int rows) {
    if (!dot) return false;
    for (int r = 0; r < rows; ++r)
      for (int bb = 0; bb < NB; ++bb) {
        const int idx = (i0 + r) * sp.nb + bb0 + bb;
        if (sp.xlo[idx] < win.lo || sp.xhi[idx] > win.hi) return false;
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
      for (int bb = 0; bb < sp.nb; ++bb) {
        const int64_t b = b0 + bb;
        const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
        for (int i = 0; i < nt; ++i) {
          const __m512 beta = fold16(lanes[i * sp.nb + bb]);
          chain_beta(chain, beta, part[i][sub], total[i][sub], add_ps);
        }
      }
    }
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
    case WeightFormat::kFP8:
    case WeightFormat::kFP4: break;  // never here: run_quant (linear_fp4.h, linear_fp8.h)
  }
}

// A tile of up to kMaxRowTile rows as span tiles of kRowTile rows.
template <class XT, bool kDot>
void tile_rows(const Tile& tl) {
  Tile t = tl;
  const XT* x = static_cast<const XT*>(tl.x);
  for (int i0 = 0; i0 < tl.nt; i0 += kRowTile) {
    t.nt = tl.nt - i0 < kRowTile ? tl.nt - i0 : kRowTile;
    t.x = x + i0 * tl.x_stride;
    t.y = tl.y + i0 * kMaxOutTile;
    tile_any<XT, kDot>(t);
  }
}

// --- GEMM tile of kAvx512 (no VDPBF16PS): BF16 weights, bf16 x, up to
// kMaxRowTile rows (linear_avx2.cc's, 16 lanes wide) ---
// Each block of 16 outputs is decoded once (exact fp32, 8 KiB) for all rows.
// Inside the window of the range check (dot_window: every product of bf16 x and
// the bf16-exact weight is normal or zero and finite, so exact in fp32) a lane
// step is one FMA, which then equals the multiply and add; elsewhere the
// separate multiply and add.

// The x exponent window of outputs [o, o + ns) at full block k (empty: none).
inline XWindow fma_window(const DecodeBf16& d, int64_t o, int ns, int64_t k) {
  int wl = 0, wh = 0;
  bf16_range(d.w.at(o, k), &wl, &wh, ns, d.w.row_stride());
  return bf16_window(wl, wh);
}

// beta of 16 outputs for one row block xr (fp32) against w (16 outputs' blocks).
template <bool kFma>
inline __m512 row_beta(const float* xr, const __m512 (*w)[kChunks]) {
  __m512 a[kOutTile];
  for (int q = 0; q < kOutTile; ++q) a[q] = _mm512_setzero_ps();
  for (int c = 0; c < kChunks; ++c) {
    const __m512 xc = _mm512_load_ps(xr + 16 * c);
    for (int q = 0; q < kOutTile; ++q)
      a[q] = kFma ? _mm512_fmadd_ps(xc, w[q][c], a[q]) : _mm512_add_ps(a[q], _mm512_mul_ps(xc, w[q][c]));
  }
  return fold16(a);
}

template <class Dec>
void fma_gemm_tile(const Tile& tl) {
  constexpr int kSubs = kTileOut / kOutTile;
  constexpr int kPrefetchBlocks = 2;  // weight rows prefetched this many blocks ahead
  const Dec dec(*tl.w);
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int nt = tl.nt, no = tl.no;
  const int64_t n_blk = ceil_div64(tl.k1 - tl.k0, kBlock);
  alignas(64) float xb[kMaxRowTile * kBlock];  // row i's block, fp32
  int xlo[kMaxRowTile], xhi[kMaxRowTile];
  alignas(64) __m512 w[kOutTile][kChunks];  // 16 outputs' block, exact fp32
  __m512 part[kMaxRowTile][kSubs], total[kMaxRowTile][kSubs];
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
      const XWindow win = partial ? kNoWindow : fma_window(dec, o, ns, k);
      for (int q = 0; q < kOutTile; ++q) {
        if (q >= ns) {
          for (int c = 0; c < kChunks; ++c) w[q][c] = _mm512_setzero_ps();
          continue;
        }
        if (pf) dec.prefetch(o + q, k + kPrefetchBlocks * kBlock);
        if (partial) dec.part(o + q, k, width, w[q]);
        else dec.full(o + q, k, w[q]);
      }
      for (int i = 0; i < nt; ++i) {
        const bool row_fma = !win.empty() && xlo[i] >= win.lo && xhi[i] <= win.hi;
        const __m512 beta = row_fma ? row_beta<true>(xb + i * kBlock, w) : row_beta<false>(xb + i * kBlock, w);
        chain_beta(chain, beta, part[i][s], total[i][s], add_ps);
      }
    }
  }
  for (int i = 0; i < nt; ++i)
    for (int s = 0; s * kOutTile < no; ++s) _mm512_storeu_ps(tl.y + i * kMaxOutTile + s * kOutTile, total[i][s]);
}

// bf16 x: BF16 weights with kFmaGemmMinRows rows or more on the FMA GEMM tile; else
// span tiles (kDot: with VDPBF16PS, kAvx512Bf16 on CPUs without VBMI).
constexpr int kFmaGemmMinRows = 3;
template <bool kDot>
void tile_bf16_fma(const Tile& tl) {
  if (tl.nt >= kFmaGemmMinRows && tl.w->format == WeightFormat::kBF16) return fma_gemm_tile<DecodeBf16>(tl);
  tile_rows<uint16_t, kDot>(tl);
}

// BF16 weights from kBf16GemmMinRows rows, or in tiles (LinearWeight::bf16_tiles: a 16-output
// block is one contiguous stream, range scan included): the GEMM tile; one row of stored
// rows: the span tile, which streams without a range scan of the weights; F32 weights: span
// tiles.
constexpr int kBf16GemmMinRows = 2;
void tile_bf16_gemm(const Tile& tl) {
  if (tl.w->format == WeightFormat::kBF16 && (tl.nt >= kBf16GemmMinRows || tl.w->bf16_tiles))
    return avx512_bf16_gemm_tile(tl);
  tile_rows<uint16_t, true>(tl);
}

}  // namespace

// actq_dequant_row's e4m3 round trip of one 128-block, vectorized (the scalar's cases):
// s = 2^k with k = ceil(log2(fl(max(amax, floor) · fl(1/448)))) as e4m3_scale_exponent;
// t = x / s (exact); |t| >= 2^-6: three mantissa bits, nearest-even at bit 20 of the fp32
// (t <= 448·(1 + 2^-22), so no saturation differs); |t| < 2^-6: the subnormal grid,
// nearest-even multiple of 2^-9; then times s (exact) and the upper half (exact: at most
// four significant bits).
bool avx512_actq_row(const uint16_t* x, int64_t n, uint16_t* xq, float amax_floor) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i hi_words = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29,
                                            27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  __m512i row_max = _mm512_setzero_si512();  // a NaN or Inf anywhere: nothing written
  for (int64_t i = 0; i < n; i += 32) {
    const __m512i w = _mm512_and_si512(_mm512_loadu_si512(x + i), _mm512_set1_epi16(0x7FFF));
    row_max = _mm512_max_epu16(row_max, w);
  }
  if (_mm512_cmpge_epu16_mask(row_max, _mm512_set1_epi16(0x7F80)) != 0) return false;
  for (int64_t b = 0; b < n; b += kBlock) {
    __m512 v[kChunks];
    __m512i mx = _mm512_setzero_si512();
    for (int c = 0; c < kChunks; ++c) {
      v[c] = bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + b + 16 * c)));
      mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(v[c]), abs_mask));
    }
    const uint32_t amax_bits = static_cast<uint32_t>(_mm512_reduce_max_epu32(mx));
    const float amax = __builtin_bit_cast(float, amax_bits);
    const float tt = (amax > amax_floor ? amax : amax_floor) * (1.0f / 448.0f);
    const uint32_t u = __builtin_bit_cast(uint32_t, tt);
    const int k = static_cast<int>((u >> 23) & 0xFF) - 127 + ((u & 0x7FFFFFu) != 0 ? 1 : 0);
    const __m512 inv = _mm512_castsi512_ps(_mm512_set1_epi32((127 - k) << 23));
    const __m512 s = _mm512_castsi512_ps(_mm512_set1_epi32((127 + k) << 23));
    const __m512 small = _mm512_set1_ps(0x1p-6f), grid = _mm512_set1_ps(512.0f), ungrid = _mm512_set1_ps(0x1p-9f);
    const __m512i half = _mm512_set1_epi32(0x7FFFF), keep = _mm512_set1_epi32(static_cast<int>(0xFFF00000u));
    __m512 y[kChunks];
    for (int c = 0; c < kChunks; ++c) {
      const __m512 t = _mm512_mul_ps(v[c], inv);
      const __m512i tb = _mm512_castps_si512(t);
      const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(tb, 20), _mm512_set1_epi32(1));
      const __m512 normal = _mm512_castsi512_ps(
          _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(tb, half), odd), keep));
      const __m512 sub = _mm512_mul_ps(
          _mm512_roundscale_ps(_mm512_mul_ps(t, grid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), ungrid);
      const __mmask16 is_small =
          _mm512_cmp_ps_mask(_mm512_castsi512_ps(_mm512_and_si512(tb, abs_mask)), small, _CMP_LT_OQ);
      y[c] = _mm512_mul_ps(_mm512_mask_mov_ps(normal, is_small, sub), s);
    }
    for (int c = 0; c < kChunks; c += 2)
      _mm512_storeu_si512(xq + b + 16 * c, _mm512_permutex2var_epi16(_mm512_castps_si512(y[c]), hi_words,
                                                                      _mm512_castps_si512(y[c + 1])));
  }
  return true;
}

Kernels avx512_kernels() {
  return Kernels{kTileOut, kMaxRowTile, tile_bf16_fma<false>, tile_rows<float, false>, avx512_fp4_tile,
                 avx512_fp8_tile};
}
Kernels avx512_bf16_kernels(bool vbmi) {
  return Kernels{kTileOut, kMaxRowTile, vbmi ? tile_bf16_gemm : tile_bf16_fma<true>, tile_rows<float, false>,
                 avx512_bf16_fp4_tile, vbmi ? avx512_bf16_fp8_tile : avx512_fp8_tile};
}

}  // namespace dsv4::kernels::linear_tile
