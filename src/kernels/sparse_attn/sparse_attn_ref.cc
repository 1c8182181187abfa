// Reference Level-A sparse attention: one row, one head at a time, the block
// recurrence of model.md §0.4.6 written one fp32 operation per line, in the engine's
// summation order (sparse_attn.h).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/sparse_attn/sparse_attn.h"

namespace dsv4::kernels {

float attn_softmax_scale(int head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

void sparse_attn_ref(const SparseAttnParams& p, const bf16* q, int64_t T, const AttnList& list,
                     const AttnKeys& keys, const float* sink, bf16* o) {
  const int H = p.n_heads, Dh = p.head_dim;
  const float scale = attn_softmax_scale(Dh);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  std::vector<float> qo(Dh), s(kAttnBlock), pj(kAttnBlock), acc(Dh), u(Dh);
  std::vector<std::vector<float>> key(kAttnBlock, std::vector<float>(Dh));  // the block's real keys, operands
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* entries = list.entries + t * list.stride;
    const int64_t n_list = list.len[t];
    const int64_t n = n_list + (list.n_dense ? list.n_dense[t] : 0);
    for (int h = 0; h < H; ++h) {
      const bf16* qh = q + (t * H + h) * Dh;
      for (int d = 0; d < Dh; ++d) qo[d] = attn_operand(qh[d].to_float());
      float m = kNegInf, S = 0.0f;
      for (int d = 0; d < Dh; ++d) acc[d] = 0.0f;
      for (int64_t b0 = 0; b0 < n; b0 += kAttnBlock) {
        const int64_t b1 = b0 + kAttnBlock < n ? b0 + kAttnBlock : n;
        // The block's real entries c = 0 .. nr − 1, in list order, and their logits.
        int nr = 0;
        for (int64_t j = b0; j < b1; ++j) {
          const int32_t e = j < n_list ? entries[j] : static_cast<int32_t>(j - n_list);
          if (e < 0) continue;
          const bf16* k = j < list.n_win[t] ? keys.win[t].row(e) : keys.cmp[t].row(e);
          for (int d = 0; d < Dh; ++d) key[nr][d] = attn_operand(k[d].to_float());
          // Dims in pairs (2i, 2i + 1), the odd one first: d = 1, 0, 3, 2, ... (one sum a
          // statement: GCC 12.2 at -O2 miscompiles the same chain written as two sums an
          // iteration, odd then even: it adds the even product twice).
          float dot = 0.0f;
          for (int e = 0; e < Dh; ++e) {
            const int d = e ^ 1;
            dot = dot + qo[d] * key[nr][d];
          }
          s[nr] = dot * scale;
          ++nr;
        }
        if (nr == 0) continue;  // no real entry: state unchanged
        float bmax = kNegInf;
        for (int c = 0; c < nr; ++c) bmax = s[c] > bmax ? s[c] : bmax;
        const float m_new = m > bmax ? m : bmax;
        const float alpha = m == kNegInf ? 0.0f : attn_exp(m - m_new);
        float lanes[16] = {};
        for (int c = 0; c < nr; ++c) {
          pj[c] = attn_exp(s[c] - m_new);
          lanes[c % 16] = lanes[c % 16] + pj[c];
        }
        const float psum = attn_sum16(lanes);
        const float s_scaled = S * alpha;
        S = s_scaled + psum;
        // u = Σ bf16(p_c)·K_c from zero, the entries in pairs (2i, 2i + 1), the odd one first.
        for (int d = 0; d < Dh; ++d) u[d] = 0.0f;
        for (int k = 0; k < nr; ++k) {
          const int c = (k ^ 1) < nr ? k ^ 1 : k;
          const float pb = attn_operand(round_bf16(pj[c]));
          for (int d = 0; d < Dh; ++d) u[d] = u[d] + pb * key[c][d];
        }
        for (int d = 0; d < Dh; ++d) {
          const float scaled = acc[d] * alpha;
          acc[d] = scaled + u[d];
        }
        m = m_new;
      }
      const float sink_term = std::exp(sink[h] - m);
      S = S + sink_term;
      bf16* oh = o + (t * H + h) * Dh;
      for (int d = 0; d < Dh; ++d) oh[d] = bf16::from_float(acc[d] / S);
    }
  }
}

}  // namespace dsv4::kernels
