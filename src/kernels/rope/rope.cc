// Engine RoPE: the (row, vector) items are split over threads; cos/sin of a
// row are computed once per thread and row (same fp32 functions as the ref).
#include <cmath>

#include "base/check.h"
#include "base/math.h"
#include "kernels/rope/rope.h"

namespace dsv4::kernels {

void rope(const float* inv_freq, int rope_dim, bf16* x, int64_t T, int n_vec, int dim,
          const int64_t* pos, bool inverse, int tid, int nthreads) {
  DSV4_CHECK(rope_dim % 2 == 0 && rope_dim <= kRopeMaxDim && rope_dim <= dim,
             "rope_dim {} (max {}, vector {})", rope_dim, kRopeMaxDim, dim);
  const int half = rope_dim / 2;
  float cs[kRopeMaxDim / 2], sn[kRopeMaxDim / 2];
  const Range r = split_range(T * n_vec, tid, nthreads);
  int64_t row = -1;
  for (int64_t item = r.begin; item < r.end; ++item) {
    const int64_t t = item / n_vec;
    if (t != row) {
      row = t;
      const float p = static_cast<float>(pos[t]);
      for (int i = 0; i < half; ++i) {
        const float angle = p * inv_freq[i];
        cs[i] = std::cos(angle);
        sn[i] = inverse ? -std::sin(angle) : std::sin(angle);
      }
    }
    bf16* base = x + item * dim + (dim - rope_dim);
    for (int i = 0; i < half; ++i) {
      const float a = base[2 * i].to_float();
      const float b = base[2 * i + 1].to_float();
      base[2 * i] = bf16::from_float(a * cs[i] - b * sn[i]);
      base[2 * i + 1] = bf16::from_float(a * sn[i] + b * cs[i]);
    }
  }
}

}  // namespace dsv4::kernels
