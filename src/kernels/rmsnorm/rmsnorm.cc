// Engine RMSNorm: rows split over threads; the sum of squares uses 16 fixed
// lanes (lane l sums i ≡ l mod 16 ascending, lanes folded by a fixed tree), so
// a row's result depends on n only.
#include <cmath>

#include "base/math.h"
#include "kernels/rmsnorm/rmsnorm.h"

namespace dsv4::kernels {
namespace {

constexpr int kLanes = 16;

inline float to_f32(bf16 v) { return v.to_float(); }
inline float to_f32(float v) { return v; }

template <class XT>
float rms_factor_impl(const XT* x, int64_t n, float eps) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += to_f32(x[i + l]) * to_f32(x[i + l]);
  for (int l = 0; i + l < n; ++l) lane[l] += to_f32(x[i + l]) * to_f32(x[i + l]);
  for (int h = kLanes / 2; h > 0; h /= 2)
    for (int l = 0; l < h; ++l) lane[l] += lane[l + h];
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(n));  // fp32(1/n)
  const float mean = lane[0] * inv_n;
  const float v = mean + eps;
  return 1.0f / std::sqrt(v);
}

}  // namespace

float rms_factor(const bf16* x, int64_t n, float eps) { return rms_factor_impl(x, n, eps); }
float rms_factor(const float* x, int64_t n, float eps) { return rms_factor_impl(x, n, eps); }

void rmsnorm(const bf16* x, const bf16* w, bf16* y, int64_t T, int64_t n, float eps, int tid,
             int nthreads) {
  const Range r = split_range(T, tid, nthreads);
  for (int64_t t = r.begin; t < r.end; ++t) {
    const bf16* xt = x + t * n;
    bf16* yt = y + t * n;
    const float rho = rms_factor(xt, n, eps);
    if (w) {
      for (int64_t i = 0; i < n; ++i) yt[i] = bf16::from_float(w[i].to_float() * (xt[i].to_float() * rho));
    } else {
      for (int64_t i = 0; i < n; ++i) yt[i] = bf16::from_float(xt[i].to_float() * rho);
    }
  }
}

}  // namespace dsv4::kernels
