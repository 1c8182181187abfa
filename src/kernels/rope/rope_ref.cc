// Oracle for rope.h: per row and vector, the interleaved pairs of the last Dr
// dims rotated by the fp32 angle fp32(p)·inv[i].
#include <cmath>

#include "kernels/rope/rope.h"

namespace dsv4::kernels {

void rope_ref(const float* inv_freq, int rope_dim, bf16* x, int64_t T, int n_vec, int dim,
              const int64_t* pos, bool inverse) {
  for (int64_t t = 0; t < T; ++t) {
    const float p = static_cast<float>(pos[t]);
    for (int v = 0; v < n_vec; ++v) {
      bf16* base = x + (t * n_vec + v) * dim + (dim - rope_dim);
      for (int i = 0; i < rope_dim / 2; ++i) {
        const float angle = p * inv_freq[i];
        const float c = std::cos(angle);
        const float s = inverse ? -std::sin(angle) : std::sin(angle);
        const float a = base[2 * i].to_float();
        const float b = base[2 * i + 1].to_float();
        base[2 * i] = bf16::from_float(a * c - b * s);
        base[2 * i + 1] = bf16::from_float(a * s + b * c);
      }
    }
  }
}

}  // namespace dsv4::kernels
