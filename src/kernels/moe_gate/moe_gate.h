// MoE router (model.md §9.1; Level A §0.4.5 A11), per row t of f [T, D] bf16:
//   l_e   = Σ₃₂(gate.weight_e · fp32(f_t))       gate.weight [E, D] BF16 (or F32), read as fp32
//   s_e   = sqrt(softplus(l_e))                  softplus(z) = z if z > 20, else log1p(exp(z))
//   score layers: sel = the K experts with the largest key_e = f32(s_e + bias_e), in descending
//                 key order, exact ties → lower expert id (bias only for the selection)
//   hash layers:  sel = tid2eid[tok_t]           table [V, K] int32 or int64, in table order
//   w_k   = f32(s_{sel_k} / Σ₃₂_k' s_{sel_k'})    Σ over the K slots in slot order
//   w_k   = f32(w_k · fp32(routed_scaling_factor))
// A hash row that repeats an id keeps both slots (normalized over all K); the expert is
// applied once (moe_expert dispatch, moe_combine).
// Outputs: scores [T, E] fp32 (s), ids [T, K] int32, weights [T, K] fp32.
//
// Engine: two phases, each its own ThreadPool::run:
//   moe_gate_scores  s for all rows, experts split over threads (each gate row read once for
//                    all T rows); each dot sums in a fixed order depending only on D;
//   moe_gate_route   selection and weights per row (rows split over threads).
#pragma once

#include <cstdint>

#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

constexpr int kMoeMaxTopK = 32;  // bound on num_experts_per_tok (stack arrays)

struct MoeGateParams {
  int64_t hidden = 0;                  // D
  int64_t n_routed_experts = 0;        // E
  int64_t num_experts_per_tok = 0;     // K
  float routed_scaling_factor = 1.5f;  // fp32(routed_scaling_factor)
};

// gate.tid2eid [vocab, K]: int64 as stored, or int32 (a loader's narrowed copy).
struct Tid2Eid {
  const void* data = nullptr;
  bool is_int64 = true;
  int64_t vocab = 0;
};

// Score layer: bias != nullptr, tid2eid.data == nullptr; hash layer: the reverse.
struct MoeGateWeights {
  LinearWeight weight;          // [E, D], kBF16 or kF32
  const float* bias = nullptr;  // [E]
  Tid2Eid tid2eid;
};

// Top-K of key_e = f32(scores_e + bias_e) (bias == nullptr: key_e = scores_e) over E experts:
// ids[0..K) in descending key order, exact ties → lower id. Shared by the engine route.
void moe_topk(const float* scores, const float* bias, int64_t E, int64_t K, int32_t* ids);

// --- reference (single-threaded, obviously correct) ---
void moe_gate_scores_ref(const bf16* f, const MoeGateWeights& w, const MoeGateParams& p, int64_t T,
                         float* scores);
void moe_gate_route_ref(const float* scores, const MoeGateWeights& w, const int32_t* tokens,
                        const MoeGateParams& p, int64_t T, int32_t* ids, float* weights);

// --- engine (inside ThreadPool::run; no allocation) ---
void moe_gate_scores(const bf16* f, const MoeGateWeights& w, const MoeGateParams& p, int64_t T,
                     float* scores, int tid, int nthreads);
// tokens [T] (hash layers only; may be nullptr for score layers).
void moe_gate_route(const float* scores, const MoeGateWeights& w, const int32_t* tokens,
                    const MoeGateParams& p, int64_t T, int32_t* ids, float* weights, int tid,
                    int nthreads);
// The route weights of one row for given ids (the router's, or forced by decision replay):
// scores [E] of the row, ids [K] -> weights [K], the w_k formula above.
void moe_route_weights(const float* scores, const int32_t* ids, const MoeGateParams& p, float* weights);

}  // namespace dsv4::kernels
