// Level-A quantizers: scale rule, actq, fp8sim_64, fp4sim_32 against a plain
// reference that uses ceil(log2()) in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/quant.h"

namespace dsv4 {
namespace {

// 2^ceil(log2(amax/Q)) in exact arithmetic: the scale rule's value on bf16 inputs.
double ref_scale(double amax, double floor, double q) {
  const double a = std::max(amax, floor);
  return std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(a / q))));
}

std::vector<bf16> random_row(std::mt19937& rng, int n, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<bf16> v(n);
  for (auto& x : v) x = bf16::from_float(d(rng));
  return v;
}

TEST(ScaleRule, PowersOfTwoAndBoundaries) {
  EXPECT_EQ(e4m3_scale_exponent(448.0f), 0);          // t = 1 exactly -> 2^0
  EXPECT_EQ(e4m3_scale_exponent(449.0f), 1);
  EXPECT_EQ(e4m3_scale_exponent(224.0f), -1);
  EXPECT_EQ(e4m3_scale_exponent(0.0f), e4m3_scale_exponent(1e-4f));  // floor
  EXPECT_EQ(e2m1_scale_exponent(6.0f), 0);
  EXPECT_EQ(e2m1_scale_exponent(6.5f), 1);
  EXPECT_EQ(e2m1_scale_exponent(3.0f), -1);
  EXPECT_EQ(e2m1_scale_exponent(0.0f), -126);  // floor 6·2^-126 -> t = 2^-126
}

TEST(ScaleRule, MatchesCeilLog2OnEveryBf16) {
  for (uint32_t b = 0; b < 0x7F80; ++b) {  // every positive finite bf16
    const float a = bf16::from_bits(static_cast<uint16_t>(b)).to_float();
    ASSERT_EQ(std::ldexp(1.0, e4m3_scale_exponent(a)), ref_scale(a, 1e-4f, 448.0)) << a;
    ASSERT_EQ(std::ldexp(1.0, e2m1_scale_exponent(a)), ref_scale(a, kFp4AmaxFloor, 6.0)) << a;
  }
}

TEST(Actq, CodesAndScalesPerBlock) {
  std::mt19937 rng(1);
  auto x = random_row(rng, 256, 1.0f);
  x[200] = bf16::from_float(100.0f);  // second block gets a larger scale than the first
  std::vector<uint8_t> codes(256);
  float scales[2];
  actq_row(x.data(), 256, codes.data(), scales);
  for (int b = 0; b < 2; ++b) {
    double amax = 0;
    for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs((double)x[b * 128 + i].to_float()));
    EXPECT_EQ(scales[b], ref_scale(amax, 1e-4f, 448.0));
    for (int i = 0; i < 128; ++i) {
      const float q = x[b * 128 + i].to_float() / scales[b];
      EXPECT_LE(std::fabs(q), 448.0f);
      EXPECT_EQ(codes[b * 128 + i], e4m3_encode(q));
    }
  }
  EXPECT_NE(scales[0], scales[1]);
  std::vector<bf16> xhat(256);
  actq_dequant_row(x.data(), 256, xhat.data());
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(xhat[i].to_float(), e4m3_decode(codes[i]) * scales[i / 128]);
}

TEST(Fp8Sim, BlockOf64HandExample) {
  std::vector<bf16> v(64, bf16::from_float(0.0f));
  v[0] = bf16::from_float(448.0f);  // s = 1
  v[1] = bf16::from_float(1.0625f);  // tie -> 1.0
  v[2] = bf16::from_float(1.1875f);  // tie -> 1.25
  v[3] = bf16::from_float(-300.0f);  // e4m3 neighbours 288 | 320 -> 288
  fp8sim_row(v.data(), 64);
  EXPECT_EQ(v[0].to_float(), 448.0f);
  EXPECT_EQ(v[1].to_float(), 1.0f);
  EXPECT_EQ(v[2].to_float(), 1.25f);
  EXPECT_EQ(v[3].to_float(), -288.0f);
}

TEST(Fp8Sim, MatchesReferenceAndIsIdempotent) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 50; ++trial) {
    auto v = random_row(rng, 128, trial < 25 ? 0.01f : 30.0f);
    auto ref = v;
    for (int b = 0; b < 2; ++b) {
      double amax = 0;
      for (int i = 0; i < 64; ++i) amax = std::max(amax, std::fabs((double)ref[b * 64 + i].to_float()));
      const double s = ref_scale(amax, 1e-4f, 448.0);
      for (int i = 0; i < 64; ++i) {
        bf16& e = ref[b * 64 + i];
        e = bf16::from_float(static_cast<float>(e4m3_decode(e4m3_encode(static_cast<float>(e.to_float() / s))) * s));
      }
    }
    fp8sim_row(v.data(), 128);
    for (int i = 0; i < 128; ++i) ASSERT_EQ(v[i].bits, ref[i].bits) << i;
    auto again = v;
    fp8sim_row(again.data(), 128);
    for (int i = 0; i < 128; ++i) ASSERT_EQ(again[i].bits, v[i].bits);
  }
}

TEST(Fp4Sim, HandExampleWithTies) {
  std::vector<bf16> v(32, bf16::from_float(0.0f));
  v[0] = bf16::from_float(6.0f);    // s = 1
  v[1] = bf16::from_float(0.25f);   // -> 0
  v[2] = bf16::from_float(0.75f);   // -> 1
  v[3] = bf16::from_float(-2.5f);   // -> -2
  v[4] = bf16::from_float(5.0f);    // -> 4
  v[5] = bf16::from_float(3.5f);    // -> 4
  fp4sim_row(v.data(), 32);
  EXPECT_EQ(v[0].to_float(), 6.0f);
  EXPECT_EQ(v[1].to_float(), 0.0f);
  EXPECT_EQ(v[2].to_float(), 1.0f);
  EXPECT_EQ(v[3].to_float(), -2.0f);
  EXPECT_EQ(v[4].to_float(), 4.0f);
  EXPECT_EQ(v[5].to_float(), 4.0f);
}

TEST(Fp4Sim, PerBlockScales) {
  std::vector<bf16> v(64, bf16::from_float(0.0f));
  v[0] = bf16::from_float(12.0f);   // block 0: s = 2
  v[1] = bf16::from_float(5.0f);    // 2.5 -> 2 -> 4
  v[32] = bf16::from_float(0.75f);  // block 1: amax 0.75 -> s = 2^-3; 0.75/0.125 = 6
  v[33] = bf16::from_float(0.3f);   // 2.4 -> 2 -> 0.25
  fp4sim_row(v.data(), 64);
  EXPECT_EQ(v[0].to_float(), 12.0f);
  EXPECT_EQ(v[1].to_float(), 4.0f);
  EXPECT_EQ(v[32].to_float(), 0.75f);
  EXPECT_EQ(v[33].to_float(), 0.25f);
}

TEST(Quant, NaNPoisonsItsBlockOnly) {
  std::vector<bf16> v(128, bf16::from_float(1.0f));
  v[5] = bf16::from_float(std::numeric_limits<float>::quiet_NaN());
  fp8sim_row(v.data(), 128);
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(std::isnan(v[i].to_float())) << i;
  for (int i = 64; i < 128; ++i) EXPECT_EQ(v[i].to_float(), 1.0f);
}

}  // namespace
}  // namespace dsv4
