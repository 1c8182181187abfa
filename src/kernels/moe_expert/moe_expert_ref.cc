// Reference expert: linear_ref for the three projections, the element-wise SwiGLU of
// model.md §0.4.5 A12 one fp32 operation per statement.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/linear/linear.h"
#include "kernels/moe_expert/moe_expert.h"

namespace dsv4::kernels {

void moe_expert_ref(const ExpertWeights& w, const MoeExpertParams& p, const bf16* x, int64_t T,
                    const float* row_weight, bf16* out) {
  const int64_t D = p.hidden, F = p.moe_intermediate_size;
  DSV4_CHECK(w.w1.out == F && w.w1.in == D && w.w3.out == F && w.w3.in == D && w.w2.out == D &&
                 w.w2.in == F,
             "expert shapes w1 [{}, {}] w3 [{}, {}] w2 [{}, {}] for D={} F={}", w.w1.out, w.w1.in,
             w.w3.out, w.w3.in, w.w2.out, w.w2.in, D, F);
  std::vector<bf16> g(T * F), u(T * F), h(T * F);
  linear_ref(w.w1, x, T, g.data(), w.w1.quantized());
  linear_ref(w.w3, x, T, u.data(), w.w3.quantized());
  const float L = p.swiglu_limit;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < F; ++i) {
      float gv = g[t * F + i].to_float();
      float uv = u[t * F + i].to_float();
      if (L > 0.0f) {
        uv = std::min(std::max(uv, -L), L);
        gv = std::min(gv, L);
      }
      const float e = std::exp(-gv);
      const float d = 1.0f + e;
      const float silu = gv / d;
      float hv = silu * uv;
      if (row_weight) hv = row_weight[t] * hv;
      h[t * F + i] = bf16::from_float(hv);
    }
  }
  linear_ref(w.w2, h.data(), T, out, w.w2.quantized());
}

}  // namespace dsv4::kernels
