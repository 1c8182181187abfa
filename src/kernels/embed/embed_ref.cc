// Oracle for embed.h: element-by-element copy of the table row into N streams.
#include "base/check.h"
#include "kernels/embed/embed.h"

namespace dsv4::kernels {

Status validate_token_ids(const int32_t* tok, int64_t T, int64_t vocab_size) {
  for (int64_t t = 0; t < T; ++t)
    if (tok[t] < 0 || tok[t] >= vocab_size)
      return Status::errorf("token id {} at row {} is outside the vocabulary [0, {})", tok[t], t,
                            vocab_size);
  return Status();
}

void embed_ref(const EmbedParams& p, const bf16* table, const int32_t* tok, int64_t T, bf16* X) {
  for (int64_t t = 0; t < T; ++t) {
    DSV4_CHECK(tok[t] >= 0 && tok[t] < p.vocab_size, "token id {} at row {}", tok[t], t);
    for (int k = 0; k < p.hc_mult; ++k)
      for (int64_t d = 0; d < p.hidden; ++d)
        X[(t * p.hc_mult + k) * p.hidden + d] = table[tok[t] * p.hidden + d];
  }
}

}  // namespace dsv4::kernels
