// Token embedding (model.md §3.1, §0.4.5 A1) and the hyper-connection stream start:
//   e[t] = embed[tok[t]]                  bf16, exact copy        table [V, D]
//   X[t, k, :] = e[t]  for k < N          (N = hc_mult; N = 1 gives e itself)
// tok: [T] token ids; X: [T, N, D] bf16. An id outside [0, V) is an error of the
// outside world: validate_token_ids reports it (id, row, vocab size); the kernels
// take valid ids as a precondition (checked, aborts on a broken invariant).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "numeric/bf16.h"

namespace dsv4::kernels {

struct EmbedParams {
  int64_t vocab_size = 0;  // V
  int64_t hidden = 0;      // D
  int hc_mult = 1;         // N copies per row
};

// Ok iff every tok[t], t < T, lies in [0, vocab_size); else names the first bad one.
Status validate_token_ids(const int32_t* tok, int64_t T, int64_t vocab_size);

void embed_ref(const EmbedParams& p, const bf16* table, const int32_t* tok, int64_t T, bf16* X);
// Engine: rows split over threads.
void embed(const EmbedParams& p, const bf16* table, const int32_t* tok, int64_t T, bf16* X,
           int tid, int nthreads);

}  // namespace dsv4::kernels
