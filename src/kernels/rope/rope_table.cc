// RoPE frequency table (model.md §4.1) in the Level-A fp32 op order of §0.4.5 A5.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/check.h"
#include "kernels/rope/rope.h"

namespace dsv4::kernels {

void yarn_ramp_bounds(const RopeParams& p, double* lo, double* hi) {
  // c(n) = Dr·ln(L0 / (2π·n)) / (2·ln θ), in double as the demo's Python does.
  auto c = [&](double n) {
    return p.rope_dim * std::log(p.original_max_pos / (n * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(p.theta));
  };
  *lo = std::max(std::floor(c(p.beta_fast)), 0.0);
  *hi = std::min(std::ceil(c(p.beta_slow)), static_cast<double>(p.rope_dim - 1));
  if (*lo == *hi) *hi += 0.001;
}

std::vector<float> rope_inv_freq(const RopeParams& p) {
  DSV4_CHECK(p.rope_dim > 0 && p.rope_dim % 2 == 0, "rope_dim {} must be even and positive", p.rope_dim);
  const int half = p.rope_dim / 2;
  const float theta = static_cast<float>(p.theta);
  const float dr = static_cast<float>(p.rope_dim);
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / dr;
    inv[i] = 1.0f / std::pow(theta, e);
  }
  if (!p.yarn) return inv;
  double lo = 0, hi = 0;
  yarn_ramp_bounds(p, &lo, &hi);
  const float lo32 = static_cast<float>(lo);
  const float span = static_cast<float>(hi - lo);
  const float f = static_cast<float>(p.yarn_factor);
  for (int i = 0; i < half; ++i) {
    const float num = static_cast<float>(i) - lo32;
    const float ramp = std::clamp(num / span, 0.0f, 1.0f);
    const float smooth = 1.0f - ramp;
    const float scaled = inv[i] / f;
    const float keep = 1.0f - smooth;
    const float a = scaled * keep;
    const float b = inv[i] * smooth;
    inv[i] = a + b;
  }
  return inv;
}

}  // namespace dsv4::kernels
