// GEMM tile of the linear engine (linear_tile.h) for kAvx512Bf16 on CPUs with
// AVX512_VBMI: FP8 weights with bf16 x (actq'd, or not: wo_a) and BF16
// weights, up to kMaxRowTile rows and 64 outputs per call. Each 128-wide K block of 16 outputs is decoded ONCE per call
// into bf16 words in dot layout (4 KiB, L1), then every row of the call runs
// against it. Below kTransposeMinRows rows (row_dot): per row, 16 output lane
// vectors of 4 VDPBF16PS each (lane l sums k = l, l+16, ..., l+112 in ascending
// order), folded by fold16. From kTransposeMinRows rows (rows_dot_t): the block is
// transposed once (accumulator lane j = output j, one accumulator per lane l, x
// word pairs broadcast) and the fold tree is whole-vector adds. Either way the
// betas are chained over the blocks (or the grouped tree) — the K order of
// linear.h, so each result has the scalar variant's bits. The dot is used for a (row, block of 16 outputs)
// only inside the range check of linear_avx512.cc (the same windows); blocks or
// rows outside it (extreme scales, subnormal or huge x, the partial last block)
// take the multiply-add path on the exact fp32 decode.
// Decoding straight to bf16 words by table lookup in registers, exact and equal
// to the truncated fp32 decode of the span tile:
//   FP8: the code bytes are put in dot order by vpermb; vpermi2b looks up the high
//        and the low byte of bf16(e4m3 value · 2^(s-127)) for the 7-bit magnitude
//        in 128-entry tables built per scale byte s (10 <= s <= 134: every non-zero
//        value is a normal bf16; NaN codes give NaN), the sign is ORed in,
//        vpunpck{l,h}bw make words. In the tile layout (LinearWeight::fp8_dot, packed
//        at load) the codes are already in the order of the transposed block: the
//        lookups and vpunpck{l,h}bw give its vectors directly (fp8_tile_pair), with no
//        vpermb and no transpose, and one 16-row tile is one scale, one sequential read.
// FP4 weights never come here: run_fp4 (linear.cc) takes them to the FP4 tiles of
// linear_fp4.h (linear_fp4_avx512.cc).
// Only intrinsics (isa_intrinsics.h) and linear_tile.h here (see linear_tile.h).
#include <cstdint>
#include <utility>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_avx512_decode.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

constexpr int kDotChunks = kBlock / 32;  // 32-k dot chunks per block
constexpr int kPrefetchBlocks = 2;       // weight rows prefetched this many blocks ahead
constexpr int kTransposeMinRows = 8;     // rows from which a block's weights are transposed (rows_dot_t)

// k (within its 32-k chunk) of word w of the dot layout (dot_order).
constexpr int dot_k(int w) { return w % 2 == 1 ? (w - 1) / 2 : 16 + w / 2; }

struct Bytes64 {
  uint8_t b[64];
};
struct Words {
  uint16_t w[128];
};

// FP8: codes of 64 k (dot chunks 2h, 2h+1) permuted so that vpunpcklbw takes
// bytes 16L + i (i < 8) to word 8L + i of chunk 2h, vpunpckhbw bytes 16L + 8 + i
// to word 8L + i of chunk 2h + 1.
constexpr Bytes64 make_fp8_perm() {
  Bytes64 p{};
  for (int b = 0; b < 64; ++b) {
    const int r = b % 16, w = 8 * (b / 16) + r % 8;
    p.b[b] = static_cast<uint8_t>((r < 8 ? 0 : 32) + dot_k(w));
  }
  return p;
}
// bf16 words of the e4m3 magnitudes 0..127; 0x7F (NaN) gives a bf16 NaN: a NaN
// weight makes its output NaN on every path (stored canonical, linear.cc).
constexpr Words make_fp8_words() {
  Words t{};
  t.w[127] = 0x7FC0;
  for (int c = 1; c < 127; ++c) {
    const int e = c >> 3, m = c & 7;
    if (e > 0) {
      t.w[c] = static_cast<uint16_t>((e + 120) << 7 | m << 4);
    } else {  // m·2^-9
      const int p = m >= 4 ? 2 : m >= 2 ? 1 : 0;
      t.w[c] = static_cast<uint16_t>((118 + p) << 7 | (m - (1 << p)) << (7 - p));
    }
  }
  return t;
}
// Bytes 2i + 1 / 2i of 64 words: the high / low bytes.
constexpr Bytes64 make_byte_pick(int hi) {
  Bytes64 p{};
  for (int i = 0; i < 64; ++i) p.b[i] = static_cast<uint8_t>(2 * i + hi);
  return p;
}
constexpr Bytes64 kFp8Perm = make_fp8_perm();
constexpr Words kFp8Words = make_fp8_words();
constexpr Bytes64 kHiBytes = make_byte_pick(1);
constexpr Bytes64 kLoBytes = make_byte_pick(0);

inline __m512i load(const void* p) { return _mm512_loadu_si512(p); }

// The high / low bytes of bf16(e4m3 value · 2^(s-127)) for the magnitudes 0..127.
struct Fp8Lut {
  __m512i hi0, hi1, lo0, lo1;
};
inline Fp8Lut fp8_lut(int sb) {
  const __m512i add = _mm512_set1_epi16(static_cast<int16_t>((sb - 127) * 128));
  __m512i w[4];
  for (int j = 0; j < 4; ++j) {
    const __m512i base = load(kFp8Words.w + 32 * j);
    // 0 and NaN stay as they are.
    w[j] = _mm512_mask_add_epi16(base, j == 0 ? 0xFFFFFFFEu : j == 3 ? 0x7FFFFFFFu : 0xFFFFFFFFu, base, add);
  }
  const __m512i hi = load(kHiBytes.b), lo = load(kLoBytes.b);
  return Fp8Lut{_mm512_permutex2var_epi8(w[0], hi, w[1]), _mm512_permutex2var_epi8(w[2], hi, w[3]),
                _mm512_permutex2var_epi8(w[0], lo, w[1]), _mm512_permutex2var_epi8(w[2], lo, w[3])};
}

// window(o, ns, k): the x exponent window of the range check (linear_tile.h) for
// outputs [o, o + ns) at block k together, empty when they need the multiply-add
// path; dot_block(o, k, out): one output's block in dot layout (out[m]: k = 32m ..
// 32m + 31).
struct GemmFp8 {
  using General = DecodeFp8;
  const uint8_t* data;
  const uint8_t* scale;
  int64_t in, nbk;
  Fp8Lut lut{};
  int lut_sb = -1;
  explicit GemmFp8(const LinearWeight& w)
      : data(static_cast<const uint8_t*>(w.data)), scale(w.scale), in(w.in), nbk(ceil_div64(w.in, kBlock)) {}
  void prefetch(int64_t o, int64_t k) const { prefetch_lines(data + o * in + k, kBlock); }
  // The window of outputs [o, o + ns) at block k together: their scale bytes (at
  // most two 128-row blocks) all in [10, 134].
  XWindow window(int64_t o, int ns, int64_t k) const {
    return intersect(fp8_window(scale[(o / kBlock) * nbk + k / kBlock]),
                     fp8_window(scale[((o + ns - 1) / kBlock) * nbk + k / kBlock]));
  }
  void dot_block(int64_t o, int64_t k, __m512i* out) {
    const int sb = scale[(o / kBlock) * nbk + k / kBlock];
    if (sb != lut_sb) {
      lut = fp8_lut(sb);
      lut_sb = sb;
    }
    const uint8_t* p = data + o * in + k;
    const __m512i perm = load(kFp8Perm.b), sign = _mm512_set1_epi8(-128);
    for (int h = 0; h < 2; ++h) {
      const __m512i c = load(p + 64 * h);
      const __m512i q = _mm512_permutexvar_epi8(perm, c);
      const __m512i hb = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(lut.hi0, q, lut.hi1), q, sign, 0xF8);
      const __m512i lb = _mm512_permutex2var_epi8(lut.lo0, q, lut.lo1);
      out[2 * h] = _mm512_unpacklo_epi8(lb, hb);
      out[2 * h + 1] = _mm512_unpackhi_epi8(lb, hb);
    }
  }
};

static_assert(kOutTile == kDotTileRows && kBlock == kDotTileCols);

// The exact fp32 decode of one row's block of a tile (the multiply-add path): its codes
// gathered back into column order, then DecodeFp8's decode.
struct GeneralFp8Tiles : DecodeFp8 {
  explicit GeneralFp8Tiles(const LinearWeight& w) : DecodeFp8(w) {}
  void full(int64_t o, int64_t k, __m512* out) const {
    const uint8_t* t = data + o / kOutTile * kOutTile * in + k / kBlock * (kOutTile * kBlock);
    alignas(64) uint8_t codes[kBlock];
    for (int c = 0; c < kBlock; ++c) codes[c] = t[kFp8TileOffsets.at[o % kOutTile][c]];
    codes_full(codes, scale[(o / kBlock) * nbk + k / kBlock], out);
  }
  void part(int64_t o, int64_t k, int, __m512* out) const { full(o, k, out); }  // in % 128 == 0: never partial
};

// The 32 code vectors of a tile: vector v -> the transposed dot vectors wt[v / 8][v % 8]
// (vpunpcklbw) and wt[v / 8][v % 8 + 8] (vpunpckhbw).
struct Fp8Pair {
  __m512i lo, hi;
};
inline Fp8Pair fp8_tile_pair(const uint8_t* p, const Fp8Lut& lut) {
  const __m512i q = load(p), sign = _mm512_set1_epi8(-128);
  const __m512i hb = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(lut.hi0, q, lut.hi1), q, sign, 0xF8);
  const __m512i lb = _mm512_permutex2var_epi8(lut.lo0, q, lut.lo1);
  return Fp8Pair{_mm512_unpacklo_epi8(lb, hb), _mm512_unpackhi_epi8(lb, hb)};
}
// pf: the tile to prefetch (nullptr: none), one line per vector decoded, so the line fills
// spread over the tile's work instead of 32 requests at once.
inline void prefetch_line(const uint8_t* pf, int v) {
  if (pf != nullptr) _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * v), _MM_HINT_T0);
}
inline void fp8_tile_decode(const uint8_t* p, const Fp8Lut& lut, __m512i (*wt)[kOutTile], const uint8_t* pf) {
  for (int v = 0; v < 2 * kDotChunks * 4; ++v) {
    prefetch_line(pf, v);
    const Fp8Pair d = fp8_tile_pair(p + 64 * v, lut);
    wt[v / 8][v % 8] = d.lo;
    wt[v / 8][v % 8 + 8] = d.hi;
  }
}

// BF16 weights (no decode): the window from the exponent range of the ns outputs'
// 128-column blocks together; dot_block permutes each 32-k chunk into dot layout.
struct GemmBf16 {
  using General = DecodeBf16;
  const uint16_t* data;
  int64_t in;
  explicit GemmBf16(const LinearWeight& w) : data(static_cast<const uint16_t*>(w.data)), in(w.in) {}
  void prefetch(int64_t o, int64_t k) const { prefetch_lines(data + o * in + k, 2 * kBlock); }
  XWindow window(int64_t o, int ns, int64_t k) const {
    int wl = 0, wh = 0;
    bf16_range(data + o * in + k, &wl, &wh, ns, in);
    return bf16_window(wl, wh);
  }
  void dot_block(int64_t o, int64_t k, __m512i* out) const {
    const uint16_t* p = data + o * in + k;
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

// rows_dot_t<R> for R rows of an FP8 tile, decoding each code vector into registers as
// the quads need it (no scratch): the same products, lanes and tree, so the same bits.
template <int R>
inline void rows_dot_fp8_tile(const uint8_t* p, const Fp8Lut& lut, const uint16_t* xd, __m512* beta,
                              const uint8_t* pf) {
  constexpr int kQuadBase[4] = {0, 2, 1, 3};  // quad {a, a+8, a+4, a+12} (rows_dot_t's kQuad)
  const int32_t* xw = reinterpret_cast<const int32_t*>(xd);  // row r, chunk m, lane l: xw[64r + 16m + l]
  __m512 s4[4][R];
  for (int qd = 0; qd < 4; ++qd) {
    const int a = kQuadBase[qd];
    __m512 acc[4][R];
    for (int e = 0; e < 4; ++e)
      for (int r = 0; r < R; ++r) acc[e][r] = _mm512_setzero_ps();
    for (int m = 0; m < kDotChunks; ++m)
      for (int h = 0; h < 2; ++h) {  // vector 8m + a + 4h: lanes a + 4h (lo) and a + 4h + 8 (hi)
        const int l = a + 4 * h;
        prefetch_line(pf, 8 * m + l);
        const Fp8Pair d = fp8_tile_pair(p + 64 * (8 * m + l), lut);
        for (int r = 0; r < R; ++r) {
          acc[2 * h][r] = _mm512_dpbf16_ps(acc[2 * h][r], (__m512bh)d.lo,
                                           (__m512bh)_mm512_set1_epi32(xw[64 * r + 16 * m + l]));
          acc[2 * h + 1][r] = _mm512_dpbf16_ps(acc[2 * h + 1][r], (__m512bh)d.hi,
                                               (__m512bh)_mm512_set1_epi32(xw[64 * r + 16 * m + l + 8]));
        }
      }
    for (int r = 0; r < R; ++r)
      s4[qd][r] = _mm512_add_ps(_mm512_add_ps(acc[0][r], acc[1][r]), _mm512_add_ps(acc[2][r], acc[3][r]));
  }
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

// FP8 in the tile layout (LinearWeight::fp8_dot; the caller keeps o and no multiples of
// 16, and in % 128 == 0): each 16-output tile decoded once (one scale, one LUT) straight
// into the transposed vectors, K in spans as gemv_tile's; up to kFusedMaxRows rows take
// the fused rows_dot_fp8_tile.
// Rows outside the range check take the multiply-add path, as in gemm_tile.
constexpr int kTilePrefetch = 4;  // tiles (2 KiB each) prefetched this many blocks ahead, a line per vector decoded
constexpr int kFusedMaxRows = 4;  // rows_dot_fp8_tile up to this many rows (its accumulators)
void fp8_tiles_gemm(const Tile& tl) {
  constexpr int kSubs = kMaxOutTile / kOutTile;
  const LinearWeight& w = *tl.w;
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  const int64_t in = w.in, nbk = in / kBlock;
  const GeneralFp8Tiles general(w);
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int nt = tl.nt, no = tl.no;
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock;
  // Blocks in spans of kGemvSpanRows / nt (at least 1): per span, each 16-output tile row is
  // one sequential read of span tiles.
  const int span = nt < kGemvSpanRows ? kGemvSpanRows / nt : 1;
  alignas(64) uint16_t xd[kMaxRowTile * kBlock];  // row i of span block bb in dot layout at (bb·nt + i)·128
  int xlo[kMaxRowTile], xhi[kMaxRowTile];
  alignas(64) __m512i wt[kDotChunks][kOutTile];  // the tile's transposed dot vectors
  alignas(64) __m512 wf[kOutTile][kChunks];      // the exact fp32 decode, for the multiply-add path
  __m512 part[kMaxRowTile][kSubs], total[kMaxRowTile][kSubs];
  Fp8Lut lut{};
  int lut_sb = -1;
  for (int64_t b0 = 0; b0 < n_blk; b0 += span) {
    const int nb = n_blk - b0 < span ? static_cast<int>(n_blk - b0) : span;
    for (int bb = 0; bb < nb; ++bb)
      for (int i = 0; i < nt; ++i) {
        const int r = bb * nt + i;
        x_block_dot(x + i * tl.x_stride + tl.k0 + (b0 + bb) * kBlock, xd + r * kBlock, &xlo[r], &xhi[r]);
      }
    for (int s = 0; s * kOutTile < no; ++s) {
      const int64_t o = tl.o + s * kOutTile;
      for (int bb = 0; bb < nb; ++bb) {
        const int64_t b = b0 + bb, k = tl.k0 + b * kBlock;
        const uint16_t* xb = xd + bb * nt * kBlock;  // the span block's rows
        const int* lo = xlo + bb * nt;
        const int* hi = xhi + bb * nt;
        const uint8_t* tile = data + o * in + (k / kBlock) * (kOutTile * kBlock);
        const uint8_t* pf = b + kTilePrefetch < n_blk ? tile + kTilePrefetch * (kOutTile * kBlock) : nullptr;
        const int sb = w.scale[(o / kBlock) * nbk + k / kBlock];
        const XWindow win = fp8_window(sb);
        auto row_ok = [&](int i) { return !win.empty() && lo[i] >= win.lo && hi[i] <= win.hi; };
        const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
        auto chain_row = [&](int i, __m512 beta) { chain_beta(chain, beta, part[i][s], total[i][s], add_ps); };
        int n_ok = 0;
        for (int i = 0; i < nt; ++i) n_ok += row_ok(i);
        if (n_ok > 0 && sb != lut_sb) {
          lut = fp8_lut(sb);
          lut_sb = sb;
        }
        if (n_ok == nt && nt <= kFusedMaxRows) {  // few rows: decoded into registers, no scratch
          __m512 beta[kFusedMaxRows];
          switch (nt) {
            case 1: rows_dot_fp8_tile<1>(tile, lut, xb, beta, pf); break;
            case 2: rows_dot_fp8_tile<2>(tile, lut, xb, beta, pf); break;
            case 3: rows_dot_fp8_tile<3>(tile, lut, xb, beta, pf); break;
            default: rows_dot_fp8_tile<4>(tile, lut, xb, beta, pf); break;
          }
          for (int i = 0; i < nt; ++i) chain_row(i, beta[i]);
          continue;
        }
        if (n_ok > 0) fp8_tile_decode(tile, lut, wt, pf);
        else if (pf != nullptr) prefetch_lines(pf, kOutTile * kBlock);
        if (n_ok < nt) decode_exact(general, o, kOutTile, k, kBlock, wf);
        auto one_row = [&](int i) {
          if (!row_ok(i)) return chain_row(i, row_general(x + i * tl.x_stride + k, kBlock, wf));
          __m512 beta[1];
          rows_dot_t<1>(xb + i * kBlock, wt, beta);
          chain_row(i, beta[0]);
        };
        rows_on_transposed(nt, xb, wt, row_ok, one_row, chain_row);
      }
    }
  }
  for (int i = 0; i < nt; ++i)
    for (int s = 0; s * kOutTile < no; ++s) _mm512_storeu_ps(tl.y + i * kMaxOutTile + s * kOutTile, total[i][s]);
}

// R rows x NT tiles of one block by VDPBF16PS on the tiles' transposed vectors wt[t]:
// rows_dot_t's lanes, chains and tree, so the same bits. Per (quad, half) the lo and hi
// chains of the R·NT (row, tile) pairs live in registers (2·R·NT accumulators), each decoded
// vector feeds R rows and each broadcast x pair NT tiles; the pair sums go through ps.
// xd: the rows' dot-layout blocks, kBlock words apart. beta[r·NT + t]: the results.
using TileVectors = __m512i[kDotChunks][kOutTile];
template <int R, int NT>
void rows_tiles_dot(const uint16_t* xd, const TileVectors* wt, __m512* beta) {
  constexpr int kBase[4] = {0, 2, 1, 3};  // rows_dot_t's quads {a, a+8, a+4, a+12}
  const int32_t* xw = reinterpret_cast<const int32_t*>(xd);  // row r, chunk m, lane l: xw[64r + 16m + l]
  alignas(64) float ps[8][R * NT][kOutTile];                  // (quad, half): lo + hi chains
  for (int qd = 0; qd < 4; ++qd)
    for (int h = 0; h < 2; ++h) {
      const int l = kBase[qd] + 4 * h;
      __m512 lo[R][NT], hi[R][NT];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) lo[r][t] = hi[r][t] = _mm512_setzero_ps();
      for (int m = 0; m < kDotChunks; ++m) {
        __m512i wl[NT], wh[NT];
        for (int t = 0; t < NT; ++t) {
          wl[t] = _mm512_load_si512(&wt[t][m][l]);
          wh[t] = _mm512_load_si512(&wt[t][m][l + 8]);
        }
        for (int r = 0; r < R; ++r) {
          const __m512bh xl = (__m512bh)_mm512_set1_epi32(xw[64 * r + 16 * m + l]);
          const __m512bh xh = (__m512bh)_mm512_set1_epi32(xw[64 * r + 16 * m + l + 8]);
          for (int t = 0; t < NT; ++t) {
            lo[r][t] = _mm512_dpbf16_ps(lo[r][t], (__m512bh)wl[t], xl);
            hi[r][t] = _mm512_dpbf16_ps(hi[r][t], (__m512bh)wh[t], xh);
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) _mm512_store_ps(ps[2 * qd + h][r * NT + t], _mm512_add_ps(lo[r][t], hi[r][t]));
    }
  for (int i = 0; i < R * NT; ++i) {
    __m512 s4[4];
    for (int qd = 0; qd < 4; ++qd) s4[qd] = _mm512_add_ps(_mm512_load_ps(ps[2 * qd][i]), _mm512_load_ps(ps[2 * qd + 1][i]));
    beta[i] = _mm512_add_ps(_mm512_add_ps(s4[0], s4[1]), _mm512_add_ps(s4[2], s4[3]));
  }
}

// Register blocks of R <= kFp8BlockRows rows x NT tiles with R·NT <= kFp8BlockPairs.
constexpr int kFp8BlockRows = 6;
constexpr int kFp8BlockPairs = 12;
constexpr int kSubTiles = kMaxOutTile / kOutTile;
using RowsTilesFn = void (*)(const uint16_t*, const TileVectors*, __m512*);
struct RowsTilesTable {
  RowsTilesFn fn[kFp8BlockRows][kSubTiles];  // [R - 1][NT - 1]; nullptr where R·NT > kFp8BlockPairs
};
template <int... I>
constexpr RowsTilesTable make_rows_tiles(std::integer_sequence<int, I...>) {
  RowsTilesTable t{};
  constexpr auto fn_of = []<int R, int NT>() -> RowsTilesFn {
    if constexpr (R * NT <= kFp8BlockPairs) return rows_tiles_dot<R, NT>;
    else return nullptr;
  };
  ((t.fn[I / kSubTiles][I % kSubTiles] = fn_of.template operator()<I / kSubTiles + 1, I % kSubTiles + 1>()), ...);
  return t;
}
constexpr RowsTilesTable kRowsTiles = make_rows_tiles(std::make_integer_sequence<int, kFp8BlockRows * kSubTiles>{});

// FP8 tiles from kFusedMaxRows + 1 rows: per block, each of the call's tiles decoded once
// into transposed vectors (up to 16 KiB, L1), then register blocks of rows x tiles
// (rows_tiles_dot). A (row, tile) outside the range check takes the multiply-add path, and
// the other pairs of its register block rows_dot_t<1>: the same betas, chained as in
// fp8_tiles_gemm.
void fp8_tiles_gemm_blocked(const Tile& tl) {
  const LinearWeight& w = *tl.w;
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  const int64_t in = w.in, nbk = in / kBlock;
  const GeneralFp8Tiles general(w);
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int nt = tl.nt, n_sub = tl.no / kOutTile;
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock;
  alignas(64) uint16_t xd[kMaxRowTile * kBlock];  // row i's block in dot layout
  int xlo[kMaxRowTile], xhi[kMaxRowTile];
  alignas(64) TileVectors wt[kSubTiles];
  alignas(64) __m512 wf[kOutTile][kChunks];  // the exact fp32 decode of tile wf_tile
  alignas(64) float part[kMaxRowTile][kSubTiles][kOutTile], total[kMaxRowTile][kSubTiles][kOutTile];
  Fp8Lut lut{};
  int lut_sb = -1;
  for (int64_t b = 0; b < n_blk; ++b) {
    const int64_t k = tl.k0 + b * kBlock;
    for (int i = 0; i < nt; ++i) x_block_dot(x + i * tl.x_stride + k, xd + i * kBlock, &xlo[i], &xhi[i]);
    XWindow win[kSubTiles];
    for (int s = 0; s < n_sub; ++s) {
      const int64_t o = tl.o + s * kOutTile;
      const uint8_t* tile = data + o * in + (k / kBlock) * (kOutTile * kBlock);
      const uint8_t* pf = b + 1 < n_blk ? tile + kOutTile * kBlock : nullptr;  // a block's work hides one fetch
      const int sb = w.scale[(o / kBlock) * nbk + k / kBlock];
      win[s] = fp8_window(sb);
      if (win[s].empty()) {
        if (pf != nullptr) prefetch_lines(pf, kOutTile * kBlock);
        continue;
      }
      if (sb != lut_sb) {
        lut = fp8_lut(sb);
        lut_sb = sb;
      }
      fp8_tile_decode(tile, lut, wt[s], pf);
    }
    auto ok = [&](int i, int s) { return !win[s].empty() && xlo[i] >= win[s].lo && xhi[i] <= win[s].hi; };
    const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
    auto chain_pair = [&](int i, int s, __m512 beta) {
      __m512 pa = _mm512_load_ps(part[i][s]), to = _mm512_load_ps(total[i][s]);
      chain_beta(chain, beta, pa, to, add_ps);
      _mm512_store_ps(part[i][s], pa);
      _mm512_store_ps(total[i][s], to);
    };
    int wf_tile = -1;
    auto one_pair = [&](int i, int s) {
      __m512 beta[1];
      if (ok(i, s)) {
        rows_dot_t<1>(xd + i * kBlock, wt[s], beta);
      } else {
        if (wf_tile != s) decode_exact(general, tl.o + s * kOutTile, kOutTile, k, kBlock, wf);
        wf_tile = s;
        beta[0] = row_general(x + i * tl.x_stride + k, kBlock, wf);
      }
      chain_pair(i, s, beta[0]);
    };
    for (int i0 = 0; i0 < nt; i0 += kFp8BlockRows) {
      const int nr = nt - i0 < kFp8BlockRows ? nt - i0 : kFp8BlockRows;
      const int per = kFp8BlockPairs / nr < kSubTiles ? kFp8BlockPairs / nr : kSubTiles;
      for (int s0 = 0; s0 < n_sub; s0 += per) {
        const int ns = n_sub - s0 < per ? n_sub - s0 : per;
        bool all_ok = true;
        for (int i = i0; i < i0 + nr; ++i)
          for (int s = s0; s < s0 + ns; ++s) all_ok = all_ok && ok(i, s);
        if (!all_ok) {
          for (int i = i0; i < i0 + nr; ++i)
            for (int s = s0; s < s0 + ns; ++s) one_pair(i, s);
          continue;
        }
        __m512 beta[kFp8BlockPairs];
        kRowsTiles.fn[nr - 1][ns - 1](xd + i0 * kBlock, wt + s0, beta);
        for (int r = 0; r < nr; ++r)
          for (int t = 0; t < ns; ++t) chain_pair(i0 + r, s0 + t, beta[r * ns + t]);
      }
    }
  }
  for (int i = 0; i < nt; ++i)
    for (int s = 0; s < n_sub; ++s) _mm512_storeu_ps(tl.y + i * kMaxOutTile + s * kOutTile, _mm512_load_ps(total[i][s]));
}

}  // namespace

void avx512_bf16_gemm_tile(const Tile& tl) {
  switch (tl.w->format) {
    case WeightFormat::kFP8:
      if (!tl.w->fp8_dot) return gemm_tile<GemmFp8>(tl);
      return tl.nt > kFusedMaxRows ? fp8_tiles_gemm_blocked(tl) : fp8_tiles_gemm(tl);
    case WeightFormat::kFP4: break;  // never here: run_fp4 (linear_fp4.h)
    case WeightFormat::kBF16: return gemm_tile<GemmBf16>(tl);
    case WeightFormat::kF32: break;
  }
}

}  // namespace dsv4::kernels::linear_tile
