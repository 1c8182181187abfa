// The pair step of the FP4 and FP8 dot tiles (linear_fp4.h, linear_fp8.h) on AVX-512 BF16: one
// VDPBF16PS per (row, tile) for one column pair. Only intrinsics and linear_tile.h here.
#pragma once

#include <cstdint>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_tile.h"

namespace dsv4::kernels::linear_tile {

// p[r][t] += the pair (col, col + 1) of row r's bf16 x times w[t], the NT tiles' decoded bf16
// weights of that pair: each row's x pair is broadcast once for its NT dots.
template <int R, int NT>
inline void dot_column_pair(__m512 (&p)[R][NT], const __m512i (&w)[NT], const uint16_t* const* xr, int64_t col) {
  DSV4_UNROLL(16)
  for (int r = 0; r < R; ++r) {
    int32_t pair;
    __builtin_memcpy(&pair, xr[r] + col, 4);
    const __m512bh xp = (__m512bh)_mm512_set1_epi32(pair);
    DSV4_UNROLL(4)
    for (int t = 0; t < NT; ++t) p[r][t] = _mm512_dpbf16_ps(p[r][t], (__m512bh)w[t], xp);
  }
}

}  // namespace dsv4::kernels::linear_tile
