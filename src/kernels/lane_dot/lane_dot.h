// Dots in 8 interleaved fp32 lanes: the fixed summation order of the router's scores
// (moe_gate) and the hyper-connections' mixing dots and Σx² (hc). For a row x of n elements:
//   lane l = Σ₃₂ over c ≡ l (mod 8), c ascending, of f32(w[c]·x[c])   (product rounded, then
//            added: no FMA)
//   dot    = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
// so a row's bits depend on n only. w is fp32 or bf16 (widened exactly), x bf16.
// The engine form takes up to kLaneDotMaxRows rows in one pass over w (each row's arithmetic
// unchanged) and runs on the selected ISA variant (lane_dot_tile.h: x86-64-v2, AVX2, and for
// lane_dot_block AVX-512; AVX-512 CPUs run lane_dot_rows on the AVX2 one: 8 lanes are one
// ymm). Every variant gives the same bits.
#pragma once

#include <cstdint>

#include "base/cpu.h"
#include "numeric/bf16.h"

namespace dsv4::kernels {

constexpr int kLaneDotLanes = 8;
constexpr int kLaneDotMaxRows = 8;  // 8 independent accumulator chains per pass over w
constexpr int kLaneDotMaxWeights = 4;  // weights per lane_dot_block pass

// --- reference: one row, plain loops ---
float lane_dot_ref(const float* w, const bf16* x, int64_t n);
float lane_dot_ref(const bf16* w, const bf16* x, int64_t n);

// --- engine: out[r] = the dot of w with x[r], r < rows (1 <= rows <= kLaneDotMaxRows) ---
void lane_dot_rows(const float* w, const bf16* const* x, int rows, int64_t n, float* out);
void lane_dot_rows(const bf16* w, const bf16* const* x, int rows, int64_t n, float* out);

// --- engine: out[i·rows + r] = the dot of w[i] with x[r], i < n_w, r < rows
// (1 <= n_w <= kLaneDotMaxWeights, 1 <= rows <= kLaneDotMaxRows); bf16 weights. Each (weight,
// row) pair's arithmetic is lane_dot_rows'; AVX-512 runs two weights per register. ---
void lane_dot_block(const bf16* const* w, int n_w, const bf16* const* x, int rows, int64_t n, float* out);

// ISA of lane_dot_rows and lane_dot_block: detect_isa() unless set. Set it between steps, not while a call runs.
void set_lane_dot_isa(Isa isa);
Isa lane_dot_isa();

}  // namespace dsv4::kernels
