#include "parallel/topology.h"

namespace dsv4 {

Result<Topology> make_topology(int world, int rank, int tp, int dp, int ep) {
  if (world < 1 || rank < 0 || rank >= world)
    return Status::errorf("rank {} of a world of {} ranks", rank, world);
  if (tp < 1) return Status::errorf("--tp {} must be at least 1", tp);
  if (dp < 0 || ep < 0) return Status::errorf("--dp {} and --ep {} must not be negative", dp, ep);
  Topology t;
  t.world = world;
  t.rank = rank;
  t.tp = tp;
  t.dp = dp > 0 ? dp : world / tp;
  t.ep = ep > 0 ? ep : world;
  if (dp == 0 && world % tp != 0)
    return Status::errorf("--tp {} does not divide the world of {} ranks (mpirun -np)", tp, world);
  if (t.dp * t.tp != world)
    return Status::errorf("--dp {} x --tp {} = {} ranks, but the world has {} (mpirun -np)", t.dp, t.tp, t.dp * t.tp,
                          world);
  if (world % t.ep != 0) return Status::errorf("--ep {} does not divide the world of {} ranks", t.ep, world);
  return t;
}

}  // namespace dsv4
