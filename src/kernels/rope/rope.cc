// Engine RoPE: the (row, vector) items are split over threads; cos/sin of a
// row are computed once per thread and row (same fp32 functions as the ref).
#include <cmath>

#include "base/check.h"
#include "base/math.h"
#include "kernels/rope/rope.h"

namespace dsv4::kernels {

void rope_tables(const float* inv_freq, int rope_dim, int64_t pos, bool inverse, float* cs, float* sn) {
  const float p = static_cast<float>(pos);
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float angle = p * inv_freq[i];
    cs[i] = std::cos(angle);
    sn[i] = inverse ? -std::sin(angle) : std::sin(angle);
  }
}

void rope_rotate(bf16* dims, int rope_dim, const float* cs, const float* sn) {
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float a = dims[2 * i].to_float();
    const float b = dims[2 * i + 1].to_float();
    dims[2 * i] = bf16::from_float(a * cs[i] - b * sn[i]);
    dims[2 * i + 1] = bf16::from_float(a * sn[i] + b * cs[i]);
  }
}

void rope(const float* inv_freq, int rope_dim, bf16* x, int64_t T, int n_vec, int dim,
          const int64_t* pos, bool inverse, int tid, int nthreads) {
  DSV4_CHECK(rope_dim % 2 == 0 && rope_dim <= kRopeMaxDim && rope_dim <= dim,
             "rope_dim {} (max {}, vector {})", rope_dim, kRopeMaxDim, dim);
  float cs[kRopeMaxDim / 2], sn[kRopeMaxDim / 2];
  const Range r = split_range(T * n_vec, tid, nthreads);
  int64_t row = -1;
  for (int64_t item = r.begin; item < r.end; ++item) {
    const int64_t t = item / n_vec;
    if (t != row) {
      row = t;
      rope_tables(inv_freq, rope_dim, pos[t], inverse, cs, sn);
    }
    rope_rotate(x + item * dim + (dim - rope_dim), rope_dim, cs, sn);
  }
}

}  // namespace dsv4::kernels
