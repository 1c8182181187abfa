// The communicators of one rank (runtime.md §6.1): the whole job, its TP group (the tp
// ranks of its DP group, which own the step's rows and shard the output projection and
// the vocabulary) and its EP group (the ep ranks that spread the routed experts).
// Built once at start-up; every rank of the job must call make_rank_groups.
#pragma once

#include <memory>

#include "base/status.h"
#include "parallel/communicator.h"
#include "parallel/topology.h"

namespace dsv4 {

struct RankGroups {
  Topology topo;
  Communicator* world = nullptr;      // not owned
  std::unique_ptr<Communicator> tp;   // ranks [d·tp, (d+1)·tp), ordered by TP rank
  std::unique_ptr<Communicator> ep;   // ranks [k·ep, (k+1)·ep), ordered by EP rank
  bool overlap = true;                // seams overlap non-blocking collectives with compute

  bool multi() const { return topo.world > 1; }
  // World rank of TP rank q of this rank's DP group.
  int tp_peer(int q) const { return topo.dp_group() * topo.tp + q; }
};

// Splits `world` per t (t.world == world.size(), t.rank == world.rank()).
Result<std::unique_ptr<RankGroups>> make_rank_groups(Communicator& world, const Topology& t);

}  // namespace dsv4
