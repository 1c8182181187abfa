// bfloat16: the upper 16 bits of an IEEE binary32. Encoding is plain
// round-to-nearest-even (model.md §0.2): no saturation, a value that rounds
// past the largest finite bf16 becomes ±Inf, NaN stays a (quiet) NaN.
#pragma once

#include <bit>
#include <cstdint>

namespace dsv4 {

struct bf16 {
  uint16_t bits = 0;

  static constexpr bf16 from_bits(uint16_t b) { return bf16{b}; }
  static constexpr bf16 from_float(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
    const uint32_t bias = 0x7fffu + ((u >> 16) & 1u);
    return bf16{static_cast<uint16_t>((u + bias) >> 16)};
  }
  constexpr float to_float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
  friend constexpr bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
};
static_assert(sizeof(bf16) == 2);

// bf16(x) of model.md: round an fp32 value to the nearest bf16 and back.
constexpr float round_bf16(float x) { return bf16::from_float(x).to_float(); }

}  // namespace dsv4
