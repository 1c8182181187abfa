// Lane dots with AVX2 (CMakeLists.txt: -mavx2, no contraction): lane l of a row is element l
// of one ymm accumulator; each step multiplies 8 weights by 8 elements of every row, then adds.
// Only intrinsics and lane_dot_tile.h here (the tail and the combining tree come from it).
#include "kernels/common/immintrin_quiet.h"
#include "kernels/lane_dot/lane_dot_tile.h"

namespace dsv4::kernels::lane_dot_tile {
namespace {

inline __m256 widen8(const bf16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const bf16* p) { return widen8(p); }

struct Avx2Dot {
  template <int R, class W>
  static void rows(const W* w, const bf16* const* x, int64_t n, float* out) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + kLaneDotLanes <= n; c += kLaneDotLanes) {
      const __m256 wv = load8(w + c);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(wv, widen8(x[r] + c)));
    }
    alignas(32) float lanes[R][kLaneDotLanes];
    for (int r = 0; r < R; ++r) _mm256_store_ps(lanes[r], acc[r]);
    finish_rows<R>(w, x, c, n, lanes, out);
  }
};

}  // namespace

Fns fns_avx2() { return fns_of<Avx2Dot>(); }

}  // namespace dsv4::kernels::lane_dot_tile
