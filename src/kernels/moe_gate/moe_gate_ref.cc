// Reference router: plain loops straight from model.md §0.4.5 A11; top-K by repeated argmax
// (strict >, scanning ascending ids, so exact ties go to the lower id).
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/moe_gate/moe_gate.h"

namespace dsv4::kernels {
namespace {

float gate_weight_at(const LinearWeight& w, int64_t e, int64_t i) {
  if (w.format == WeightFormat::kBF16)
    return static_cast<const bf16*>(w.data)[e * w.in + i].to_float();
  return static_cast<const float*>(w.data)[e * w.in + i];
}

float softplus(float z) {
  if (z > 20.0f) return z;
  const float e = std::exp(z);
  return std::log1p(e);
}

int64_t table_at(const Tid2Eid& t, int64_t token, int64_t K, int64_t k) {
  if (t.is_int64) return static_cast<const int64_t*>(t.data)[token * K + k];
  return static_cast<const int32_t*>(t.data)[token * K + k];
}

}  // namespace

void moe_gate_scores_ref(const bf16* f, const MoeGateWeights& w, const MoeGateParams& p, int64_t T,
                         float* scores) {
  const int64_t D = p.hidden, E = p.n_routed_experts;
  DSV4_CHECK(w.weight.out == E && w.weight.in == D, "gate.weight [{}, {}] for E={} D={}",
             w.weight.out, w.weight.in, E, D);
  DSV4_CHECK(w.weight.format == WeightFormat::kBF16 || w.weight.format == WeightFormat::kF32,
             "gate.weight must be BF16 or F32");
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      float lane[8] = {};  // the engine's order: element i in lane i % 8, lanes by a fixed tree
      for (int64_t i = 0; i < D; ++i) lane[i % 8] += gate_weight_at(w.weight, e, i) * f[t * D + i].to_float();
      const float l = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
      scores[t * E + e] = std::sqrt(softplus(l));
    }
  }
}

void moe_gate_route_ref(const float* scores, const MoeGateWeights& w, const int32_t* tokens,
                        const MoeGateParams& p, int64_t T, int32_t* ids, float* weights) {
  const int64_t E = p.n_routed_experts, K = p.num_experts_per_tok;
  const bool hash = w.tid2eid.data != nullptr;
  DSV4_CHECK(hash != (w.bias != nullptr), "exactly one of gate.bias and gate.tid2eid");
  DSV4_CHECK(K >= 1 && K <= E && K <= kMoeMaxTopK, "num_experts_per_tok {} (E={})", K, E);
  for (int64_t t = 0; t < T; ++t) {
    const float* s = scores + t * E;
    int32_t* sel = ids + t * K;
    if (hash) {
      const int64_t tok = tokens[t];
      DSV4_CHECK(tok >= 0 && tok < w.tid2eid.vocab, "token {} outside tid2eid [0, {})", tok,
                 w.tid2eid.vocab);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = table_at(w.tid2eid, tok, K, k);
        DSV4_CHECK(e >= 0 && e < E, "tid2eid[{}][{}] = {} outside [0, {})", tok, k, e, E);
        sel[k] = static_cast<int32_t>(e);
      }
    } else {
      std::vector<float> key(E);
      for (int64_t e = 0; e < E; ++e) key[e] = s[e] + w.bias[e];
      std::vector<bool> taken(E, false);
      for (int64_t k = 0; k < K; ++k) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; ++e)
          if (!taken[e] && (best < 0 || key[e] > key[best])) best = e;
        taken[best] = true;
        sel[k] = static_cast<int32_t>(best);
      }
    }
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) sum += s[sel[k]];
    for (int64_t k = 0; k < K; ++k) {
      const float wk = s[sel[k]] / sum;
      weights[t * K + k] = wk * p.routed_scaling_factor;
    }
  }
}

}  // namespace dsv4::kernels
