// The FP8 tiles for AVX-512 (linear_fp8.h): for the rows of Tile::dot_rows one FMA per product
// (AVX-512 F/BW, avx512_fp8_tile) or VDPBF16PS (AVX-512 BF16 with VBMI, avx512_bf16_fp8_tile);
// a multiply and an add for the others. A tile call is up to 4 tiles of 16 outputs x 64 rows;
// rows go in register blocks of R rows x NT tiles, each block streaming its tiles' codes
// along K once, decoding each 64-byte code vector in registers for all R rows (the FMA and
// exact steps from 5 rows: each tile block decoded once for all rows, run_rows_decoded).
// Decoding a code vector (columns 4v .. 4v + 3 of 16 outputs, numeric/linear_weight.h):
//   dot: vpermi2b looks up the high and the low byte of the bf16 e4m3 value for the 7-bit
//        magnitude (linear_fp8.h kFp8Bf16), the sign is ORed in, vpunpck{l,h}bw give the
//        weight vectors of the two column pairs;
//   fp32: vpshufb and vpermd put each column's 16 codes in a 128-bit chunk; a sign-extended
//        code c gives the fp32 bits sign | (c & 0x7F) << 20, the value times 2^-120 (exact,
//        subnormal for e4m3 subnormals), times 2^120; NaN codes (magnitude 0x7F) set to NaN.
// Included by linear_fp8_avx512.cc (AVX-512 F/BW: the FMA and exact steps) and
// linear_fp8_avx512_bf16.cc (with BF16 and VBMI: the dot step, whose decode needs VBMI; kept
// out of the F/BW unit so that no VBMI instruction can reach it). Everything is in an
// unnamed namespace (linear_tile.h). Only intrinsics and linear_tile.h / linear_fp8.h / linear_avx512_pair.h /
// linear_prefetch.h here.
#pragma once

#include <cstdint>
#include <utility>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_avx512_pair.h"
#include "kernels/linear/linear_fp8.h"
#include "kernels/linear/linear_prefetch.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

using fp8::kTileOut;
using fp8::kVectors;
constexpr int kMaxTiles = kMaxOutTile / kTileOut;
// Prefetch distances of the tiles' streams (linear_prefetch.h), in blocks: far 4 measured best
// of 0 / 4 / 6 / 8 / 12 for the dot (Zen 4, T = 1 / 2 / 4: +5-15 % against the L1 prefetch
// alone); the instruction-bound FMA and exact steps ran 1.5-3.5 % slower with it and skip it.
constexpr int kNearBlocks = 2, kFarBlocks = 4;

inline __m512 add_ps(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
// A bf16 value as fp32 in every lane.
inline __m512 bcast_bf16(uint16_t v) {
  return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int32_t>(uint32_t{v} << 16)));
}
// Scale byte -> 2^(s-127) in every lane, as the scalar variant's scale_value (255: NaN; 0: 2^-127).
inline __m512 scale_vec(uint8_t s) {
  const uint32_t bits = s == 255 ? 0x7FC00000u : s == 0 ? 0x00400000u : uint32_t{s} << 23;
  return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int32_t>(bits)));
}

// The dot step, in the units compiled with VBMI (or emulated).
#if defined(__AVX512VBMI__) || defined(DSV4_ISA_EMULATED)
#define DSV4_FP8_DOT 1
#else
#define DSV4_FP8_DOT 0
#endif

#if DSV4_FP8_DOT
// The bf16 byte tables of the dot decode, in registers.
struct Lut {
  __m512i hi0, hi1, lo0, lo1;
};
inline Lut load_lut() {
  return Lut{_mm512_load_si512(fp8::kFp8Bf16.hi), _mm512_load_si512(fp8::kFp8Bf16.hi + 64),
             _mm512_load_si512(fp8::kFp8Bf16.lo), _mm512_load_si512(fp8::kFp8Bf16.lo + 64)};
}
// Code vector q -> the bf16 weight vectors of its column pairs (w[0]: 4v, 4v + 1; w[1]: 4v + 2, 4v + 3).
inline void decode_dot(__m512i q, const Lut& lut, __m512i* w) {
  const __m512i sign = _mm512_set1_epi8(-128);
  const __m512i hb = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(lut.hi0, q, lut.hi1), q, sign, 0xF8);
  const __m512i lb = _mm512_permutex2var_epi8(lut.lo0, q, lut.lo1);
  w[0] = _mm512_unpacklo_epi8(lb, hb);
  w[1] = _mm512_unpackhi_epi8(lb, hb);
}
#endif
// Code vector q -> the fp32 weights of its 4 columns (w[c]: column 4v + c of the 16 outputs).
inline void decode_f32(__m512i q, __m512* w) {
  const __m512i shuf = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(fp8::kColumnShuffle)));
  const __m512i cols = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                                _mm512_shuffle_epi8(q, shuf));
  const __m512 two120 = _mm512_castsi512_ps(_mm512_set1_epi32(247 << 23));
  const __m512i mag = _mm512_set1_epi32(0x7F);
  const __m128i c0 = _mm512_castsi512_si128(cols), c1 = _mm512_extracti32x4_epi32(cols, 1),
                c2 = _mm512_extracti32x4_epi32(cols, 2), c3 = _mm512_extracti32x4_epi32(cols, 3);
  const __m128i c[4] = {c0, c1, c2, c3};
  for (int k = 0; k < 4; ++k) {
    const __m512i d = _mm512_cvtepi8_epi32(c[k]);
    const __m512i bits = _mm512_and_si512(_mm512_slli_epi32(d, 20), _mm512_set1_epi32(static_cast<int32_t>(0x87F00000u)));
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(d, mag), mag);
    w[k] = _mm512_mask_mov_ps(_mm512_mul_ps(_mm512_castsi512_ps(bits), two120), nan,
                              _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
  }
}

// One register block: R rows x NT tiles of 16 outputs from o, over the slice's blocks.
// xr[r]: row r's bf16 x from the slice's first column; yr[r]: its 16·NT results. The R·NT
// pair chains P live in registers (R·NT independent chains hide the dot's latency); the
// chain partials go through `part` (R·NT vectors), once per block.
// How a block computes the pair step (linear_fp8.h): VDPBF16PS (AVX-512 BF16, rows of
// Tile::dot_rows), one FMA per product (AVX-512 F, rows of Tile::dot_rows: their products
// are exact normal numbers, so the FMA gives the multiply-then-add bits), or a multiply
// and an add (every other row).
enum class Step { kDot, kFma, kExact };

template <int R, int NT, Step kStep>
void run_block(const Tile& tl, const fp8::Tiles& W, int64_t o, const uint16_t* const* xr, float* const* yr,
               float* part) {
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock, blk0 = tl.k0 / kBlock;
  const int64_t tile_bytes = kTileOut * W.in;  // codes of one tile, every block
  for (int64_t b = 0; b < n_blk; ++b) {
    const uint8_t* ct[NT];
    for (int t = 0; t < NT; ++t) ct[t] = W.code_tile(o + kTileOut * t, blk0 + b);
    // The next register block's tile starts NT tiles on.
    const Ahead ahead = stream_ahead(kNearBlocks, kFarBlocks, b, n_blk, fp8::kTileBytes, NT * tile_bytes);
    __m512 p[R][NT];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < NT; ++t) p[r][t] = _mm512_setzero_ps();
    DSV4_UNROLL(2)
    for (int v = 0; v < kVectors; ++v) {
      const int64_t col = b * kBlock + 4 * v;
#if DSV4_FP8_DOT
      if constexpr (kStep == Step::kDot) {  // the NT tiles' weights decoded, then each x pair broadcast once
        const Lut lut = load_lut();
        __m512i w[2][NT];  // [column pair m][tile t]
        DSV4_UNROLL(4)
        for (int t = 0; t < NT; ++t) {
          prefetch_ahead(ct[t] + 64 * v, ahead);
          __m512i pairs[2];
          decode_dot(_mm512_loadu_si512(ct[t] + 64 * v), lut, pairs);
          w[0][t] = pairs[0];
          w[1][t] = pairs[1];
        }
        DSV4_UNROLL(2)
        for (int m = 0; m < 2; ++m) dot_column_pair<R, NT>(p, w[m], xr, col + 2 * m);
        continue;
      }
#endif
      DSV4_UNROLL(4)
      for (int t = 0; t < NT; ++t) {
        prefetch_near(ct[t] + 64 * v, ahead);  // the FMA and exact steps: L1 only (2-3 % faster)
        __m512 w[4];
        decode_f32(_mm512_loadu_si512(ct[t] + 64 * v), w);
        DSV4_UNROLL(2)
        for (int m = 0; m < 2; ++m)
          DSV4_UNROLL(16)
          for (int r = 0; r < R; ++r) {
            const __m512 xo = bcast_bf16(xr[r][col + 2 * m + 1]), xe = bcast_bf16(xr[r][col + 2 * m]);
            if constexpr (kStep == Step::kFma) {
              p[r][t] = _mm512_fmadd_ps(w[2 * m + 1], xo, p[r][t]);
              p[r][t] = _mm512_fmadd_ps(w[2 * m], xe, p[r][t]);
            } else {
              p[r][t] = _mm512_add_ps(p[r][t], _mm512_mul_ps(w[2 * m + 1], xo));
              p[r][t] = _mm512_add_ps(p[r][t], _mm512_mul_ps(w[2 * m], xe));
            }
          }
      }
    }
    const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
    for (int t = 0; t < NT; ++t) {
      const __m512 s = scale_vec(W.scale(o + kTileOut * t, blk0 + b));
      for (int r = 0; r < R; ++r) {
        const int i = kTileOut * (r * NT + t);
        __m512 pa = _mm512_load_ps(part + i), total = _mm512_loadu_ps(yr[r] + kTileOut * t);
        chain_beta(chain, _mm512_mul_ps(p[r][t], s), pa, total, add_ps);
        _mm512_store_ps(part + i, pa);
        if (chain.last) _mm512_storeu_ps(yr[r] + kTileOut * t, total);
      }
    }
  }
}

using BlockFn = void (*)(const Tile&, const fp8::Tiles&, int64_t, const uint16_t* const*, float* const*, float*);

// Register blocks of R <= kBlockRows rows x NT <= 4 tiles with R·NT <= kBlockRegs pair
// chains, as many tiles as fit: each broadcast x pair feeds NT dots and each decoded vector R.
// 16 chains, the 4 lookup tables and 4 weight vectors fit the 32 registers (no spill); on
// Zen 5, one thread, 8 x 2 read about 10 % more than the FP4 tiles' 6 x 2 at T = 64.
constexpr int kBlockRegs = 16;
constexpr int kBlockRows = 8;
template <Step kStep>
struct Blocks {
  BlockFn fn[kBlockRows][kMaxTiles];  // [R - 1][NT - 1]; nullptr where R·NT > kBlockRegs
};
template <Step kStep, int... I>
constexpr Blocks<kStep> make_blocks(std::integer_sequence<int, I...>) {
  Blocks<kStep> b{};
  constexpr auto fn_of = []<int R, int NT>() -> BlockFn {
    if constexpr (R * NT <= kBlockRegs) return run_block<R, NT, kStep>;
    else return nullptr;
  };
  ((b.fn[I / kMaxTiles][I % kMaxTiles] = fn_of.template operator()<I / kMaxTiles + 1, I % kMaxTiles + 1>()), ...);
  return b;
}
template <Step kStep>
constexpr Blocks<kStep> kBlocks = make_blocks<kStep>(std::make_integer_sequence<int, kBlockRows * kMaxTiles>{});

// Rows rows[0..n) of the call, all with one kind of step.
template <Step kStep>
void run_rows(const Tile& tl, const fp8::Tiles& W, const int* rows, int n) {
  const int nt = (tl.no + kTileOut - 1) / kTileOut;
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const uint16_t* xr[kBlockRows];
  float* yr[kBlockRows];
  alignas(64) float part[kBlockRegs * kTileOut];
  for (int i = 0; i < n; i += kBlockRows) {
    const int nr = n - i < kBlockRows ? n - i : kBlockRows;
    const int per = kBlockRegs / nr < kMaxTiles ? kBlockRegs / nr : kMaxTiles;  // tiles per block
    for (int r = 0; r < nr; ++r) xr[r] = x + rows[i + r] * tl.x_stride + tl.k0;
    for (int t = 0; t < nt; t += per) {
      const int nb = nt - t < per ? nt - t : per;
      for (int r = 0; r < nr; ++r) yr[r] = tl.y + rows[i + r] * kMaxOutTile + kTileOut * t;
      kBlocks<kStep>.fn[nr - 1][nb - 1](tl, W, tl.o + kTileOut * t, xr, yr, part);
    }
  }
}

// The FMA and exact steps from kDecodeOnceRows rows: each tile's block decoded once into
// fp32 vectors in L1 (8 KiB), then the rows in blocks of up to kBlockRows rows, x converted
// to fp32 once per block and broadcast from memory. The same chains as run_block, so the
// same bits.
constexpr int kDecodeOnceRows = 5;
struct DecodedBlock {
  __m512 w[kVectors][4];  // [code vector v][column 4v + c]
};

// R rows' pair chains of one decoded block, then their betas P·s into bet[r].
template <int R, Step kStep>
void rows_on_decoded(const DecodedBlock& d, const uint16_t* const* xr, int64_t col0, __m512 s,
                     float (*bet)[kTileOut]) {
  alignas(64) float xf[R][kBlock];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < kBlock; c += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r] + col0 + c));
      _mm512_store_ps(xf[r] + c, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
  __m512 p[R];
  for (int r = 0; r < R; ++r) p[r] = _mm512_setzero_ps();
  for (int v = 0; v < kVectors; ++v)
    DSV4_UNROLL(2)
    for (int m = 0; m < 2; ++m) {
      const __m512 wo = d.w[v][2 * m + 1], we = d.w[v][2 * m];
      DSV4_UNROLL(8)
      for (int r = 0; r < R; ++r) {
        const __m512 xo = _mm512_set1_ps(xf[r][4 * v + 2 * m + 1]), xe = _mm512_set1_ps(xf[r][4 * v + 2 * m]);
        if constexpr (kStep == Step::kFma) {
          p[r] = _mm512_fmadd_ps(we, xe, _mm512_fmadd_ps(wo, xo, p[r]));
        } else {
          p[r] = _mm512_add_ps(_mm512_add_ps(p[r], _mm512_mul_ps(wo, xo)), _mm512_mul_ps(we, xe));
        }
      }
    }
  for (int r = 0; r < R; ++r) _mm512_store_ps(bet[r], _mm512_mul_ps(p[r], s));
}

using DecodedFn = void (*)(const DecodedBlock&, const uint16_t* const*, int64_t, __m512, float (*)[kTileOut]);
template <Step kStep, int... I>
constexpr auto make_decoded(std::integer_sequence<int, I...>) {
  struct Table {
    DecodedFn fn[sizeof...(I)];
  } t{{rows_on_decoded<I + 1, kStep>...}};
  return t;
}
template <Step kStep>
constexpr auto kDecoded = make_decoded<kStep>(std::make_integer_sequence<int, kBlockRows>{});

// Rows rows[0..n) of the call (n >= kDecodeOnceRows), all by FMA or all exact.
template <Step kStep>
void run_rows_decoded(const Tile& tl, const fp8::Tiles& W, const int* rows, int n) {
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock, blk0 = tl.k0 / kBlock;
  alignas(64) DecodedBlock d;
  alignas(64) float bet[kBlockRows][kTileOut];
  alignas(64) float part[kMaxRowTile][kTileOut], total[kMaxRowTile][kTileOut];
  const uint16_t* xr[kBlockRows];
  for (int t = 0; t * kTileOut < tl.no; ++t) {
    const int64_t o = tl.o + kTileOut * t;
    for (int64_t b = 0; b < n_blk; ++b) {
      const uint8_t* ct = W.code_tile(o, blk0 + b);
      const uint8_t* pf = ct + (b + 1 < n_blk ? fp8::kTileBytes : 0);
      for (int v = 0; v < kVectors; ++v) {
        _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * v), _MM_HINT_T0);
        decode_f32(_mm512_loadu_si512(ct + 64 * v), d.w[v]);
      }
      const __m512 s = scale_vec(W.scale(o, blk0 + b));
      const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
      for (int i = 0; i < n; i += kBlockRows) {
        const int nr = n - i < kBlockRows ? n - i : kBlockRows;
        for (int r = 0; r < nr; ++r) xr[r] = x + rows[i + r] * tl.x_stride + tl.k0;
        kDecoded<kStep>.fn[nr - 1](d, xr, b * kBlock, s, bet);
        for (int r = 0; r < nr; ++r) {
          __m512 pa = _mm512_load_ps(part[i + r]), to = _mm512_load_ps(total[i + r]);
          chain_beta(chain, _mm512_load_ps(bet[r]), pa, to, add_ps);
          _mm512_store_ps(part[i + r], pa);
          _mm512_store_ps(total[i + r], to);
        }
      }
    }
    for (int i = 0; i < n; ++i) _mm512_storeu_ps(tl.y + rows[i] * kMaxOutTile + kTileOut * t, _mm512_load_ps(total[i]));
  }
}

// Rows rows[0..n) with one kind of step: the dot in register blocks, the FMA and exact steps
// from kDecodeOnceRows rows on the decoded block.
template <Step kStep>
void run_step(const Tile& tl, const fp8::Tiles& W, const int* rows, int n) {
  if (kStep != Step::kDot && n >= kDecodeOnceRows) return run_rows_decoded<kStep>(tl, W, rows, n);
  run_rows<kStep>(tl, W, rows, n);
}

// The call's rows of Tile::dot_rows with `fast`, the others exact.
template <Step kFast>
void split_rows(const Tile& tl) {
  int fast[kMaxRowTile], exact[kMaxRowTile], nf = 0, ne = 0;
  for (int i = 0; i < tl.nt; ++i) {
    if ((tl.dot_rows >> i) & 1) fast[nf++] = i;
    else exact[ne++] = i;
  }
  const fp8::Tiles W{static_cast<const uint8_t*>(tl.w->data), tl.w->scale, tl.w->in};
  if (nf > 0) run_step<kFast>(tl, W, fast, nf);
  if (ne > 0) run_step<Step::kExact>(tl, W, exact, ne);
}

}  // namespace
}  // namespace dsv4::kernels::linear_tile
