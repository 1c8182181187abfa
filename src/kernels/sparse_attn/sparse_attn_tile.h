// The two inner loops of the engine's sparse attention (sparse_attn.h order), compiled
// once per ISA: sparse_attn.cc (x86-64-v2), sparse_attn_avx2.cc, sparse_attn_avx512.cc.
// Logits vectorize across a block's entries, P·V across dims; every element keeps its
// operation order, so all variants give the same bits (no FMA contraction).
#pragma once

#include <cstdint>

#include "kernels/common/dot_columns.h"

namespace dsv4::kernels::attn_tile {

constexpr int kBlock = 64;  // kAttnBlock

struct Fns {
  // s[j] += Σ_d q[d]·kt[d, j] (kt [Dh, 64]) for j < n, ascending d.
  void (*logits)(const float* q, const float* kt, int Dh, int n, float* s);
  // acc[d] += Σ_j pb[j]·kb[j, d] (kb [n, Dh]), ascending j.
  void (*accumulate_pv)(const float* pb, const float* kb, int Dh, int n, float* acc);
};
Fns fns_avx2();
Fns fns_avx512();

namespace {  // one copy per translation unit: each is compiled for its own ISA

void logits_impl(const float* q, const float* kt, int Dh, int n, float* s) { dot_columns<kBlock>(q, kt, Dh, n, s); }

// acc[d] += Σ_j pb[j]·kb[j, d] for j < nr, each acc[d] in ascending j (four
// entries per pass, added one at a time).
void accumulate_pv_impl(const float* __restrict pb, const float* __restrict kb, int Dh, int nr,
                        float* __restrict acc) {
  int j = 0;
  for (; j + 4 <= nr; j += 4) {
    const float p0 = pb[j], p1 = pb[j + 1], p2 = pb[j + 2], p3 = pb[j + 3];
    const float* k0 = kb + static_cast<int64_t>(j) * Dh;
    const float* k1 = k0 + Dh;
    const float* k2 = k1 + Dh;
    const float* k3 = k2 + Dh;
    for (int d = 0; d < Dh; ++d) {
      float v = acc[d];
      v = v + p0 * k0[d];
      v = v + p1 * k1[d];
      v = v + p2 * k2[d];
      v = v + p3 * k3[d];
      acc[d] = v;
    }
  }
  for (; j < nr; ++j) {
    const float* k = kb + static_cast<int64_t>(j) * Dh;
    for (int d = 0; d < Dh; ++d) acc[d] = acc[d] + pb[j] * k[d];
  }
}

}  // namespace
}  // namespace dsv4::kernels::attn_tile
