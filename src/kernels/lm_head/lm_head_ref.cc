// Oracle for lm_head.h: plain ascending fp32 dot per logit.
#include "base/check.h"
#include "kernels/linear/linear.h"
#include "kernels/lm_head/lm_head.h"

namespace dsv4::kernels {

void lm_head_ref(const LmHeadParams& p, const LinearWeight& head, const bf16* y, int64_t T,
                 float* logits) {
  DSV4_CHECK(!head.quantized(), "the LM head is used in fp32 without actq");
  for (int64_t t = 0; t < T; ++t)
    for (int64_t v = p.v0; v < p.v1; ++v) {
      float acc = 0.0f;
      for (int64_t d = 0; d < head.in; ++d) acc += weight_at(head, v, d) * y[t * head.in + d].to_float();
      logits[t * p.logits_stride + (v - p.v0)] = acc;
    }
}

}  // namespace dsv4::kernels
