// Engine router. Gate dots in the lane order of kernels/lane_dot (8 fp32 lanes, a fixed tree),
// kRowTile rows per pass over a gate row (BF16: over kLaneDotMaxWeights gate rows) with the
// same per-row arithmetic, so a row's scores depend only on D.
#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/math.h"
#include "kernels/lane_dot/lane_dot.h"
#include "kernels/moe_gate/moe_gate.h"

namespace dsv4::kernels {
namespace {

constexpr int kRowTile = kLaneDotMaxRows;

inline float sqrt_softplus(float z) {
  if (z > 20.0f) return std::sqrt(z);
  const float e = std::exp(z);
  return std::sqrt(std::log1p(e));
}

template <class W>
void scores_for(const W* weight, const bf16* f, int64_t D, int64_t E, int64_t T, Range experts,
                float* scores) {
  for (int64_t e = experts.begin; e < experts.end; ++e) {
    const W* w = weight + e * D;
    int64_t t = 0;
    for (; t + kRowTile <= T; t += kRowTile) {
      const bf16* x[kRowTile];
      float l[kRowTile];
      for (int q = 0; q < kRowTile; ++q) x[q] = f + (t + q) * D;
      lane_dot_rows(w, x, kRowTile, D, l);
      for (int q = 0; q < kRowTile; ++q) scores[(t + q) * E + e] = sqrt_softplus(l[q]);
    }
    for (; t < T; ++t) {
      const bf16* x[1] = {f + t * D};
      float l;
      lane_dot_rows(w, x, 1, D, &l);
      scores[t * E + e] = sqrt_softplus(l);
    }
  }
}

// BF16 gate: kLaneDotMaxWeights experts x kRowTile rows per lane_dot_block pass.
void scores_bf16(const bf16* weight, const bf16* f, int64_t D, int64_t E, int64_t T, Range experts, float* scores) {
  for (int64_t e0 = experts.begin; e0 < experts.end; e0 += kLaneDotMaxWeights) {
    const int n_w = static_cast<int>(std::min<int64_t>(kLaneDotMaxWeights, experts.end - e0));
    const bf16* w[kLaneDotMaxWeights];
    for (int i = 0; i < n_w; ++i) w[i] = weight + (e0 + i) * D;
    for (int64_t t = 0; t < T; t += kRowTile) {
      const int rows = static_cast<int>(std::min<int64_t>(kRowTile, T - t));
      const bf16* x[kRowTile];
      float l[kLaneDotMaxWeights * kRowTile];
      for (int q = 0; q < rows; ++q) x[q] = f + (t + q) * D;
      lane_dot_block(w, n_w, x, rows, D, l);
      for (int i = 0; i < n_w; ++i)
        for (int q = 0; q < rows; ++q) scores[(t + q) * E + e0 + i] = sqrt_softplus(l[i * rows + q]);
    }
  }
}

}  // namespace

void moe_topk(const float* scores, const float* bias, int64_t E, int64_t K, int32_t* ids) {
  DSV4_CHECK(K >= 1 && K <= E && K <= kMoeMaxTopK, "num_experts_per_tok {} (E={})", K, E);
  // Sorted list (key descending, equal keys in ascending id: a later id is placed after them).
  float keys[kMoeMaxTopK];
  int64_t n = 0;
  for (int64_t e = 0; e < E; ++e) {
    const float key = bias ? scores[e] + bias[e] : scores[e];
    if (n == K && !(key > keys[K - 1])) continue;
    int64_t pos = n < K ? n++ : K - 1;
    for (; pos > 0 && key > keys[pos - 1]; --pos) {
      keys[pos] = keys[pos - 1];
      ids[pos] = ids[pos - 1];
    }
    keys[pos] = key;
    ids[pos] = static_cast<int32_t>(e);
  }
}

void moe_gate_scores(const bf16* f, const MoeGateWeights& w, const MoeGateParams& p, int64_t T,
                     float* scores, int tid, int nthreads) {
  const int64_t D = p.hidden, E = p.n_routed_experts;
  DSV4_CHECK(w.weight.out == E && w.weight.in == D, "gate.weight [{}, {}] for E={} D={}",
             w.weight.out, w.weight.in, E, D);
  const Range r = split_range(E, tid, nthreads);
  if (w.weight.format == WeightFormat::kBF16)
    scores_bf16(static_cast<const bf16*>(w.weight.data), f, D, E, T, r, scores);
  else if (w.weight.format == WeightFormat::kF32)
    scores_for(static_cast<const float*>(w.weight.data), f, D, E, T, r, scores);
  else
    DSV4_CHECK(false, "gate.weight must be BF16 or F32");
}

void moe_gate_route(const float* scores, const MoeGateWeights& w, const int32_t* tokens,
                    const MoeGateParams& p, int64_t T, int32_t* ids, float* weights, int tid,
                    int nthreads) {
  const int64_t E = p.n_routed_experts, K = p.num_experts_per_tok;
  const bool hash = w.tid2eid.data != nullptr;
  DSV4_CHECK(hash != (w.bias != nullptr), "exactly one of gate.bias and gate.tid2eid");
  DSV4_CHECK(K >= 1 && K <= E && K <= kMoeMaxTopK, "num_experts_per_tok {} (E={})", K, E);
  const Range r = split_range(T, tid, nthreads);
  for (int64_t t = r.begin; t < r.end; ++t) {
    const float* s = scores + t * E;
    int32_t* sel = ids + t * K;
    if (hash) {
      const int64_t tok = tokens[t];
      DSV4_CHECK(tok >= 0 && tok < w.tid2eid.vocab, "token {} outside tid2eid [0, {})", tok,
                 w.tid2eid.vocab);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = w.tid2eid.is_int64
                              ? static_cast<const int64_t*>(w.tid2eid.data)[tok * K + k]
                              : static_cast<const int32_t*>(w.tid2eid.data)[tok * K + k];
        DSV4_CHECK(e >= 0 && e < E, "tid2eid[{}][{}] = {} outside [0, {})", tok, k, e, E);
        sel[k] = static_cast<int32_t>(e);
      }
    } else {
      moe_topk(s, w.bias, E, K, sel);
    }
    moe_route_weights(s, sel, p, weights + t * K);
  }
}

void moe_route_weights(const float* scores, const int32_t* ids, const MoeGateParams& p, float* weights) {
  const int64_t K = p.num_experts_per_tok;
  float sum = 0.0f;
  for (int64_t k = 0; k < K; ++k) sum += scores[ids[k]];
  for (int64_t k = 0; k < K; ++k) weights[k] = scores[ids[k]] / sum * p.routed_scaling_factor;
}

}  // namespace dsv4::kernels
