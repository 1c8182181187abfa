// Oracle for kv_path.h: the composition of the reference operators.
#include "kernels/kv_path/kv_path.h"
#include "kernels/linear/linear.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {

void kv_path_ref(const KvPathParams& p, const KvPathWeights& w, const bf16* a, int64_t T,
                 const int64_t* pos, bf16* kv) {
  linear_ref(w.wkv, a, T, kv, w.wkv.quantized());
  rmsnorm_ref(kv, w.kv_norm, kv, T, p.head_dim, p.eps);
  rope_ref(w.inv_freq, p.rope_dim, kv, T, 1, p.head_dim, pos, false);
  for (int64_t t = 0; t < T; ++t) fp8sim_row(kv + t * p.head_dim, p.nope_dim(), kFp8SimBlock);
}

}  // namespace dsv4::kernels
