// head_rms_tile.h with AVX-512 F/BW (CMakeLists.txt: no contraction): 16 heads per pass,
// head h's chain in lane h; each 16 dims of the 16 heads are squared and rounded in place,
// transposed, then added in ascending dim order.
#include "kernels/common/bf16_simd.h"
#include "kernels/q_path/head_rms_tile.h"

namespace dsv4::kernels::head_rms_tile {
namespace {

constexpr int kLanes = 16;

// heads[0..16) (a short group repeats its last head: read only) -> r [16].
void sums16(bf16* const* heads, int head_dim, float inv_n, float eps, float* r) {
  __m512 acc = _mm512_setzero_ps();
  for (int i = 0; i < head_dim; i += kLanes) {
    __m512 sq[kLanes];
    for (int h = 0; h < kLanes; ++h) {
      const __m512 x = simd::widen16(heads[h] + i);
      sq[h] = simd::round_bf16(_mm512_mul_ps(x, x));
    }
    simd::transpose16(sq);
    for (int k = 0; k < kLanes; ++k) acc = _mm512_add_ps(acc, sq[k]);
  }
  const __m512 mu = simd::round_bf16(_mm512_mul_ps(acc, _mm512_set1_ps(inv_n)));
  const __m512 var = simd::round_bf16(_mm512_add_ps(mu, _mm512_set1_ps(eps)));
  _mm512_storeu_ps(r, simd::round_bf16(_mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(var))));
}

void scale(bf16* v, int head_dim, float r) {
  const __m512 rv = _mm512_set1_ps(r);
  for (int i = 0; i < head_dim; i += kLanes)
    simd::store16(v + i, simd::round_bf16(_mm512_mul_ps(simd::widen16(v + i), rv)));
}

void heads(bf16* q, int64_t n_heads, int head_dim, float inv_n, float eps) {
  if (head_dim % kLanes != 0) return heads_portable(q, n_heads, head_dim, inv_n, eps);
  for (int64_t h0 = 0; h0 < n_heads; h0 += kLanes) {
    const int n = static_cast<int>(n_heads - h0 < kLanes ? n_heads - h0 : kLanes);
    bf16* group[kLanes];
    for (int h = 0; h < kLanes; ++h) group[h] = q + (h0 + (h < n ? h : n - 1)) * head_dim;
    alignas(64) float r[kLanes];
    sums16(group, head_dim, inv_n, eps, r);
    for (int h = 0; h < n; ++h) scale(group[h], head_dim, r[h]);
  }
}

}  // namespace

HeadsFn heads_avx512() { return heads; }

}  // namespace dsv4::kernels::head_rms_tile
