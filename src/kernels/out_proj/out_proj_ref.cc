// Oracle for out_proj.h: inverse RoPE, the block-diagonal wo_a as one reference dot per
// output over its group's heads, then wo_b (actq when quantized) in the K order of the
// engine: the grouped tree when Ro % 128 == 0, else the plain block chain.
#include <vector>

#include "kernels/linear/linear.h"
#include "kernels/out_proj/out_proj.h"
#include "kernels/rope/rope.h"

namespace dsv4::kernels {

void out_proj_ref(const OutProjParams& p, const OutProjWeights& w, bf16* o, int64_t T,
                  const int64_t* pos, bf16* out) {
  rope_ref(w.inv_freq, p.rope_dim, o, T, p.n_heads, p.head_dim, pos, true);
  const int64_t hd = int64_t{p.n_heads} * p.head_dim, din = p.group_in();
  const int64_t uw = p.u_width();
  std::vector<bf16> u(T * uw);
  std::vector<float> og(din);
  for (int64_t t = 0; t < T; ++t)
    for (int g = 0; g < p.o_groups; ++g) {
      for (int64_t d = 0; d < din; ++d) og[d] = o[t * hd + g * din + d].to_float();
      for (int64_t r = 0; r < p.o_lora_rank; ++r)
        u[t * uw + g * p.o_lora_rank + r] = bf16::from_float(linear_dot_ref(w.wo_a, g * p.o_lora_rank + r, og.data()));
    }
  linear_ref(w.wo_b, u.data(), T, out, w.wo_b.quantized(), p.wo_b_k_group());
}

}  // namespace dsv4::kernels
