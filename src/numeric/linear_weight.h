// A linear layer's weight as the checkpoint stores it (checkpoint.md §4, §5.7),
// viewed without copying. Logical shape [out, in]; y_o = Σ_i W[o,i]·x_i.
//   kBF16: data = bf16 [out, in], no scale                       (no actq)
//   kF32 : data = f32 [out, in], no scale                        (no actq)
//   kFP8 : data = e4m3 codes [out, in], scale = ue8m0 [ceil(out/128), ceil(in/128)]
//   kFP4 : data = packed e2m1 [out, in/2] (low nibble = even element),
//          scale = ue8m0 [out, in/32]
//          With fp4_dot, each full 128-column block of a row (64 bytes) is instead
//          laid out for the VDPBF16PS kernel (kernels/linear/linear_avx512_gemm.cc),
//          which then finds a chunk's 32 lookup indices with one shift: the block is 32
//          little-endian 16-bit words, nibble j of word v holding column
//          32j + fp4_dot_col(v) of the block. A partial last block stays as stored.
//          Same bytes, same scales: only the order of the nibbles changes.
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
  bool fp4_dot = false;  // kFP4 only: full blocks in the dot layout above

  bool quantized() const { return format == WeightFormat::kFP8 || format == WeightFormat::kFP4; }
};

// Column (within its 32-column chunk) held by word v of the dot layout: VDPBF16PS adds
// a lane's odd word first, and lane l sums columns l, l + 16 (linear.h K order).
constexpr int fp4_dot_col(int v) { return v % 2 == 1 ? (v - 1) / 2 : 16 + v / 2; }
// Byte offset in its block and nibble (0 low, 1 high) of column c < 128 of a full
// block in the dot layout.
constexpr int fp4_dot_byte(int c) {
  const int r = c % 32, v = r < 16 ? 2 * r + 1 : 2 * (r - 16);
  return 2 * v + (c / 32) / 2;
}
constexpr int fp4_dot_nibble(int c) { return (c / 32) % 2; }

// The e2m1 code of W[o, i] of an FP4 weight, in either layout.
inline uint8_t fp4_code(const LinearWeight& w, int64_t o, int64_t i) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + o * (w.in / 2);
  const int64_t blk = i / 128;
  if (w.fp4_dot && (blk + 1) * 128 <= w.in) {
    const int c = static_cast<int>(i % 128);
    const uint8_t b = row[blk * 64 + fp4_dot_byte(c)];
    return static_cast<uint8_t>(fp4_dot_nibble(c) ? b >> 4 : b & 0xF);
  }
  const uint8_t b = row[i / 2];
  return static_cast<uint8_t>(i % 2 ? b >> 4 : b & 0xF);
}

// Rewrites one FP4 row (in / 2 bytes, as stored) into the dot layout, in place.
inline void fp4_pack_dot_row(uint8_t* row, int64_t in) {
  for (int64_t blk = 0; (blk + 1) * 128 <= in; ++blk) {
    uint8_t* p = row + blk * 64;
    uint8_t stored[64];
    for (int j = 0; j < 64; ++j) stored[j] = p[j];
    for (int v = 0; v < 32; ++v) {
      const int r = fp4_dot_col(v);  // column 32j + r: stored byte 16j + r/2, nibble r % 2
      const int sh = 4 * (r % 2);
      uint32_t word = 0;
      for (int j = 0; j < 4; ++j) word |= ((stored[16 * j + r / 2] >> sh) & 0xFu) << (4 * j);
      p[2 * v] = static_cast<uint8_t>(word);
      p[2 * v + 1] = static_cast<uint8_t>(word >> 8);
    }
  }
}

}  // namespace dsv4
