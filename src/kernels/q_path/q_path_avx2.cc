// head_rms_tile.h with AVX2 (CMakeLists.txt: no contraction): 8 heads per pass, head h's
// chain in lane h; each 8 dims of the 8 heads are squared and rounded in place, transposed,
// then added in ascending dim order; the scaling pass applies RoPE (rope_simd.h).
#include "kernels/q_path/head_rms_vector.h"

namespace dsv4::kernels::head_rms_tile {
namespace {

constexpr int kLanes = 8;

// heads[0..8) (a short group repeats its last head: read only) -> r [8].
void sums8(bf16* const* heads, int head_dim, float inv_n, float eps, float* r) {
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < head_dim; i += kLanes) {
    __m256 sq[kLanes];
    for (int h = 0; h < kLanes; ++h) {
      const __m256 x = simd::widen8(heads[h] + i);
      sq[h] = simd::round_bf16(_mm256_mul_ps(x, x));
    }
    simd::transpose8(sq);
    for (int k = 0; k < kLanes; ++k) acc = _mm256_add_ps(acc, sq[k]);
  }
  const __m256 mu = simd::round_bf16(_mm256_mul_ps(acc, _mm256_set1_ps(inv_n)));
  const __m256 var = simd::round_bf16(_mm256_add_ps(mu, _mm256_set1_ps(eps)));
  _mm256_storeu_ps(r, simd::round_bf16(_mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(var))));
}

// v = bf16(v·r); then RoPE on the dims from rope_from (cd, sd: the pair tables), when given.
void scale(bf16* v, int head_dim, float r, int rope_from, const float* cd, const float* sd) {
  const __m256 rv = _mm256_set1_ps(r);
  for (int i = 0; i < head_dim; i += kLanes) {
    __m256 y = simd::round_bf16(_mm256_mul_ps(simd::widen8(v + i), rv));
    if (i >= rope_from) y = simd::rope_rotate8(y, cd + (i - rope_from), sd + (i - rope_from));
    simd::store8(v + i, y);
  }
}

// The vector driver's operations (head_rms_vector.h).
struct Ops {
  static constexpr int kLanes = 8;
  static constexpr auto sums = &sums8;
  static constexpr auto scale = &head_rms_tile::scale;
};

}  // namespace

HeadsFn heads_avx2() { return heads_vector<Ops>; }

}  // namespace dsv4::kernels::head_rms_tile
