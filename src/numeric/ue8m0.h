// ue8m0 scale bytes (checkpoint.md §3.3, §4.5): value 2^(b-127); 255 is NaN.
// A checkpoint's .scale bytes must lie in 27..227 (2^-100 .. 2^100).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace dsv4 {

constexpr uint8_t kUe8m0Nan = 255;
constexpr uint8_t kUe8m0CheckpointMin = 27;
constexpr uint8_t kUe8m0CheckpointMax = 227;

inline float ue8m0_decode(uint8_t b) {
  if (b == 255) return std::bit_cast<float>(0x7fc00000u);
  if (b == 0) return std::ldexp(1.0f, -127);                  // 2^-127: subnormal
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 23);  // 2^(b-127): exponent field b
}
constexpr bool ue8m0_checkpoint_ok(uint8_t b) {
  return b >= kUe8m0CheckpointMin && b <= kUe8m0CheckpointMax;
}
// Byte for the power of two 2^e (e in -127..127).
constexpr uint8_t ue8m0_encode_exp(int e) { return static_cast<uint8_t>(e + 127); }

}  // namespace dsv4
