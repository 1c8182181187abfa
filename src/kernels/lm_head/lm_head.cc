// Engine LM head: linear_slice over the vocabulary rows [v0, v1), fp32 output.
#include "base/check.h"
#include "kernels/linear/linear.h"
#include "kernels/lm_head/lm_head.h"

namespace dsv4::kernels {

void lm_head(const LmHeadParams& p, const LinearWeight& head, const bf16* y, int64_t T,
             float* logits, int tid, int nthreads) {
  DSV4_CHECK(!head.quantized(), "the LM head is used in fp32 without actq");
  DSV4_CHECK(p.v0 >= 0 && p.v0 <= p.v1 && p.v1 <= head.out && p.logits_stride >= p.v1 - p.v0,
             "vocab rows [{}, {}) of {}, stride {}", p.v0, p.v1, head.out, p.logits_stride);
  if (p.v0 == p.v1) return;
  LinearSlice s;
  s.o0 = p.v0;
  s.o1 = p.v1;
  s.y_stride = p.logits_stride;
  linear_slice(head, s, y, T, logits, tid, nthreads);
}

}  // namespace dsv4::kernels
