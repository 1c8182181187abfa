// Reference Hadamard: explicit matrix product, entries (−1)^popcount(i&j),
// fp32 sum in ascending j.
#include <bit>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/hadamard/hadamard.h"

namespace dsv4::kernels {

float hadamard_scale(int n) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n))); }

void hadamard_ref(const bf16* x, bf16* y, int64_t T, int n_vec, int n) {
  DSV4_CHECK(n > 0 && std::has_single_bit(static_cast<unsigned>(n)), "n = {}", n);
  const float scale = hadamard_scale(n);
  std::vector<float> v(n);
  for (int64_t k = 0; k < T * n_vec; ++k) {
    for (int j = 0; j < n; ++j) v[j] = x[k * n + j].to_float();  // copy first: x may alias y
    for (int i = 0; i < n; ++i) {
      float sum = v[0];  // (−1)^popcount(i & 0) = +1
      for (int j = 1; j < n; ++j) {
        const bool neg = std::popcount(static_cast<unsigned>(i & j)) & 1;
        sum = neg ? sum - v[j] : sum + v[j];
      }
      const float scaled = sum * scale;
      y[k * n + i] = bf16::from_float(scaled);
    }
  }
}

}  // namespace dsv4::kernels
