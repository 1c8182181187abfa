// De-rotation and grouped output projection (model.md §6.6, §0.4.5 A10; runtime.md
// §6.6–§6.7), per row t at position pos[t]:
//   o_h  = inverse RoPE of the last Dr dims of head h     o [T, H, Dh] bf16, in place
//   og_g = concat(o_h, h = g·H/G .. (g+1)·H/G − 1)          [Din = H·Dh/G]
//   u[g·Ro + r] = bf16(Σ₃₂ wo_a[g·Ro + r, :] · og_g)       u [T, G·Ro]; wo_a [G·Ro, Din]
//                 (the dequantized weight — stored FP8 or BF16 — and NO actq)
//   out = Linear(wo_b, u)                                   out [T, D] bf16; wo_b [D, G·Ro]
//                 (actq on u when wo_b is stored FP8/FP4, 128-blocks over the concatenated u)
// wo_b K order (runtime.md §6.7): 128-wide K blocks β; when Ro % 128 == 0 the grouped tree
//   π_g = (…(β_{g,0} + β_{g,1}) + …),  out = bf16((…(π_0 + π_1) + …) + π_{G−1});
// otherwise (tp = 1 only) the plain chain of all K blocks. π_g is linear_slice over K
// columns [g·Ro, (g+1)·Ro) with fp32 output, so a rank holding some groups computes the
// same partials and the owner's ascending chain gives the same bits.
//
// Engine: kOutProjPhases phases, each its own ThreadPool::run:
//   0 inverse RoPE on o       (row, head) pairs split
//   1 wo_a per group -> u     each group's Ro outputs split
//   2 actq(u) -> uq           rows split (skipped when wo_b is BF16)
//   3 wo_b -> out             output columns split
#pragma once

#include <cstdint>

#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

struct OutProjParams {
  int n_heads = 0;          // H
  int head_dim = 0;         // Dh
  int rope_dim = 0;         // Dr
  int o_groups = 0;         // G (H % G == 0)
  int64_t o_lora_rank = 0;  // Ro
  int64_t hidden = 0;       // D
  int64_t group_in() const { return int64_t{n_heads} / o_groups * head_dim; }  // Din
  int64_t u_width() const { return o_groups * o_lora_rank; }                  // G·Ro
  // K-group width of the wo_b tree: Ro (grouped) or 0 (plain chain).
  int64_t wo_b_k_group() const { return o_lora_rank % 128 == 0 ? o_lora_rank : 0; }
};

struct OutProjWeights {
  LinearWeight wo_a;                // [G·Ro, Din], used without actq whatever its storage
  LinearWeight wo_b;                // [D, G·Ro]
  const float* inv_freq = nullptr;  // [Dr/2], the layer's RoPE profile
};

struct OutProjIO {
  int64_t T = 0;
  bf16* o = nullptr;             // [T, H, Dh] attention output; de-rotated in place
  const int64_t* pos = nullptr;  // [T]
  bf16* out = nullptr;           // [T, D] out
  bf16* scratch = nullptr;       // out_proj_scratch_elems(p, capacity) bf16
};

// bf16 elements of scratch for T <= capacity rows: u [T, G·Ro], uq [T, G·Ro].
int64_t out_proj_scratch_elems(const OutProjParams& p, int64_t capacity);

// Reference; also de-rotates o in place.
void out_proj_ref(const OutProjParams& p, const OutProjWeights& w, bf16* o, int64_t T,
                  const int64_t* pos, bf16* out);

constexpr int kOutProjPhases = 4;
void out_proj(int phase, const OutProjParams& p, const OutProjWeights& w, const OutProjIO& io,
              int tid, int nthreads);
// Phases 1 and 2 (wo_a, then actq of u) on u columns [c0, c1) only, on the calling thread (c0,
// c1 multiples of 128 or c1 = G·Ro: whole actq blocks): one run for both when each thread takes
// its own columns.
void out_proj_wo_a_cols(const OutProjParams& p, const OutProjWeights& w, const OutProjIO& io, int64_t c0,
                        int64_t c1);
// Phase 3 (wo_b) on output columns [o0, o1) only, on the calling thread: a caller that splits
// the hidden columns itself can go on with those columns in the same run (hc_post_cols).
void out_proj_wo_b_cols(const OutProjParams& p, const OutProjWeights& w, const OutProjIO& io, int64_t o0,
                        int64_t o1);

}  // namespace dsv4::kernels

