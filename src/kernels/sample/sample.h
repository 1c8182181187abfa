// Sampling (model.md §10.2): one token per logits row l [V] fp32, a pure function of the row,
// the request's parameters and (seed, position q, draft slot j) — never of the batch.
//   greedy (T = 0): argmax_v l_v, exact ties → lowest id.
//   T > 0: T = max(T, fp32(1e-5)); x_v = f32(l_v / T) (true division);
//          p_v = softmax: μ = max x; e_v = exp(f32(x_v − μ)); S = Σ₃₂ e_v; p_v = f32(e_v / S)
//            S sums in a fixed order for a given V: e_v into fp32 lane v % 8 (ascending v), then
//            the lanes as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7));
//          order v_1..v_V by p descending, equal p → lower id first; c_k = f32(c_{k−1} + p_{v_k});
//          K = V if top_p = 1, else the smallest k with c_k ≥ top_p (V if none);
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

#include "base/status.h"

namespace dsv4::kernels {

constexpr float kMinTemperature = 1e-5f;  // fp32(1e-5): the demo's floor for a positive T

// Per-request parameters, fixed at admission (validate_sampling_params).
struct SamplingParams {
  float temperature = 0.0f;  // T ≥ 0, 0 = greedy
  float top_p = 1.0f;        // 0 < top_p ≤ 1
  uint64_t seed = 0;
};

// Rejects temperature < 0, non-finite temperature, top_p ≤ 0, top_p > 1 and NaNs, naming the field.
Status validate_sampling_params(const SamplingParams& p);

// One logits row to sample: the request's parameters, the absolute position q of the token being
// sampled (q < 2^56) and the draft slot j (0 = target, 1 = drafter; j < 256).
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

}  // namespace dsv4::kernels
