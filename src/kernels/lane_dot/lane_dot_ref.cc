// Reference lane dot: one row, the lanes and the combining tree written out.
#include "kernels/lane_dot/lane_dot.h"

namespace dsv4::kernels {
namespace {

float as_float(float v) { return v; }
float as_float(bf16 v) { return v.to_float(); }

template <class W>
float dot_ref(const W* w, const bf16* x, int64_t n) {
  float lane[kLaneDotLanes] = {};
  for (int64_t c = 0; c < n; ++c) {
    const float product = as_float(w[c]) * x[c].to_float();
    lane[c % kLaneDotLanes] = lane[c % kLaneDotLanes] + product;
  }
  const float l04 = lane[0] + lane[4], l26 = lane[2] + lane[6], l15 = lane[1] + lane[5], l37 = lane[3] + lane[7];
  return (l04 + l26) + (l15 + l37);
}

}  // namespace

float lane_dot_ref(const float* w, const bf16* x, int64_t n) { return dot_ref(w, x, n); }
float lane_dot_ref(const bf16* w, const bf16* x, int64_t n) { return dot_ref(w, x, n); }

}  // namespace dsv4::kernels
