// A linear layer's weight as the checkpoint stores it (checkpoint.md §4, §5.7),
// viewed without copying. Logical shape [out, in]; y_o = Σ_i W[o,i]·x_i.
//   kBF16: data = bf16 [out, in], no scale                       (no actq)
//   kF32 : data = f32 [out, in], no scale                        (no actq)
//   kFP8 : data = e4m3 codes [out, in], scale = ue8m0 [ceil(out/128), ceil(in/128)]
//   kFP4 : data = packed e2m1 [out, in/2] (low nibble = even element),
//          scale = ue8m0 [out, in/32]
//          With fp4_dot (needs out % 16 == 0 and in % 128 == 0), the codes are instead
//          laid out for the VDPBF16PS kernel (kernels/linear/linear_avx512_gemm.cc) in
//          tiles of 16 rows x 128 columns (1024 bytes) along K, then the next 16 rows
//          (rows [16g, 16g + 16) start at byte 16g·in/2 as before), so the kernel reads
//          one sequential run per 16 rows. Inside a tile, row j's block is the 64 bytes at
//          64j: 32 little-endian 16-bit words, nibble m of word v holding column
//          32m + fp4_dot_col(v), so a chunk's 32 lookup indices take one shift. Same
//          bytes, same scales (as stored): only the order of the nibbles changes.
//          With fp8_dot (needs out % 16 == 0 and in % 128 == 0), the codes are instead
//          stored tile by tile for the same kernel: tiles of 16 rows x 128 columns (one
//          scale, 2048 bytes) follow each other along K, then the next 16 rows (so rows
//          [16g, 16g + 16) start at byte 16g·in as before). Inside a tile, 64-byte vector
//          v decodes into the two transposed dot vectors of chunk m = v / 8 and lanes
//          l = v % 8 and v % 8 + 8 (fp8_dot_offset); the kernel needs no shuffle or
//          transpose. Same codes, same scales: only their order changes.
// `actq` follows the *stored* form (model.md §0.4.4): FP8/FP4 get it, except
// wo_a, which the model dequantizes to bf16 at load and runs without it.
#pragma once

#include <cstdint>

namespace dsv4 {

enum class WeightFormat { kBF16, kF32, kFP8, kFP4 };

struct LinearWeight {
  WeightFormat format = WeightFormat::kBF16;
  int64_t out = 0;
  int64_t in = 0;
  const void* data = nullptr;
  const uint8_t* scale = nullptr;
  bool fp4_dot = false;  // kFP4 only: codes in 16 x 128 tiles (above)
  bool fp8_dot = false;  // kFP8 only: codes in 16 x 128 tiles (above)

  bool quantized() const { return format == WeightFormat::kFP8 || format == WeightFormat::kFP4; }
};

// The tile layouts (fp4_dot, fp8_dot): rows and columns of a tile, its bytes.
constexpr int kDotTileRows = 16;
constexpr int kDotTileCols = 128;
constexpr int kFp8TileBytes = kDotTileRows * kDotTileCols;
constexpr int kFp4TileBytes = kDotTileRows * kDotTileCols / 2;
// Whether a [out, in] FP8 or FP4 weight can take the tile layout.
constexpr bool dot_tiles_fit(int64_t out, int64_t in) { return out % kDotTileRows == 0 && in % kDotTileCols == 0; }

// Column (within its 32-column chunk) held by word v of the dot layout: VDPBF16PS adds
// a lane's odd word first, and lane l sums columns l, l + 16 (linear.h K order).
constexpr int fp4_dot_col(int v) { return v % 2 == 1 ? (v - 1) / 2 : 16 + v / 2; }
// Byte offset in its row's 64-byte block and nibble (0 low, 1 high) of column c < 128
// in the tile layout.
constexpr int fp4_dot_byte(int c) {
  const int r = c % 32, v = r < 16 ? 2 * r + 1 : 2 * (r - 16);
  return 2 * v + (c / 32) / 2;
}
constexpr int fp4_dot_nibble(int c) { return (c / 32) % 2; }

// Byte offset of row o's 64-byte block blk in an FP4 weight of `in` columns in the tile layout.
constexpr int64_t fp4_block_offset(int64_t in, int64_t o, int64_t blk) {
  return (o / kDotTileRows) * kDotTileRows * (in / 2) + blk * kFp4TileBytes + (o % kDotTileRows) * (kDotTileCols / 2);
}

// The e2m1 code of W[o, i] of an FP4 weight, in either layout.
inline uint8_t fp4_code(const LinearWeight& w, int64_t o, int64_t i) {
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  if (w.fp4_dot) {
    const int c = static_cast<int>(i % 128);
    const uint8_t b = data[fp4_block_offset(w.in, o, i / kDotTileCols) + fp4_dot_byte(c)];
    return static_cast<uint8_t>(fp4_dot_nibble(c) ? b >> 4 : b & 0xF);
  }
  const uint8_t b = data[o * (w.in / 2) + i / 2];
  return static_cast<uint8_t>(i % 2 ? b >> 4 : b & 0xF);
}

// Byte offset inside its tile of row j < 16, column c < 128. The transposed dot vector of
// chunk m, lane l has in dword j the bf16 words of columns 32m + 16 + l (low) and 32m + l
// (high) of row j (the x dot layout, kernels/linear/linear_avx512_decode.h dot_order);
// vector v = 8m + l % 8 holds lane l % 8 in the bytes vpunpcklbw widens (bytes 0-7 of each
// 16-byte lane) and lane l % 8 + 8 in those vpunpckhbw widens (bytes 8-15).
constexpr int fp8_dot_offset(int j, int c) {
  const int m = c / 32, r = c % 32, l = r % 16;
  const int w = 2 * j + (r < 16 ? 1 : 0);  // word of the dot vector
  return 64 * (8 * m + l % 8) + 16 * (w / 8) + w % 8 + 8 * (l / 8);
}
// Offset of W[o, i]'s code in data, in either layout.
inline int64_t fp8_code_offset(const LinearWeight& w, int64_t o, int64_t i) {
  if (!w.fp8_dot) return o * w.in + i;
  return (o / kDotTileRows) * kDotTileRows * w.in + (i / kDotTileCols) * kFp8TileBytes +
         fp8_dot_offset(static_cast<int>(o % kDotTileRows), static_cast<int>(i % kDotTileCols));
}
inline uint8_t fp8_code(const LinearWeight& w, int64_t o, int64_t i) {
  return static_cast<const uint8_t*>(w.data)[fp8_code_offset(w, o, i)];
}
// Writes the codes of a [rows, in] FP8 matrix (stored order at src) as tiles at dst
// (rows·in bytes, not overlapping src); dot_tiles_fit(rows, in).
struct Fp8TileOffsets {
  uint16_t at[kDotTileRows][kDotTileCols];
};
constexpr Fp8TileOffsets make_fp8_tile_offsets() {
  Fp8TileOffsets t{};
  for (int j = 0; j < kDotTileRows; ++j)
    for (int c = 0; c < kDotTileCols; ++c) t.at[j][c] = static_cast<uint16_t>(fp8_dot_offset(j, c));
  return t;
}
// A constant table (data only, so the ISA translation units read it too, linear_tile.h).
inline constexpr Fp8TileOffsets kFp8TileOffsets = make_fp8_tile_offsets();
inline void fp8_pack_dot(const uint8_t* src, int64_t rows, int64_t in, uint8_t* dst) {
  for (int64_t g = 0; g < rows; g += kDotTileRows)
    for (int j = 0; j < kDotTileRows; ++j)
      for (int64_t t = 0; t < in / kDotTileCols; ++t) {
        const uint8_t* s = src + (g + j) * in + t * kDotTileCols;
        uint8_t* d = dst + g * in + t * kFp8TileBytes;
        for (int c = 0; c < kDotTileCols; ++c) d[kFp8TileOffsets.at[j][c]] = s[c];
      }
}

// Writes the codes of a [rows, in] FP4 matrix (stored order at src) as tiles at dst
// (rows·in/2 bytes, not overlapping src); dot_tiles_fit(rows, in).
inline void fp4_pack_dot(const uint8_t* src, int64_t rows, int64_t in, uint8_t* dst) {
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t blk = 0; blk < in / 128; ++blk) {
      const uint8_t* p = src + o * (in / 2) + blk * 64;
      uint8_t* q = dst + fp4_block_offset(in, o, blk);
      for (int v = 0; v < 32; ++v) {
        const int r = fp4_dot_col(v);  // column 32m + r: stored byte 16m + r/2, nibble r % 2
        const int sh = 4 * (r % 2);
        uint32_t word = 0;
        for (int m = 0; m < 4; ++m) word |= ((p[16 * m + r / 2] >> sh) & 0xFu) << (4 * m);
        q[2 * v] = static_cast<uint8_t>(word);
        q[2 * v + 1] = static_cast<uint8_t>(word >> 8);
      }
    }
}

// w (FP4 or FP8 as stored, dot_tiles_fit) written in its tile layout at dst (as many bytes
// as w's codes, not overlapping them): the view of the copy, fp4_dot / fp8_dot set.
inline LinearWeight pack_tiles(const LinearWeight& w, uint8_t* dst) {
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  LinearWeight t = w;
  t.data = dst;
  if (w.format == WeightFormat::kFP4) {
    fp4_pack_dot(src, w.out, w.in, dst);
    t.fp4_dot = true;
  } else {
    fp8_pack_dot(src, w.out, w.in, dst);
    t.fp8_dot = true;
  }
  return t;
}

}  // namespace dsv4
