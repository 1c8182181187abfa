// FP4 tiles for AVX2 (linear_fp4.h): 8 outputs per vector (a tile's 16 outputs in two
// halves); one FMA per product on the rows of Tile::dot_rows, a multiply and an add on the
// others. Register blocks of up to kRows rows x one tile; each
// 64-byte code chunk is decoded in registers once for the block's rows.
// Only intrinsics and linear_tile.h / linear_fp4.h here (see linear_tile.h).
#include <cstdint>
#include <utility>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_fp4.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {
namespace {

using fp4::kChunks;
using fp4::kGroups;
using fp4::kTileOut;
constexpr int kRows = 4;
constexpr int kPrefetchBlocks = 4;

struct V2 {  // 16 lanes as two halves
  __m256 h[2];
};
inline __m256 add_ps(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }

// 8 scale bytes -> 2^(s-127) as the scalar variant's scale_value (255: NaN; 0: 2^-127).
inline __m256 scale_vec(const uint8_t* p) {
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  __m256i f = _mm256_slli_epi32(b, 23);
  f = _mm256_blendv_epi8(f, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(b, _mm256_setzero_si256()));
  f = _mm256_blendv_epi8(f, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(b, _mm256_set1_epi32(255)));
  return _mm256_castsi256_ps(f);
}

// The weights of nibble field s (bits s..s+3 of each dword) as fp32: magnitude by lookup,
// the code's bit 3 moved to the sign.
template <int S>
inline __m256 weights(__m256i d, __m256 mag_lut) {
  const __m256 mag = _mm256_permutevar8x32_ps(mag_lut, _mm256_srli_epi32(d, S));
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(d, 28 - S), _mm256_set1_epi32(INT32_MIN));
  return _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
}

inline __m256 bcast_bf16(uint16_t v) {
  return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(uint32_t{v} << 16)));
}

// R rows x one tile of 16 outputs from o; xr[r] from the slice's first column, yr[r] its 16
// results. kFma: rows of Tile::dot_rows, whose products are exact normal fp32 numbers
// (linear_fp4.h), so one FMA per product gives the multiply-then-add bits.
template <int R, bool kFma>
void run_block(const Tile& tl, const fp4::Tiles& W, int64_t o, const uint16_t* const* xr, float* const* yr) {
  const int64_t n_blk = (tl.k1 - tl.k0) / kBlock, blk0 = tl.k0 / kBlock;
  const __m256 lut = _mm256_loadu_ps(fp4::kE2m1F32);
  V2 part[R], total[R];
  for (int64_t b = 0; b < n_blk; ++b) {
    const uint8_t* ct = W.code_tile(o, blk0 + b);
    const uint8_t* st = W.scale_tile(o, blk0 + b);
    // kPrefetchBlocks ahead; near the end into the next tile (contiguous), the next block's.
    // The scales likewise (also contiguous from tile to tile).
    const int64_t ahead = kPrefetchBlocks * fp4::kTileBytes;
    _mm_prefetch(reinterpret_cast<const char*>(st + ahead / fp4::kCodesPerScaleByte), _MM_HINT_T0);
    V2 beta[R];
    for (int g = 0; g < kGroups; ++g) {
      V2 p[R];
      for (int r = 0; r < R; ++r) p[r].h[0] = p[r].h[1] = _mm256_setzero_ps();
      DSV4_UNROLL(4)
      for (int c = 0; c < kChunks; ++c) {
        const int q = kChunks * g + c;
        const int64_t col = b * kBlock + 8 * q;
        _mm_prefetch(reinterpret_cast<const char*>(ct + ahead + 64 * q), _MM_HINT_T0);
        DSV4_UNROLL(2)
        for (int h = 0; h < 2; ++h) {
          const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ct + 64 * q + 32 * h));
          const __m256 w[8] = {weights<0>(d, lut),  weights<16>(d, lut), weights<4>(d, lut),  weights<20>(d, lut),
                               weights<8>(d, lut),  weights<24>(d, lut), weights<12>(d, lut), weights<28>(d, lut)};
          DSV4_UNROLL(4)
          for (int m = 0; m < 4; ++m)
            DSV4_UNROLL(4)
            for (int r = 0; r < R; ++r) {
              const __m256 xo = bcast_bf16(xr[r][col + 2 * m + 1]), xe = bcast_bf16(xr[r][col + 2 * m]);
              if constexpr (kFma) {
                p[r].h[h] = _mm256_fmadd_ps(w[2 * m + 1], xo, p[r].h[h]);
                p[r].h[h] = _mm256_fmadd_ps(w[2 * m], xe, p[r].h[h]);
              } else {
                p[r].h[h] = _mm256_add_ps(p[r].h[h], _mm256_mul_ps(w[2 * m + 1], xo));
                p[r].h[h] = _mm256_add_ps(p[r].h[h], _mm256_mul_ps(w[2 * m], xe));
              }
            }
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256 s = scale_vec(st + 16 * g + 8 * h);
        for (int r = 0; r < R; ++r) {
          const __m256 ps = _mm256_mul_ps(p[r].h[h], s);
          beta[r].h[h] = g == 0 ? ps : _mm256_add_ps(beta[r].h[h], ps);
        }
      }
    }
    const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) chain_beta(chain, beta[r].h[h], part[r].h[h], total[r].h[h], add_ps);
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(yr[r] + 8 * h, total[r].h[h]);
}

using BlockFn = void (*)(const Tile&, const fp4::Tiles&, int64_t, const uint16_t* const*, float* const*);
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
void run_rows(const Tile& tl, const fp4::Tiles& W, const int* rows, int n) {
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

// From kDecodeOnceRows rows: each tile's block decoded once into fp32 vectors in L1 (8 KiB)
// and its scales once, then the rows in register blocks of up to kRows rows: per column pair
// the 4 weight vectors (odd and even column, two halves) are loaded once for the block's
// rows. The same chains as run_block, so the same bits.
constexpr int kDecodeOnceRows = 5;
struct DecodedBlock {
  __m256 w[kGroups * kChunks][2][8];  // [chunk q][half h][run_block's w index]
  __m256 s[kGroups][2];               // [group][half]
};

inline void decode_block(const uint8_t* ct, const uint8_t* st, const uint8_t* pf, DecodedBlock& d) {
  const __m256 lut = _mm256_loadu_ps(fp4::kE2m1F32);
  _mm_prefetch(reinterpret_cast<const char*>(st + (pf - ct) / fp4::kCodesPerScaleByte), _MM_HINT_T0);  // scales too
  for (int q = 0; q < kGroups * kChunks; ++q) {
    _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * q), _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ct + 64 * q + 32 * h));
      const __m256 w[8] = {weights<0>(v, lut),  weights<16>(v, lut), weights<4>(v, lut),  weights<20>(v, lut),
                           weights<8>(v, lut),  weights<24>(v, lut), weights<12>(v, lut), weights<28>(v, lut)};
      for (int j = 0; j < 8; ++j) _mm256_store_ps(reinterpret_cast<float*>(&d.w[q][h][j]), w[j]);
    }
  }
  for (int g = 0; g < kGroups; ++g)
    for (int h = 0; h < 2; ++h) d.s[g][h] = scale_vec(st + 16 * g + 8 * h);
}

// R rows' betas (bet[r]: 16 floats) of one decoded block.
template <int R, bool kFma>
void rows_on_decoded(const DecodedBlock& d, const uint16_t* const* xr, int64_t col0, float (*bet)[kTileOut]) {
  for (int g = 0; g < kGroups; ++g) {
    V2 p[R];
    for (int r = 0; r < R; ++r) p[r].h[0] = p[r].h[1] = _mm256_setzero_ps();
    for (int c = 0; c < kChunks; ++c) {
      const int q = kChunks * g + c;
      const int64_t col = col0 + 8 * q;
      DSV4_UNROLL(4)
      for (int m = 0; m < 4; ++m) {
        const __m256 wo0 = d.w[q][0][2 * m + 1], wo1 = d.w[q][1][2 * m + 1];
        const __m256 we0 = d.w[q][0][2 * m], we1 = d.w[q][1][2 * m];
        DSV4_UNROLL(4)
        for (int r = 0; r < R; ++r) {
          const __m256 xo = bcast_bf16(xr[r][col + 2 * m + 1]), xe = bcast_bf16(xr[r][col + 2 * m]);
          if constexpr (kFma) {
            p[r].h[0] = _mm256_fmadd_ps(we0, xe, _mm256_fmadd_ps(wo0, xo, p[r].h[0]));
            p[r].h[1] = _mm256_fmadd_ps(we1, xe, _mm256_fmadd_ps(wo1, xo, p[r].h[1]));
          } else {
            p[r].h[0] = _mm256_add_ps(_mm256_add_ps(p[r].h[0], _mm256_mul_ps(wo0, xo)), _mm256_mul_ps(we0, xe));
            p[r].h[1] = _mm256_add_ps(_mm256_add_ps(p[r].h[1], _mm256_mul_ps(wo1, xo)), _mm256_mul_ps(we1, xe));
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) {
        const __m256 ps = _mm256_mul_ps(p[r].h[h], d.s[g][h]);
        float* b = bet[r] + 8 * h;
        _mm256_store_ps(b, g == 0 ? ps : _mm256_add_ps(_mm256_load_ps(b), ps));
      }
  }
}

using DecodedFn = void (*)(const DecodedBlock&, const uint16_t* const*, int64_t, float (*)[kTileOut]);
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
void run_rows_decoded(const Tile& tl, const fp4::Tiles& W, const int* rows, int n) {
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
      decode_block(ct, W.scale_tile(o, blk0 + b), ct + (b + 1 < n_blk ? fp4::kTileBytes : 0), d);
      const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
      for (int i = 0; i < n; i += kRows) {
        const int nr = n - i < kRows ? n - i : kRows;
        for (int r = 0; r < nr; ++r) xr[r] = x + rows[i + r] * tl.x_stride + tl.k0;
        kDecoded<kFma>.fn[nr - 1](d, xr, b * kBlock, bet);
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

void avx2_fp4_tile(const Tile& tl) {
  int fma[kMaxRowTile], exact[kMaxRowTile], nf = 0, ne = 0;
  for (int i = 0; i < tl.nt; ++i) {
    if ((tl.dot_rows >> i) & 1) fma[nf++] = i;
    else exact[ne++] = i;
  }
  const fp4::Tiles W{static_cast<const uint8_t*>(tl.w->data), tl.w->scale, tl.w->in};
  if (nf >= kDecodeOnceRows) run_rows_decoded<true>(tl, W, fma, nf);
  else if (nf > 0) run_rows<true>(tl, W, fma, nf);
  if (ne >= kDecodeOnceRows) run_rows_decoded<false>(tl, W, exact, ne);
  else if (ne > 0) run_rows<false>(tl, W, exact, ne);
}

}  // namespace dsv4::kernels::linear_tile
