// indexer_finish_tile.h with AVX-512 F/BW (CMakeLists.txt: no contraction): a head of Di dims
// in Di/16 registers; RoPE on interleaved pairs (a partner swap and a blend), butterflies
// h = 1..8 inside each register and h >= 16 between registers, each fp4 block two registers.
#include "kernels/indexer/indexer_finish_tile.h"
#include "kernels/rope/rope_simd.h"

namespace dsv4::kernels::indexer_finish_tile {
namespace {

constexpr int kW = 16;
constexpr int kMaxVecs = kHadamardMaxN / kW;

// |x| and the sign bit of x (AVX-512 F has the bit operations on integers only).
inline __m512 abs_of(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}
inline __m512 with_sign_of(__m512 magnitude, __m512 x) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
}

// A butterfly stage inside a register: lanes with the stage's bit clear take self + partner,
// the others partner − self (hadamard_vec's lo = a + b, hi = a − b).
inline __m512 stage_in(__m512 x, __m512 partner, __mmask16 hi) {
  return _mm512_mask_blend_ps(hi, _mm512_add_ps(x, partner), _mm512_sub_ps(partner, x));
}

inline void butterflies(__m512* v, int nv) {
  for (int j = 0; j < nv; ++j) {
    __m512 x = v[j];
    x = stage_in(x, _mm512_permute_ps(x, 0xB1), 0xAAAA);
    x = stage_in(x, _mm512_permute_ps(x, 0x4E), 0xCCCC);
    x = stage_in(x, _mm512_shuffle_f32x4(x, x, 0xB1), 0xF0F0);
    x = stage_in(x, _mm512_shuffle_f32x4(x, x, 0x4E), 0xFF00);
    v[j] = x;
  }
  for (int h = 1; h < nv; h *= 2)
    for (int i = 0; i < nv; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const __m512 a = v[j], b = v[j + h];
        v[j] = _mm512_add_ps(a, b);
        v[j + h] = _mm512_sub_ps(a, b);
      }
}

// e2m1 magnitude index of |t| (e2m1_encode's thresholds, ties to the even index).
inline __m512i magnitude_index(__m512 a) {
  const __m512i one = _mm512_set1_epi32(1);
  __m512i m = _mm512_setzero_si512();
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.25f), _CMP_GT_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.75f), _CMP_GE_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.25f), _CMP_GT_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.75f), _CMP_GE_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.5f), _CMP_GT_OQ), m, one);
  m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.5f), _CMP_GE_OQ), m, one);
  return _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(a, _mm512_set1_ps(5.0f), _CMP_GT_OQ), m, one);
}

// fp4sim_32 of the block v[0], v[1] (bf16 values): decode(encode(x·2^-k))·2^k, exact in bf16;
// a NaN anywhere makes the block NaN (0 · NaN scale, as fp4sim_row).
inline void fp4_block(__m512* v) {
  if (_mm512_cmp_ps_mask(v[0], v[0], _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v[1], v[1], _CMP_UNORD_Q)) {
    v[0] = v[1] = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000));
    return;
  }
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs_of(v[0]), abs_of(v[1])));
  const int k = e2m1_scale_exponent(amax);
  const __m512 inv = _mm512_set1_ps(pow2_bits(-k)), s = _mm512_set1_ps(pow2_bits(k));
  const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int j = 0; j < 2; ++j) {
    const __m512 t = _mm512_mul_ps(v[j], inv);
    const __m512 mag = _mm512_permutexvar_ps(magnitude_index(abs_of(t)), table);
    v[j] = with_sign_of(_mm512_mul_ps(mag, s), t);
  }
}

// One head; NV = Di/16 when fixed at compile time (registers), 0 for any Di.
template <int NV>
void head(bf16* q, int nv_any, int first_rope, const float* cd, const float* sd, float scale) {
  const int nv = NV ? NV : nv_any;
  __m512 v[NV ? NV : kMaxVecs];
  for (int j = 0; j < nv; ++j) v[j] = simd::widen16(q + j * kW);
  for (int j = first_rope; j < nv; ++j) {
    const int at = (j - first_rope) * kW;
    v[j] = simd::rope_rotate16(v[j], cd + at, sd + at);
  }
  butterflies(v, nv);
  const __m512 sc = _mm512_set1_ps(scale);
  for (int j = 0; j < nv; ++j) v[j] = simd::round_bf16(_mm512_mul_ps(v[j], sc));
  for (int j = 0; j < nv; j += 2) fp4_block(v + j);
  for (int j = 0; j < nv; ++j) simd::store16(q + j * kW, v[j]);  // exact: already bf16
}

void heads(bf16* q, int64_t n_heads, int Di, int Dr, const float* cs, const float* sn, float scale) {
  if (!vector_shape_ok(Di, Dr, kW)) return heads_portable(q, n_heads, Di, Dr, cs, sn, scale);
  alignas(64) float cd[kRopeMaxDim], sd[kRopeMaxDim];
  simd::rope_pair_tables(cs, sn, Dr, cd, sd);
  const int nv = Di / kW, first = (Di - Dr) / kW;
  for (int64_t h = 0; h < n_heads; ++h) {
    if (nv == 8)
      head<8>(q + h * Di, nv, first, cd, sd, scale);
    else
      head<0>(q + h * Di, nv, first, cd, sd, scale);
  }
}

}  // namespace

HeadsFn heads_avx512() { return heads; }

}  // namespace dsv4::kernels::indexer_finish_tile
