// The vector driver of head_rms_tile.h, shared by q_path_avx2.cc and q_path_avx512.cc: heads in
// groups of Ops::kLanes, each group's factors from Ops::sums (the heads' chains in the lanes),
// then per head Ops::scale, the scaling pass with RoPE fused where its dims are whole registers
// (rope_simd.h), else rope_rotate after it.
#pragma once

#include "kernels/q_path/head_rms_tile.h"
#include "kernels/rope/rope_simd.h"

namespace dsv4::kernels::head_rms_tile {
namespace {  // one copy per translation unit: each is compiled for its own ISA

// Ops: kLanes; sums(group, head_dim, inv_n, eps, r) with group[0..kLanes) (a short group repeats
// its last head: read only) -> r [kLanes]; scale(v, head_dim, r, rope_from, cd, sd).
template <class Ops>
void heads_vector(bf16* q, int64_t n_heads, int head_dim, float inv_n, float eps, HeadRope rope) {
  constexpr int kLanes = Ops::kLanes;
  if (head_dim % kLanes != 0) return heads_portable(q, n_heads, head_dim, inv_n, eps, rope);
  const bool fused = rope.rope_dim % kLanes == 0;
  alignas(64) float cd[kRopeMaxDim], sd[kRopeMaxDim];
  if (fused) simd::rope_pair_tables(rope.cs, rope.sn, rope.rope_dim, cd, sd);
  const int rope_from = fused && rope.rope_dim > 0 ? head_dim - rope.rope_dim : head_dim;
  for (int64_t h0 = 0; h0 < n_heads; h0 += kLanes) {
    const int n = static_cast<int>(n_heads - h0 < kLanes ? n_heads - h0 : kLanes);
    bf16* group[kLanes];
    for (int h = 0; h < kLanes; ++h) group[h] = q + (h0 + (h < n ? h : n - 1)) * head_dim;
    alignas(64) float r[kLanes];
    Ops::sums(group, head_dim, inv_n, eps, r);
    for (int h = 0; h < n; ++h) {
      Ops::scale(group[h], head_dim, r[h], rope_from, cd, sd);
      if (!fused && rope.rope_dim > 0)
        rope_rotate(group[h] + (head_dim - rope.rope_dim), rope.rope_dim, rope.cs, rope.sn);
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels::head_rms_tile
