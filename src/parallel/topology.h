// Rank topology (runtime.md §6.1): world = dp × tp. Rank w = d·tp + r is TP rank r of DP
// group d (the tp ranks of a group own the rows of its steps and shard the output
// projection and the vocabulary). Routed experts are spread over ep ranks: ep divides the
// world, and ranks [k·ep, (k+1)·ep) form EP group k (the expert set is replicated world/ep
// times). Defaults: dp = world / tp, ep = world.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace dsv4 {

struct Topology {
  int world = 1, rank = 0;
  int tp = 1, dp = 1, ep = 1;

  int tp_rank() const { return rank % tp; }
  int dp_group() const { return rank / tp; }
  int ep_rank() const { return rank % ep; }
  int ep_group() const { return rank / ep; }
};

// From the flags (0 = default) and the launched world; errors name the flag and the rule:
// tp, dp, ep >= 1; world == dp · tp; ep divides world.
Result<Topology> make_topology(int world, int rank, int tp, int dp = 0, int ep = 0);

// Contiguous share [begin, end) of n items for part i of k (i·n/k .. (i+1)·n/k).
struct Share {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
constexpr Share share_of(int64_t n, int i, int k) { return {n * i / k, n * (i + 1) / k}; }

}  // namespace dsv4
