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
//
// Engine K order (per output element, fixed by the weight shape only):
//   beta_kb = fp32 dot over K block kb = columns [128kb, min(128kb+128, in)):
//             16 lanes, lane l sums the products k ≡ l (mod 16) of the block in
//             ascending k, lanes folded (l += l+8, l += l+4, l += l+2, l += l+1);
//   y       = (...((beta_0 + beta_1) + beta_2) + ...)      blocks chained ascending
// or, with LinearSlice::k_group, the grouped tree of runtime.md §6.7:
//   pi_g = chain of the blocks of group g;  y = (...((pi_0 + pi_1) + pi_2) + ...)
// FP4 weights have their own beta_kb (linear_fp4.h): per 32-column scale group, the column
// pairs chained ascending (odd column first) on the unscaled e2m1 values, times the group
// scale, the block's 4 groups summed ascending; the blocks are then chained as above.
// FP8 weights too (linear_fp8.h): beta_kb = the block's column pairs chained ascending (odd
// column first) on the unscaled e4m3 values, times the 128x128 block scale.
// The 16-lane beta_kb above is that of BF16 and F32 weights. FP8/FP4 products are exact
// (unscaled code times bf16 x̂; the scales are powers of two), so an FP8/FP4 linear is the
// fp32 dot of x̂ = actq(x) and the dequantized weight up to summation order
// (model.md §0.4.4 equivalence). Partial K blocks (in % 128 != 0: BF16/F32 and
// FP8 without actq, e.g. wo_a [512, 80]) and FP8 scale grids with dims < 128
// (ceil) are supported; FP4 needs in % 32 == 0, actq needs in % 128 == 0.
// The engine has scalar, AVX2, AVX-512 and AVX-512 BF16 variants (linear_tile.h,
// linear_fp4.h, linear_fp8.h), all giving the same bits; one is selected at start-up (detect_isa) or by
// set_linear_isa.
#pragma once

#include <cstdint>

#include "base/cpu.h"
#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

// --- reference (single-threaded, obviously correct; plain loops in the engine's K order) ---
// Dequantized weight element W[o, i] as fp32 (exact for accepted checkpoints).
float weight_at(const LinearWeight& w, int64_t o, int64_t i);
// Σ₃₂ W[o, i]·x[i] over i < w.in in the engine K order above: the plain block chain
// (k_group 0) or the grouped tree with K groups of k_group columns (a multiple of 128).
float linear_dot_ref(const LinearWeight& w, int64_t o, const float* x, int64_t k_group = 0);
// bf16 output; applies actq first when apply_actq (callers pass w.quantized(),
// or false for wo_a); k_group as in linear_dot_ref (wo_b's grouped tree).
void linear_ref(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, bool apply_actq,
                int64_t k_group = 0);
// fp32 output on an fp32 copy of the bf16 input, no actq (compressor wkv/wgate,
// router, LM head, hc_*_fn).
void linear_f32_ref(const LinearWeight& w, const bf16* x, int64_t T, float* y);
// Same on fp32 input (hc_*_fn acts on the fp32 stream vector).
void linear_f32_in_ref(const LinearWeight& w, const float* x, int64_t T, float* y);

// --- engine variant (base/cpu.h); every variant gives the same bits ---
// Selects the variant for all later engine calls; not while a linear runs. The
// CPU must support it (isa_supported).
void set_linear_isa(Isa isa);
// The selected variant: detect_isa() until set_linear_isa is called.
Isa linear_isa();
// Every variant reads FP8 and FP4 weights in the tile layout (LinearWeight::fp8_dot, fp4_dot)
// through its FP8 / FP4 tiles, and the loader packs them so. Weights in the stored layout (or
// a slice whose o0 is not a multiple of 16, or fp32 x) run on the scalar tiles, with the same
// bits.

// Whether the selected variant reads BF16 weights faster in the tile layout
// (LinearWeight::bf16_tiles; any variant reads both, with the same bits): the VDPBF16PS GEMM
// tile (kAvx512Bf16 with VBMI) streams a 16-output block at every T; measured on Zen 5 at
// 1024 x 4096, T = 1..16, 12-24 % faster. AVX2 and AVX-512 F read stored rows faster.
bool linear_prefers_bf16_tiles();

// --- engine (call inside ThreadPool::run; any nthreads; no allocation) ---
// xq[t] = actq_dequant(x[t]) for t in [0, T) (rows split over threads).
void actq_rows(const bf16* x, int64_t T, int64_t in, bf16* xq, int tid, int nthreads);
// y = W·x, bf16 out (x already actq'd if the weight requires it). Output
// columns split over threads.
void linear(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, int tid, int nthreads);
// fp32 out, fp32 copy of a bf16 input / fp32 input, no actq.
void linear_f32(const LinearWeight& w, const bf16* x, int64_t T, float* y, int tid, int nthreads);
void linear_f32_in(const LinearWeight& w, const float* x, int64_t T, float* y, int tid, int nthreads);

// General engine form: outputs [o0, o1) of W over strided rows, K columns
// [k0, k1), optional grouped K tree. linear / linear_f32 / linear_f32_in are
// this with the defaults.
struct LinearSlice {
  int64_t o0 = 0;         // first output (row of W)
  int64_t o1 = -1;        // one past the last output; -1: w.out
  int64_t k0 = 0;         // first K column summed; a multiple of 128
  int64_t k1 = -1;        // one past the last; -1: w.in; a multiple of 128 unless == w.in
  int64_t x_stride = -1;  // x row t is x + t*x_stride, indexed by W's column k; -1: w.in
  int64_t y_stride = -1;  // y row t is y + t*y_stride, output o at (o - o0); -1: o1 - o0
  int64_t k_group = 0;    // 0: plain block chain; else width (multiple of 128 dividing
                          // k1 - k0) of the K groups of the grouped tree (runtime.md §6.7)
};
// Output columns [o0, o1) split over threads; rows [0, T) only.
void linear_slice(const LinearWeight& w, const LinearSlice& s, const bf16* x, int64_t T, bf16* y,
                  int tid, int nthreads);
void linear_slice(const LinearWeight& w, const LinearSlice& s, const bf16* x, int64_t T, float* y,
                  int tid, int nthreads);
void linear_slice(const LinearWeight& w, const LinearSlice& s, const float* x, int64_t T, float* y,
                  int tid, int nthreads);

}  // namespace dsv4::kernels
