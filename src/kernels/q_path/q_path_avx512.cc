// head_rms_tile.h with AVX-512 F/BW (CMakeLists.txt: no contraction): 16 heads per pass,
// head h's chain in lane h; each 16 dims of the 16 heads are squared and rounded in place,
// transposed, then added in ascending dim order; the scaling pass applies RoPE (rope_simd.h).
#include "kernels/q_path/head_rms_tile.h"
#include "kernels/rope/rope_simd.h"

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

void heads(bf16* q, int64_t n_heads, int head_dim, float inv_n, float eps, HeadRope rope) {
  if (head_dim % kLanes != 0) return heads_portable(q, n_heads, head_dim, inv_n, eps, rope);
  // RoPE in the scaling pass when its dims are whole registers, else after it (scalar).
  const bool fused = rope.rope_dim % kLanes == 0;
  alignas(64) float cd[kRopeMaxDim], sd[kRopeMaxDim];
  if (fused) simd::rope_pair_tables(rope.cs, rope.sn, rope.rope_dim, cd, sd);
  const int rope_from = fused && rope.rope_dim > 0 ? head_dim - rope.rope_dim : head_dim;
  for (int64_t h0 = 0; h0 < n_heads; h0 += kLanes) {
    const int n = static_cast<int>(n_heads - h0 < kLanes ? n_heads - h0 : kLanes);
    bf16* group[kLanes];
    for (int h = 0; h < kLanes; ++h) group[h] = q + (h0 + (h < n ? h : n - 1)) * head_dim;
    alignas(64) float r[kLanes];
    sums16(group, head_dim, inv_n, eps, r);
    for (int h = 0; h < n; ++h) {
      scale(group[h], head_dim, r[h], rope_from, cd, sd);
      if (!fused && rope.rope_dim > 0)
        rope_rotate(group[h] + (head_dim - rope.rope_dim), rope.rope_dim, rope.cs, rope.sn);
    }
  }
}

}  // namespace

HeadsFn heads_avx512() { return heads; }

}  // namespace dsv4::kernels::head_rms_tile
