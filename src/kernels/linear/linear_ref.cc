// Oracle for linear.h: per output, the fp32 sum over K of the dequantized weight times the
// (actq-dequantized) input, written as plain loops in the engine's fixed K order (16 lanes
// per 128-wide block, lanes folded, blocks chained; linear.h). Level A leaves the order free
// (model.md §0.3); pinning it here makes engine and reference agree bit for bit, which the
// whole-model reference (model/reference_model.h) relies on.
#include <algorithm>
#include <vector>

#include "base/check.h"
#include "base/math.h"
#include "kernels/linear/linear.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/quant.h"
#include "numeric/ue8m0.h"

namespace dsv4::kernels {

float weight_at(const LinearWeight& w, int64_t o, int64_t i) {
  switch (w.format) {
    case WeightFormat::kBF16:
      return static_cast<const bf16*>(w.data)[o * w.in + i].to_float();
    case WeightFormat::kF32:
      return static_cast<const float*>(w.data)[o * w.in + i];
    case WeightFormat::kFP8: {
      const int64_t nbk = ceil_div<int64_t>(w.in, 128);
      const uint8_t code = static_cast<const uint8_t*>(w.data)[o * w.in + i];
      return e4m3_decode(code) * ue8m0_decode(w.scale[(o / 128) * nbk + i / 128]);
    }
    case WeightFormat::kFP4: {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + o * (w.in / 2);
      return e2m1_decode(e2m1_nibble(row, i)) * ue8m0_decode(w.scale[o * (w.in / 32) + i / 32]);
    }
  }
  DSV4_CHECK(false, "unknown weight format");
  return 0.0f;
}

float linear_dot_ref(const LinearWeight& w, int64_t o, const float* x, int64_t k_group) {
  constexpr int64_t kBlock = 128, kLanes = 16;
  float total = 0.0f, group = 0.0f;
  for (int64_t k0 = 0; k0 < w.in; k0 += kBlock) {
    float lane[kLanes] = {};
    for (int64_t i = k0; i < std::min(w.in, k0 + kBlock); ++i) lane[(i - k0) % kLanes] += weight_at(w, o, i) * x[i];
    for (int64_t h = kLanes / 2; h >= 1; h /= 2)
      for (int64_t l = 0; l < h; ++l) lane[l] += lane[l + h];
    if (k_group == 0) {  // blocks chained
      total = k0 == 0 ? lane[0] : total + lane[0];
      continue;
    }
    group = k0 % k_group == 0 ? lane[0] : group + lane[0];  // blocks chained inside a group,
    if ((k0 + kBlock) % k_group == 0 || k0 + kBlock >= w.in)  // then the groups chained
      total = k0 < k_group ? group : total + group;
  }
  return total;
}

void linear_ref(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, bool apply_actq) {
  std::vector<bf16> xhat(w.in);
  std::vector<float> xf(w.in);
  for (int64_t t = 0; t < T; ++t) {
    const bf16* xt = x + t * w.in;
    if (apply_actq) {
      actq_dequant_row(xt, w.in, xhat.data());
      xt = xhat.data();
    }
    for (int64_t i = 0; i < w.in; ++i) xf[i] = xt[i].to_float();
    for (int64_t o = 0; o < w.out; ++o) y[t * w.out + o] = bf16::from_float(linear_dot_ref(w, o, xf.data()));
  }
}

void linear_f32_ref(const LinearWeight& w, const bf16* x, int64_t T, float* y) {
  std::vector<float> xf(w.in);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < w.in; ++i) xf[i] = x[t * w.in + i].to_float();
    for (int64_t o = 0; o < w.out; ++o) y[t * w.out + o] = linear_dot_ref(w, o, xf.data());
  }
}

void linear_f32_in_ref(const LinearWeight& w, const float* x, int64_t T, float* y) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < w.out; ++o) y[t * w.out + o] = linear_dot_ref(w, o, x + t * w.in);
}

}  // namespace dsv4::kernels
