// A linear layer's weight as the checkpoint stores it (checkpoint.md §4, §5.7),
// viewed without copying. Logical shape [out, in]; y_o = Σ_i W[o,i]·x_i.
//   kBF16: data = bf16 [out, in], no scale                       (no actq)
//   kF32 : data = f32 [out, in], no scale                        (no actq)
//   kFP8 : data = e4m3 codes [out, in], scale = ue8m0 [ceil(out/128), ceil(in/128)]
//   kFP4 : data = packed e2m1 [out, in/2] (low nibble = even element),
//          scale = ue8m0 [out, in/32]
//          With fp4_dot (needs out % 16 == 0 and in % 128 == 0), codes and scales are
//          instead laid out for the FP4 kernels (kernels/linear/linear_fp4.h): codes in
//          tiles of 16 rows x 128 columns (1024 bytes) along K, then the next 16 rows
//          (rows [16g, 16g + 16) start at byte 16g·in/2 as before). Inside a tile, the
//          64-byte chunk q holds columns [8q, 8q + 8) of the 16 rows as 32 little-endian
//          16-bit words: word 2j + s (row j, s = 0 even, 1 odd column) holds in nibble m
//          the code of column 8q + 2m + s, so one shift and one 16-entry lookup give the
//          16 rows' weights of a column pair. `scale` then points to the scales in the same
//          tiles: 64 bytes per tile, group g < 4 (columns [32g, 32g + 32)) at 16g + j.
//          Same codes, same scales: only their order changes (fp4_packed_bytes in all).
//          With fp8_dot (needs out % 16 == 0 and in % 128 == 0), the codes are instead
//          stored tile by tile for the FP8 kernels (kernels/linear/linear_fp8.h): tiles of 16
//          rows x 128 columns (one scale, 2048 bytes) follow each other along K, then the next
//          16 rows (so rows [16g, 16g + 16) start at byte 16g·in as before). Inside a tile,
//          64-byte vector v holds columns [4v, 4v + 4) of the 16 rows: in each 16-byte lane L,
//          bytes 0-7 the column pair (4v, 4v + 1) and bytes 8-15 the pair (4v + 2, 4v + 3) of
//          rows 4L..4L+3, even column first (fp8_dot_offset), so vpunpck{l,h}bw of its decoded
//          bytes give the VDPBF16PS weight vectors of the two pairs (dword j = row j, its odd
//          column in the high word). Same codes, same scales: only their order changes.
//   kBF16 with bf16_tiles (needs out % 16 == 0 and in % 128 == 0): the values stored tile
//          by tile like fp8_dot's codes: tiles of 16 rows x 128 columns (4096 bytes) along
//          K, then the next 16 rows; inside a tile row j's 128 values at j·128, in order. The
//          linear kernels read a 16-output block as one contiguous stream (bf16_offset).
// `actq` follows the *stored* form (model.md §0.4.4): FP8/FP4 get it, except
// wo_a, which the model dequantizes to bf16 at load and runs without it.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace dsv4 {

enum class WeightFormat { kBF16, kF32, kFP8, kFP4 };

struct LinearWeight {
  WeightFormat format = WeightFormat::kBF16;
  int64_t out = 0;
  int64_t in = 0;
  const void* data = nullptr;
  const uint8_t* scale = nullptr;
  bool fp4_dot = false;  // kFP4 only: codes and scales in 16 x 128 tiles (above)
  bool fp8_dot = false;  // kFP8 only: codes in 16 x 128 tiles (above)
  bool bf16_tiles = false;  // kBF16 only: values in 16 x 128 tiles (above)

  bool quantized() const { return format == WeightFormat::kFP8 || format == WeightFormat::kFP4; }
};

// The tile layouts (fp4_dot, fp8_dot): rows and columns of a tile, its bytes.
constexpr int kDotTileRows = 16;
constexpr int kDotTileCols = 128;
constexpr int kFp8TileBytes = kDotTileRows * kDotTileCols;
constexpr int kFp4TileBytes = kDotTileRows * kDotTileCols / 2;
// Whether a [out, in] FP8 or FP4 weight can take the tile layout.
constexpr bool dot_tiles_fit(int64_t out, int64_t in) { return out % kDotTileRows == 0 && in % kDotTileCols == 0; }

// Byte offset of column c < 128 of row j < 16 in its FP4 tile (above), and its nibble (0..3
// of the little-endian word, i.e. nibble c % 8 / 2 % 2 of that byte).
constexpr int fp4_tile_byte(int j, int c) { return 64 * (c / 8) + 2 * (2 * j + c % 2) + (c % 8) / 4; }
constexpr int fp4_tile_nibble(int c) { return (c % 8) / 2 % 2; }
// Byte offset of row o's tile at column block blk in an FP4 weight of `in` columns (tile layout).
constexpr int64_t fp4_tile_offset(int64_t in, int64_t o, int64_t blk) {
  return (o / kDotTileRows) * kDotTileRows * (in / 2) + blk * kFp4TileBytes;
}
// Offset of the scale byte of W[o, i] (group i / 32) in the tile layout's scales.
constexpr int64_t fp4_tile_scale_offset(int64_t in, int64_t o, int64_t i) {
  return (o / kDotTileRows) * kDotTileRows * (in / 32) + (i / kDotTileCols) * 64 + 16 * (i % 128 / 32) +
         o % kDotTileRows;
}
// Bytes of an FP4 weight in the tile layout: codes, then scales (64-byte aligned).
constexpr int64_t fp4_packed_bytes(int64_t out, int64_t in) { return out * in / 2 + out * in / 32; }

// The e2m1 code of W[o, i] of an FP4 weight, in either layout.
inline uint8_t fp4_code(const LinearWeight& w, int64_t o, int64_t i) {
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  if (w.fp4_dot) {
    const int c = static_cast<int>(i % 128);
    const uint8_t b = data[fp4_tile_offset(w.in, o, i / kDotTileCols) + fp4_tile_byte(static_cast<int>(o % 16), c)];
    return static_cast<uint8_t>(fp4_tile_nibble(c) ? b >> 4 : b & 0xF);
  }
  const uint8_t b = data[o * (w.in / 2) + i / 2];
  return static_cast<uint8_t>(i % 2 ? b >> 4 : b & 0xF);
}
// The ue8m0 scale byte of W[o, i] (of its 32-column group), in either layout.
inline uint8_t fp4_scale(const LinearWeight& w, int64_t o, int64_t i) {
  return w.scale[w.fp4_dot ? fp4_tile_scale_offset(w.in, o, i) : o * (w.in / 32) + i / 32];
}

// Byte offset inside its FP8 tile of row j < 16, column c < 128 (above): vector c / 4, lane
// j / 4, pair half (c / 2) % 2, row j % 4, column parity.
constexpr int fp8_dot_offset(int j, int c) { return 64 * (c / 4) + 16 * (j / 4) + 8 * (c / 2 % 2) + 2 * (j % 4) + c % 2; }
// Offset of W[o, i]'s code in data, in either layout.
inline int64_t fp8_code_offset(const LinearWeight& w, int64_t o, int64_t i) {
  if (!w.fp8_dot) return o * w.in + i;
  return (o / kDotTileRows) * kDotTileRows * w.in + (i / kDotTileCols) * kFp8TileBytes +
         fp8_dot_offset(static_cast<int>(o % kDotTileRows), static_cast<int>(i % kDotTileCols));
}
inline uint8_t fp8_code(const LinearWeight& w, int64_t o, int64_t i) {
  return static_cast<const uint8_t*>(w.data)[fp8_code_offset(w, o, i)];
}
// Element offset of W[o, i] of a BF16 weight in either layout (the ISA tiles compute the same
// in linear_tile.h's Bf16Layout: they may call no inline function with external linkage).
inline int64_t bf16_offset(const LinearWeight& w, int64_t o, int64_t i) {
  if (!w.bf16_tiles) return o * w.in + i;
  return (o / kDotTileRows) * kDotTileRows * w.in + (i / kDotTileCols) * (kDotTileRows * kDotTileCols) +
         (o % kDotTileRows) * kDotTileCols + i % kDotTileCols;
}
// Writes a [rows, in] BF16 matrix (stored order at src) as tiles at dst (rows·in values, not
// overlapping src); dot_tiles_fit(rows, in).
inline void bf16_pack_tiles(const uint16_t* src, int64_t rows, int64_t in, uint16_t* dst) {
  for (int64_t g = 0; g < rows; g += kDotTileRows)
    for (int64_t t = 0; t < in / kDotTileCols; ++t)
      for (int j = 0; j < kDotTileRows; ++j)
        std::memcpy(dst + g * in + (t * kDotTileRows + j) * kDotTileCols, src + (g + j) * in + t * kDotTileCols,
                    sizeof(uint16_t) * kDotTileCols);
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

// Writes the codes and scales of a [rows, in] FP4 matrix (stored order at src, scales sc) as
// tiles at dst: fp4_packed_bytes(rows, in) bytes, codes then scales, not overlapping src.
inline void fp4_pack_dot(const uint8_t* src, const uint8_t* sc, int64_t rows, int64_t in, uint8_t* dst) {
  uint8_t* dsc = dst + rows * in / 2;
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t blk = 0; blk < in / kDotTileCols; ++blk) {
      const uint8_t* p = src + o * (in / 2) + blk * 64;
      uint8_t* q = dst + fp4_tile_offset(in, o, blk);
      const int j = static_cast<int>(o % kDotTileRows);
      for (int c = 0; c < 16; ++c)  // row j's words in the 16 chunks, then its nibbles ORed in
        for (int b = 0; b < 4; ++b) q[64 * c + 4 * j + b] = 0;
      for (int c = 0; c < 128; ++c) {
        const uint8_t code = static_cast<uint8_t>((p[c / 2] >> (4 * (c % 2))) & 0xF);
        q[fp4_tile_byte(j, c)] = static_cast<uint8_t>(q[fp4_tile_byte(j, c)] | code << (4 * fp4_tile_nibble(c)));
      }
      for (int g = 0; g < 4; ++g) dsc[fp4_tile_scale_offset(in, o, blk * 128 + 32 * g)] = sc[o * (in / 32) + blk * 4 + g];
    }
}

// w (FP4, FP8 or BF16 as stored, dot_tiles_fit) written in its tile layout at dst
// (packed_bytes(w) bytes, not overlapping w): the view of the copy, fp4_dot / fp8_dot /
// bf16_tiles set.
// Bytes of w's copy in its tile layout (FP4: codes and scales; FP8: codes; BF16: values).
constexpr int64_t packed_bytes(const LinearWeight& w) {
  return w.format == WeightFormat::kFP4 ? fp4_packed_bytes(w.out, w.in)
         : w.format == WeightFormat::kBF16 ? 2 * w.out * w.in
                                           : w.out * w.in;
}
inline LinearWeight pack_tiles(const LinearWeight& w, uint8_t* dst) {
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  LinearWeight t = w;
  t.data = dst;
  if (w.format == WeightFormat::kFP4) {
    fp4_pack_dot(src, w.scale, w.out, w.in, dst);
    t.scale = dst + w.out * w.in / 2;
    t.fp4_dot = true;
  } else if (w.format == WeightFormat::kBF16) {
    bf16_pack_tiles(reinterpret_cast<const uint16_t*>(src), w.out, w.in, reinterpret_cast<uint16_t*>(dst));
    t.bf16_tiles = true;
  } else {
    fp8_pack_dot(src, w.out, w.in, dst);
    t.fp8_dot = true;
  }
  return t;
}

// w (stored, dot_tiles_fit) rewritten in its tile layout in place: its codes at w.data (and,
// FP4, its scales at w.scale) replaced by the tile layout's; the view with fp4_dot / fp8_dot /
// bf16_tiles set.
inline LinearWeight pack_tiles_in_place(const LinearWeight& w) {
  std::vector<uint8_t> tiles(static_cast<size_t>(packed_bytes(w)));
  const LinearWeight t = pack_tiles(w, tiles.data());
  const int64_t codes = w.format == WeightFormat::kFP4 ? w.out * w.in / 2 : packed_bytes(w);
  LinearWeight r = t;
  r.data = w.data;
  r.scale = w.scale;
  std::memcpy(const_cast<void*>(w.data), tiles.data(), static_cast<size_t>(codes));
  if (w.format == WeightFormat::kFP4)
    std::memcpy(const_cast<uint8_t*>(w.scale), tiles.data() + codes, static_cast<size_t>(w.out * w.in / 32));
  return r;
}

}  // namespace dsv4
