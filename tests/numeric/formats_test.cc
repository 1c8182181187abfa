// Element formats: bf16 RNE, e4m3fn (all 256 codes), e2m1 (all 16 nibbles),
// ue8m0 — each encoder checked against a brute-force nearest-value search.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "numeric/bf16.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/ue8m0.h"

namespace dsv4 {
namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Reference: nearest finite code by exact distance, ties to the even code,
// saturating beyond the largest magnitude.
uint8_t e4m3_encode_brute(float x) {
  if (std::isnan(x)) return 0x7F;
  const double xd = x;
  if (std::fabs(xd) > 448.0) return x < 0 ? 0xFE : 0x7E;
  int best = -1;
  double best_d = 0;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    if ((c >> 7) != (std::signbit(x) ? 1 : 0)) continue;  // same sign (keeps -0 -> 0x80)
    const double d = std::fabs(static_cast<double>(e4m3_decode_slow(static_cast<uint8_t>(c))) - xd);
    if (best < 0 || d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<uint8_t>(best);
}

TEST(Bf16, RoundToNearestEven) {
  EXPECT_EQ(bf16::from_float(1.0f).bits, 0x3F80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(bf16::from_float(1.0f + 0x1p-8f).bits, 0x3F80);
  // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(bf16::from_float(1.0f + 3 * 0x1p-8f).bits, 0x3F82);
  EXPECT_EQ(bf16::from_float(1.0f + 0x1p-8f + 0x1p-20f).bits, 0x3F81);  // above half
  EXPECT_EQ(bf16::from_float(-2.5f).to_float(), -2.5f);
}

TEST(Bf16, NonFiniteAndOverflow) {
  EXPECT_EQ(bf16::from_float(kInf).bits, 0x7F80);
  EXPECT_EQ(bf16::from_float(-kInf).bits, 0xFF80);
  const bf16 n = bf16::from_float(kNaN);
  EXPECT_TRUE(std::isnan(n.to_float()));
  EXPECT_TRUE(n.bits & 0x0040);  // quiet
  // A signalling NaN whose payload sits in the low 16 bits stays NaN.
  EXPECT_TRUE(std::isnan(bf16::from_float(std::bit_cast<float>(0x7F800001u)).to_float()));
  // Largest finite fp32 rounds past the largest finite bf16: +Inf, no saturation.
  EXPECT_EQ(bf16::from_float(std::numeric_limits<float>::max()).bits, 0x7F80);
  // Largest finite bf16 survives.
  EXPECT_EQ(bf16::from_float(std::bit_cast<float>(0x7F7F0000u)).bits, 0x7F7F);
}

TEST(Bf16, RoundTripEveryPattern) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const bf16 v = bf16::from_bits(static_cast<uint16_t>(b));
    const float f = v.to_float();
    if (std::isnan(f)) continue;
    EXPECT_EQ(bf16::from_float(f).bits, b);
  }
}

TEST(E4m3, DecodeEveryCode) {
  EXPECT_EQ(e4m3_decode(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(e4m3_decode(0x80)));
  EXPECT_EQ(e4m3_decode(0x01), 0x1p-9f);        // smallest subnormal
  EXPECT_EQ(e4m3_decode(0x07), 7 * 0x1p-9f);    // largest subnormal
  EXPECT_EQ(e4m3_decode(0x08), 0x1p-6f);        // smallest normal
  EXPECT_EQ(e4m3_decode(0x38), 1.0f);
  EXPECT_EQ(e4m3_decode(0x7E), 448.0f);
  EXPECT_EQ(e4m3_decode(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3_decode(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_decode(0xFF)));
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    const float v = e4m3_decode(static_cast<uint8_t>(c));
    EXPECT_EQ(e4m3_encode(v), c) << "code " << c;             // every code round-trips
    EXPECT_EQ(bf16::from_float(v).to_float(), v) << c;         // exact in bf16
  }
}

TEST(E4m3, EncodeMatchesBruteForceOnEveryBf16) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float x = bf16::from_bits(static_cast<uint16_t>(b)).to_float();
    ASSERT_EQ(e4m3_encode(x), e4m3_encode_brute(x)) << "x=" << x << " bits=" << b;
  }
}

TEST(E4m3, EncodeMatchesBruteForceOnRandomFp32) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    // Concentrate on the e4m3 range: exponent in [2^-12, 2^10).
    u = (u & 0x807fffffu) | ((115u + (u % 22u)) << 23);
    const float x = std::bit_cast<float>(u);
    ASSERT_EQ(e4m3_encode(x), e4m3_encode_brute(x)) << x;
  }
}

TEST(E4m3, TiesSaturationNaN) {
  EXPECT_EQ(e4m3_decode(e4m3_encode(1.0625f)), 1.0f);     // midpoint 1 | 1.125 -> even (1.0)
  EXPECT_EQ(e4m3_decode(e4m3_encode(1.1875f)), 1.25f);    // midpoint 1.125 | 1.25 -> even (1.25)
  EXPECT_EQ(e4m3_decode(e4m3_encode(0x1p-10f)), 0.0f);    // half the smallest subnormal -> 0
  EXPECT_EQ(e4m3_decode(e4m3_encode(3 * 0x1p-10f)), 2 * 0x1p-9f);  // 1.5 subnormals -> 2 (even)
  EXPECT_EQ(e4m3_decode(e4m3_encode(15 * 0x1p-10f)), 0x1p-6f);     // 7.5 subnormals -> normal
  EXPECT_EQ(e4m3_encode(449.0f), 0x7E);
  EXPECT_EQ(e4m3_encode(464.0f), 0x7E);   // midpoint to the (absent) 480: saturate
  EXPECT_EQ(e4m3_encode(1e30f), 0x7E);
  EXPECT_EQ(e4m3_encode(kInf), 0x7E);
  EXPECT_EQ(e4m3_encode(-kInf), 0xFE);
  EXPECT_EQ(e4m3_encode(kNaN), 0x7F);
  EXPECT_EQ(e4m3_encode(-0.0f), 0x80);
}

TEST(E2m1, EveryNibbleAndTies) {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int n = 0; n < 16; ++n) {
    const float v = e2m1_decode(static_cast<uint8_t>(n));
    EXPECT_EQ(std::fabs(v), mags[n & 7]);
    EXPECT_EQ(std::signbit(v), (n & 8) != 0);
    EXPECT_EQ(e2m1_encode(v), n);
  }
  const float ties[7][2] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 1}, {1.75f, 2}, {2.5f, 2}, {3.5f, 4}, {5.0f, 4}};
  for (auto& t : ties) {
    EXPECT_EQ(e2m1_decode(e2m1_encode(t[0])), t[1]) << t[0];
    EXPECT_EQ(e2m1_decode(e2m1_encode(-t[0])), -t[1]) << -t[0];
  }
  EXPECT_EQ(e2m1_decode(e2m1_encode(0.26f)), 0.5f);
  EXPECT_EQ(e2m1_decode(e2m1_encode(5.01f)), 6.0f);
  EXPECT_EQ(e2m1_encode(7.0f), 7);
  EXPECT_EQ(e2m1_encode(kInf), 7);
  EXPECT_EQ(e2m1_encode(-kInf), 15);
  EXPECT_EQ(e2m1_encode(kNaN), 0);
}

TEST(E2m1, EncodeMatchesBruteForceOnEveryBf16) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float x = bf16::from_bits(static_cast<uint16_t>(b)).to_float();
    if (std::isnan(x)) continue;
    const double a = std::min(std::fabs(static_cast<double>(x)), 6.0);
    int best = 0;
    for (int m = 1; m < 8; ++m) {
      const double d = std::fabs(kE2M1Magnitude[m] - a), db = std::fabs(kE2M1Magnitude[best] - a);
      if (d < db || (d == db && (m & 1) == 0)) best = m;
    }
    ASSERT_EQ(e2m1_encode(x) & 7, best) << x;
  }
}

TEST(E2m1, PackedNibbleOrder) {
  const uint8_t packed[2] = {0x21, 0xF7};  // elements: 1, 2, 7, 15
  EXPECT_EQ(e2m1_nibble(packed, 0), 1);
  EXPECT_EQ(e2m1_nibble(packed, 1), 2);
  EXPECT_EQ(e2m1_nibble(packed, 2), 7);
  EXPECT_EQ(e2m1_nibble(packed, 3), 15);
}

TEST(Ue8m0, DecodeAndRange) {
  EXPECT_EQ(ue8m0_decode(127), 1.0f);
  EXPECT_EQ(ue8m0_decode(128), 2.0f);
  EXPECT_EQ(ue8m0_decode(0), 0x1p-127f);
  EXPECT_GT(ue8m0_decode(0), 0.0f);
  EXPECT_EQ(ue8m0_decode(254), 0x1p127f);
  EXPECT_TRUE(std::isnan(ue8m0_decode(255)));
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(ue8m0_checkpoint_ok(static_cast<uint8_t>(b)), b >= 27 && b <= 227) << b;
  EXPECT_EQ(ue8m0_encode_exp(-3), 124);
}

}  // namespace
}  // namespace dsv4
