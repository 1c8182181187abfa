// Reference lightning indexer: straight from model.md §8 / §0.4.5 A8, one head
// and one entry at a time.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "kernels/hadamard/hadamard.h"
#include "kernels/indexer/indexer.h"
#include "kernels/linear/linear.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {

float indexer_weight_scale(const IndexerParams& p) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)) /
                            std::sqrt(static_cast<double>(p.n_heads)));
}

void indexer_queries_ref(const IndexerParams& p, const LinearWeight& wq_b, const bf16* qr,
                         int64_t T, const float* inv_freq, const int64_t* pos, bf16* qi) {
  const int Hi = p.n_heads, Di = p.head_dim;
  DSV4_CHECK(wq_b.out == static_cast<int64_t>(Hi) * Di, "indexer.wq_b out {}", wq_b.out);
  linear_ref(wq_b, qr, T, qi, wq_b.quantized());
  rope_ref(inv_freq, p.rope_dim, qi, T, Hi, Di, pos, /*inverse=*/false);
  hadamard_ref(qi, qi, T, Hi, Di);
  for (int64_t v = 0; v < T * Hi; ++v) fp4sim_row(qi + v * Di, Di);
}

void indexer_weights_ref(const IndexerParams& p, const LinearWeight& weights_proj, const bf16* a,
                         int64_t T, bf16* wgt) {
  DSV4_CHECK(weights_proj.out == p.n_heads && !weights_proj.quantized(),
             "indexer.weights_proj must be a BF16/F32 [{}, D] weight", p.n_heads);
  linear_ref(weights_proj, a, T, wgt, /*apply_actq=*/false);
  const float scale = indexer_weight_scale(p);
  for (int64_t i = 0; i < T * p.n_heads; ++i) wgt[i] = bf16::from_float(wgt[i].to_float() * scale);
}

void indexer_scores_ref(const IndexerParams& p, const bf16* qi, const bf16* wgt,
                        const IndexEntries& entries, int64_t T, bf16* scores,
                        int64_t score_stride) {
  const int Hi = p.n_heads, Di = p.head_dim;
  for (int64_t t = 0; t < T; ++t) {
    DSV4_CHECK(entries.count[t] <= score_stride, "row {}: {} entries", t, entries.count[t]);
    for (int64_t i = 0; i < entries.count[t]; ++i) {
      const bf16* J = entries.rows[t].row(i);
      float score = 0.0f;
      for (int h = 0; h < Hi; ++h) {
        const bf16* q = qi + (t * Hi + h) * Di;
        float dot = 0.0f;
        for (int k = 0; k < Di; ++k) dot += q[k].to_float() * J[k].to_float();
        const float d = round_bf16(dot);
        const float relu = d > 0.0f ? d : 0.0f;
        const float th = round_bf16(relu * wgt[t * Hi + h].to_float());
        score += th;
      }
      scores[t * score_stride + i] = bf16::from_float(score);
    }
  }
}

void indexer_topk_ref(const IndexerParams& p, const bf16* scores, int64_t score_stride,
                      const int32_t* count, int64_t T, int32_t* picks, int32_t* n_picks) {
  for (int64_t t = 0; t < T; ++t) {
    const bf16* s = scores + t * score_stride;
    std::vector<int32_t> order(count[t]);
    std::iota(order.begin(), order.end(), 0);
    // Stable: equal scores keep ascending entry index.
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return indexer_score_key(s[a]) > indexer_score_key(s[b]);
    });
    const int32_t k = std::min<int32_t>(p.topk, count[t]);
    for (int32_t j = 0; j < p.topk; ++j) picks[t * p.topk + j] = j < k ? order[j] : -1;
    n_picks[t] = k;
  }
}

}  // namespace dsv4::kernels
