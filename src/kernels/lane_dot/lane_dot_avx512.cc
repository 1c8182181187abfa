// lane_dot_block with AVX-512 F/BW (CMakeLists.txt: no contraction): one zmm holds the 8 lanes
// of two weight rows (low half, high half) against one row of x broadcast to both halves;
// up to 2 such pairs x 8 rows of x per pass, each lane's products added in ascending c as the
// reference. Only intrinsics and lane_dot_tile.h here (tails and the tree come from it).
#include "kernels/common/immintrin_quiet.h"
#include "kernels/lane_dot/lane_dot_tile.h"

namespace dsv4::kernels::lane_dot_tile {
namespace {

constexpr int kMaxPairs = 2;

inline __m512i load8(const bf16* p) {
  return _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// One VPERMW / VPERMT2W puts bf16 word j of the sources into the high half of fp32 lane j
// (zeroing the low halves: the exact widening). word_index(false): words 0..7 into lanes 0..7
// and again 8..15; word_index(true): words 0..7 of a into lanes 0..7, of b into 8..15.
constexpr __mmask32 kHighWords = 0xAAAAAAAAu;
inline __m512i word_index(bool pair) {
  alignas(64) int16_t idx[32] = {};
  for (int j = 0; j < 16; ++j) idx[2 * j + 1] = static_cast<int16_t>(j < 8 ? j : (pair ? 32 + j - 8 : j - 8));
  return _mm512_load_si512(idx);
}
// Elements c..c+7 of x in both halves.
inline __m512 widen_both(const bf16* x, __m512i idx) {
  return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kHighWords, idx, load8(x)));
}
// Elements c..c+7 of a (low half) and of b (high half).
inline __m512 widen_pair(const bf16* a, const bf16* b, __m512i idx) {
  return _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi16(kHighWords, load8(a), idx, load8(b)));
}

// w[0..2P) weight rows (a pair may repeat a row: read only), x[0..R) rows -> out[i·R + r].
template <int R, int P>
void block(const bf16* const* w, const bf16* const* x, int64_t n, float* out) {
  __m512 acc[P][R];
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) acc[p][r] = _mm512_setzero_ps();
  const __m512i both = word_index(false), pair = word_index(true);
  int64_t c = 0;
  for (; c + kLaneDotLanes <= n; c += kLaneDotLanes) {
    __m512 wv[P];
    for (int p = 0; p < P; ++p) wv[p] = widen_pair(w[2 * p] + c, w[2 * p + 1] + c, pair);
    for (int r = 0; r < R; ++r) {
      const __m512 xv = widen_both(x[r] + c, both);
      for (int p = 0; p < P; ++p) acc[p][r] = _mm512_add_ps(acc[p][r], _mm512_mul_ps(wv[p], xv));
    }
  }
  for (int p = 0; p < P; ++p) {
    alignas(64) float both[R][2 * kLaneDotLanes];  // [weight 2p | weight 2p+1]
    for (int r = 0; r < R; ++r) _mm512_store_ps(both[r], acc[p][r]);
    for (int half = 0; half < 2; ++half) {
      float lanes[R][kLaneDotLanes];
      for (int r = 0; r < R; ++r)
        for (int q = 0; q < kLaneDotLanes; ++q) lanes[r][q] = both[r][half * kLaneDotLanes + q];
      finish_rows<R>(w[2 * p + half], x, c, n, lanes, out + (2 * p + half) * R);
    }
  }
}

template <int P>
void block_rows(const bf16* const* w, const bf16* const* x, int rows, int64_t n, float* out) {
  switch (rows) {
    case 8: return block<8, P>(w, x, n, out);
    case 7: return block<7, P>(w, x, n, out);
    case 6: return block<6, P>(w, x, n, out);
    case 5: return block<5, P>(w, x, n, out);
    case 4: return block<4, P>(w, x, n, out);
    case 3: return block<3, P>(w, x, n, out);
    case 2: return block<2, P>(w, x, n, out);
    default: return block<1, P>(w, x, n, out);
  }
}

// n_w <= kLaneDotMaxWeights weights in pairs (an odd count repeats its last weight into a
// scratch output).
void block_any(const bf16* const* w, int n_w, const bf16* const* x, int rows, int64_t n, float* out) {
  const bf16* wp[2 * kMaxPairs];
  for (int i = 0; i < 2 * kMaxPairs; ++i) wp[i] = w[i < n_w ? i : n_w - 1];
  float o[2 * kMaxPairs * kLaneDotMaxRows];
  if (n_w > 2)
    block_rows<2>(wp, x, rows, n, o);
  else
    block_rows<1>(wp, x, rows, n, o);
  for (int i = 0; i < n_w * rows; ++i) out[i] = o[i];
}

}  // namespace

BlockFn block_avx512() { return block_any; }

}  // namespace dsv4::kernels::lane_dot_tile
