// Linear layers (model.md §3.2, §0.4.4). y[t, o] = Σ_i W[o, i]·x[t, i] for rows
// t in [0, T); x is bf16 [T, in] (row stride in), y bf16 [T, out] or fp32.
//
// Level A: FP8/FP4-stored weights get actq on the input (per-row, per-128-K
// blocks, power-of-two scale); the quantized GEMM then equals the fp32 dot of
// the actq-dequantized input x̂ with the exactly dequantized weight. The engine
// runs the two phases as separate calls (each its own ThreadPool::run):
//   actq_rows(x -> xq), then linear(w, xq -> y).
// Every output element sums K in one fixed order (ascending 128-wide K blocks)
// that depends on nothing but (o, in): rows are bit-identical whatever T is.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

// --- reference (single-threaded, obviously correct) ---
// Dequantized weight element W[o, i] as fp32 (exact for accepted checkpoints).
float weight_at(const LinearWeight& w, int64_t o, int64_t i);
// bf16 output; applies actq first when apply_actq (callers pass w.quantized(),
// or false for wo_a).
void linear_ref(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, bool apply_actq);
// fp32 output on an fp32 copy of the bf16 input, no actq (compressor wkv/wgate,
// router, LM head, hc_*_fn).
void linear_f32_ref(const LinearWeight& w, const bf16* x, int64_t T, float* y);
// Same on fp32 input (hc_*_fn acts on the fp32 stream vector).
void linear_f32_in_ref(const LinearWeight& w, const float* x, int64_t T, float* y);

// --- engine (call inside ThreadPool::run; any nthreads; no allocation) ---
// xq[t] = actq_dequant(x[t]) for t in [0, T) (rows split over threads).
void actq_rows(const bf16* x, int64_t T, int64_t in, bf16* xq, int tid, int nthreads);
// y = W·x, bf16 out (x already actq'd if the weight requires it). Output
// columns split over threads.
void linear(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, int tid, int nthreads);
// fp32 out, fp32 copy of a bf16 input / fp32 input, no actq.
void linear_f32(const LinearWeight& w, const bf16* x, int64_t T, float* y, int tid, int nthreads);
void linear_f32_in(const LinearWeight& w, const float* x, int64_t T, float* y, int tid, int nthreads);

}  // namespace dsv4::kernels
