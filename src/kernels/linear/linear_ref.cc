// Oracle for linear.h: per row, plain ascending fp32 sum over K of the
// dequantized weight times the (actq-dequantized) input.
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

void linear_ref(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, bool apply_actq) {
  std::vector<bf16> xhat(w.in);
  for (int64_t t = 0; t < T; ++t) {
    const bf16* xt = x + t * w.in;
    if (apply_actq) {
      actq_dequant_row(xt, w.in, xhat.data());
      xt = xhat.data();
    }
    for (int64_t o = 0; o < w.out; ++o) {
      float acc = 0.0f;
      for (int64_t i = 0; i < w.in; ++i) acc += weight_at(w, o, i) * xt[i].to_float();
      y[t * w.out + o] = bf16::from_float(acc);
    }
  }
}

void linear_f32_ref(const LinearWeight& w, const bf16* x, int64_t T, float* y) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < w.out; ++o) {
      float acc = 0.0f;
      for (int64_t i = 0; i < w.in; ++i) acc += weight_at(w, o, i) * x[t * w.in + i].to_float();
      y[t * w.out + o] = acc;
    }
}

void linear_f32_in_ref(const LinearWeight& w, const float* x, int64_t T, float* y) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < w.out; ++o) {
      float acc = 0.0f;
      for (int64_t i = 0; i < w.in; ++i) acc += weight_at(w, o, i) * x[t * w.in + i];
      y[t * w.out + o] = acc;
    }
}

}  // namespace dsv4::kernels
