// rmsnorm: engine vs reference (weighted and unweighted, in place and not) on the
// norm widths of tiny and tiny2 at every T in [1, kCapacity] with 1 and 2
// threads; row independence; the Level-A rounding points of A3.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "support/poison.h"
#include "support/threads.h"
#include "support/quant_weights.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

constexpr float kEps = 1e-6f;

using test::pool2;
using test::run;

// D, Rq, Dh, Di of tiny (128, 128, 80, 32) and tiny2 (256, 256, 192, 128).
const int64_t kWidths[] = {128, 80, 32, 256, 192};

TEST(RmsNorm, EveryTMatchesRef) {
  for (int64_t n : kWidths)
    for (bool weighted : {true, false})
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " weighted=" << weighted << " in_place=" << in_place);
        std::mt19937 rng(static_cast<uint32_t>(n));
        const auto x = test::random_bf16(rng, kCapacity * n, 2.0f);
        const auto wv = test::random_norm_weight(n, 5);
        const bf16* w = weighted ? wv.data() : nullptr;
        std::vector<bf16> want(x.size()), full(x.size());
        rmsnorm_ref(x.data(), w, want.data(), kCapacity, n, kEps);
        rmsnorm(x.data(), w, full.data(), kCapacity, n, kEps, 0, 1);
        ASSERT_TRUE(test::all_close(full.data(), want.data(), full.size(), test::kBf16Out));
        RowBuffer<bf16> y(kCapacity, n);
        for (int nthreads : {1, 2})
          for (int T = 1; T <= kCapacity; ++T) {
            y.poison(T);
            const bf16* src = x.data();
            if (in_place) {
              std::copy(x.begin(), x.begin() + T * n, y.v.begin());
              src = y.data();
            }
            run(nthreads, [&](int tid, int nt) { rmsnorm(src, w, y.data(), T, n, kEps, tid, nt); });
            ASSERT_TRUE(y.sentinel_intact(T));
            ASSERT_TRUE(test::all_close(y.data(), full.data(), T * n, test::kExact)) << "T=" << T;
          }
        for (int t = 0; t < kCapacity; ++t) {  // each row alone
          std::vector<bf16> o(n);
          rmsnorm(x.data() + t * n, w, o.data(), 1, n, kEps, 0, 1);
          ASSERT_TRUE(test::all_close(o.data(), full.data() + t * n, n, test::kExact));
        }
      }
}

// A3: y = bf16(f32(w · f32(x·ρ))), the normalized x NOT rounded to bf16 before
// the weight multiply; ρ = rsqrt(f32(f32(Σx²·fp32(1/n)) + fp32(ε))).
TEST(RmsNorm, RoundingPoints) {
  std::mt19937 rng(7);
  const int64_t n = 256;
  const auto x = test::random_bf16(rng, n, 3.0f);
  const auto w = test::random_norm_weight(n, 8);
  double ss = 0;
  for (auto v : x) ss += static_cast<double>(v.to_float()) * v.to_float();
  const float rho = rms_factor(x.data(), n, kEps);
  EXPECT_NEAR(rho, 1.0 / std::sqrt(ss / n + 1e-6), 2e-7 * rho);
  std::vector<bf16> y(n);
  rmsnorm(x.data(), w.data(), y.data(), 1, n, kEps, 0, 1);
  int differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float t = x[i].to_float() * rho;
    ASSERT_EQ(y[i].bits, bf16::from_float(w[i].to_float() * t).bits) << i;
    differ += bf16::from_float(w[i].to_float() * round_bf16(t)).bits != y[i].bits;
  }
  EXPECT_GT(differ, 0) << "the double-rounded form should differ somewhere";
  // Hand case: x = (3, 4), n = 2: mean 12.5, ρ = 1/sqrt(12.500001) = 0.28284270..
  const bf16 x2[2] = {bf16::from_float(3), bf16::from_float(4)};
  EXPECT_NEAR(rms_factor(x2, 2, kEps), 0.2828427, 1e-7);
  bf16 y2[2];
  rmsnorm(x2, nullptr, y2, 1, 2, kEps, 0, 1);
  EXPECT_EQ(y2[0].to_float(), 0.84765625f);  // bf16(0.848528)
  EXPECT_EQ(y2[1].to_float(), 1.1328125f);   // bf16(1.131371)
  // fp32 input form (used by hc_pre / hc_head over N·D).
  std::vector<float> xf(1024);
  for (auto& v : xf) v = std::normal_distribution<float>(0, 1)(rng);
  double ssf = 0;
  for (float v : xf) ssf += static_cast<double>(v) * v;
  EXPECT_NEAR(rms_factor(xf.data(), 1024, kEps), 1.0 / std::sqrt(ssf / 1024 + 1e-6), 1e-6);
}

}  // namespace
}  // namespace dsv4::kernels
