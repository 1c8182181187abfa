// ModelRunner on several ranks (runtime.md §6): the rows each rank computes and caches and the
// seams live in RankRows (model/rank_rows.h); here the runner's side: set-up, the routed
// experts over the EP group, and the bytes each seam sent.
#include "model/rank_rows.h"
#include "model/runner.h"
#include "model/runner_state.h"

namespace dsv4 {

Status ModelRunner::init_ranks(RankGroups* g) {
  Result<std::unique_ptr<RankRows>> r = RankRows::create(cfg_, w_, limits_, g, step_meta_.cap);
  if (!r.ok()) return r.status();
  ranks_ = std::move(*r);
  return Status();
}

ModelRunner::SeamBytes ModelRunner::seam_bytes() const { return ranks_ ? ranks_->seam_bytes() : SeamBytes{}; }

ModelRunner::SeamTimes ModelRunner::seam_times() const { return ranks_ ? ranks_->seam_times() : SeamTimes{}; }

void ModelRunner::reset_seam_bytes() {
  if (ranks_) ranks_->reset_seam_bytes();
}

// With an EP seam its batch, whose first rows are the own rows (nothing is copied into it).
ModelRunner::MoeRows ModelRunner::moe_rows() {
  if (ranks_ && ranks_->moe) return {ranks_->moe->rows(), ranks_->moe->ids(), ranks_->moe->route_w()};
  StepScratch& s = *scratch_;
  return {s.a.data(), s.ids.data(), s.route_w.data()};
}

// Expert-parallel MoE over the EP group (parallel/moe_seam.h): local experts
// [ep_rank·E/ep, (ep_rank+1)·E/ep).
Status ModelRunner::run_moe_seam(const LayerCaches& lc) {
  StepScratch& s = *scratch_;
  const Topology& t = ranks_->g->topo;
  const int64_t first = cfg_.n_routed_experts / t.ep * t.ep_rank();
  return ranks_->moe->run(*ranks_->g->ep, pool_, step_meta_.T, lc.experts.data() + first, lc.shared, s.m.data());
}

}  // namespace dsv4
