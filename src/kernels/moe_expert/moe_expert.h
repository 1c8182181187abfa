// SwiGLU experts with clamp (model.md §9.2; Level A §0.4.5 A12), routed and shared, and the
// grouped engine that runs every expert of a MoE layer on the rows routed to it.
// Per row f [D] bf16, expert weights w1, w3 [F, D], w2 [D, F] (FP4, FP8 or BF16 as stored):
//   g = fp32(Linear(w1, f)),  u = fp32(Linear(w3, f))   bf16 outputs (actq on f if quantized)
//   u = clamp(u, −L, L);  g = min(g, L)                 L = fp32(swiglu_limit); L ≤ 0: no clamps
//   h = f32(silu(g) · u)                                silu(g) = f32(g / f32(1 + exp(−g)))
//   h = f32(w_k · h)                                    routed only: route weight before w2
//   out = Linear(w2, bf16(h))                           actq on bf16(h) if w2 is quantized; bf16
//
// Engine layout (caller scratch sized for `capacity` rows, no allocation per call):
//   dispatch: the routes (t, k) whose expert lies in the local range [expert_first,
//     expert_first + n_local) become entries, grouped by expert (ascending), rows ascending inside
//     an expert; a hash row that repeats an id gets one entry (model.md §9.1), its later slots
//     point at the same entry. expert_begin[i] .. expert_begin[i+1] are local expert i's entries,
//     entry_slot[r] = t·K + k of entry r, slot_entry[t·K + k] = its entry (−1: not local).
//   activation rows: [0, n_entries) the routed entries, [n_entries, n_entries + shared_rows) the
//     shared expert on rows 0..shared_rows−1; x [R, D] holds the expert inputs and then the outputs, g and u [R, F]
//     the up projections, then bf16(h) and the w2 input. R ≤ capacity·(K + 1).
// Phases, each its own ThreadPool::run except the first (serial, O(T·K + n_local)):
//   moe_dispatch_build  ids → dispatch
//   moe_experts_in      x[r] = actq(f[row of r]) (or a copy for BF16 weights); rows split
//                       (or moe_experts_gather from a per-row actq: copies, some rows in place)
//   moe_experts_up      g, u = w1·x, w3·x per expert over its entries (every expert's output
//                       columns split over threads: each weight is read once per step)
//   moe_experts_act     clamp, silu, route weight, bf16, actq of the w2 input; rows split
//   moe_experts_down    x = w2·(w2 input) per expert
// Then moe_combine(work.x, work.slot_entry, ids, shared_out(work), ...) adds them up (A13).
// Every row's result is the linear engine's row result (independent of the other rows in the
// expert's group) followed by per-row element-wise steps: bit-identical whatever T and nthreads.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

struct MoeExpertParams {
  int64_t hidden = 0;                 // D
  int64_t moe_intermediate_size = 0;  // F
  float swiglu_limit = 10.0f;         // L
};

struct ExpertWeights {
  LinearWeight w1, w3;  // [F, D]
  LinearWeight w2;      // [D, F]
};

// The routed experts held here: global ids [expert_first, expert_first + n_local).
struct MoeDispatchParams {
  int64_t num_experts_per_tok = 0;  // K
  int64_t expert_first = 0;
  int64_t n_local = 0;
  int64_t capacity = 0;  // max T
};

// --- reference (single-threaded, obviously correct; allocates) ---
// One expert on rows x [T, D] → out [T, D]; row_weight [T] (routed) or nullptr (shared expert).
void moe_expert_ref(const ExpertWeights& w, const MoeExpertParams& p, const bf16* x, int64_t T,
                    const float* row_weight, bf16* out);

// --- engine ---
struct MoeWork {
  int32_t* expert_begin = nullptr;  // [n_local + 1]
  int32_t* entry_slot = nullptr;    // [capacity·K]
  int32_t* slot_entry = nullptr;    // [capacity·K]
  bf16* x = nullptr;                // [capacity·(K+1), D]
  bf16* g = nullptr;                // [capacity·(K+1), F]
  bf16* u = nullptr;                // [capacity·(K+1), F]
  int64_t T = 0;                    // rows of the last dispatch
  int64_t shared_rows = 0;          // leading rows that also get the shared expert (≤ T)
  int64_t n_entries = 0;            // routed entries of the last dispatch
  // Inputs read in place (set by moe_experts_gather, cleared by moe_dispatch_build): the shared
  // expert's rows and every expert with one entry read their row of in_q (quantized w1) or in_f
  // (BF16 w1) instead of a copy in x.
  const bf16* in_q = nullptr;       // [T, D]
  const bf16* in_f = nullptr;       // [T, D]
};

int64_t moe_expert_scratch_bytes(const MoeExpertParams& p, const MoeDispatchParams& d);
// Points a MoeWork into buf (bytes ≥ moe_expert_scratch_bytes, 64-byte aligned).
MoeWork moe_expert_scratch_carve(const MoeExpertParams& p, const MoeDispatchParams& d, void* buf,
                                 int64_t bytes);

// ids [T, K] (router output), T ≤ capacity. Serial. The shared expert runs on rows
// [0, shared_rows) (−1: all T; expert parallelism appends rows of other ranks, which get only
// their routed experts here).
void moe_dispatch_build(const int32_t* ids, int64_t T, const MoeDispatchParams& d, MoeWork* w,
                        int64_t shared_rows = -1);

// experts [n_local] (local expert i = global id expert_first + i); f [T, D] with T = w.T.
void moe_experts_in(const bf16* f, const ExpertWeights* experts, const ExpertWeights& shared,
                    const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w, int tid,
                    int nthreads);
// moe_experts_in's result from f and fq = actq_rows(f) (per token row, e.g. in the run that
// normed f), on the calling thread so that no run is needed: the shared expert and the experts
// with one entry read f / fq in place (w->in_f, w->in_q; f and fq stay unchanged until
// moe_experts_up), the rows of the others are copied into x, O(entries · D).
void moe_experts_gather(const bf16* f, const bf16* fq, const ExpertWeights* experts, const ExpertWeights& shared,
                        const MoeExpertParams& p, const MoeDispatchParams& d, MoeWork* w);
void moe_experts_up(const ExpertWeights* experts, const ExpertWeights& shared,
                    const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w, int tid,
                    int nthreads);
// route_weights [T, K] (router output, routed_scaling_factor included).
void moe_experts_act(const float* route_weights, const ExpertWeights* experts,
                     const ExpertWeights& shared, const MoeExpertParams& p,
                     const MoeDispatchParams& d, const MoeWork& w, int tid, int nthreads);
// moe_experts_up then moe_experts_act on intermediate columns [f0, f1) of every entry, on the
// calling thread (f0, f1 multiples of 128 or f1 = F: whole actq blocks): the same bits, one run
// for both when each thread takes its own columns.
void moe_experts_up_act_cols(const float* route_weights, const ExpertWeights* experts, const ExpertWeights& shared,
                             const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w, int64_t f0,
                             int64_t f1);
void moe_experts_down(const ExpertWeights* experts, const ExpertWeights& shared,
                      const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w,
                      int tid, int nthreads);
// moe_experts_down on output columns [o0, o1) of every entry, on the calling thread: a caller
// that splits the hidden columns itself can combine those columns in the same run
// (moe_combine_cols).
void moe_experts_down_cols(const ExpertWeights* experts, const ExpertWeights& shared, const MoeExpertParams& p,
                           const MoeDispatchParams& d, const MoeWork& w, int64_t o0, int64_t o1);

// Results after moe_experts_down: the routed output of slot (t, k) is row slot_entry[t·K + k] of
// w.x; the shared expert's output of row t is row t of shared_out(w).
inline const bf16* shared_out(const MoeWork& w, const MoeExpertParams& p) {
  return w.x + w.n_entries * p.hidden;
}

}  // namespace dsv4::kernels
