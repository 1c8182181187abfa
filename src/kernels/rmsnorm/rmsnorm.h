// RMSNorm (model.md §3.3, §0.4.5 A3), per row of n elements:
//   ρ = rsqrt(f32(f32(Σ x² · fp32(1/n)) + fp32(ε)));  y = bf16(f32(w · f32(x·ρ)))
// Weighted (w = stored bf16 weight) or unweighted (w == nullptr: y = bf16(x·ρ)).
// x: [T, n] bf16 (stride n), y: [T, n] bf16; x == y allowed.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"

namespace dsv4::kernels {

// fp32 RMS factor ρ_n of one row (bf16 or fp32 input), Level-A op order; the
// sum of squares uses 16 fixed lanes (lane l: i ≡ l mod 16, ascending; lanes
// folded l += l+8, +4, +2, +1), rsqrt evaluated as 1/sqrt. Depends on n only.
float rms_factor(const bf16* x, int64_t n, float eps);
float rms_factor(const float* x, int64_t n, float eps);

void rmsnorm_ref(const bf16* x, const bf16* w, bf16* y, int64_t T, int64_t n, float eps);
// Engine: rows split over threads; rms_factor for ρ.
void rmsnorm(const bf16* x, const bf16* w, bf16* y, int64_t T, int64_t n, float eps, int tid,
             int nthreads);

}  // namespace dsv4::kernels
