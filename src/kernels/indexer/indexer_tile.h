// Scores of one tile of index keys (indexer.h order: per head the dot in ascending k,
// bf16, relu, times the head weight, bf16, summed over heads in ascending h), compiled
// once per ISA: indexer.cc (x86-64-v2), indexer_avx2.cc, indexer_avx512.cc. The loops
// vectorize across the tile's entries at each unit's vector width and keep every
// score's operation order, so all variants give the same bits (no FMA contraction).
#pragma once

#include "base/cpu.h"
#include "kernels/common/dot_columns.h"
#include "numeric/bf16.h"

namespace dsv4::kernels::indexer_tile {

constexpr int kScoreTile = 64;  // entries per transposed tile

// qf [Hi, Di], wf [Hi], jt [Di, 64] (the tile's nb keys, transposed) -> sc [nb];
// dv [2, 64] scratch. Di is even.
using ScoreTileFn = void (*)(const float* qf, const float* wf, const float* jt, int Hi, int Di, int nb,
                             float* dv, float* sc);

ScoreTileFn score_tile_avx2();
ScoreTileFn score_tile_avx512();

namespace {  // one copy per translation unit: each is compiled for its own ISA

// d0[j] += Σ_k q0[k]·t[k, j] and d1[j] += Σ_k q1[k]·t[k, j] (two heads per pass over the
// tile: twice the independent chains), each sum in ascending k as dot_columns.
void dot_columns_2(const float* __restrict q0, const float* __restrict q1, const float* __restrict t, int n_dims,
                   int n_cols, float* __restrict d0, float* __restrict d1) {
  for (int k = 0; k < n_dims; k += 2) {
    const float a0 = q0[k], a1 = q0[k + 1], b0 = q1[k], b1 = q1[k + 1];
    const float* t0 = t + k * kScoreTile;
    const float* t1 = t0 + kScoreTile;
    for (int j = 0; j < n_cols; ++j) {
      float u = d0[j], v = d1[j];
      u = u + a0 * t0[j];
      v = v + b0 * t0[j];
      u = u + a1 * t1[j];
      v = v + b1 * t1[j];
      d0[j] = u;
      d1[j] = v;
    }
  }
}

// dv: [2, 64] scratch.
void score_tile_impl(const float* qf, const float* wf, const float* jt, int Hi, int Di, int nb, float* dv,
                     float* sc) {
  for (int j = 0; j < nb; ++j) sc[j] = 0.0f;
  float* d0 = dv;
  float* d1 = dv + kScoreTile;
  auto add_head = [&](const float* d, float w) {
    for (int j = 0; j < nb; ++j) {
      const float x = round_bf16(d[j]);
      const float relu = x > 0.0f ? x : 0.0f;
      sc[j] += round_bf16(relu * w);
    }
  };
  int h = 0;
  for (; h + 2 <= Hi; h += 2) {
    for (int j = 0; j < nb; ++j) d0[j] = d1[j] = 0.0f;
    dot_columns_2(qf + static_cast<int64_t>(h) * Di, qf + static_cast<int64_t>(h + 1) * Di, jt, Di, nb, d0, d1);
    add_head(d0, wf[h]);  // heads join the sum in ascending h
    add_head(d1, wf[h + 1]);
  }
  for (; h < Hi; ++h) {
    for (int j = 0; j < nb; ++j) d0[j] = 0.0f;
    dot_columns<kScoreTile>(qf + static_cast<int64_t>(h) * Di, jt, Di, nb, d0);
    add_head(d0, wf[h]);
  }
}

}  // namespace
}  // namespace dsv4::kernels::indexer_tile
