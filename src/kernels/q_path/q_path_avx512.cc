// head_rms_tile.h with AVX-512 F/BW (CMakeLists.txt: no contraction): 16 heads per pass,
// head h's chain in lane h; each 16 dims of the 16 heads are squared and rounded in place,
// transposed, then added in ascending dim order; the scaling pass applies RoPE (rope_simd.h).
#include "kernels/q_path/head_rms_vector.h"

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

// v = bf16(v·r); then RoPE on the dims from rope_from (cd, sd: the pair tables), when given.
void scale(bf16* v, int head_dim, float r, int rope_from, const float* cd, const float* sd) {
  const __m512 rv = _mm512_set1_ps(r);
  for (int i = 0; i < head_dim; i += kLanes) {
    __m512 y = simd::round_bf16(_mm512_mul_ps(simd::widen16(v + i), rv));
    if (i >= rope_from) y = simd::rope_rotate16(y, cd + (i - rope_from), sd + (i - rope_from));
    simd::store16(v + i, y);
  }
}

// The vector driver's operations (head_rms_vector.h).
struct Ops {
  static constexpr int kLanes = 16;
  static constexpr auto sums = &sums16;
  static constexpr auto scale = &head_rms_tile::scale;
};

}  // namespace

HeadsFn heads_avx512() { return heads_vector<Ops>; }

}  // namespace dsv4::kernels::head_rms_tile
