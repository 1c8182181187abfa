// Internal to the linear engine: the FP8 tiles (linear_tile.h Kernels::fp8) on weights in
// the tile layout (LinearWeight::fp8_dot), 16 outputs in the lanes of a vector.
//
// The FP8 K order (linear.h), the same bits on every path:
//   P    = the column pairs (2p, 2p+1) of the 128-column block ascending, each pair adding
//          the odd column's product first: P += w[2p+1]·x[2p+1]; P += w[2p]·x[2p]
//          (w the e4m3 value, unscaled; separately rounded fp32 products and sums; a last
//          column without its pair, in a partial block, adds alone);
//   beta = P·S (S = 2^(s-127), the 128x128 block's ue8m0 scale, a separately rounded product);
//   betas chained over 128-wide blocks (or wo_b's grouped tree) as in every format.
// This is model.md §0.4.4's FP8 GEMM, P_b times the weight scale, with x̂ = actq(x).
// Why this order: VDPBF16PS computes exactly a lane's pair step, (acc + odd product) + even
// product, each rounded to nearest even, with the products exact (an e4m3 value times a
// bf16 has at most 12 significant bits). With 16 outputs in the lanes, one instruction does
// one column pair of 16 outputs against a broadcast x pair: no fold tree, no transpose,
// every MAC useful. The weights are decoded unscaled (one table for every block: no
// per-scale lookup table); the scale multiplies P once per block. On hosts without a bf16
// dot the same order is a multiply and an add per product (AVX2: 8 outputs per vector;
// AVX-512 F: 16), or one FMA where the product is an exact normal number (the rows below),
// which rounds the same.
//
// The dot equals the multiply-add chain only where VDPBF16PS's flushing of subnormals
// cannot act: every x of the row's slice zero or normal with biased exponent in
// [kDotExpLo, kDotExpHi]. Then each product (|w| a multiple of 2^-9 below 2^9) is a multiple
// of 2^-126, so every partial sum of P is zero or normal, and |P| < 128·2^9·2^(237-126)
// = 2^127 stays finite. The caller marks such rows (Tile::dot_rows, quant_dot_row); the
// others take the exact path. actq's rows (|x̂| >= 2^-31, biased exponent >= 96) pass.
// The scale product and the block sums are plain fp32 multiplies and adds on every path.
#pragma once

#include <cstdint>

namespace dsv4::kernels::linear_tile::fp8 {

constexpr int kTileOut = 16;      // outputs of a tile (lanes)
constexpr int kVectors = 32;      // 64-byte code vectors per tile block (4 columns each)
constexpr int kTileBytes = 2048;  // codes of a tile's block

// Biased exponents of x admitted by the dot (above).
constexpr int kDotExpLo = 17, kDotExpHi = 237;

// The tile layout: codes of output o's tile at block blk, and the scale byte of that block.
struct Tiles {
  const uint8_t* codes;
  const uint8_t* scales;  // ue8m0 [ceil(out/128), in/128]
  int64_t in;
  const uint8_t* code_tile(int64_t o, int64_t blk) const {
    return codes + (o / kTileOut) * kTileOut * in + blk * kTileBytes;
  }
  uint8_t scale(int64_t o, int64_t blk) const { return scales[(o / 128) * (in / 128) + blk]; }
};

// bf16 bits of the e4m3 magnitudes 0..127 (unscaled, all normal or zero; 0x7F, NaN: a bf16
// NaN), split into the high and low bytes for vpermi2b.
struct Fp8Bytes {
  uint8_t hi[128], lo[128];
};
constexpr Fp8Bytes make_fp8_bytes() {
  Fp8Bytes t{};
  for (int c = 1; c < 128; ++c) {
    const int e = c >> 3, m = c & 7;
    int w = 0x7FC0;  // 127: NaN
    if (c < 127 && e > 0) w = (e + 120) << 7 | m << 4;
    else if (c < 127) {  // m·2^-9
      const int p = m >= 4 ? 2 : m >= 2 ? 1 : 0;
      w = (118 + p) << 7 | (m - (1 << p)) << (7 - p);
    }
    t.hi[c] = static_cast<uint8_t>(w >> 8);
    t.lo[c] = static_cast<uint8_t>(w & 0xFF);
  }
  return t;
}
alignas(64) inline constexpr Fp8Bytes kFp8Bf16 = make_fp8_bytes();

// In-lane byte order that groups a code vector's 16-byte lane by column: bytes 4c..4c+3
// hold column 4v + c of the lane's 4 rows (the fp32 decoders).
alignas(16) inline constexpr uint8_t kColumnShuffle[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};

}  // namespace dsv4::kernels::linear_tile::fp8
