// FP8 tiles for AVX2 (linear_fp8.h): 8 outputs per vector (a tile's 16 outputs in two
// halves); one FMA per product on the rows of Tile::dot_rows, a multiply and an add on the
// others. Register blocks of up to kRows rows x one tile; each 64-byte code vector (columns
// 4v .. 4v + 3 of the 16 outputs, numeric/linear_weight.h) is decoded in registers once for
// the block's rows (from 5 rows, once per tile block for all rows: run_rows_decoded). Per
// half, vpshufb and vpermd put each column's 8 codes in 8 bytes; a sign-extended code c gives
// the fp32 bits sign | (c & 0x7F) << 20, the value times 2^-120 (exact, subnormal for e4m3
// subnormals), times 2^120; NaN codes (magnitude 0x7F, found by a scan of the tile block
// first) set to NaN.
// Only intrinsics and linear_tile.h / linear_fp8.h here (see linear_tile.h).
#include <cstdint>
#include <utility>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_fp8.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

using fp8::kTileOut;
using fp8::kVectors;
constexpr int kRows = 4;
constexpr int kPrefetchBlocks = 2;

struct V2 {  // 16 lanes as two halves
  __m256 h[2];
};
inline __m256 add_ps(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
// The bf16 pair p[0], p[1] as fp32 in every lane: *odd = p[1], *even = p[0].
inline void bcast_pair(const uint16_t* p, __m256* odd, __m256* even) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  const __m256i d = _mm256_set1_epi32(v);
  *odd = _mm256_castsi256_ps(_mm256_and_si256(d, _mm256_set1_epi32(static_cast<int32_t>(0xFFFF0000u))));
  *even = _mm256_castsi256_ps(_mm256_slli_epi32(d, 16));
}
// The pair step of linear_fp8.h on one half: p += wo·xo, then p += we·xe (kFma: one FMA each).
template <bool kFma>
inline __m256 pair_step(__m256 p, __m256 wo, __m256 xo, __m256 we, __m256 xe) {
  if constexpr (kFma) return _mm256_fmadd_ps(we, xe, _mm256_fmadd_ps(wo, xo, p));
  return _mm256_add_ps(_mm256_add_ps(p, _mm256_mul_ps(wo, xo)), _mm256_mul_ps(we, xe));
}
// Scale byte -> 2^(s-127) in every lane, as the scalar variant's scale_value (255: NaN; 0: 2^-127).
inline __m256 scale_vec(uint8_t s) {
  const uint32_t bits = s == 255 ? 0x7FC00000u : s == 0 ? 0x00400000u : uint32_t{s} << 23;
  return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(bits)));
}

// Whether the tile block at p holds a NaN code (magnitude 0x7F): its decode then sets NaNs.
inline bool has_nan_code(const uint8_t* p) {
  __m256i mx = _mm256_setzero_si256();
  const __m256i sign = _mm256_set1_epi8(-128);
  for (int i = 0; i < fp8::kTileBytes; i += 32)
    mx = _mm256_max_epu8(mx, _mm256_or_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), sign));
  return _mm256_movemask_epi8(_mm256_cmpeq_epi8(mx, _mm256_set1_epi8(-1))) != 0;
}

// 8 codes (the low 8 bytes of c) -> their fp32 values; nan: NaN codes set to NaN (else
// the block has none).
inline __m256 codes_f32(__m128i c, bool nan) {
  const __m256i d = _mm256_cvtepi8_epi32(c), mag = _mm256_set1_epi32(0x7F);
  const __m256i bits = _mm256_and_si256(_mm256_slli_epi32(d, 20), _mm256_set1_epi32(static_cast<int32_t>(0x87F00000u)));
  const __m256 w = _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_castsi256_ps(_mm256_set1_epi32(247 << 23)));
  if (!nan) return w;
  return _mm256_or_ps(w, _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(d, mag), mag)));
}
// Half h of code vector p (rows 8h .. 8h + 7) -> w[c]: column 4v + c of those rows.
inline void decode_half(const uint8_t* p, bool nan, __m256* w) {
  const __m256i shuf = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(fp8::kColumnShuffle)));
  const __m256i g = _mm256_permutevar8x32_epi32(
      _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), shuf),
      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  const __m128i lo = _mm256_castsi256_si128(g), hi = _mm256_extracti128_si256(g, 1);
  w[0] = codes_f32(lo, nan);
  w[1] = codes_f32(_mm_srli_si128(lo, 8), nan);
  w[2] = codes_f32(hi, nan);
  w[3] = codes_f32(_mm_srli_si128(hi, 8), nan);
}

// R rows x one tile of 16 outputs from o; xr[r] from the slice's first column, yr[r] its 16
// results. kFma: rows of Tile::dot_rows, whose products are exact normal fp32 numbers
// (linear_fp8.h), so one FMA per product gives the multiply-then-add bits.
template <int R, bool kFma>
void run_block(const Tile& tl, const fp8::Tiles& W, int64_t o, const uint16_t* const* xr, float* const* yr) {
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock, blk0 = tl.k0 / kBlock;
  V2 part[R], total[R];
  for (int64_t b = 0; b < n_blk; ++b) {
    const uint8_t* ct = W.code_tile(o, blk0 + b);
    // kPrefetchBlocks ahead; near the end into the next tile (contiguous), the next block's.
    const int64_t ahead = kPrefetchBlocks * fp8::kTileBytes;
    const bool nan = has_nan_code(ct);
    V2 p[R];
    for (int r = 0; r < R; ++r) p[r].h[0] = p[r].h[1] = _mm256_setzero_ps();
    DSV4_UNROLL(2)
    for (int v = 0; v < kVectors; ++v) {
      const int64_t col = b * kBlock + 4 * v;
      _mm_prefetch(reinterpret_cast<const char*>(ct + ahead + 64 * v), _MM_HINT_T0);
      DSV4_UNROLL(2)
      for (int h = 0; h < 2; ++h) {
        __m256 w[4];
        decode_half(ct + 64 * v + 32 * h, nan, w);
        DSV4_UNROLL(2)
        for (int m = 0; m < 2; ++m)
          DSV4_UNROLL(4)
          for (int r = 0; r < R; ++r) {
            __m256 xo, xe;
            bcast_pair(xr[r] + col + 2 * m, &xo, &xe);
            p[r].h[h] = pair_step<kFma>(p[r].h[h], w[2 * m + 1], xo, w[2 * m], xe);
          }
      }
    }
    const __m256 s = scale_vec(W.scale(o, blk0 + b));
    const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) chain_beta(chain, _mm256_mul_ps(p[r].h[h], s), part[r].h[h], total[r].h[h], add_ps);
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(yr[r] + 8 * h, total[r].h[h]);
}

using BlockFn = void (*)(const Tile&, const fp8::Tiles&, int64_t, const uint16_t* const*, float* const*);
template <bool kFma, int... I>
constexpr auto make_blocks(std::integer_sequence<int, I...>) {
  struct Table {
    BlockFn fn[sizeof...(I)];
  } t{{run_block<I + 1, kFma>...}};
  return t;
}
template <bool kFma>
constexpr auto kBlocks = make_blocks<kFma>(std::make_integer_sequence<int, kRows>{});

// Rows rows[0..n) of the call, all by FMA or all exact.
template <bool kFma>
void run_rows(const Tile& tl, const fp8::Tiles& W, const int* rows, int n) {
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const uint16_t* xr[kRows];
  float* yr[kRows];
  for (int t = 0; t * kTileOut < tl.no; ++t)
    for (int i = 0; i < n; i += kRows) {
      const int nr = n - i < kRows ? n - i : kRows;
      for (int r = 0; r < nr; ++r) {
        xr[r] = x + rows[i + r] * tl.x_stride + tl.k0;
        yr[r] = tl.y + rows[i + r] * kMaxOutTile + kTileOut * t;
      }
      kBlocks<kFma>.fn[nr - 1](tl, W, tl.o + kTileOut * t, xr, yr);
    }
}

// From kDecodeOnceRows rows: each tile's block decoded once into fp32 vectors in L1 (8 KiB),
// then the rows in register blocks of up to kRows rows: per column pair the 4 weight vectors
// (odd and even column, two halves) are loaded once for the block's rows. The same chains as
// run_block, so the same bits.
constexpr int kDecodeOnceRows = 5;
struct DecodedBlock {
  __m256 w[kVectors][2][4];  // [code vector v][half h][column 4v + c]
};
inline void decode_block(const uint8_t* ct, const uint8_t* pf, DecodedBlock& d) {
  const bool nan = has_nan_code(ct);
  for (int v = 0; v < kVectors; ++v) {
    _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * v), _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) decode_half(ct + 64 * v + 32 * h, nan, d.w[v][h]);
  }
}

// R rows' pair chains of one decoded block (p[r]: 16 lanes), then their betas P·s into bet[r].
template <int R, bool kFma>
void rows_on_decoded(const DecodedBlock& d, const uint16_t* const* xr, int64_t col0, __m256 s,
                     float (*bet)[kTileOut]) {
  V2 p[R];
  for (int r = 0; r < R; ++r) p[r].h[0] = p[r].h[1] = _mm256_setzero_ps();
  for (int v = 0; v < kVectors; ++v) {
    const int64_t col = col0 + 4 * v;
    DSV4_UNROLL(2)
    for (int m = 0; m < 2; ++m) {
      const __m256 wo0 = d.w[v][0][2 * m + 1], wo1 = d.w[v][1][2 * m + 1];
      const __m256 we0 = d.w[v][0][2 * m], we1 = d.w[v][1][2 * m];
      DSV4_UNROLL(4)
      for (int r = 0; r < R; ++r) {
        __m256 xo, xe;
        bcast_pair(xr[r] + col + 2 * m, &xo, &xe);
        p[r].h[0] = pair_step<kFma>(p[r].h[0], wo0, xo, we0, xe);
        p[r].h[1] = pair_step<kFma>(p[r].h[1], wo1, xo, we1, xe);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) _mm256_store_ps(bet[r] + 8 * h, _mm256_mul_ps(p[r].h[h], s));
}

using DecodedFn = void (*)(const DecodedBlock&, const uint16_t* const*, int64_t, __m256, float (*)[kTileOut]);
template <bool kFma, int... I>
constexpr auto make_decoded(std::integer_sequence<int, I...>) {
  struct Table {
    DecodedFn fn[sizeof...(I)];
  } t{{rows_on_decoded<I + 1, kFma>...}};
  return t;
}
template <bool kFma>
constexpr auto kDecoded = make_decoded<kFma>(std::make_integer_sequence<int, kRows>{});

// Rows rows[0..n) of the call (n >= kDecodeOnceRows), all by FMA or all exact.
template <bool kFma>
void run_rows_decoded(const Tile& tl, const fp8::Tiles& W, const int* rows, int n) {
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock, blk0 = tl.k0 / kBlock;
  alignas(32) DecodedBlock d;
  alignas(32) float bet[kRows][kTileOut];
  alignas(32) float part[kMaxRowTile][kTileOut], total[kMaxRowTile][kTileOut];
  const uint16_t* xr[kRows];
  for (int t = 0; t * kTileOut < tl.no; ++t) {
    const int64_t o = tl.o + kTileOut * t;
    for (int64_t b = 0; b < n_blk; ++b) {
      const uint8_t* ct = W.code_tile(o, blk0 + b);
      decode_block(ct, ct + (b + 1 < n_blk ? fp8::kTileBytes : 0), d);
      const __m256 s = scale_vec(W.scale(o, blk0 + b));
      const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
      for (int i = 0; i < n; i += kRows) {
        const int nr = n - i < kRows ? n - i : kRows;
        for (int r = 0; r < nr; ++r) xr[r] = x + rows[i + r] * tl.x_stride + tl.k0;
        kDecoded<kFma>.fn[nr - 1](d, xr, b * kBlock, s, bet);
        for (int r = 0; r < nr; ++r)
          for (int h = 0; h < 2; ++h) {
            __m256 pa = _mm256_load_ps(part[i + r] + 8 * h), to = _mm256_load_ps(total[i + r] + 8 * h);
            chain_beta(chain, _mm256_load_ps(bet[r] + 8 * h), pa, to, add_ps);
            _mm256_store_ps(part[i + r] + 8 * h, pa);
            _mm256_store_ps(total[i + r] + 8 * h, to);
          }
      }
    }
    for (int i = 0; i < n; ++i)
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_ps(tl.y + rows[i] * kMaxOutTile + kTileOut * t + 8 * h, _mm256_load_ps(total[i] + 8 * h));
  }
}

}  // namespace

void avx2_fp8_tile(const Tile& tl) {
  int fast[kMaxRowTile], exact[kMaxRowTile], nf = 0, ne = 0;
  for (int i = 0; i < tl.nt; ++i) {
    if ((tl.dot_rows >> i) & 1) fast[nf++] = i;
    else exact[ne++] = i;
  }
  const fp8::Tiles W{static_cast<const uint8_t*>(tl.w->data), tl.w->scale, tl.w->in};
  if (nf >= kDecodeOnceRows) run_rows_decoded<true>(tl, W, fast, nf);
  else if (nf > 0) run_rows<true>(tl, W, fast, nf);
  if (ne >= kDecodeOnceRows) run_rows_decoded<false>(tl, W, exact, ne);
  else if (ne > 0) run_rows<false>(tl, W, exact, ne);
}

}  // namespace dsv4::kernels::linear_tile
