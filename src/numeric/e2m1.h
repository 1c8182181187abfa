// fp4 e2m1 (checkpoint.md §3.4, §3.5): nibble = sign bit 3, magnitude index
// 0..7 -> {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Packed two per byte: element 2c in the
// low nibble, 2c+1 in the high nibble. Encoding: round to nearest, ties to the
// even code (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4),
// saturating at ±6 (±Inf too); NaN encodes as +0.
#pragma once

#include <bit>
#include <cstdint>

namespace dsv4 {

constexpr float kE2M1Max = 6.0f;
inline constexpr float kE2M1Magnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

constexpr float e2m1_decode(uint8_t nibble) {
  const float v = kE2M1Magnitude[nibble & 7];
  return (nibble & 8) ? -v : v;
}

constexpr uint8_t e2m1_encode(float x) {
  if (x != x) return 0;  // NaN -> +0
  const uint8_t sign = std::bit_cast<uint32_t>(x) >> 31 ? 8 : 0;
  const float a = x < 0 ? -x : x;
  // The magnitude index counts the rounding thresholds a lies above (a tie goes to the even
  // index: > at the thresholds below even codes, >= below odd ones). No branches: the
  // thresholds are crossed in data order, so a branch chain mispredicts on real rows.
  const int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return static_cast<uint8_t>(sign | m);
}

// Element i of a packed row.
constexpr uint8_t e2m1_nibble(const uint8_t* packed, int64_t i) {
  const uint8_t b = packed[i >> 1];
  return (i & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0xF);
}

}  // namespace dsv4
