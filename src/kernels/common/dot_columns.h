// s[j] += Σ_k q[k]·t[k·kStride + j] for j < n_cols: dot products of one query
// against the columns of a transposed tile, each s[j] summed in ascending k
// (four k per pass, added one at a time: the order of a plain loop), so the
// result is the reference's bit for bit. Loops vectorize across columns.
// Callers build with -ffp-contract=off (the products are rounded on their own).
#pragma once

namespace dsv4::kernels {
// Internal linkage: units compiled for different ISAs (the *_avx2.cc / *_avx512.cc
// variants) each keep their own copy, never one another's.
namespace {

template <int kStride>
inline void dot_columns(const float* __restrict q, const float* __restrict t, int n_dims, int n_cols,
                        float* __restrict s) {
  int k = 0;
  for (; k + 4 <= n_dims; k += 4) {
    const float q0 = q[k], q1 = q[k + 1], q2 = q[k + 2], q3 = q[k + 3];
    const float* t0 = t + k * kStride;
    const float* t1 = t0 + kStride;
    const float* t2 = t1 + kStride;
    const float* t3 = t2 + kStride;
    for (int j = 0; j < n_cols; ++j) {
      float v = s[j];
      v = v + q0 * t0[j];
      v = v + q1 * t1[j];
      v = v + q2 * t2[j];
      v = v + q3 * t3[j];
      s[j] = v;
    }
  }
  for (; k < n_dims; ++k)
    for (int j = 0; j < n_cols; ++j) s[j] = s[j] + q[k] * t[k * kStride + j];
}

}  // namespace
}  // namespace dsv4::kernels
