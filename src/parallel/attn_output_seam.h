// DSA-CP output seam of an attention layer over a TP group of G ranks (runtime.md §6.3
// steps 4-6, §6.5-§6.7). Each rank owns its step rows and computed all H heads for them;
// rank r holds output groups [r·G_o/G, (r+1)·G_o/G) of wo_a (a row shard) and the matching
// wo_b input columns (a column shard, copied at load).
//   1 all-to-all: own row t sends to rank d the heads of d's groups (one contiguous
//     H·Dh/G slice of the row)  ->  X [group_t, H·Dh/G], rows rank-major
//   2 u = bf16(X · wo_a_shard^T) per local group (FP32 accumulation, no actq)
//   3 actq(u) per 128-block when wo_b is quantized
//   4 π_g = FP32 block chain of wo_b over the group's own K columns   [group_t, local groups, D]
//   5 reduce-scatter to the owners in fixed group order (parallel/fixed_order.h), one cast
//     to bf16: out = bf16((…(π_0 + π_1) + …) + π_{G_o−1})
// This is the grouped tree of kernels/out_proj.h, so every G dividing G_o gives the bits of
// one rank. Rows are packed compactly; a rank with no rows still joins both collectives.
// No staging copies: step 1 sends from o's own layout (a strided all-to-all), step 4 writes the
// reduce-scatter's send layout. Both collectives block: nothing of the layer is independent of
// them.
// The inverse RoPE of the heads (out_proj phase 0) runs before, on the owner.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/out_proj/out_proj.h"
#include "numeric/bf16.h"
#include "numeric/linear_weight.h"
#include "parallel/communicator.h"
#include "parallel/seam_time.h"

namespace dsv4 {

// One rank's shard of one layer's output projection.
struct OutProjShard {
  LinearWeight wo_a;             // [G_l·Ro, Din], rows of the local groups (view)
  LinearWeight wo_b;             // [D, G_l·Ro], columns of the local groups (owned copy)
  std::vector<uint8_t> storage;  // wo_b's copy
};

// Errors: G does not divide G_o, Ro % 128 != 0 with G > 1, a weight of the wrong shape.
Result<OutProjShard> make_out_proj_shard(const kernels::OutProjParams& p, const LinearWeight& wo_a,
                                         const LinearWeight& wo_b, int tp, int tp_rank);

class AttnOutputSeam {
 public:
  // capacity: the most rows of one TP group in a step (and so of one rank).
  AttnOutputSeam(const kernels::OutProjParams& p, int tp, int tp_rank, int64_t capacity);

  // o [rows[tp_rank], H, Dh] bf16 (de-rotated); rows[q] = TP rank q's rows this step;
  // out [rows[tp_rank], D] bf16 (rows past it untouched).
  Status run(Communicator& tp, ThreadPool& pool, const OutProjShard& w, const bf16* o,
             std::span<const int64_t> rows, bf16* out);
  // Bytes this rank sent since construction: head-group all-to-all, partials' reduce-scatter.
  int64_t a2a_bytes = 0, reduce_bytes = 0;
  SeamTime time;

 private:
  kernels::OutProjParams p_;
  int tp_, rank_;
  int64_t capacity_, n_local_;  // local groups G_l
  std::vector<bf16> x_, u_, uq_;
  std::vector<float> partial_, reduce_, acc_;
};

}  // namespace dsv4
