#include "ranks.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "model/placement.h"

namespace dsv4::cli {

void add_rank_options(CLI::App* sub, RankFlags* f) {
  sub->add_option("--tp", f->tp, "Ranks sharing each step's rows, output projection and vocabulary (mpirun -np)")
      ->capture_default_str();
  sub->add_option("--dp", f->dp, "Independent attention groups (default: world / tp)");
  sub->add_option("--ep", f->ep, "Ranks spreading the routed experts (default: the world)");
  sub->add_flag("--no-overlap", f->no_overlap,
                "Wait for the MoE dispatch before the own rows' experts (default: they overlap it)");
}

Result<std::unique_ptr<RankSession>> RankSession::start(const RankFlags& f) {
  auto s = std::unique_ptr<RankSession>(new RankSession());
  s->flags_ = f;
  if (launched_by_mpirun()) {
    Result<std::unique_ptr<Communicator>> c = make_mpi_communicator();
    if (!c.ok()) return c.status();
    s->world_ = std::move(*c);
  } else {
    s->world_ = make_single_communicator();
  }
  if (!s->primary()) {
    set_error_printing(false);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) return Status::error("cannot silence stdout");
  }
  Result<Topology> t = make_topology(s->world_->size(), s->world_->rank(), f.tp, f.dp, f.ep);
  if (!t.ok()) return t.status();
  s->topo_ = *t;
  return s;
}

Result<std::string> RankSession::model_dir(const std::string& model_flag) {
  Result<std::string> dir = primary() ? resolve_model_dir(model_flag) : Result<std::string>(std::string());
  uint8_t ok = dir.ok() ? 1 : 0;
  DSV4_RETURN_IF_ERROR(world_->broadcast(&ok, 1, 0));
  if (!ok) return primary() ? dir.status() : Status::error("rank 0 could not resolve the model directory");
  return primary() ? dir : resolve_model_dir(model_flag);
}

LoadOptions RankSession::load_options(const ModelConfig& cfg) const {
  LoadOptions o;
  if (world_->size() == 1) return o;
  if (validate_topology(cfg, topo_).ok())  // else bind() reports it
    o.reads = [cfg, t = topo_](const std::string& name) { return rank_reads(name, cfg, t); };
  return o;
}

Status RankSession::bind(const ModelConfig& cfg) {
  DSV4_RETURN_IF_ERROR(validate_topology(cfg, topo_));
  Result<std::unique_ptr<RankGroups>> g = make_rank_groups(*world_, topo_);
  if (!g.ok()) return g.status();
  groups_ = std::move(*g);
  groups_->overlap = !flags_.no_overlap;
  return Status();
}

Status RankSession::agree(const Status& mine) {
  const int n = world_->size();
  if (n == 1) return mine;
  uint8_t ok = mine.ok() ? 1 : 0;
  std::vector<uint8_t> all(static_cast<size_t>(n));
  const std::vector<int64_t> one(static_cast<size_t>(n), 1);
  DSV4_RETURN_IF_ERROR(world_->all_gather_rows(&ok, one, 1, all.data()));
  int first_failed = -1;
  for (int q = n - 1; q >= 0; --q)
    if (!all[q]) first_failed = q;
  if (first_failed < 0) return Status();
  if (!mine.ok()) {
    if (!primary() && all[0]) {
      std::fprintf(stderr, "dsv4: error (rank %d): %s\n", world_->rank(), mine.message().c_str());
      std::fflush(stderr);
    }
    return mine;
  }
  return Status::errorf("rank {} failed (its message above)", first_failed);
}

void RankSession::end_failed_job(const Status& st) {
  fail(st);
  if (world_->size() > 1) {
    (void)wait_for_ranks_at_exit(kExitWaitSeconds);
    exit_failed_job(1);
  }
  std::exit(1);
}

void RankSession::abort_job(const Status& st) {
  std::fprintf(stderr, "dsv4: error (rank %d): %s\n", world_->rank(), st.message().c_str());
  std::fflush(stderr);
  world_->abort(1);
  std::abort();  // not reached
}

}  // namespace dsv4::cli
