// The one tolerance table of the test suite (docs/numerics.md gives the reason
// for each entry). A value passes when |got - want| <= abs + rel·|want|; a
// bounded fraction of elements (outlier_ratio) may miss it on quantized paths,
// where one flipped rounding of an fp8/fp4 code moves an element by a full
// quantization step. NaN and ±Inf positions must match exactly.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "numeric/bf16.h"

namespace dsv4::test {

struct Tol {
  double abs;
  double rel;
  double outlier_ratio;
  const char* name;
};

// Same ops in the same order: bit-identical.
inline constexpr Tol kExact{0.0, 0.0, 0.0, "exact"};
// fp32 result of a reduction whose summation order differs (Level A leaves it free).
inline constexpr Tol kF32Sum{1e-5, 1e-5, 0.0, "f32-sum"};
// bf16 result of an fp32 reduction in another order: one bf16 ulp (2^-8 relative).
inline constexpr Tol kBf16Out{1e-6, 1.0 / 128, 0.0, "bf16-out"};
// bf16 output fed by quantized stages (actq / fp8sim / fp4sim) computed from
// inputs that differ by summation-order noise: a code may flip.
inline constexpr Tol kQuantized{1e-3, 1.0 / 32, 0.02, "quantized"};

inline float as_float(float v) { return v; }
inline float as_float(bf16 v) { return v.to_float(); }

template <class A, class B>
::testing::AssertionResult all_close(const A* got, const B* want, int64_t n, const Tol& tol,
                                     const std::string& what = "") {
  int64_t outliers = 0, first_bad = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = as_float(got[i]), w = as_float(want[i]);
    if (std::isnan(g) || std::isnan(w)) {
      if (std::isnan(g) != std::isnan(w))
        return ::testing::AssertionFailure() << what << ": NaN position differs at " << i
                                             << " got " << g << " want " << w;
      continue;
    }
    if (std::isinf(g) || std::isinf(w)) {
      if (g != w)
        return ::testing::AssertionFailure() << what << ": Inf position differs at " << i
                                             << " got " << g << " want " << w;
      continue;
    }
    const double err = std::fabs(g - w), lim = tol.abs + tol.rel * std::fabs(w);
    if (err > lim) {
      ++outliers;
      if (first_bad < 0) first_bad = i;
      worst = std::max(worst, err);
    }
  }
  if (outliers > static_cast<int64_t>(tol.outlier_ratio * static_cast<double>(n)))
    return ::testing::AssertionFailure()
           << what << ": " << outliers << "/" << n << " elements outside tolerance " << tol.name
           << " (first at " << first_bad << ": got " << as_float(got[first_bad]) << " want "
           << as_float(want[first_bad]) << ", worst abs err " << worst << ")";
  return ::testing::AssertionSuccess();
}

}  // namespace dsv4::test
