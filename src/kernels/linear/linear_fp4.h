// Internal to the linear engine: the FP4 tiles (linear_tile.h Kernels::fp4) on weights in
// the tile layout (LinearWeight::fp4_dot), 16 outputs in the lanes of a vector.
//
// The FP4 K order (linear.h), the same bits on every path:
//   P_g  = the column pairs (2p, 2p+1) of 32-column group g ascending, each pair adding
//          the odd column's product first: P += w[2p+1]·x[2p+1]; P += w[2p]·x[2p]
//          (w the e2m1 value, unscaled; separately rounded fp32 products and sums);
//   beta = P_0·S_0, then beta + P_g·S_g for the block's groups g ascending (S_g = 2^(s-127),
//          the group's ue8m0 scale, a separately rounded product);
//   betas chained over 128-wide blocks (or the grouped tree) as in every format.
// Why this order: VDPBF16PS computes exactly a lane's pair step, (acc + odd product) + even
// product, each rounded to nearest even, with the products exact (e2m1 times a bf16 has at
// most 10 significant bits). With 16 outputs in the lanes, one instruction does one column
// pair of 16 outputs against a broadcast x pair: no fold tree, no transpose, every MAC
// useful, and the unscaled weights are 4 vpermw and 3 shifts per 64 code bytes. The
// scales multiply P once per 32 columns. The integer route (VPDPBUSD on e4m3 limbs) would
// need 3 to 4 dots per useful one; measured choice on an AVX-512 BF16 host, see
// docs/benchmarks.md. On hosts without a bf16 dot the same order is a multiply and an add
// per product (AVX2: 8 outputs per vector; AVX-512 F: 16), or one FMA where the product
// is an exact normal number (the rows below), which rounds the same.
//
// The dot equals the multiply-add chain only where VDPBF16PS's flushing of subnormals
// cannot act: every x of the row's slice zero or normal with biased exponent in [9, 245]
// (products and partial sums of P are then multiples of 2^-126 and below 2^127). The
// caller marks such rows (Tile::dot_rows, fp4_dot_row); the others take the exact path.
// The same rows let AVX2 and AVX-512 F fuse each product into its add: w·x is then an exact
// normal fp32 number, so FMA(w, x, P) = round(P + w·x) = the multiply-then-add.
// The scale product and the block sums are plain fp32 multiplies and adds on every path.
#pragma once

#include <cstdint>

namespace dsv4::kernels::linear_tile::fp4 {

constexpr int kTileOut = 16;     // outputs of a tile (lanes)
constexpr int kGroups = 4;       // 32-column scale groups per 128-column block
constexpr int kChunks = 4;       // 64-byte code chunks per group (8 columns x 16 outputs each)
constexpr int kTileBytes = 1024; // codes of a tile's block
constexpr int kScaleBytes = 64;  // scales of a tile's block: group g at 16g + output
// A tile's code bytes per scale byte (every block, so for a whole tile too): a prefetch that
// runs `ahead` bytes into the codes runs ahead / kCodesPerScaleByte into the scales.
constexpr int kCodesPerScaleByte = kTileBytes / kScaleBytes;

// Biased exponents of x admitted by the dot (above).
constexpr int kDotExpLo = 9, kDotExpHi = 245;

// The tile layout: codes of output o's tile at block blk, and its scales.
struct Tiles {
  const uint8_t* codes;
  const uint8_t* scales;
  int64_t in;
  const uint8_t* code_tile(int64_t o, int64_t blk) const {
    return codes + (o / kTileOut) * kTileOut * (in / 2) + blk * kTileBytes;
  }
  const uint8_t* scale_tile(int64_t o, int64_t blk) const {
    return scales + (o / kTileOut) * kTileOut * (in / 32) + blk * kScaleBytes;
  }
};

// e2m1 code -> value (sign in bit 3), fp32 and bf16 bits (the latter twice: vpermw reads
// index bits 0..4, and bit 4 is the next nibble's).
alignas(64) inline constexpr float kE2m1F32[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
alignas(64) inline constexpr uint16_t kE2m1Bf16[32] = {
    0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80,
    0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0, 0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040,
    0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};

}  // namespace dsv4::kernels::linear_tile::fp4
