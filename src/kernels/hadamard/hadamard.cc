// Engine Hadamard: in-register fp32 butterflies (stage h pairs j and j + h),
// stages h = 1, 2, 4, … n/2; the order depends on n only.
#include "kernels/hadamard/hadamard.h"

#include <bit>

#include "base/check.h"
#include "base/math.h"

namespace dsv4::kernels {

void hadamard_vec(const bf16* x, bf16* y, int n) {
  DSV4_CHECK(n > 0 && n <= kHadamardMaxN && std::has_single_bit(static_cast<unsigned>(n)), "n = {}",
             n);
  float v[kHadamardMaxN];
  for (int j = 0; j < n; ++j) v[j] = x[j].to_float();
  for (int h = 1; h < n; h *= 2) {
    for (int i = 0; i < n; i += 2 * h) {
      float* lo = v + i;
      float* hi = v + i + h;
      for (int j = 0; j < h; ++j) {
        const float a = lo[j], b = hi[j];
        lo[j] = a + b;
        hi[j] = a - b;
      }
    }
  }
  const float scale = hadamard_scale(n);
  for (int j = 0; j < n; ++j) y[j] = bf16::from_float(v[j] * scale);
}

void hadamard(const bf16* x, bf16* y, int64_t T, int n_vec, int n, int tid, int nthreads) {
  const Range r = split_range(T * n_vec, tid, nthreads);
  for (int64_t k = r.begin; k < r.end; ++k) hadamard_vec(x + k * n, y + k * n, n);
}

}  // namespace dsv4::kernels
