// Oracle for mtp_proj.h: the composition of the reference operators and one
// rounded fp32 add per element.
#include <vector>

#include "kernels/embed/embed.h"
#include "kernels/linear/linear.h"
#include "kernels/mtp_proj/mtp_proj.h"
#include "kernels/rmsnorm/rmsnorm.h"

namespace dsv4::kernels {

void mtp_proj_ref(const MtpProjParams& p, const MtpProjWeights& w, const int32_t* next_tok,
                  const bf16* X, int64_t T, bf16* Z) {
  const int64_t D = p.hidden, N = p.hc_mult;
  std::vector<bf16> e(T * D), h(T * N * D), ep(T * D), hp(T * N * D);
  embed_ref({p.vocab_size, D, 1}, w.embed, next_tok, T, e.data());
  rmsnorm_ref(e.data(), w.enorm, e.data(), T, D, p.eps);
  rmsnorm_ref(X, w.hnorm, h.data(), T * N, D, p.eps);
  linear_ref(w.e_proj, e.data(), T, ep.data(), w.e_proj.quantized());
  linear_ref(w.h_proj, h.data(), T * N, hp.data(), w.h_proj.quantized());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < N; ++k)
      for (int64_t d = 0; d < D; ++d) {
        const float sum = ep[t * D + d].to_float() + hp[(t * N + k) * D + d].to_float();
        Z[(t * N + k) * D + d] = bf16::from_float(sum);
      }
}

}  // namespace dsv4::kernels
