// The ranks of one dsv4 command (runtime.md §6): one process, or an mpirun job whose
// ranks all run the same command line. --tp/--dp/--ep give the topology; only rank 0
// prints and writes files; an error that every rank meets (flags, topology, checkpoint) is
// printed once and every rank exits non-zero.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "model/config.h"
#include "model/weights.h"
#include "parallel/communicator.h"
#include "parallel/rank_groups.h"

namespace CLI {
class App;
}

namespace dsv4::cli {

struct RankFlags {
  int tp = 1, dp = 0, ep = 0;  // 0: default (dp = world / tp, ep = world)
  bool no_overlap = false;     // the MoE dispatch waited for before any expert work
};
void add_rank_options(CLI::App* sub, RankFlags* f);

class RankSession {
 public:
  // MPI when started by mpirun, else one rank. Ranks other than 0 stop printing to stdout
  // and print no errors.
  static Result<std::unique_ptr<RankSession>> start(const RankFlags& f);

  bool primary() const { return world_->rank() == 0; }
  int world_size() const { return world_->size(); }
  int rank() const { return world_->rank(); }
  // resolve_model_dir on rank 0 first, then the others (a missing model is reported once).
  Result<std::string> model_dir(const std::string& model_flag);
  // Checks the topology against the model and builds the TP/EP groups.
  Status bind(const ModelConfig& cfg);
  // How this rank loads the weights: with several ranks, wo_a as stored and only the data
  // of its share read (model/weights.h LoadOptions).
  LoadOptions load_options(const ModelConfig& cfg) const;
  // nullptr for one rank.
  RankGroups* groups() { return world_->size() > 1 ? groups_.get() : nullptr; }
  // Every rank's outcome of a step that may fail on some ranks only (a checkpoint read on
  // each host, a memory reservation): all ranks return an error if any failed. A failing
  // rank other than 0 prints its own message (rank 0 prints the first failing rank's number),
  // unless rank 0 failed too (then the error is taken to be the same everywhere).
  Status agree(const Status& mine);
  // Ends the whole job after a failure that other ranks may wait on.
  [[noreturn]] void abort_job(const Status& st);
  // Ends this rank after its engine's job failed (Engine::job_failed: every rank left its
  // step with an error): rank 0 prints the error, then every rank waits for the others at the
  // exit (at most kExitWaitSeconds, so rank 0 answers its clients first) and exits 1.
  static constexpr double kExitWaitSeconds = 30;
  [[noreturn]] void end_failed_job(const Status& st);

 private:
  RankFlags flags_;
  Topology topo_;
  std::unique_ptr<Communicator> world_;
  std::unique_ptr<RankGroups> groups_;
};

}  // namespace dsv4::cli
