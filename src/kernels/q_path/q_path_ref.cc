// Oracle for q_path.h: the composition of the reference operators, and the
// per-head bf16 RMS written one rounding per line.
#include <cmath>
#include <vector>

#include "kernels/linear/linear.h"
#include "kernels/q_path/q_path.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"

namespace dsv4::kernels {

void head_rms_ref(bf16* q, int64_t T, int n_heads, int head_dim, float eps) {
  const float inv_n = static_cast<float>(1.0 / head_dim);  // fp32(1/Dh)
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < n_heads; ++h) {
      bf16* v = q + (t * n_heads + h) * head_dim;
      float sum = 0.0f;
      for (int i = 0; i < head_dim; ++i) {
        const float x = v[i].to_float();
        const float sq = round_bf16(x * x);
        sum += sq;
      }
      const float mu = round_bf16(sum * inv_n);
      const float var = round_bf16(mu + eps);
      const float r = round_bf16(1.0f / std::sqrt(var));
      for (int i = 0; i < head_dim; ++i) v[i] = bf16::from_float(v[i].to_float() * r);
    }
}

void q_path_ref(const QPathParams& p, const QPathWeights& w, const bf16* a, int64_t T,
                const int64_t* pos, bf16* qr, bf16* q) {
  std::vector<bf16> qa(T * p.q_lora_rank);
  linear_ref(w.wq_a, a, T, qa.data(), w.wq_a.quantized());
  rmsnorm_ref(qa.data(), w.q_norm, qr, T, p.q_lora_rank, p.eps);
  linear_ref(w.wq_b, qr, T, q, w.wq_b.quantized());
  head_rms_ref(q, T, p.n_heads, p.head_dim, p.eps);
  rope_ref(w.inv_freq, p.rope_dim, q, T, p.n_heads, p.head_dim, pos, false);
}

}  // namespace dsv4::kernels
