// indexer_finish_tile.h with AVX2 (CMakeLists.txt: no contraction): a head of Di dims in
// Di/8 registers; RoPE on interleaved pairs (a partner swap and a blend), butterflies
// h = 1..4 inside each register and h >= 8 between registers, each fp4 block four registers.
#include "kernels/indexer/indexer_finish_tile.h"
#include "kernels/rope/rope_simd.h"

namespace dsv4::kernels::indexer_finish_tile {
namespace {

constexpr int kW = 8;
constexpr int kMaxVecs = kHadamardMaxN / kW;

// A butterfly stage inside a register: lanes with the stage's bit clear take self + partner,
// the others partner − self (hadamard_vec's lo = a + b, hi = a − b).
template <int kHi>
inline __m256 stage_in(__m256 x, __m256 partner) {
  return _mm256_blend_ps(_mm256_add_ps(x, partner), _mm256_sub_ps(partner, x), kHi);
}

inline void butterflies(__m256* v, int nv) {
  for (int j = 0; j < nv; ++j) {
    __m256 x = v[j];
    x = stage_in<0xAA>(x, _mm256_permute_ps(x, 0xB1));
    x = stage_in<0xCC>(x, _mm256_permute_ps(x, 0x4E));
    x = stage_in<0xF0>(x, _mm256_permute2f128_ps(x, x, 0x01));
    v[j] = x;
  }
  for (int h = 1; h < nv; h *= 2)
    for (int i = 0; i < nv; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const __m256 a = v[j], b = v[j + h];
        v[j] = _mm256_add_ps(a, b);
        v[j + h] = _mm256_sub_ps(a, b);
      }
}

// e2m1 magnitude index of |t| (e2m1_encode's thresholds, ties to the even index): each
// true compare is −1, subtracted.
inline __m256i magnitude_index(__m256 a) {
  __m256i m = _mm256_setzero_si256();
  const auto step = [&](float threshold, int pred) {
    m = _mm256_sub_epi32(m, _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(threshold), pred)));
  };
  step(0.25f, _CMP_GT_OQ);
  step(0.75f, _CMP_GE_OQ);
  step(1.25f, _CMP_GT_OQ);
  step(1.75f, _CMP_GE_OQ);
  step(2.5f, _CMP_GT_OQ);
  step(3.5f, _CMP_GE_OQ);
  step(5.0f, _CMP_GT_OQ);
  return m;
}

// fp4sim_32 of the block v[0..4) (bf16 values): decode(encode(x·2^-k))·2^k, exact in bf16;
// a NaN anywhere makes the block NaN (0 · NaN scale, as fp4sim_row).
inline void fp4_block(__m256* v) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 nan = _mm256_setzero_ps(), m = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[j], v[j], _CMP_UNORD_Q));
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
  }
  if (_mm256_movemask_ps(nan)) {
    for (int j = 0; j < 4; ++j) v[j] = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
    return;
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 0x55));
  const int k = e2m1_scale_exponent(_mm_cvtss_f32(m4));
  const __m256 inv = _mm256_set1_ps(pow2_bits(-k)), s = _mm256_set1_ps(pow2_bits(k));
  const __m256 table = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  for (int j = 0; j < 4; ++j) {
    const __m256 t = _mm256_mul_ps(v[j], inv);
    const __m256 mag = _mm256_permutevar8x32_ps(table, magnitude_index(_mm256_andnot_ps(sign, t)));
    v[j] = _mm256_or_ps(_mm256_mul_ps(mag, s), _mm256_and_ps(sign, t));
  }
}

// One head; NV = Di/8 when fixed at compile time (registers), 0 for any Di.
template <int NV>
void head(bf16* q, int nv_any, int first_rope, const float* cd, const float* sd, float scale) {
  const int nv = NV ? NV : nv_any;
  __m256 v[NV ? NV : kMaxVecs];
  for (int j = 0; j < nv; ++j) v[j] = simd::widen8(q + j * kW);
  for (int j = first_rope; j < nv; ++j) {
    const int at = (j - first_rope) * kW;
    v[j] = simd::rope_rotate8(v[j], cd + at, sd + at);
  }
  butterflies(v, nv);
  const __m256 sc = _mm256_set1_ps(scale);
  for (int j = 0; j < nv; ++j) v[j] = simd::round_bf16(_mm256_mul_ps(v[j], sc));
  for (int j = 0; j < nv; j += 4) fp4_block(v + j);
  for (int j = 0; j < nv; ++j) simd::store8(q + j * kW, v[j]);  // exact: already bf16
}

void heads(bf16* q, int64_t n_heads, int Di, int Dr, const float* cs, const float* sn, float scale) {
  if (!vector_shape_ok(Di, Dr, kW)) return heads_portable(q, n_heads, Di, Dr, cs, sn, scale);
  alignas(32) float cd[kRopeMaxDim], sd[kRopeMaxDim];
  simd::rope_pair_tables(cs, sn, Dr, cd, sd);
  const int nv = Di / kW, first = (Di - Dr) / kW;
  for (int64_t h = 0; h < n_heads; ++h) {
    if (nv == 16)
      head<16>(q + h * Di, nv, first, cd, sd, scale);
    else
      head<0>(q + h * Di, nv, first, cd, sd, scale);
  }
}

}  // namespace

HeadsFn heads_avx2() { return heads; }

}  // namespace dsv4::kernels::indexer_finish_tile
