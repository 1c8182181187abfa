// Oracle for rmsnorm.h: one fp32 op per line; the sum of squares in the fixed order of
// rms_factor (16 lanes, lane l sums i ≡ l mod 16 ascending, lanes folded l += l+8, +4, +2, +1).
#include <cmath>

#include "kernels/rmsnorm/rmsnorm.h"

namespace dsv4::kernels {

void rmsnorm_ref(const bf16* x, const bf16* w, bf16* y, int64_t T, int64_t n, float eps) {
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(n));  // fp32(1/n)
  for (int64_t t = 0; t < T; ++t) {
    const bf16* xt = x + t * n;
    float lane[16] = {};
    for (int64_t i = 0; i < n; ++i) lane[i % 16] += xt[i].to_float() * xt[i].to_float();
    for (int h = 8; h >= 1; h /= 2)
      for (int l = 0; l < h; ++l) lane[l] += lane[l + h];
    const float ss = lane[0];
    const float mean = ss * inv_n;
    const float v = mean + eps;
    const float rho = 1.0f / std::sqrt(v);
    for (int64_t i = 0; i < n; ++i) {
      const float xn = xt[i].to_float() * rho;
      const float yi = w ? w[i].to_float() * xn : xn;
      y[t * n + i] = bf16::from_float(yi);
    }
  }
}

}  // namespace dsv4::kernels
