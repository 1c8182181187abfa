// GEMM tile of the linear engine (linear_tile.h) for kAvx512Bf16 on CPUs with
// AVX512_VBMI: BF16 weights with bf16 x, up to kMaxRowTile rows and 64 outputs per call.
// Each 128-wide K block of 16 outputs is permuted ONCE per call into dot layout (4 KiB,
// L1), then every row of the call runs against it. Below kTransposeMinRows rows (row_dot):
// per row, 16 output lane vectors of 4 VDPBF16PS each (lane l sums k = l, l+16, ..., l+112
// in ascending order), folded by fold16. From kTransposeMinRows rows (rows_dot_t): the
// block is transposed once (accumulator lane j = output j, one accumulator per lane l, x
// word pairs broadcast) and the fold tree is whole-vector adds. Either way the betas are
// chained over the blocks (or the grouped tree) — the K order of linear.h, so each result
// has the scalar variant's bits. The dot is used for a (row, block of 16 outputs) only
// inside the range check of linear_avx512.cc (the same windows); blocks or rows outside it
// (extreme weights, subnormal or huge x, the partial last block) take the multiply-add
// path on the exact fp32 decode.
// FP4 and FP8 weights never come here: run_quant (linear.cc) takes them to the tiles of
// linear_fp4.h / linear_fp8.h.
// Only intrinsics (isa_intrinsics.h) and linear_tile.h here (see linear_tile.h).
#include <cstdint>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_avx512_decode.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

constexpr int kDotChunks = kBlock / 32;  // 32-k dot chunks per block
constexpr int kPrefetchBlocks = 2;       // weight rows prefetched into L1 this many blocks ahead
// ... and into L2 this many: 16 outputs' block is 4 KiB read once per call, and the L1 prefetch
// alone left too few lines in flight from DRAM (Zen 4, T = 2 / 4 / 8 / 16 / 64: +19 / +43 / +35 /
// +15 / +4 %; 3 and 4 blocks measured alike, 2 and 8 less).
constexpr int kFarBlocks = 4;
constexpr int kTransposeMinRows = 8;     // rows from which a block's weights are transposed (rows_dot_t)

inline __m512i load(const void* p) { return _mm512_loadu_si512(p); }

// BF16 weights (no decode): the window from the exponent range of the ns outputs'
// 128-column blocks together; dot_block permutes each 32-k chunk into dot layout.
struct GemmBf16 {
  using General = DecodeBf16;
  Bf16Layout w;
  explicit GemmBf16(const LinearWeight& lw) : w(lw) {}
  DSV4_PREFETCH_FN void prefetch(int64_t o, int64_t k) const { prefetch_lines(w.at(o, k), 2 * kBlock); }
  // The ns outputs' block at column k into L2 (in tiles one contiguous run).
  DSV4_PREFETCH_FN void prefetch_far(int64_t o, int ns, int64_t k) const {
    if (w.tiles) return prefetch_lines<Cache::kL2>(w.at(o, k), ns * 2 * kBlock);
    for (int q = 0; q < ns; ++q) prefetch_lines<Cache::kL2>(w.at(o + q, k), 2 * kBlock);
  }
  XWindow window(int64_t o, int ns, int64_t k) const {
    int wl = 0, wh = 0;
    bf16_range(w.at(o, k), &wl, &wh, ns, w.row_stride());
    return bf16_window(wl, wh);
  }
  void dot_block(int64_t o, int64_t k, __m512i* out) const {
    const uint16_t* p = w.at(o, k);
    for (int m = 0; m < kDotChunks; ++m) out[m] = _mm512_permutexvar_epi16(dot_order(), load(p + 32 * m));
  }
};

// beta of 16 outputs for one row by VDPBF16PS: x in dot layout, w[q] output q's block.
inline __m512 row_dot(const uint16_t* xr, const __m512i (*w)[kDotChunks]) {
  const __m512i x0 = load(xr), x1 = load(xr + 32), x2 = load(xr + 64), x3 = load(xr + 96);
  __m512 acc[kOutTile];
  for (int q = 0; q < kOutTile; ++q) {
    __m512 a = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)x0, (__m512bh)w[q][0]);
    a = _mm512_dpbf16_ps(a, (__m512bh)x1, (__m512bh)w[q][1]);
    a = _mm512_dpbf16_ps(a, (__m512bh)x2, (__m512bh)w[q][2]);
    acc[q] = _mm512_dpbf16_ps(a, (__m512bh)x3, (__m512bh)w[q][3]);
  }
  return fold16(acc);
}

// The same, decoding each output's block into registers (one row: no scratch).
template <class G>
inline __m512 row_dot_decode(G& dec, int64_t o, int ns, int64_t k, const uint16_t* xr) {
  const __m512i x0 = load(xr), x1 = load(xr + 32), x2 = load(xr + 64), x3 = load(xr + 96);
  __m512 acc[kOutTile];
  for (int q = 0; q < kOutTile; ++q) {
    if (q >= ns) {
      acc[q] = _mm512_setzero_ps();
      continue;
    }
    __m512i w[kDotChunks];
    dec.dot_block(o + q, k, w);
    __m512 a = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)x0, (__m512bh)w[0]);
    a = _mm512_dpbf16_ps(a, (__m512bh)x1, (__m512bh)w[1]);
    a = _mm512_dpbf16_ps(a, (__m512bh)x2, (__m512bh)w[2]);
    acc[q] = _mm512_dpbf16_ps(a, (__m512bh)x3, (__m512bh)w[3]);
  }
  return fold16(acc);
}

// The same by separate multiplies and adds on the exact fp32 decode wf (width
// columns from k, zero beyond): the span tile's block_general.
inline __m512 row_general(const uint16_t* x, int width, const __m512 (*wf)[kChunks]) {
  alignas(64) float xb[kBlock];
  load_x(x, width, xb);
  __m512 acc[kOutTile];
  for (int q = 0; q < kOutTile; ++q) {
    __m512 a = _mm512_setzero_ps();
    for (int c = 0; c < kChunks; ++c) a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_load_ps(xb + 16 * c), wf[q][c]));
    acc[q] = a;
  }
  return fold16(acc);
}

// wt[m][l] dword j = wd[j][m] dword l: the 16 x 16 dword transpose of each chunk m.
inline void transpose_block(const __m512i (*wd)[kDotChunks], __m512i (*wt)[kOutTile]) {
  for (int m = 0; m < kDotChunks; ++m) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_epi32(wd[2 * i][m], wd[2 * i + 1][m]);
      t[2 * i + 1] = _mm512_unpackhi_epi32(wd[2 * i][m], wd[2 * i + 1][m]);
    }
    for (int i = 0; i < 4; ++i) {  // 128-bit lane L of u[4i + c]: rows 4i .. 4i+3 at column 4L + c
      u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
      u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
      u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
      u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int c = 0; c < 4; ++c) {
      const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
      const __m512i v1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88),
                    w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
      wt[m][c] = _mm512_shuffle_i32x4(v0, v1, 0x88);
      wt[m][8 + c] = _mm512_shuffle_i32x4(v0, v1, 0xDD);
      wt[m][4 + c] = _mm512_shuffle_i32x4(w0, w1, 0x88);
      wt[m][12 + c] = _mm512_shuffle_i32x4(w0, w1, 0xDD);
    }
  }
}

// beta of 16 outputs for R rows by VDPBF16PS on the transposed block: accumulator
// lane j is output j, one accumulator per (row, lane l), each x word pair
// broadcast; the fold tree of linear.h is then plain adds of whole vectors
// (lanes in the tree's quads {l, l+8, l+4, l+12}: s4[l] = (L_l + L_l+8) + (L_l+4 + L_l+12)).
template <int R>
inline void rows_dot_t(const uint16_t* xd, const __m512i (*wt)[kOutTile], __m512* beta) {
  constexpr int kQuad[4][4] = {{0, 8, 4, 12}, {2, 10, 6, 14}, {1, 9, 5, 13}, {3, 11, 7, 15}};
  const int32_t* xw = reinterpret_cast<const int32_t*>(xd);  // row r, chunk m, lane l: xw[64r + 16m + l]
  __m512 s4[4][R];
  for (int qd = 0; qd < 4; ++qd) {
    __m512 a[4][R];
    for (int e = 0; e < 4; ++e)
      for (int r = 0; r < R; ++r) a[e][r] = _mm512_setzero_ps();
    for (int m = 0; m < kDotChunks; ++m)
      for (int e = 0; e < 4; ++e) {
        const int l = kQuad[qd][e];
        const __m512i w = _mm512_load_si512(&wt[m][l]);
        for (int r = 0; r < R; ++r)
          a[e][r] = _mm512_dpbf16_ps(a[e][r], (__m512bh)w, (__m512bh)_mm512_set1_epi32(xw[64 * r + 16 * m + l]));
      }
    for (int r = 0; r < R; ++r)
      s4[qd][r] = _mm512_add_ps(_mm512_add_ps(a[0][r], a[1][r]), _mm512_add_ps(a[2][r], a[3][r]));
  }
  // s2[0] = s4[0] + s4[2], s2[1] = s4[1] + s4[3] (quads 0, 1 hold s4[0], s4[2]; quads 2, 3 s4[1], s4[3]).
  for (int r = 0; r < R; ++r)
    beta[r] = _mm512_add_ps(_mm512_add_ps(s4[0][r], s4[1][r]), _mm512_add_ps(s4[2][r], s4[3][r]));
}

// One full block of a row of x into dot layout at xo (64-byte aligned), and its exponent
// range for the range check.
inline void x_block_dot(const uint16_t* xs, uint16_t* xo, int* lo, int* hi) {
  for (int g = 0; g < kDotChunks; ++g)
    _mm512_store_si512(xo + 32 * g, _mm512_permutexvar_epi16(dot_order(), load(xs + 32 * g)));
  bf16_range(xs, lo, hi);
}

// The exact fp32 decode of outputs [o, o + ns) at the block of width columns from k
// (zero beyond ns and beyond width): the multiply-add path's weights.
template <class D>
inline void decode_exact(const D& general, int64_t o, int ns, int64_t k, int width, __m512 (*wf)[kChunks]) {
  for (int q = 0; q < kOutTile; ++q) {
    if (q >= ns) {
      for (int c = 0; c < kChunks; ++c) wf[q][c] = _mm512_setzero_ps();
    } else if (width < kBlock) {
      general.part(o + q, k, width, wf[q]);
    } else {
      general.full(o + q, k, wf[q]);
    }
  }
}

// Rows [0, nt) on a transposed block wt: groups of 4, then 2, whose rows all pass the
// range check by rows_dot_t; every other row by one_row(i). chain_row(i, beta) chains a beta.
template <class Ok, class One, class Chain>
inline void rows_on_transposed(int nt, const uint16_t* xd, const __m512i (*wt)[kOutTile], Ok row_ok, One one_row,
                               Chain chain_row) {
  auto group = [&]<int R>(int i0) {
    bool ok = true;
    for (int r = 0; r < R; ++r) ok = ok && row_ok(i0 + r);
    if (!ok) {
      for (int r = 0; r < R; ++r) one_row(i0 + r);
      return;
    }
    __m512 beta[R];
    rows_dot_t<R>(xd + i0 * kBlock, wt, beta);
    for (int r = 0; r < R; ++r) chain_row(i0 + r, beta[r]);
  };
  int i = 0;
  for (; i + 4 <= nt; i += 4) group.template operator()<4>(i);
  for (; i + 2 <= nt; i += 2) group.template operator()<2>(i);
  for (; i < nt; ++i) one_row(i);
}

// Fewer rows than kTransposeMinRows: per sub-tile of 16 outputs, K in spans of
// kGemvSpanRows / nt blocks, so only 16 weight rows stream at a time, each in runs
// of a span (gemm_tile's block-outer order keeps 64 rows in flight, one block
// each). Same betas, chained in the same order per output: the same bits.
constexpr int kGemvSpanRows = 32;  // blocks x rows of x kept in dot layout (8 KiB)
template <class G>
void gemv_tile(const Tile& tl) {
  constexpr int kSubs = kMaxOutTile / kOutTile;
  G dec(*tl.w);
  const typename G::General general(*tl.w);
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int nt = tl.nt, no = tl.no, span = kGemvSpanRows / nt;
  const int64_t n_blk = ceil_div64(tl.k1 - tl.k0, kBlock);
  alignas(64) uint16_t xd[kGemvSpanRows * kBlock];  // row i's block bb at xd + (bb·nt + i)·128
  int xlo[kGemvSpanRows], xhi[kGemvSpanRows];
  alignas(64) __m512i wd[kOutTile][kDotChunks];  // 16 outputs' block in dot layout
  alignas(64) __m512 wf[kOutTile][kChunks];      // exact fp32 decode for the multiply-add path
  __m512 part[kTransposeMinRows][kSubs], total[kTransposeMinRows][kSubs];
  for (int64_t b0 = 0; b0 < n_blk; b0 += span) {
    const int nb = n_blk - b0 < span ? static_cast<int>(n_blk - b0) : span;
    for (int bb = 0; bb < nb; ++bb) {
      const int64_t k = tl.k0 + (b0 + bb) * kBlock;
      if (tl.k1 - k < kBlock) continue;  // partial block: the multiply-add path
      for (int i = 0; i < nt; ++i) {
        const int r = bb * nt + i;
        x_block_dot(x + i * tl.x_stride + k, xd + r * kBlock, &xlo[r], &xhi[r]);
      }
    }
    for (int s = 0; s * kOutTile < no; ++s) {
      const int ns = no - s * kOutTile < kOutTile ? no - s * kOutTile : kOutTile;
      const int64_t o = tl.o + s * kOutTile;
      for (int bb = 0; bb < nb; ++bb) {
        const int64_t b = b0 + bb, k = tl.k0 + b * kBlock;
        const int width = tl.k1 - k < kBlock ? static_cast<int>(tl.k1 - k) : kBlock;
        const bool partial = width < kBlock;
        const XWindow win = partial ? kNoWindow : dec.window(o, ns, k);
        const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
        int n_ok = 0;
        bool ok[kTransposeMinRows];
        for (int i = 0; i < nt; ++i) {
          const int r = bb * nt + i;
          ok[i] = !win.empty() && xlo[r] >= win.lo && xhi[r] <= win.hi;
          n_ok += ok[i];
        }
        if (n_ok > 0 && k + (kPrefetchBlocks + 1) * kBlock <= tl.k1)
          for (int q = 0; q < ns; ++q) dec.prefetch(o + q, k + kPrefetchBlocks * kBlock);
        if (k + (kFarBlocks + 1) * kBlock <= tl.k1) dec.prefetch_far(o, ns, k + kFarBlocks * kBlock);
        if (nt == 1 && n_ok == 1) {  // one row: decoded weights go straight to the dot
          chain_beta(chain, row_dot_decode(dec, o, ns, k, xd + bb * kBlock), part[0][s], total[0][s], add_ps);
          continue;
        }
        if (n_ok > 0) {
          for (int q = 0; q < ns; ++q) dec.dot_block(o + q, k, wd[q]);
          for (int q = ns; q < kOutTile; ++q)
            for (int m = 0; m < kDotChunks; ++m) wd[q][m] = _mm512_setzero_si512();
        }
        if (n_ok < nt) decode_exact(general, o, ns, k, width, wf);
        for (int i = 0; i < nt; ++i) {
          const __m512 beta = ok[i] ? row_dot(xd + (bb * nt + i) * kBlock, wd)
                                    : row_general(x + i * tl.x_stride + k, width, wf);
          chain_beta(chain, beta, part[i][s], total[i][s], add_ps);
        }
      }
    }
  }
  for (int i = 0; i < nt; ++i)
    for (int s = 0; s * kOutTile < no; ++s) _mm512_storeu_ps(tl.y + i * kMaxOutTile + s * kOutTile, total[i][s]);
}

template <class G>
void gemm_tile(const Tile& tl) {
  if (tl.nt < kTransposeMinRows) return gemv_tile<G>(tl);
  constexpr int kSubs = kMaxOutTile / kOutTile;
  G dec(*tl.w);
  const typename G::General general(*tl.w);
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int nt = tl.nt, no = tl.no;
  const int64_t n_blk = ceil_div64(tl.k1 - tl.k0, kBlock);
  alignas(64) uint16_t xd[kMaxRowTile * kBlock];  // row i's block in dot layout
  int xlo[kMaxRowTile], xhi[kMaxRowTile];
  alignas(64) __m512i wd[kOutTile][kDotChunks];  // 16 outputs' block in dot layout
  alignas(64) __m512i wt[kDotChunks][kOutTile];  // wd transposed: wt[m][l] word pair j from output j
  alignas(64) __m512 wf[kOutTile][kChunks];      // the same, fp32, for the multiply-add path
  __m512 part[kMaxRowTile][kSubs], total[kMaxRowTile][kSubs];
  for (int64_t b = 0; b < n_blk; ++b) {
    const int64_t k = tl.k0 + b * kBlock;
    const int width = tl.k1 - k < kBlock ? static_cast<int>(tl.k1 - k) : kBlock;
    const bool partial = width < kBlock;
    if (!partial)
      for (int i = 0; i < nt; ++i) {
        x_block_dot(x + i * tl.x_stride + k, xd + i * kBlock, &xlo[i], &xhi[i]);
      }
    const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
    const bool pf = k + (kPrefetchBlocks + 1) * kBlock <= tl.k1;
    for (int s = 0; s * kOutTile < no; ++s) {
      const int ns = no - s * kOutTile < kOutTile ? no - s * kOutTile : kOutTile;
      const int64_t o = tl.o + s * kOutTile;
      const XWindow win = partial ? kNoWindow : dec.window(o, ns, k);
      const bool fast = !win.empty();
      auto chain_row = [&](int i, __m512 beta) {
        chain_beta(chain, beta, part[i][s], total[i][s], add_ps);
      };
      auto row_ok = [&](int i) { return fast && xlo[i] >= win.lo && xhi[i] <= win.hi; };
      if (k + (kFarBlocks + 1) * kBlock <= tl.k1) dec.prefetch_far(o, ns, k + kFarBlocks * kBlock);
      for (int q = 0; q < ns; ++q) {
        if (pf) dec.prefetch(o + q, k + kPrefetchBlocks * kBlock);
        if (fast) dec.dot_block(o + q, k, wd[q]);
      }
      for (int q = ns; q < kOutTile; ++q)
        for (int m = 0; m < kDotChunks; ++m) wd[q][m] = _mm512_setzero_si512();
      bool wf_ready = false;
      auto one_row = [&](int i) {
        if (row_ok(i)) return chain_row(i, row_dot(xd + i * kBlock, wd));
        if (!wf_ready) {
          decode_exact(general, o, ns, k, width, wf);
          wf_ready = true;
        }
        chain_row(i, row_general(x + i * tl.x_stride + k, width, wf));
      };
      if (fast && nt >= kTransposeMinRows) {
        transpose_block(wd, wt);
        rows_on_transposed(nt, xd, wt, row_ok, one_row, chain_row);
      } else {
        for (int i = 0; i < nt; ++i) one_row(i);
      }
    }
  }
  for (int i = 0; i < nt; ++i)
    for (int s = 0; s * kOutTile < no; ++s) _mm512_storeu_ps(tl.y + i * kMaxOutTile + s * kOutTile, total[i][s]);
}

}  // namespace

void avx512_bf16_gemm_tile(const Tile& tl) {
  switch (tl.w->format) {
    case WeightFormat::kFP8:
    case WeightFormat::kFP4: break;  // never here: run_quant (linear_fp4.h, linear_fp8.h)
    case WeightFormat::kBF16: return gemm_tile<GemmBf16>(tl);
    case WeightFormat::kF32: break;
  }
}

}  // namespace dsv4::kernels::linear_tile
