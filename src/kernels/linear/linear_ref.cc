// Oracle for linear.h: per output, the fp32 sum over K of the dequantized weight times the
// (actq-dequantized) input, written as plain loops in the engine's fixed K order (16 lanes
// per 128-wide block, lanes folded, blocks chained; linear.h). Level A leaves the order free
// (model.md §0.3); pinning it here makes engine and reference agree bit for bit, which the
// whole-model reference (oracle/reference_model.h) relies on.
#include <algorithm>
#include <type_traits>
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
      return e4m3_decode(fp8_code(w, o, i)) * ue8m0_decode(w.scale[(o / 128) * nbk + i / 128]);
    }
    case WeightFormat::kFP4: {
      return e2m1_decode(fp4_code(w, o, i)) * ue8m0_decode(w.scale[o * (w.in / 32) + i / 32]);
    }
  }
  DSV4_CHECK(false, "unknown weight format");
  return 0.0f;
}

namespace {

// Σ₃₂ wrow[i]·x[i], i < n, in the engine K order (see linear_dot_ref).
float dot_in_order(const float* wrow, const float* x, int64_t n, int64_t k_group) {
  constexpr int64_t kBlock = 128, kLanes = 16;
  float total = 0.0f, group = 0.0f;
  for (int64_t k0 = 0; k0 < n; k0 += kBlock) {
    float lane[kLanes] = {};
    for (int64_t i = k0; i < std::min(n, k0 + kBlock); ++i) lane[(i - k0) % kLanes] += wrow[i] * x[i];
    for (int64_t h = kLanes / 2; h >= 1; h /= 2)
      for (int64_t l = 0; l < h; ++l) lane[l] += lane[l + h];
    if (k_group == 0) {  // blocks chained
      total = k0 == 0 ? lane[0] : total + lane[0];
      continue;
    }
    group = k0 % k_group == 0 ? lane[0] : group + lane[0];  // blocks chained inside a group,
    if ((k0 + kBlock) % k_group == 0 || k0 + kBlock >= n)  // then the groups chained
      total = k0 < k_group ? group : total + group;
  }
  return total;
}

void weight_row(const LinearWeight& w, int64_t o, float* wrow) {
  for (int64_t i = 0; i < w.in; ++i) wrow[i] = weight_at(w, o, i);
}

// y[t·out + o] = dot of row o with x row t, for fp32 input rows x [T, in].
template <class Y>
void rows_times_weight(const LinearWeight& w, const float* x, int64_t T, Y* y, int64_t k_group = 0) {
  std::vector<float> wrow(w.in);
  for (int64_t o = 0; o < w.out; ++o) {
    weight_row(w, o, wrow.data());
    for (int64_t t = 0; t < T; ++t) {
      const float v = dot_in_order(wrow.data(), x + t * w.in, w.in, k_group);
      if constexpr (std::is_same_v<Y, bf16>) y[t * w.out + o] = bf16::from_float(v);
      else y[t * w.out + o] = v;
    }
  }
}

std::vector<float> to_f32(const bf16* x, int64_t n) {
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) f[i] = x[i].to_float();
  return f;
}

}  // namespace

float linear_dot_ref(const LinearWeight& w, int64_t o, const float* x, int64_t k_group) {
  std::vector<float> wrow(w.in);
  weight_row(w, o, wrow.data());
  return dot_in_order(wrow.data(), x, w.in, k_group);
}

void linear_ref(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, bool apply_actq, int64_t k_group) {
  std::vector<bf16> xhat(T * w.in);
  for (int64_t t = 0; t < T; ++t) {
    if (apply_actq) actq_dequant_row(x + t * w.in, w.in, xhat.data() + t * w.in);
    else std::copy_n(x + t * w.in, w.in, xhat.data() + t * w.in);
  }
  rows_times_weight(w, to_f32(xhat.data(), T * w.in).data(), T, y, k_group);
}

void linear_f32_ref(const LinearWeight& w, const bf16* x, int64_t T, float* y) {
  rows_times_weight(w, to_f32(x, T * w.in).data(), T, y);
}

void linear_f32_in_ref(const LinearWeight& w, const float* x, int64_t T, float* y) { rows_times_weight(w, x, T, y); }

}  // namespace dsv4::kernels
