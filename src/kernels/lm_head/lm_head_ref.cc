// Oracle for lm_head.h: one reference dot (linear_dot_ref, the engine K order) per logit.
#include <vector>

#include "base/check.h"
#include "kernels/linear/linear.h"
#include "kernels/lm_head/lm_head.h"

namespace dsv4::kernels {

void lm_head_ref(const LmHeadParams& p, const LinearWeight& head, const bf16* y, int64_t T,
                 float* logits) {
  DSV4_CHECK(!head.quantized(), "the LM head is used in fp32 without actq");
  std::vector<float> yf(head.in);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t d = 0; d < head.in; ++d) yf[d] = y[t * head.in + d].to_float();
    for (int64_t v = p.v0; v < p.v1; ++v) logits[t * p.logits_stride + (v - p.v0)] = linear_dot_ref(head, v, yf.data());
  }
}

}  // namespace dsv4::kernels
