// Oracle for out_proj.h: inverse RoPE, the block-diagonal wo_a written as plain
// loops over each group's heads, then the reference linear for wo_b.
#include <vector>

#include "kernels/linear/linear.h"
#include "kernels/out_proj/out_proj.h"
#include "kernels/rope/rope.h"

namespace dsv4::kernels {

void out_proj_ref(const OutProjParams& p, const OutProjWeights& w, bf16* o, int64_t T,
                  const int64_t* pos, bf16* out) {
  rope_ref(w.inv_freq, p.rope_dim, o, T, p.n_heads, p.head_dim, pos, true);
  const int64_t hd = int64_t{p.n_heads} * p.head_dim, din = p.group_in();
  std::vector<bf16> u(T * p.u_width());
  for (int64_t t = 0; t < T; ++t)
    for (int g = 0; g < p.o_groups; ++g)
      for (int64_t r = 0; r < p.o_lora_rank; ++r) {
        float acc = 0.0f;
        for (int64_t d = 0; d < din; ++d)
          acc += weight_at(w.wo_a, g * p.o_lora_rank + r, d) * o[t * hd + g * din + d].to_float();
        u[t * p.u_width() + g * p.o_lora_rank + r] = bf16::from_float(acc);
      }
  linear_ref(w.wo_b, u.data(), T, out, w.wo_b.quantized());
}

}  // namespace dsv4::kernels
