// Proposer: a speculative drafter (the proposer of vLLM v1; runtime.md §3.2, §4). The target
// verifies a request's drafts in the step after they were proposed. Per step:
//   taps()     before the forward: what the main forward writes for the drafter
//   verify()   in sampling: how the target checks a request's drafts (sampler.h)
//   commit()   after the scheduler's update: the positions committed to the caches this step
//              reach the drafter's state
//   propose()  then: drafts for every live request whose next token is known, to the scheduler
// With ranks every rank calls commit() and propose() (their stages join the seams); each
// request's drafts come from one rank and are all-gathered (rank_wire.h).
//
// Two proposers: MTP (model.md §11) and DSpark (dspark.md §4).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "model/limits.h"
#include "numeric/bf16.h"
#include "runtime/scheduler.h"

namespace dsv4 {

class ModelRunner;
class RankWire;
class Sampler;

class Proposer {
 public:
  virtual ~Proposer() = default;

  // Buffers the main forward fills for the drafter (nullptr: not needed): Xfinal [T_MAX, N·D]
  // (ModelRunner::forward's xfinal_out) and the target features [T_MAX, features_width]
  // (its features_out).
  struct Taps {
    bf16* xfinal = nullptr;
    bf16* features = nullptr;
    int64_t features_width = 0;
  };
  virtual Taps taps() { return {}; }
  // How the target checks p's drafts: by exact match (draft_lambda nullptr; runtime.md §3.2) or
  // by speculative sampling against the drafter's distributions λ_0 … λ_{n_drafts−1}
  // [n_drafts, V] (dspark.md §4.3).
  struct Verification {
    const float* draft_lambda = nullptr;
  };
  virtual Verification verify(const PlannedRows& p) const {
    (void)p;
    return {};
  }
  // row_begin [planned]: each request's first row in the main forward.
  virtual Status commit(const std::vector<PlannedRows>& plan, const int64_t* row_begin) = 0;
  virtual Status propose(const std::vector<PlannedRows>& plan) = 0;
};

// What a proposer works with (not owned).
struct ProposerContext {
  const ModelConfig& cfg;
  const Limits& limits;
  ModelRunner& runner;
  Scheduler& sched;
  Sampler& sampler;
  RankWire& wire;
  int rank = 0;
  // EngineOptions::force_draft: the draft for (request id, position) unless it returns -1.
  std::function<int32_t(int64_t, int64_t)> force_draft;
};

// MTP: one draft per request, the argmax of the MTP layer (mtp_proposer.cc).
std::unique_ptr<Proposer> make_mtp_proposer(const ProposerContext& ctx);
// DSpark: γ drafts per round; rejection: rounds at temperature > 0 drawn from λ and verified by
// speculative sampling (dspark_proposer.cc).
std::unique_ptr<Proposer> make_dspark_proposer(const ProposerContext& ctx, int32_t gamma, bool rejection);

}  // namespace dsv4
