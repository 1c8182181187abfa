// Sylvester Hadamard transform ("rotate", model.md §8.2, §0.4.3), per vector v of
// length n (a power of two), bf16 in and out:
//   y_i = bf16( f32( Σ₃₂_j (−1)^popcount(i & j) · v_j  ·  fp32(n^-0.5) ) )
// Level A: the unnormalized transform summed in fp32 (order free: the reference
// sums the matrix product in ascending j, the engine runs log2(n) butterfly
// stages), then one fp32 multiply by the fp32 constant n^-0.5, one bf16 rounding.
// x, y: [T, n_vec, n] bf16 (contiguous); x == y (in place) allowed.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"

namespace dsv4::kernels {

// Largest supported n (the engine keeps one fp32 vector on the stack).
constexpr int kHadamardMaxN = 4096;

// fp32(n^-0.5), formed in double and rounded once.
float hadamard_scale(int n);

void hadamard_ref(const bf16* x, bf16* y, int64_t T, int n_vec, int n);
// Vectors [0, T·n_vec) split over threads by contiguous ranges.
void hadamard(const bf16* x, bf16* y, int64_t T, int n_vec, int n, int tid, int nthreads);
// One vector with the engine's butterflies (for other kernels' engines); x == y allowed.
void hadamard_vec(const bf16* x, bf16* y, int n);

}  // namespace dsv4::kernels
