// Reference Level-A sparse attention: one row, one head at a time, the block
// recurrence of model.md §0.4.6 written one fp32 operation per line.
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
  std::vector<float> zero(Dh, 0.0f), key(Dh), s(kAttnBlock), pj(kAttnBlock), acc(Dh);
  std::vector<const bf16*> kptr(kAttnBlock);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* entries = list.entries + t * list.stride;
    const int64_t n_list = list.len[t];
    const int64_t n = n_list + (list.n_dense ? list.n_dense[t] : 0);
    for (int h = 0; h < H; ++h) {
      const bf16* qh = q + (t * H + h) * Dh;
      float m = kNegInf, S = 0.0f;
      for (int d = 0; d < Dh; ++d) acc[d] = 0.0f;
      for (int64_t b0 = 0; b0 < n; b0 += kAttnBlock) {
        const int nb = static_cast<int>(n - b0 < kAttnBlock ? n - b0 : kAttnBlock);
        // Logits of the block.
        for (int j = 0; j < nb; ++j) {
          const int64_t pos_in_list = b0 + j;
          const int32_t e = pos_in_list < n_list ? entries[pos_in_list] : static_cast<int32_t>(pos_in_list - n_list);
          if (e < 0) {
            kptr[j] = nullptr;
            s[j] = kNegInf;
            continue;
          }
          kptr[j] = pos_in_list < list.n_win[t] ? keys.win[t].row(e)
                                                : keys.cmp[t].row(e);
          float dot = 0.0f;
          for (int d = 0; d < Dh; ++d) dot += qh[d].to_float() * kptr[j][d].to_float();
          s[j] = dot * scale;
        }
        float bmax = kNegInf;
        for (int j = 0; j < nb; ++j) bmax = s[j] > bmax ? s[j] : bmax;
        const float m_new = m > bmax ? m : bmax;
        if (m_new == kNegInf) continue;  // no real entry so far: state unchanged
        const float alpha = m == kNegInf ? 0.0f : std::exp(m - m_new);
        float psum = 0.0f;
        for (int j = 0; j < nb; ++j) {
          pj[j] = s[j] == kNegInf ? 0.0f : std::exp(s[j] - m_new);
          psum += pj[j];
        }
        const float s_scaled = S * alpha;
        S = s_scaled + psum;
        for (int d = 0; d < Dh; ++d) acc[d] = acc[d] * alpha;
        for (int j = 0; j < nb; ++j) {
          const float pb = round_bf16(pj[j]);
          for (int d = 0; d < Dh; ++d) key[d] = kptr[j] ? kptr[j][d].to_float() : zero[d];
          for (int d = 0; d < Dh; ++d) {
            const float prod = pb * key[d];
            acc[d] = acc[d] + prod;
          }
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
