// head_rms (q_path.h A4) and then RoPE on a run of contiguous heads, compiled once per ISA:
// q_path.cc (x86-64-v2, one head at a time), q_path_avx2.cc (8 heads), q_path_avx512.cc
// (16 heads; RoPE fused into the scaling pass, kernels/rope/rope_simd.h).
// Each head's Σ sq_i stays one ascending fp32 chain; the vector forms interleave the heads'
// independent chains in the lanes of a register (a transpose of each 8 or 16 dims), so
// every variant gives the bits of head_rms_ref (no FMA contraction: CMakeLists.txt).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/rope/rope.h"
#include "numeric/bf16.h"

namespace dsv4::kernels::head_rms_tile {

// q [n_heads, head_dim] in place; inv_n = fp32(1/Dh), eps = fp32(ε); then, when rope_dim > 0,
// rope_rotate of each head's last rope_dim dims with the row's tables cs, sn [rope_dim/2].
struct HeadRope {
  int rope_dim = 0;
  const float* cs = nullptr;
  const float* sn = nullptr;
};
using HeadsFn = void (*)(bf16* q, int64_t n_heads, int head_dim, float inv_n, float eps, HeadRope rope);
HeadsFn heads_avx2();
HeadsFn heads_avx512();

namespace {  // one copy per translation unit: each is compiled for its own ISA

// r = bf16(1/sqrt(bf16(bf16(Σ·inv_n) + ε))) of one head.
inline float head_factor(float sum, float inv_n, float eps) {
  const float mu = round_bf16(sum * inv_n);
  const float var = round_bf16(mu + eps);
  return round_bf16(1.0f / std::sqrt(var));
}

// One head (ascending sum, as the reference).
inline void head_one(bf16* v, int head_dim, float inv_n, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < head_dim; ++i) {
    const float x = v[i].to_float();
    sum += round_bf16(x * x);
  }
  const float r = head_factor(sum, inv_n, eps);
  for (int i = 0; i < head_dim; ++i) v[i] = bf16::from_float(v[i].to_float() * r);
}

inline void heads_portable(bf16* q, int64_t n_heads, int head_dim, float inv_n, float eps, HeadRope rope) {
  for (int64_t h = 0; h < n_heads; ++h) {
    bf16* v = q + h * head_dim;
    head_one(v, head_dim, inv_n, eps);
    if (rope.rope_dim > 0) rope_rotate(v + (head_dim - rope.rope_dim), rope.rope_dim, rope.cs, rope.sn);
  }
}

}  // namespace
}  // namespace dsv4::kernels::head_rms_tile
