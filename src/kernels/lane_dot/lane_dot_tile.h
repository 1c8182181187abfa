// lane_dot_rows / lane_dot_block per ISA: lane_dot.cc (x86-64-v2, the portable loops),
// lane_dot_avx2.cc (intrinsics: a row's 8 lanes are one ymm, up to 8 rows' chains in flight)
// and lane_dot_avx512.cc (lane_dot_block: two weights' lanes in one zmm). Products and sums
// stay separate roundings (-ffp-contract=off), so every variant gives the reference's bits.
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/lane_dot/lane_dot.h"

namespace dsv4::kernels::lane_dot_tile {

using BlockFn = void (*)(const bf16* const* w, int n_w, const bf16* const* x, int rows, int64_t n, float* out);
struct Fns {
  void (*f32)(const float* w, const bf16* const* x, int rows, int64_t n, float* out);
  void (*bf16w)(const bf16* w, const bf16* const* x, int rows, int64_t n, float* out);
  BlockFn block;  // lane_dot_block
};
Fns fns_avx2();
BlockFn block_avx512();  // the AVX-512 variant's lane_dot_block (its row dots are AVX2's)

namespace {  // one copy per translation unit: each is compiled for its own ISA

inline float widen(bf16 v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }
inline float widen(float v) { return v; }

// The elements from c on (the tail, fewer than 8) into the lanes, then the combining tree.
template <int R, class W>
void finish_rows(const W* w, const bf16* const* x, int64_t c, int64_t n, float (*acc)[kLaneDotLanes], float* out) {
  for (; c < n; ++c)
    for (int r = 0; r < R; ++r) acc[r][c % kLaneDotLanes] = acc[r][c % kLaneDotLanes] + widen(w[c]) * widen(x[r][c]);
  for (int r = 0; r < R; ++r) {
    const float* a = acc[r];
    out[r] = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
  }
}

// Portable form (vectorized by the compiler as far as the ISA of the unit allows).
template <int R, class W>
void dot_rows(const W* __restrict w, const bf16* const* x, int64_t n, float* out) {
  float acc[R][kLaneDotLanes] = {};
  int64_t c = 0;
  for (; c + kLaneDotLanes <= n; c += kLaneDotLanes)
    for (int r = 0; r < R; ++r)
      for (int l = 0; l < kLaneDotLanes; ++l) acc[r][l] = acc[r][l] + widen(w[c + l]) * widen(x[r][c + l]);
  finish_rows<R>(w, x, c, n, acc, out);
}

// rows_impl<Dot>: Dot::rows<R, W> for the runtime row count.
template <class Dot, class W>
void rows_impl(const W* w, const bf16* const* x, int rows, int64_t n, float* out) {
  switch (rows) {
    case 8: return Dot::template rows<8>(w, x, n, out);
    case 7: return Dot::template rows<7>(w, x, n, out);
    case 6: return Dot::template rows<6>(w, x, n, out);
    case 5: return Dot::template rows<5>(w, x, n, out);
    case 4: return Dot::template rows<4>(w, x, n, out);
    case 3: return Dot::template rows<3>(w, x, n, out);
    case 2: return Dot::template rows<2>(w, x, n, out);
    default: return Dot::template rows<1>(w, x, n, out);
  }
}

// lane_dot_block as one row pass per weight.
template <class Dot>
void block_by_rows(const bf16* const* w, int n_w, const bf16* const* x, int rows, int64_t n, float* out) {
  for (int i = 0; i < n_w; ++i) rows_impl<Dot, bf16>(w[i], x, rows, n, out + i * rows);
}

template <class Dot>
Fns fns_of() {
  return Fns{rows_impl<Dot, float>, rows_impl<Dot, bf16>, block_by_rows<Dot>};
}

struct PortableDot {
  template <int R, class W>
  static void rows(const W* w, const bf16* const* x, int64_t n, float* out) {
    dot_rows<R>(w, x, n, out);
  }
};

}  // namespace
}  // namespace dsv4::kernels::lane_dot_tile
