// MoE combine (model.md §9.3; Level A §0.4.5 A13), per row t:
//   y = 0                                                        fp32 [D]
//   for each distinct routed expert id e of row t, in ascending id:  y = f32(y + out_e)
//   y = f32(y + shared_t)                                        the shared expert last
//   m_t = bf16(y)
// Inputs: ids [T, K] int32 (the router's selection; a repeated id is added once), the routed
// outputs as bf16 rows of D addressed per route slot, shared [T, D] bf16; output m [T, D] bf16.
// route_row[t·K + k] is the row of `routed` holding slot (t, k)'s output (nullptr: row t·K + k,
// the [T·K, D] per-slot layout of runtime.md §6.9); for a repeated id the first slot's row is used.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"

namespace dsv4::kernels {

struct MoeCombineParams {
  int64_t hidden = 0;               // D
  int64_t num_experts_per_tok = 0;  // K (≤ 32)
};

void moe_combine_ref(const bf16* routed, const int32_t* route_row, const int32_t* ids,
                     const bf16* shared, const MoeCombineParams& p, int64_t T, bf16* m);
// Engine: (row, 256-wide chunk of D) items split over threads; per element the same adds in the
// same order as the reference.
void moe_combine(const bf16* routed, const int32_t* route_row, const int32_t* ids,
                 const bf16* shared, const MoeCombineParams& p, int64_t T, bf16* m, int tid,
                 int nthreads);
// moe_combine on hidden columns [d0, d1) of every row, on the calling thread (the same adds per
// element): a thread that wrote those columns of every term may run it in the same run.
void moe_combine_cols(const bf16* routed, const int32_t* route_row, const int32_t* ids, const bf16* shared,
                      const MoeCombineParams& p, int64_t T, int64_t d0, int64_t d1, bf16* m);

}  // namespace dsv4::kernels
