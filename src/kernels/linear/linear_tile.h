// Internal to the linear engine: the ISA-specific inner loop. One call computes
// the fp32 results of a tile of nt rows x no outputs over the K blocks of a
// slice, in the fixed order of linear.h (BF16/F32 weights: 16 lanes per 128-wide
// block, lane l summing k ≡ l mod 16 ascending, the fold tree; FP4/FP8: the pair
// chains of linear_fp4.h / linear_fp8.h; blocks chained, grouped tree).
// Every variant gives the same bits: products and sums are separately rounded
// fp32 operations (no FMA contraction: these files build with -ffp-contract=off),
// each in the order of the scalar variant (or, for VDPBF16PS and explicit FMAs
// inside the range check that makes every product exact, provably equal to them).
//   linear.cc        scalar (the portable engine; x86-64-v2)
//   linear_avx2.cc   AVX2 + FMA flags, 32 outputs per tile; BF16 with bf16 x
//                    from 3 rows: the GEMM tile (decode once for up to 64 rows)
//   linear_avx512.cc AVX-512 F/BW/VL(/BF16) flags, 64 outputs per tile; with
//                    VDPBF16PS lane sums where a range check allows (kAvx512Bf16);
//                    BF16 with bf16 x from 3 rows: the FMA GEMM tile (kAvx512,
//                    and kAvx512Bf16 without VBMI)
//   linear_avx512_gemm.cc  kAvx512Bf16 with VBMI, BF16 weights from 2 rows, bf16 x:
//                    each weight block decoded once for up to 64 rows
//   linear_fp4_avx2.cc, linear_fp4_avx512.cc  every FP4 weight (Kernels::fp4,
//                    linear_fp4.h); FP4 never reaches x_bf16 / x_f32
//   linear_fp8_avx2.cc, linear_fp8_avx512.cc, linear_fp8_avx512_bf16.cc  every FP8
//                    weight (Kernels::fp8, linear_fp8.h); FP8 never reaches x_bf16 / x_f32
// The ISA translation units use intrinsics and this header only: an inline
// function with external linkage (std:: or dsv4 headers) compiled there could be
// the copy the linker keeps for the whole program and run on a CPU without the ISA.
#pragma once

#include <cstdint>

#include "numeric/linear_weight.h"

// Full unrolling of a kernel's inner loops (register blocks): `DSV4_UNROLL(4) for (...)`.
// Off in the emulated test build (isa_intrinsics.h), whose portable vectors would make the
// unrolled code take tens of minutes to compile; the bits do not depend on it.
#define DSV4_PRAGMA(x) _Pragma(#x)
#if defined(DSV4_ISA_EMULATED)
#define DSV4_UNROLL(n)
#else
#define DSV4_UNROLL(n) DSV4_PRAGMA(GCC unroll n)
#endif

namespace dsv4::kernels::linear_tile {

constexpr int kBlock = 128;      // K block of the chain (= the actq / FP8 scale block)
constexpr int kLanes = 16;       // fixed accumulation lanes inside a block
constexpr int kRowTile = 8;      // rows of one tile call (Kernels::row_tile of most variants)
constexpr int kMaxRowTile = 64;  // most rows of one tile call of any variant
constexpr int kMaxOutTile = 64;  // widest output tile of any variant

struct Tile {
  const LinearWeight* w;
  int64_t o;         // first output (row of W)
  int no;            // outputs, 1..out_tile
  int nt;            // rows, 1..Kernels::row_tile
  int64_t k0, k1;    // K columns [k0, k1): k0 % 128 == 0, k1 % 128 == 0 or k1 == w->in
  int64_t g_blk;     // K blocks per group of the grouped tree (n_blk for the plain chain)
  const void* x;     // row i at x + i*x_stride elements (bf16 or float), indexed by k
  int64_t x_stride;
  float* y;          // result (i, j) at y[i*kMaxOutTile + j]
  uint64_t dot_rows; // FP4 / FP8 tiles: bit i set when row i may take the bf16 dot or FMA (quant_dot_row)
};

using TileFn = void (*)(const Tile&);

// In an unnamed namespace: each ISA translation unit compiles its own copy (above).
namespace {

// Block b of n_blk in the K order of linear.h with K groups of g_blk blocks: its
// beta starts a group's chain (first), ends it (last: the group's pi joins the total),
// and belongs to the first group (pi_0 starts the total).
struct BlockChain {
  bool first, last, first_group;
};
constexpr BlockChain block_chain(int64_t b, int64_t n_blk, int64_t g_blk) {
  return BlockChain{b % g_blk == 0, (b + 1) % g_blk == 0 || b + 1 == n_blk, b < g_blk};
}
// Chains one row's beta of block c into its group partial pa and its total (V: a
// float or an ISA vector, add its addition).
template <class V, class Add>
inline void chain_beta(const BlockChain& c, V beta, V& pa, V& total, Add add) {
  pa = c.first ? beta : add(pa, beta);
  if (c.last) total = c.first_group ? pa : add(total, pa);
}

// Element offset of W[o, k] of a BF16 weight, stored rows or LinearWeight::bf16_tiles (16 rows
// x 128 columns a tile, tiles along K; rows o and o + 1 of a tile kBlock apart).
struct Bf16Layout {
  const uint16_t* data;
  int64_t in;
  bool tiles;
  explicit Bf16Layout(const LinearWeight& w)
      : data(static_cast<const uint16_t*>(w.data)), in(w.in), tiles(w.bf16_tiles) {}
  const uint16_t* at(int64_t o, int64_t k) const {
    return tiles ? data + (o / 16) * 16 * in + (k / kBlock) * 16 * kBlock + (o % 16) * kBlock + k % kBlock
                 : data + o * in + k;
  }
  // Elements between rows o and o + 1 of one tile (of the same block).
  int64_t row_stride() const { return tiles ? kBlock : in; }
};

// The range check that lets a lane step be one VDPBF16PS or FMA (linear_avx512.cc):
// the window [lo, hi] of biased exponents of x (bf16_range of the row block) inside
// which every product with the weight block is exact in fp32 (normal or zero, finite)
// and no partial sum reaches 2^127. Empty (lo > hi): the multiply-add path.
struct XWindow {
  int lo, hi;
  constexpr bool empty() const { return lo > hi; }
};
constexpr XWindow kNoWindow{1000, -1};  // admits no row (bf16_range gives lo <= 512, hi >= 0)
constexpr int at_least_1(int v) { return v > 1 ? v : 1; }
constexpr XWindow intersect(XWindow a, XWindow b) {
  return XWindow{a.lo > b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi};
}
// BF16 block of exponent range [wl, wh] (bf16_range; wl = 0: subnormal, Inf or NaN).
constexpr XWindow bf16_window(int wl, int wh) {
  return wl < 1 ? kNoWindow : XWindow{at_least_1(142 - wl), 376 - wh};
}

}  // namespace

struct Kernels {
  int out_tile;   // outputs per tile, <= kMaxOutTile
  int row_tile;   // rows per tile, <= kMaxRowTile
  TileFn x_bf16;  // x is bf16
  TileFn x_f32;   // x is fp32
  TileFn fp4;        // FP4 in the tile layout (LinearWeight::fp4_dot), bf16 x, kMaxOutTile
                     // outputs x kMaxRowTile rows (linear_fp4.h); nullptr: the scalar tile
  TileFn fp8;        // FP8 likewise (LinearWeight::fp8_dot, linear_fp8.h)
};

Kernels scalar_kernels();
Kernels avx2_kernels();
Kernels avx512_kernels();
// vbmi: the CPU has AVX512_VBMI (the GEMM tile of linear_avx512_gemm.cc, the FP8 dot tile).
Kernels avx512_bf16_kernels(bool vbmi);
// BF16 weights, bf16 x, any nt <= kMaxRowTile (linear_avx512_gemm.cc).
void avx512_bf16_gemm_tile(const Tile& tl);
// FP4 tiles (linear_fp4.h): for the rows of Tile::dot_rows one FMA per product (AVX2;
// AVX-512 F/BW) or VDPBF16PS (AVX-512 BF16); a multiply and an add for the others.
void avx2_fp4_tile(const Tile& tl);
void avx512_fp4_tile(const Tile& tl);
void avx512_bf16_fp4_tile(const Tile& tl);
// FP8 tiles (linear_fp8.h), likewise; the VDPBF16PS tile needs AVX512_VBMI (its decode).
void avx2_fp8_tile(const Tile& tl);
void avx512_fp8_tile(const Tile& tl);
void avx512_bf16_fp8_tile(const Tile& tl);
// xq = actq_dequant_row(x) (numeric/quant.h) for one row of n bf16 bits (n % 128 == 0)
// with AVX-512 F/BW (linear_avx512.cc), the same bits; amax_floor is kActqAmaxFloor.
// False, before writing anything, when the row holds a NaN or Inf: the caller runs the
// scalar row. x == xq is allowed.
bool avx512_actq_row(const uint16_t* x, int64_t n, uint16_t* xq, float amax_floor);

}  // namespace dsv4::kernels::linear_tile
