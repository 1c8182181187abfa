#include "parallel/fixed_order.h"

#include <algorithm>
#include <cstring>

namespace dsv4 {

GroupRange groups_of_rank(int64_t n_groups, int rank, int n_ranks) {
  return {n_groups * rank / n_ranks, n_groups * (rank + 1) / n_ranks};
}

int64_t reduce_scatter_scratch_floats(int64_t n_groups, int n_ranks, int64_t T, int64_t width) {
  // received slabs: all groups × own rows, ≤ G·T·width
  return n_groups * T * width + 1;
}

Status reduce_scatter_fixed_order(Communicator& comm, int64_t n_groups, const float* partials,
                                  std::span<const int64_t> rows, int64_t width, float* out, float* scratch) {
  const int n = comm.size(), me = comm.rank();
  if (static_cast<int>(rows.size()) != n)
    return Status::errorf("reduce_scatter: {} row counts for {} ranks", rows.size(), n);
  if (n_groups < n) return Status::errorf("reduce_scatter: {} groups for {} ranks (need at least one each)", n_groups, n);
  const GroupRange mine = groups_of_rank(n_groups, me, n);
  const int64_t local = mine.end - mine.begin;
  // Send: to owner o its rows of partials, each with this rank's groups in order.
  float* recv = scratch;
  int64_t send_rows[64], recv_rows[64];  // per-peer counts in rows of `width` floats
  if (n > 64) return Status::errorf("reduce_scatter: {} ranks, at most 64", n);
  for (int o = 0; o < n; ++o) {
    send_rows[o] = local * rows[o];
    const GroupRange theirs = groups_of_rank(n_groups, o, n);
    recv_rows[o] = (theirs.end - theirs.begin) * rows[me];
  }
  DSV4_RETURN_IF_ERROR(comm.all_to_all_rows(partials, {send_rows, static_cast<size_t>(n)}, recv,
                                            {recv_rows, static_cast<size_t>(n)}, width * 4));
  // Peer q's slab is [own rows, q's groups, width]; peers in rank order: groups ascending.
  const int64_t R = rows[me];
  for (int64_t t = 0; t < R; ++t) {
    float* acc = out + t * width;
    const float* slab = recv;
    bool first = true;
    for (int q = 0; q < n; ++q) {
      const GroupRange theirs = groups_of_rank(n_groups, q, n);
      const int64_t lq = theirs.end - theirs.begin;
      for (int64_t lg = 0; lg < lq; ++lg) {
        const float* p = slab + (t * lq + lg) * width;
        if (first)
          for (int64_t j = 0; j < width; ++j) acc[j] = p[j];
        else
          for (int64_t j = 0; j < width; ++j) acc[j] = acc[j] + p[j];
        first = false;
      }
      slab += lq * R * width;
    }
  }
  return Status();
}

}  // namespace dsv4
