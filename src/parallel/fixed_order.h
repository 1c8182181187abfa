// Reduce-scatter of fp32 partials to the rows' owners in a fixed summation order
// (runtime.md §6.7): G work groups with global indices 0..G−1 are split over the ranks in
// contiguous runs (rank r: groups [r·G/n, (r+1)·G/n)); each group leaves a partial row of
// width for all T rows of the step, stored row-major [T, local groups, width] so that each
// owner's rows are one contiguous slab, sent as they are (no staging copy); rank o owns
// rows [off_o, off_o + rows[o]). The
// owner adds the G partials of its rows in ascending group order,
//   acc = p_0;  acc = f32(acc + p_g) for g = 1..G−1,
// which is what one rank computes alone: the result does not depend on the rank count.
// Transport: one all-to-all of per-owner slabs (never an MPI reduction).
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "parallel/communicator.h"

namespace dsv4 {

struct GroupRange {
  int64_t begin = 0, end = 0;  // global groups [begin, end) of one rank
};
GroupRange groups_of_rank(int64_t n_groups, int rank, int n_ranks);

// Scratch floats for a step of T rows.
int64_t reduce_scatter_scratch_floats(int64_t n_groups, int n_ranks, int64_t T, int64_t width);

// partials [T, local groups, width] (this rank's groups in ascending order; T = Σ rows),
// rows [n_ranks] -> out [rows[rank], width]; rows past rows[rank] of out untouched.
Status reduce_scatter_fixed_order(Communicator& comm, int64_t n_groups, const float* partials,
                                  std::span<const int64_t> rows, int64_t width, float* out, float* scratch);

}  // namespace dsv4
