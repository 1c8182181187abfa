// float8 e4m3fn (checkpoint.md §3.2, §3.5): 1 sign, 4 exponent bits (bias 7),
// 3 mantissa bits, subnormals, max ±448, no infinities, NaN = 0x7F/0xFF.
// Encoding: round to nearest, ties to even; finite values beyond ±448 and ±Inf
// saturate to ±448; NaN encodes as 0x7F.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace dsv4 {

constexpr float kE4M3Max = 448.0f;

constexpr float e4m3_decode_slow(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 0xF, m = b & 7;
  float v = 0.0f;
  if (e == 15 && m == 7) return std::bit_cast<float>(0x7fc00000u);
  if (e == 0) {
    v = static_cast<float>(m) / 8.0f / 64.0f;  // (m/8)·2^-6
  } else {
    float p = 1.0f;
    for (int i = 7; i < e; ++i) p *= 2.0f;
    for (int i = e; i < 7; ++i) p *= 0.5f;
    v = (1.0f + static_cast<float>(m) / 8.0f) * p;
  }
  return s ? -v : v;
}

namespace detail {
constexpr std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = e4m3_decode_slow(static_cast<uint8_t>(i));
  return t;
}
inline constexpr std::array<float, 256> kE4M3Table = make_e4m3_table();
}  // namespace detail

inline float e4m3_decode(uint8_t b) { return detail::kE4M3Table[b]; }

// Saturating RNE encode, exact for every fp32 input (bit arithmetic, no libm).
constexpr uint8_t e4m3_encode(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7F;                     // NaN
  if (a >= 0x43e00000u) return sign | 0x7E;             // >= 448 (and Inf): saturate
  const int exp = static_cast<int>(a >> 23);            // biased fp32 exponent
  if (exp < 121) {                                      // |x| < 2^-6: e4m3 subnormal grid 2^-9
    // value / 2^-9, rounded to nearest even integer in 0..8 (8 = smallest normal).
    if (exp < 110) return sign;                         // < 2^-17: rounds to 0 (below half of 2^-9)
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;  // 24-bit significand, value = mant·2^(exp-150)
    const int shift = 150 - exp - 9;                    // value/2^-9 = mant >> shift
    const uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    const uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<uint8_t>(sign | r);
  }
  // Normal: keep 3 mantissa bits of the fp32 significand, RNE on the other 20.
  const uint32_t m23 = a & 0x7fffffu;
  uint32_t e = static_cast<uint32_t>(exp - 127 + 7);
  uint32_t m = m23 >> 20;
  const uint32_t rem = m23 & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (m & 1u))) {
    if (++m == 8) {
      m = 0;
      ++e;
    }
  }
  // a < 448 here, so rounding reaches at most 448 = e15 m6.
  return static_cast<uint8_t>(sign | (e << 3) | m);
}

}  // namespace dsv4
