// Hadamard transform: engine (butterflies) vs reference (matrix product) at
// every T, exact sums, hand cases, row independence, in-place use.
#include "kernels/hadamard/hadamard.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "support/poison.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

struct Dims {
  const char* name;
  int n_vec;
  int n;
};
// Index queries [T, Hi, Di] and index-key entries [T, 1, Di] of both presets.
constexpr Dims kDims[] = {
    {"tiny.q", 2, 32}, {"tiny.k", 1, 32}, {"tiny2.q", 4, 128}, {"tiny2.k", 1, 128}};

std::vector<bf16> random_rows(int64_t count, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<bf16> v(count);
  for (auto& x : v) x = bf16::from_float(d(rng));
  return v;
}

void run_engine(ThreadPool& pool, const bf16* x, bf16* y, int64_t T, int n_vec, int n) {
  pool.run([&](int tid, int nt) { hadamard(x, y, T, n_vec, n, tid, nt); });
}

TEST(Hadamard, Scale) {
  EXPECT_EQ(hadamard_scale(1), 1.0f);
  EXPECT_EQ(hadamard_scale(4), 0.5f);
  EXPECT_EQ(hadamard_scale(128), static_cast<float>(1.0 / std::sqrt(128.0)));
  EXPECT_EQ(hadamard_scale(32), static_cast<float>(1.0 / std::sqrt(32.0)));
}

TEST(Hadamard, HandCases) {
  // n = 2: [a+b, a−b]/√2; n = 4: rows ++++, +−+−, ++−−, +−−+ times 1/2 (exact).
  const float s2 = hadamard_scale(2);
  bf16 x2[2] = {bf16::from_float(3.0f), bf16::from_float(1.0f)}, y2[2], r2[2];
  hadamard_vec(x2, y2, 2);
  hadamard_ref(x2, r2, 1, 1, 2);
  EXPECT_EQ(y2[0].to_float(), round_bf16(4.0f * s2));
  EXPECT_EQ(y2[1].to_float(), round_bf16(2.0f * s2));
  EXPECT_EQ(r2[0], y2[0]);
  EXPECT_EQ(r2[1], y2[1]);
  const float v[4] = {1.0f, 2.0f, 3.0f, 5.0f};
  const float want[4] = {11.0f / 2, (1 - 2 + 3 - 5) / 2.0f, (1 + 2 - 3 - 5) / 2.0f,
                         (1 - 2 - 3 + 5) / 2.0f};
  bf16 x4[4], y4[4], r4[4];
  for (int i = 0; i < 4; ++i) x4[i] = bf16::from_float(v[i]);
  hadamard_vec(x4, y4, 4);
  hadamard_ref(x4, r4, 1, 1, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(y4[i].to_float(), want[i]) << i;
    EXPECT_EQ(r4[i].to_float(), want[i]) << i;
  }
  // n = 1 is the identity.
  bf16 x1 = bf16::from_float(-1.5f), y1;
  hadamard_vec(&x1, &y1, 1);
  EXPECT_EQ(y1, x1);
}

TEST(Hadamard, ExactSumsAreBitIdentical) {
  // Small integers: every partial sum is an exact fp32 integer in any order, so
  // engine and reference agree exactly, and equal the double-precision result.
  for (int n : {2, 8, 32, 128, 1024}) {
    std::mt19937 rng(n);
    std::uniform_int_distribution<int> d(-8, 8);
    const int n_vec = 3;
    std::vector<bf16> x(n_vec * n), ye(n_vec * n), yr(n_vec * n);
    for (auto& e : x) e = bf16::from_float(static_cast<float>(d(rng)));
    hadamard_vec(x.data(), ye.data(), n);
    hadamard(x.data() + n, ye.data() + n, 1, n_vec - 1, n, 0, 1);
    hadamard_ref(x.data(), yr.data(), 1, n_vec, n);
    const float scale = hadamard_scale(n);
    for (int k = 0; k < n_vec; ++k)
      for (int i = 0; i < n; ++i) {
        double sum = 0;
        for (int j = 0; j < n; ++j)
          sum += (std::popcount(static_cast<unsigned>(i & j)) & 1 ? -1.0 : 1.0) *
                 x[k * n + j].to_float();
        const float want = round_bf16(static_cast<float>(sum) * scale);
        ASSERT_EQ(yr[k * n + i].to_float(), want) << "n=" << n << " vec " << k << " i " << i;
        ASSERT_EQ(ye[k * n + i].to_float(), want) << "n=" << n << " vec " << k << " i " << i;
      }
  }
}

TEST(Hadamard, SelfInverseUpToRounding) {
  // H·H = n·I: applying the normalized transform twice returns v within bf16 noise.
  const int n = 128;
  auto x = random_rows(n, 7, 1.0f);
  std::vector<bf16> y(n), z(n);
  hadamard_vec(x.data(), y.data(), n);
  hadamard_vec(y.data(), z.data(), n);
  EXPECT_TRUE(
      test::all_close(z.data(), x.data(), n, test::Tol{2e-2, 2.0 / 128, 0.0, "twice-bf16"}));
}

TEST(Hadamard, EngineMatchesRefEveryT) {
  ThreadPool pool1(1), pool2(2);
  for (const Dims& dm : kDims) {
    const int64_t width = static_cast<int64_t>(dm.n_vec) * dm.n;
    const auto x = random_rows(kCapacity * width, 11 + dm.n, 1.0f);
    RowBuffer<bf16> want(kCapacity, width);
    want.poison(kCapacity);
    hadamard_ref(x.data(), want.data(), kCapacity, dm.n_vec, dm.n);
    for (ThreadPool* pool : {&pool1, &pool2}) {
      for (int64_t T = 1; T <= kCapacity; ++T) {
        RowBuffer<bf16> got(kCapacity, width);
        got.poison(T);
        run_engine(*pool, x.data(), got.data(), T, dm.n_vec, dm.n);
        ASSERT_TRUE(got.sentinel_intact(T)) << dm.name << " T=" << T;
        ASSERT_TRUE(test::all_close(got.data(), want.data(), T * width, test::kBf16Out, dm.name))
            << "T=" << T << " nthreads=" << pool->size();
      }
    }
  }
}

TEST(Hadamard, RowIndependenceAndInPlace) {
  ThreadPool pool(2);
  for (const Dims& dm : kDims) {
    const int64_t width = static_cast<int64_t>(dm.n_vec) * dm.n;
    const auto x = random_rows(kCapacity * width, 23 + dm.n, 3.0f);
    std::vector<bf16> all(kCapacity * width);
    run_engine(pool, x.data(), all.data(), kCapacity, dm.n_vec, dm.n);
    for (int64_t t = 0; t < kCapacity; ++t) {
      std::vector<bf16> one(width);
      run_engine(pool, x.data() + t * width, one.data(), 1, dm.n_vec, dm.n);
      for (int64_t i = 0; i < width; ++i)
        ASSERT_EQ(one[i], all[t * width + i]) << dm.name << " row " << t;
    }
    std::vector<bf16> inplace = x;
    run_engine(pool, inplace.data(), inplace.data(), kCapacity, dm.n_vec, dm.n);
    for (int64_t i = 0; i < kCapacity * width; ++i) ASSERT_EQ(inplace[i], all[i]) << dm.name;
    std::vector<bf16> inplace_ref = x, out_ref(kCapacity * width);
    hadamard_ref(inplace_ref.data(), inplace_ref.data(), kCapacity, dm.n_vec, dm.n);
    hadamard_ref(x.data(), out_ref.data(), kCapacity, dm.n_vec, dm.n);
    for (int64_t i = 0; i < kCapacity * width; ++i)
      ASSERT_EQ(inplace_ref[i], out_ref[i]) << dm.name;
  }
}

}  // namespace
}  // namespace dsv4::kernels
