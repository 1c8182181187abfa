#include "parallel/fixed_order.h"

#include <algorithm>
#include <cstring>

namespace dsv4 {

GroupRange groups_of_rank(int64_t n_groups, int rank, int n_ranks) {
  return {n_groups * rank / n_ranks, n_groups * (rank + 1) / n_ranks};
}

int64_t reduce_scatter_scratch_floats(int64_t n_groups, int n_ranks, int64_t T, int64_t width) {
  // send slabs (local groups × all rows) + received slabs (all groups × own rows), each ≤ G·T·width
  return 2 * n_groups * T * width + 1;
}

Status reduce_scatter_fixed_order(Communicator& comm, int64_t n_groups, const float* partials,
                                  std::span<const int64_t> rows, int64_t width, float* out, float* scratch) {
  const int n = comm.size(), me = comm.rank();
  if (static_cast<int>(rows.size()) != n)
    return Status::errorf("reduce_scatter: {} row counts for {} ranks", rows.size(), n);
  if (n_groups < n) return Status::errorf("reduce_scatter: {} groups for {} ranks (need at least one each)", n_groups, n);
  int64_t T = 0;
  for (int64_t r : rows) T += r;
  const GroupRange mine = groups_of_rank(n_groups, me, n);
  const int64_t local = mine.end - mine.begin;
  // Send: to owner o, this rank's groups in order, each the owner's rows.
  float* send = scratch;
  float* recv = scratch + n_groups * T * width;
  int64_t send_rows[64], recv_rows[64];  // per-peer counts in rows of `width` floats
  if (n > 64) return Status::errorf("reduce_scatter: {} ranks, at most 64", n);
  int64_t off = 0, pos = 0;
  for (int o = 0; o < n; ++o) {
    for (int64_t lg = 0; lg < local; ++lg) {
      if (rows[o] > 0)
        std::memcpy(send + pos * width, partials + (lg * T + off) * width,
                    sizeof(float) * static_cast<size_t>(rows[o] * width));
      pos += rows[o];
    }
    send_rows[o] = local * rows[o];
    const GroupRange theirs = groups_of_rank(n_groups, o, n);
    recv_rows[o] = (theirs.end - theirs.begin) * rows[me];
    off += rows[o];
  }
  DSV4_RETURN_IF_ERROR(comm.all_to_all_rows(send, {send_rows, static_cast<size_t>(n)}, recv,
                                            {recv_rows, static_cast<size_t>(n)}, width * 4));
  // Received slabs are in global group order (peers in rank order, groups contiguous).
  const int64_t R = rows[me];
  for (int64_t t = 0; t < R; ++t) {
    float* acc = out + t * width;
    std::memcpy(acc, recv + t * width, sizeof(float) * static_cast<size_t>(width));
    for (int64_t g = 1; g < n_groups; ++g) {
      const float* p = recv + (g * R + t) * width;
      for (int64_t j = 0; j < width; ++j) acc[j] = acc[j] + p[j];
    }
  }
  return Status();
}

}  // namespace dsv4
