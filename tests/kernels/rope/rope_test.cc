// rope: the YaRN table against §4.1's check values and ramp bounds for both
// profiles; engine vs reference at every T in [1, kCapacity] with 1 and 2
// threads (same ops: exact); inverse rotation undoes rotation up to bf16
// rounding; nope dims untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/rope/rope.h"
#include "support/poison.h"
#include "support/threads.h"
#include "support/quant_weights.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

using test::pool2;
using test::run;

RopeParams profile(int dr, bool yarn) {
  RopeParams p;
  p.rope_dim = dr;
  p.theta = yarn ? 160000.0 : 10000.0;
  p.yarn = yarn;
  return p;
}

TEST(RopeTable, FlashCompressCheckValues) {
  const auto inv = rope_inv_freq(profile(64, true));
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_EQ(inv[0], 1.0f);
  EXPECT_NEAR(inv[8], 0.05, 0.05 * 1e-6);
  EXPECT_NEAR(inv[16], 0.002265625, 0.002265625 * 1e-6);
  EXPECT_NEAR(inv[20], 2.96978e-4, 2.96978e-4 * 5e-6);  // 6 significant digits given
  EXPECT_NEAR(inv[31], 5.68053e-7, 5.68053e-7 * 5e-6);
}

TEST(RopeTable, RampBoundsBothProfiles) {
  double lo, hi;
  yarn_ramp_bounds(profile(64, true), &lo, &hi);
  EXPECT_EQ(lo, 15.0);
  EXPECT_EQ(hi, 25.0);
  yarn_ramp_bounds(profile(16, true), &lo, &hi);
  EXPECT_EQ(lo, 3.0);
  EXPECT_EQ(hi, 7.0);
  // Every entry against the double-precision formula of §4.1.
  for (int dr : {16, 64}) {
    const auto p = profile(dr, true);
    yarn_ramp_bounds(p, &lo, &hi);
    const auto inv = rope_inv_freq(p);
    for (int i = 0; i < dr / 2; ++i) {
      const double base = std::pow(160000.0, -2.0 * i / dr);
      const double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
      const double want = base / 16 * ramp + base * (1 - ramp);
      EXPECT_NEAR(inv[i], want, want * 2e-6) << "Dr=" << dr << " i=" << i;
    }
    // Pairs at or below lo keep θ^(-2i/Dr) exactly as the unscaled fp32 table; pairs at or above hi are /16.
    RopeParams plain = p;
    plain.yarn = false;
    const auto inv0 = rope_inv_freq(plain);
    for (int i = 0; i <= static_cast<int>(lo); ++i) EXPECT_EQ(inv[i], inv0[i]) << i;
    for (int i = static_cast<int>(hi); i < dr / 2; ++i) EXPECT_EQ(inv[i], inv0[i] / 16.0f) << i;
  }
  // Main profile: θ = 10000, no YaRN: inv[i] = 10000^(-2i/Dr).
  const auto m = rope_inv_freq(profile(64, false));
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(m[i], std::pow(10000.0, -i / 32.0), std::pow(10000.0, -i / 32.0) * 1e-6);
}

struct Case {
  int n_vec, dim, dr;
  bool yarn;
};
// Queries (4 heads), window key (1 vector) and indexer heads of tiny and tiny2.
const Case kCases[] = {{4, 80, 16, false}, {1, 80, 16, true},   {2, 32, 16, true},
                       {4, 192, 64, false}, {1, 192, 64, true}, {4, 128, 64, true}};

TEST(Rope, EveryTMatchesRefAndInverse) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.n_vec << "x" << c.dim << " Dr=" << c.dr << " yarn=" << c.yarn);
    const auto inv = rope_inv_freq(profile(c.dr, c.yarn));
    std::mt19937 rng(c.dim + c.dr);
    const int64_t width = int64_t{c.n_vec} * c.dim;
    const auto x = test::random_bf16(rng, kCapacity * width, 1.0f);
    std::vector<int64_t> pos(kCapacity);
    for (auto& p : pos) p = std::uniform_int_distribution<int64_t>(0, 70000)(rng);
    pos[0] = 0;
    pos[1] = 1;
    for (bool inverse : {false, true}) {
      std::vector<bf16> want(x);
      rope_ref(inv.data(), c.dr, want.data(), kCapacity, c.n_vec, c.dim, pos.data(), inverse);
      RowBuffer<bf16> y(kCapacity, width);
      for (int nthreads : {1, 2})
        for (int T = 1; T <= kCapacity; ++T) {
          y.poison(T);
          std::copy(x.begin(), x.begin() + T * width, y.v.begin());
          run(nthreads, [&](int tid, int n) {
            rope(inv.data(), c.dr, y.data(), T, c.n_vec, c.dim, pos.data(), inverse, tid, n);
          });
          ASSERT_TRUE(y.sentinel_intact(T));
          ASSERT_TRUE(test::all_close(y.data(), want.data(), T * width, test::kExact)) << "T=" << T;
        }
      for (int64_t t = 0; t < kCapacity; ++t)
        for (int v = 0; v < c.n_vec; ++v)
          for (int d = 0; d < c.dim; ++d) {
            const int64_t i = t * width + int64_t{v} * c.dim + d;
            if (d < c.dim - c.dr || t == 0) {
              ASSERT_EQ(want[i].bits, x[i].bits) << "untouched t=" << t << " d=" << d;
            }
          }
    }
    // Inverse after forward restores the input up to the two bf16 roundings.
    std::vector<bf16> y(x);
    rope(inv.data(), c.dr, y.data(), kCapacity, c.n_vec, c.dim, pos.data(), false, 0, 1);
    rope(inv.data(), c.dr, y.data(), kCapacity, c.n_vec, c.dim, pos.data(), true, 0, 1);
    for (int64_t t = 0; t < kCapacity; ++t)
      for (int v = 0; v < c.n_vec; ++v)
        for (int d = c.dim - c.dr; d < c.dim; d += 2) {
          const int64_t i = t * width + int64_t{v} * c.dim + d;
          const float a = x[i].to_float(), b = x[i + 1].to_float();
          const float r = std::sqrt(a * a + b * b);
          ASSERT_NEAR(y[i].to_float(), a, r / 64) << t;
          ASSERT_NEAR(y[i + 1].to_float(), b, r / 64) << t;
        }
  }
}

TEST(Rope, HandComputed) {
  // Dr = 4 (pairs with inv = 1 and 1/100 for θ = 10000), position 1, pair (1, 0)
  // and (0, 2): first pair -> (cos 1, sin 1), second -> (-2 sin 0.01, 2 cos 0.01).
  RopeParams p;
  p.rope_dim = 4;
  const auto inv = rope_inv_freq(p);
  ASSERT_EQ(inv[0], 1.0f);
  ASSERT_NEAR(inv[1], 0.01f, 1e-9);
  bf16 v[6] = {bf16::from_float(5), bf16::from_float(6), bf16::from_float(1), bf16::from_float(0),
               bf16::from_float(0), bf16::from_float(2)};
  const int64_t pos = 1;
  rope(inv.data(), 4, v, 1, 1, 6, &pos, false, 0, 1);
  EXPECT_EQ(v[0].to_float(), 5.0f);
  EXPECT_EQ(v[1].to_float(), 6.0f);
  EXPECT_EQ(v[2].to_float(), round_bf16(std::cos(1.0f)));
  EXPECT_EQ(v[3].to_float(), round_bf16(std::sin(1.0f)));
  EXPECT_EQ(v[4].to_float(), round_bf16(-2.0f * std::sin(inv[1])));
  EXPECT_EQ(v[5].to_float(), round_bf16(2.0f * std::cos(inv[1])));
  // Inverse at the same position: (a·c + b·s, −a·s + b·c).
  bf16 u[4] = {bf16::from_float(1), bf16::from_float(0), bf16::from_float(0), bf16::from_float(2)};
  rope(inv.data(), 4, u, 1, 1, 4, &pos, true, 0, 1);
  EXPECT_EQ(u[0].to_float(), round_bf16(std::cos(1.0f)));
  EXPECT_EQ(u[1].to_float(), round_bf16(-std::sin(1.0f)));
  EXPECT_EQ(u[2].to_float(), round_bf16(2.0f * std::sin(inv[1])));
}

}  // namespace
}  // namespace dsv4::kernels
