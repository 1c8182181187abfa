// Engine embedding: one memcpy per stream, rows split over threads.
#include <cstring>

#include "base/check.h"
#include "base/math.h"
#include "kernels/embed/embed.h"

namespace dsv4::kernels {

void embed(const EmbedParams& p, const bf16* table, const int32_t* tok, int64_t T, bf16* X,
           int tid, int nthreads) {
  const Range r = split_range(T, tid, nthreads);
  for (int64_t t = r.begin; t < r.end; ++t) {
    DSV4_CHECK(tok[t] >= 0 && tok[t] < p.vocab_size,
               "token id {} at row {} outside [0, {}): call validate_token_ids first", tok[t], t,
               p.vocab_size);
    const bf16* src = table + int64_t{tok[t]} * p.hidden;
    for (int k = 0; k < p.hc_mult; ++k)
      std::memcpy(X + (t * p.hc_mult + k) * p.hidden, src, sizeof(bf16) * p.hidden);
  }
}

}  // namespace dsv4::kernels
