#include "parallel/rank_groups.h"

namespace dsv4 {

Result<std::unique_ptr<RankGroups>> make_rank_groups(Communicator& world, const Topology& t) {
  if (t.world != world.size() || t.rank != world.rank())
    return Status::errorf("topology of {} ranks (rank {}) does not match the job's {} ranks (rank {})", t.world,
                          t.rank, world.size(), world.rank());
  auto g = std::make_unique<RankGroups>();
  g->topo = t;
  g->world = &world;
  Result<std::unique_ptr<Communicator>> tp = world.split(t.dp_group(), t.tp_rank());
  if (!tp.ok()) return tp.status();
  g->tp = std::move(*tp);
  Result<std::unique_ptr<Communicator>> ep = world.split(t.ep_group(), t.ep_rank());
  if (!ep.ok()) return ep.status();
  g->ep = std::move(*ep);
  if (g->tp->size() != t.tp || g->ep->size() != t.ep)
    return Status::errorf("communicator split gave TP {} / EP {} ranks, expected {} / {}", g->tp->size(),
                          g->ep->size(), t.tp, t.ep);
  return g;
}

}  // namespace dsv4
