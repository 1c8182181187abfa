// Sampling (model.md §10.2): one token per logits row l [V] fp32, a pure function of the row,
// the request's parameters and (seed, position q, draft slot j) — never of the batch.
//   greedy (T = 0): argmax_v l_v, exact ties → lowest id.
//   T > 0: T = max(T, fp32(1e-5)); x_v = f32(l_v / T) (true division);
//          p_v = softmax: μ = max x; e_v = exp(f32(x_v − μ)); S = Σ₃₂ e_v; p_v = f32(e_v / S)
//            S sums in a fixed order for a given V: e_v into fp32 lane v % 8 (ascending v), then
//            the lanes as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7));
//          order v_1..v_V by p descending, equal p → lower id first; c_k = f32(c_{k−1} + p_{v_k});
//          K_k = min(top_k, V) (top_k = 0: V);
//          K' = K_k if min_p = 0, else the largest k ≤ K_k with p_{v_j} ≥ f32(min_p · p_{v_1})
//            for all j ≤ k (≥ 1);
//          K = K' if top_p = 1, else the smallest k ≤ K' with c_k ≥ τ (K' if none), where
//            τ = top_p if K' = V (model.md's rule), f32(top_p · c_{K'}) if K' < V;
//          θ = f32(U(seed, q, j) · c_K); token = v_k for the smallest k ≤ K with c_k > θ.
//   U(seed, q, j) = (mix(mix(seed) XOR (q·2^8 + j)) >> 40) · 2^−24, mix = SplitMix64's finalizer.
// An id with p_v = 0 is never drawn. Should no c_k exceed θ (only with non-finite logits), the
// token is v_1.
//
// Engine: rows split over threads; each thread sorts in its own scratch slice
// (sample_scratch_bytes per thread); the order is an LSD radix sort of the keys
// (~bits(p_v) << 32 | v), stable, so it equals the order above.
#pragma once

#include <cstdint>

#include "base/sampling_params.h"
#include "base/status.h"

namespace dsv4::kernels {

constexpr float kMinTemperature = 1e-5f;  // fp32(1e-5): the demo's floor for a positive T

// Per-request parameters: SamplingParams (base/sampling_params.h), fixed at admission by
// validate_sampling_params. It rejects temperature < 0, non-finite temperature, top_p ≤ 0,
// top_p > 1, top_k < 0, min_p outside [0, 1] and NaNs, naming the field.
Status validate_sampling_params(const SamplingParams& p);

// One logits row to sample: the request's parameters, the absolute position q of the token being
// sampled (q < 2^56) and the draft slot j (0 = target, 1 = drafter, 2 = acceptance test,
// 3 = residual draw; j < 256).
struct SampleRow {
  SamplingParams params;
  int64_t position = 0;
  int draft_slot = 0;
};

uint64_t sample_mix(uint64_t z);
// U(seed, q, j) in [0, 1 − 2^−24], a multiple of 2^−24.
float sample_uniform(uint64_t seed, int64_t q, int j);

// --- reference (single-threaded, obviously correct; allocates) ---
// logits [T, V], tokens [T].
void sample_ref(const float* logits, int64_t T, int64_t V, const SampleRow* rows, int32_t* tokens);

// --- engine (inside ThreadPool::run; no allocation) ---
// Scratch bytes for `nthreads` workers on rows of V logits.
int64_t sample_scratch_bytes(int64_t V, int nthreads);
// scratch: sample_scratch_bytes(V, n) bytes (8-byte aligned) with n ≥ nthreads.
void sample(const float* logits, int64_t T, int64_t V, const SampleRow* rows, int32_t* tokens,
            void* scratch, int64_t scratch_bytes, int tid, int nthreads);
// The same over rows at any addresses: row t is logits[t] [V].
void sample(const float* const* logits, int64_t T, int64_t V, const SampleRow* rows, int32_t* tokens,
            void* scratch, int64_t scratch_bytes, int tid, int nthreads);

// --- speculative sampling (dspark.md §4.3, mode rejection) ---
// π(l): model.md §10.2 steps 2-5 for T > 0 with the top_k / min_p / top_p cut above:
// π[v] = f32(p_v / c_K) for the K kept ids, 0 for the others.
// Residual draw: r[v] = max(0, f32(πt[v] − πd[v])), ids ordered by r descending (equal r →
// lower id), running fp32 sums c'_1 … c'_V, Z = c'_V; Z > 0: the first id with
// c' > f32(u · Z); Z = 0 (rounding only): −1.
// One round of ℓ ≥ 1 drafts at positions q_1 = q1 … q_ℓ = q1 + ℓ − 1 (T > 0):
//   for k = 1 .. ℓ: accept d_k iff U(seed, q_k, 2) · πd_k[d_k] < πt_k[d_k] (exact in fp64), with
//   πt_k = π(target[k−1]), πd_k = π(draft[k−1]); at the first rejection the token for q_k is the
//   residual draw with U(seed, q_k, 3) (Z = 0: the §10.2 draw from target[k−1], slot 3); all
//   accepted: the §10.2 draw from target[ℓ] at position q1 + ℓ, slot 0.
// tokens[0 .. n_acc] = d_1 … d_{n_acc}, b; returns n_acc.
struct RejectionRound {
  const float* const* target = nullptr;  // ℓ + 1 verify rows [V]
  const float* const* draft = nullptr;   // ℓ drafter rows λ_0 … λ_{ℓ−1} [V]
  const int32_t* drafts = nullptr;       // d_1 … d_ℓ
  int32_t ell = 0;
  SamplingParams params;                 // temperature > 0
  int64_t q1 = 0;
};
void sample_distribution_ref(const float* l, int64_t V, const SamplingParams& sp, float* pi);
int32_t residual_draw_ref(const float* pt, const float* pd, int64_t V, float u);
int32_t rejection_verify_ref(const RejectionRound& r, int64_t V, int32_t* tokens);

// Engine versions, one row / round per call in the caller's thread (no allocation).
// scratch: rejection_scratch_bytes(V) bytes, 8-byte aligned (sample_distribution and
// residual_draw need only sample_scratch_bytes(V, 1)).
int64_t rejection_scratch_bytes(int64_t V);
void sample_distribution(const float* l, int64_t V, const SamplingParams& sp, float* pi, void* scratch,
                         int64_t scratch_bytes);
int32_t residual_draw(const float* pt, const float* pd, int64_t V, float u, void* scratch, int64_t scratch_bytes);
int32_t rejection_verify(const RejectionRound& r, int64_t V, int32_t* tokens, void* scratch, int64_t scratch_bytes);

}  // namespace dsv4::kernels
