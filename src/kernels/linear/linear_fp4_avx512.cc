// FP4 tiles for AVX-512 (linear_fp4.h): for the rows of Tile::dot_rows one FMA per product
// (AVX-512 F/BW, avx512_fp4_tile) or VDPBF16PS (AVX-512 BF16, avx512_bf16_fp4_tile); a
// multiply and an add for the others. A tile call is up to 4 tiles of 16 outputs x 64 rows; rows go
// in register blocks of R rows x NT tiles, each block streaming its tiles' codes along K
// once, decoding each 64-byte chunk in registers for all R rows.
// Only intrinsics and linear_tile.h / linear_fp4.h / linear_avx512_pair.h / linear_prefetch.h here (see
// linear_tile.h).
#include <cstdint>
#include <utility>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_avx512_pair.h"
#include "kernels/linear/linear_fp4.h"
#include "kernels/linear/linear_prefetch.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

using fp4::kChunks;
using fp4::kGroups;
using fp4::kTileOut;
constexpr int kMaxTiles = kMaxOutTile / kTileOut;
// Prefetch distances of the tiles' streams (linear_prefetch.h), in blocks: near 2 / far 12
// measured best of 2-4 / 12-24 (Zen 4, the dot at T = 1 / 2: +11-50 % / +18-40 % against the
// former L1 prefetch alone at 4 blocks, T >= 4 even; the AVX-512 F FMA step +5 % / +2 %).
constexpr int kNearBlocks = 2, kFarBlocks = 12;

inline __m512 add_ps(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
// A bf16 value as fp32 in every lane.
inline __m512 bcast_bf16(uint16_t v) {
  return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int32_t>(uint32_t{v} << 16)));
}

// 16 scale bytes -> 2^(s-127) as the scalar variant's scale_value (255: NaN; 0: 2^-127).
inline __m512 scale_vec(const uint8_t* p) {
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  __m512i f = _mm512_slli_epi32(b, 23);
  f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(b, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
  f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(b, _mm512_set1_epi32(255)), _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(f);
}

// One register block: R rows x NT tiles of 16 outputs from o, over the slice's blocks.
// Dot: per column pair one VDPBF16PS of the decoded bf16 weights with the broadcast x pair.
// Exact: the same pair step as a multiply and an add per product on the fp32 decode.
// xr[r]: row r's bf16 x from the slice's first column; yr[r]: its 16·NT results. Only the
// R·NT group sums P live in registers (R·NT independent chains hide the dot's latency); the
// betas and chain partials go through `sums` (2·R·NT vectors), once per group and block.
// How a block computes the pair step (linear_fp4.h): VDPBF16PS (AVX-512 BF16, rows of
// Tile::dot_rows), one FMA per product (AVX-512 F, rows of Tile::dot_rows: their products
// are exact normal numbers, so the FMA gives the multiply-then-add bits), or a multiply
// and an add (every other row).
enum class Step { kDot, kFma, kExact };
// Dot blocks from this many rows decode per column pair (the tiles' weight vectors of one
// pair, then its R·NT dots: fewer live registers, measured 5-14 % faster at T = 4..16 on
// Zen 5); smaller blocks decode the whole chunk first (faster below 4 rows).
constexpr int kPairOuterRows = 4;

// The steps of one code chunk q (columns 8q .. 8q + 7 of the block; col: its first column
// in the slice) of NT tiles into the R·NT group sums p.
// The dot, the chunk decoded whole first, then per column pair each x pair broadcast once.
template <int R, int NT>
inline void chunk_dot_whole(__m512 (&p)[R][NT], const uint8_t* const* ct, const Ahead& ahead, int q,
                            const uint16_t* const* xr, int64_t col) {
  const __m512i lut = _mm512_load_si512(fp4::kE2m1Bf16);
  __m512i w[4][NT];  // [column pair m][tile t]
  DSV4_UNROLL(4)
  for (int t = 0; t < NT; ++t) {
    prefetch_ahead(ct[t] + 64 * q, ahead);
    const __m512i v = _mm512_loadu_si512(ct[t] + 64 * q);
    w[0][t] = _mm512_permutexvar_epi16(v, lut);
    w[1][t] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 4), lut);
    w[2][t] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 8), lut);
    w[3][t] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 12), lut);
  }
  DSV4_UNROLL(4)
  for (int m = 0; m < 4; ++m) dot_column_pair<R, NT>(p, w[m], xr, col + 2 * m);
}
// The dot, per column pair: the NT tiles' weight vectors of the pair, then its R·NT dots.
template <int R, int NT>
inline void chunk_dot_pairs(__m512 (&p)[R][NT], const uint8_t* const* ct, const Ahead& ahead, int q,
                            const uint16_t* const* xr, int64_t col) {
  const __m512i lut = _mm512_load_si512(fp4::kE2m1Bf16);
  __m512i v[NT];
  DSV4_UNROLL(4)
  for (int t = 0; t < NT; ++t) {
    prefetch_ahead(ct[t] + 64 * q, ahead);
    v[t] = _mm512_loadu_si512(ct[t] + 64 * q);
  }
  DSV4_UNROLL(4)
  for (int m = 0; m < 4; ++m) {
    __m512i w[NT];
    DSV4_UNROLL(4)
    for (int t = 0; t < NT; ++t) w[t] = _mm512_permutexvar_epi16(m == 0 ? v[t] : _mm512_srli_epi16(v[t], 4 * m), lut);
    dot_column_pair<R, NT>(p, w, xr, col + 2 * m);
  }
}
// FMA or exact: per tile the fp32 decode, a multiply-add pair step per product.
template <int R, int NT, Step kStep>
inline void chunk_f32(__m512 (&p)[R][NT], const uint8_t* const* ct, const Ahead& ahead, int q,
                      const uint16_t* const* xr, int64_t col) {
  DSV4_UNROLL(4)
  for (int t = 0; t < NT; ++t) {
    prefetch_ahead(ct[t] + 64 * q, ahead);
    const __m512i v = _mm512_loadu_si512(ct[t] + 64 * q);
    const __m512 lut = _mm512_load_ps(fp4::kE2m1F32);
    DSV4_UNROLL(4)
    for (int m = 0; m < 4; ++m) {
      const __m512 we = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4 * m), lut);
      const __m512 wo = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 16 + 4 * m), lut);
      DSV4_UNROLL(16)
      for (int r = 0; r < R; ++r) {
        const __m512 xo = bcast_bf16(xr[r][col + 2 * m + 1]), xe = bcast_bf16(xr[r][col + 2 * m]);
        if constexpr (kStep == Step::kFma) {
          p[r][t] = _mm512_fmadd_ps(wo, xo, p[r][t]);
          p[r][t] = _mm512_fmadd_ps(we, xe, p[r][t]);
        } else {
          p[r][t] = _mm512_add_ps(p[r][t], _mm512_mul_ps(wo, xo));
          p[r][t] = _mm512_add_ps(p[r][t], _mm512_mul_ps(we, xe));
        }
      }
    }
  }
}

template <int R, int NT, Step kStep>
void run_block(const Tile& tl, const fp4::Tiles& W, int64_t o, const uint16_t* const* xr, float* const* yr,
               float* sums) {
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock, blk0 = tl.k0 / kBlock;
  const int64_t tile_bytes = kTileOut * (W.in / 2);  // codes of one tile, every block
  float* beta = sums;                         // (r, t) at 16·(r·NT + t)
  float* part = sums + kTileOut * R * NT;     // likewise
  for (int64_t b = 0; b < n_blk; ++b) {
    const uint8_t* ct[NT];
    const uint8_t* st[NT];
    for (int t = 0; t < NT; ++t) {
      ct[t] = W.code_tile(o + kTileOut * t, blk0 + b);
      st[t] = W.scale_tile(o + kTileOut * t, blk0 + b);
    }
    // The next register block's tile starts NT tiles on.
    const Ahead ahead = stream_ahead(kNearBlocks, kFarBlocks, b, n_blk, fp4::kTileBytes, NT * tile_bytes);
    // The scales the same distances ahead: their stream is one line per block, which the
    // hardware prefetcher left cold (Zen 5: T = 1 / 4 +9-27 % / +9-23 % on w1 / w2).
    for (int t = 0; t < NT; ++t) prefetch_ahead(st[t], ahead, fp4::kCodesPerScaleByte);
    for (int g = 0; g < kGroups; ++g) {
      __m512 p[R][NT];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < NT; ++t) p[r][t] = _mm512_setzero_ps();
      DSV4_UNROLL(4)
      for (int c = 0; c < kChunks; ++c) {
        const int q = kChunks * g + c;  // chunk: columns 8q .. 8q + 7 of the block
        const int64_t col = b * kBlock + 8 * q;
        if constexpr (kStep != Step::kDot) chunk_f32<R, NT, kStep>(p, ct, ahead, q, xr, col);
        else if constexpr (R < kPairOuterRows) chunk_dot_whole<R, NT>(p, ct, ahead, q, xr, col);
        else chunk_dot_pairs<R, NT>(p, ct, ahead, q, xr, col);
      }
      for (int t = 0; t < NT; ++t) {
        const __m512 s = scale_vec(st[t] + 16 * g);
        for (int r = 0; r < R; ++r) {
          float* bp = beta + kTileOut * (r * NT + t);
          const __m512 ps = _mm512_mul_ps(p[r][t], s);
          _mm512_store_ps(bp, g == 0 ? ps : _mm512_add_ps(_mm512_load_ps(bp), ps));
        }
      }
    }
    const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < NT; ++t) {
        const int i = kTileOut * (r * NT + t);
        __m512 pa = _mm512_load_ps(part + i), total = _mm512_loadu_ps(yr[r] + kTileOut * t);
        chain_beta(chain, _mm512_load_ps(beta + i), pa, total, add_ps);
        _mm512_store_ps(part + i, pa);
        if (chain.last) _mm512_storeu_ps(yr[r] + kTileOut * t, total);
      }
  }
}

using BlockFn = void (*)(const Tile&, const fp4::Tiles&, int64_t, const uint16_t* const*, float* const*, float*);

// Register blocks of R <= block_rows rows x NT <= 4 tiles with R·NT <= block_regs group
// sums, as many tiles as fit: each broadcast x pair feeds NT dots and each decoded chunk R.
// Dot: 8 x 2, the 16 sums, 8 broadcast pairs, 2 weight vectors and the LUT in the 32
// registers (measured on Zen 5, one thread, against 6 x 2: T = 4 / 8 / 16 +5-14 %, T = 64
// even). FMA and exact: 6 x 2 (R·NT = 12 reads 76 % of the VDPBF16PS peak at T = 64 in the
// dot's former 6 x 2; 12 x 1 and 16 x 1 spill and read 40-65 %).
// Folding the broadcast into VDPBF16PS's m32bcst operand measured slower on Zen 5 (a
// register-only loop: 175 against 470 GFLOP/s with one broadcast per 2 dots).
constexpr int kMaxBlockRows = 8;
constexpr int block_regs(Step s) { return s == Step::kDot ? 16 : 12; }
constexpr int block_rows(Step s) { return s == Step::kDot ? 8 : 6; }
template <Step kStep>
struct Blocks {
  BlockFn fn[kMaxBlockRows][kMaxTiles];  // [R - 1][NT - 1]; nullptr where the block does not fit
};
template <Step kStep, int... I>
constexpr Blocks<kStep> make_blocks(std::integer_sequence<int, I...>) {
  Blocks<kStep> b{};
  constexpr auto fn_of = []<int R, int NT>() -> BlockFn {
    if constexpr (R * NT <= block_regs(kStep) && R <= block_rows(kStep)) return run_block<R, NT, kStep>;
    else return nullptr;
  };
  ((b.fn[I / kMaxTiles][I % kMaxTiles] = fn_of.template operator()<I / kMaxTiles + 1, I % kMaxTiles + 1>()), ...);
  return b;
}
template <Step kStep>
constexpr Blocks<kStep> kBlocks = make_blocks<kStep>(std::make_integer_sequence<int, kMaxBlockRows * kMaxTiles>{});

// Rows rows[0..n) of the call, all with one kind of step.
template <Step kStep>
void run_rows(const Tile& tl, const fp4::Tiles& W, const int* rows, int n) {
  constexpr int kBlockRegs = block_regs(kStep), kBlockRows = block_rows(kStep);
  const int nt = (tl.no + kTileOut - 1) / kTileOut;
  const uint16_t* x = static_cast<const uint16_t*>(tl.x);
  const uint16_t* xr[kBlockRows];
  float* yr[kBlockRows];
  alignas(64) float sums[2 * kBlockRegs * kTileOut];
  for (int i = 0; i < n; i += kBlockRows) {
    const int nr = n - i < kBlockRows ? n - i : kBlockRows;
    const int per = kBlockRegs / nr < kMaxTiles ? kBlockRegs / nr : kMaxTiles;  // tiles per block
    for (int r = 0; r < nr; ++r) xr[r] = x + rows[i + r] * tl.x_stride + tl.k0;
    for (int t = 0; t < nt; t += per) {
      const int nb = nt - t < per ? nt - t : per;
      for (int r = 0; r < nr; ++r) yr[r] = tl.y + rows[i + r] * kMaxOutTile + kTileOut * t;
      kBlocks<kStep>.fn[nr - 1][nb - 1](tl, W, tl.o + kTileOut * t, xr, yr, sums);
    }
  }
}

fp4::Tiles tiles_of(const Tile& tl) {
  return fp4::Tiles{static_cast<const uint8_t*>(tl.w->data), tl.w->scale, tl.w->in};
}

}  // namespace

namespace {
// The call's rows of Tile::dot_rows with `fast`, the others exact.
template <Step kFast>
void split_rows(const Tile& tl) {
  int fast[kMaxRowTile], exact[kMaxRowTile], nf = 0, ne = 0;
  for (int i = 0; i < tl.nt; ++i) {
    if ((tl.dot_rows >> i) & 1) fast[nf++] = i;
    else exact[ne++] = i;
  }
  const fp4::Tiles W = tiles_of(tl);
  if (nf > 0) run_rows<kFast>(tl, W, fast, nf);
  if (ne > 0) run_rows<Step::kExact>(tl, W, exact, ne);
}
}  // namespace

void avx512_fp4_tile(const Tile& tl) { split_rows<Step::kFma>(tl); }
void avx512_bf16_fp4_tile(const Tile& tl) { split_rows<Step::kDot>(tl); }

}  // namespace dsv4::kernels::linear_tile
