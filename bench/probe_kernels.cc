// Portable (x86-64-v2) probe kernels: 64-bit loads and SSE mul + add chains.
#include <immintrin.h>

#include "probe.h"

namespace dsv4::bench::probe {

uint64_t read_sum_scalar(const uint8_t* p, int64_t bytes) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t i = 0; i < bytes / 8; i += 4) {
    s0 += w[i];
    s1 += w[i + 1];
    s2 += w[i + 2];
    s3 += w[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

float dot_loop_sse(int64_t iters, double* flops) {
  __m128 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm_set1_ps(static_cast<float>(j));
  const __m128 a = _mm_set1_ps(0.999f), b = _mm_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 8; ++j) acc[j] = _mm_add_ps(_mm_mul_ps(acc[j], a), b);
  *flops = static_cast<double>(iters) * 8 * 4 * 2;
  __m128 s = acc[0];
  for (int j = 1; j < 8; ++j) s = _mm_add_ps(s, acc[j]);
  return _mm_cvtss_f32(s);
}

}  // namespace dsv4::bench::probe
