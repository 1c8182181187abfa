// LM head (model.md §10.1, §0.4.5 A15 last line): fp32 logits of the final-normed
// hidden row y (bf16) over a vocabulary row range [v0, v1) (a rank's shard,
// runtime.md §6.10; the whole vocabulary on one rank):
//   logits[t, v − v0] = Σ₃₂( head[v, :] · fp32(y[t, :]) )     head [V, D] BF16 (fp32 copy), no actq
// y [T, D] bf16; logits [T, v1 − v0] fp32 with row stride logits_stride (≥ v1 − v0).
// Every logit is one whole dot product in the fixed K order of linear.h, so a
// shard's logits equal the same columns of the unsharded call bit for bit.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

struct LmHeadParams {
  int64_t v0 = 0;             // first vocabulary row of this call
  int64_t v1 = 0;             // one past the last
  int64_t logits_stride = 0;  // row stride of logits (elements)
};

void lm_head_ref(const LmHeadParams& p, const LinearWeight& head, const bf16* y, int64_t T,
                 float* logits);
// Engine: vocabulary rows split over threads.
void lm_head(const LmHeadParams& p, const LinearWeight& head, const bf16* y, int64_t T,
             float* logits, int tid, int nthreads);

}  // namespace dsv4::kernels
