// Engine: continuous batching over one ModelRunner (runtime.md §1, §3, §4). The engine is the
// loop; each stage is its own unit, as in vLLM v1:
//   schedule  runtime/scheduler.h: admission, preemption, the rows of every request (the plan)
//   execute   ModelRunner::forward over the plan's rows; runtime/sampler.h: the head rows'
//             tokens and logprobs, the drafts verified
//   update    Scheduler::update: commit, stop rules -> the step's RequestUpdates, which the
//             caller streams; then runtime/proposer.h (MTP or DSpark) drafts the next round
// Each running request contributes a prompt chunk (<= max_chunk) while it prefills, then 1
// row per decode step (1 + its drafts with a proposer), so B changes from step to step.
// Sampling (model.md §10.2) depends only on the request's seed and the position, so a
// request's tokens never depend on its batch. A finished request's state is released at once.
//
// Several ranks (EngineOptions::ranks, runtime.md §6; runtime/rank_wire.h): requests enter on
// rank 0 only. Each step starts with rank 0's step header: the requests added since the last
// step (in full, once), its cancels, or the stop signal; every rank then runs the same
// scheduler on the same state, so admission, owners (runtime/scheduler.h: slots and pages are
// per rank) and the StepPlan agree everywhere. Samplers sample their requests' rows and the
// sampled tokens (then the drafts) are all-gathered: the per-step deltas every rank applies.
// Ranks other than 0 call step() until stopped(); rank 0 calls stop() when done. Rank 0 sends
// nothing while it has no news and no rows (the others wait for its next header, asleep).
// A step that fails on any rank fails the job on every rank (job_failed()).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kernels/sample/sample.h"
#include "model/runner.h"
#include "parallel/rank_groups.h"
#include "runtime/grammar_cache.h"
#include "runtime/rank_wire.h"
#include "runtime/request.h"
#include "runtime/scheduler.h"

namespace dsv4 {

class Proposer;
class Sampler;
class Tokenizer;

struct StepReport {
  int32_t batch = 0;          // requests in the step (B)
  int32_t rows = 0;           // rows of the main forward (T)
  int32_t committed = 0;      // tokens committed to outputs this step
  int32_t drafts = 0;         // drafts verified this step (MTP or DSpark)
  int32_t accepted = 0;       // of which accepted
  static constexpr int kMaxAcceptedAt = Scheduler::Counters::kMaxAcceptedAt;
  int32_t rounds = 0;         // requests whose step verified drafts
  int32_t accepted_at[kMaxAcceptedAt] = {};  // of those, by drafts accepted (0 .. γ)
  int32_t preempted = 0;      // requests sent back to wait (pages ran out)
  int32_t forked = 0;         // choices started from their parent's caches (GenerationRequest::n)
  int64_t prefix_hit_tokens = 0;  // prompt positions admitted requests skipped (prefix cache)
  double seconds = 0;
};

struct EngineOptions {
  bool mtp = false;
  // DSpark speculative decoding (dspark.md §4) with this many drafts per round (0: off): each
  // step verifies the anchor plus the drafts (by exact match), commits the accepted rows'
  // features to the drafter's rings and drafts the next round.
  int32_t dspark_gamma = 0;
  // DSpark verification mode rejection (dspark.md §4.3) for requests at temperature > 0: drafts
  // drawn from the drafter's λ and accepted by speculative sampling — lossless in distribution,
  // not token-identical to plain sampling. Temperature 0 stays exact.
  bool dspark_rejection = false;
  // Forced drafts (runtime.md §8: forced accept patterns): when set, the drafter
  // (MTP or DSpark) still runs, but the draft for (request id, position) is this
  // function's value unless it returns -1.
  std::function<int32_t(int64_t, int64_t)> force_draft;
  // The job's communicators when several ranks share each step (not owned); nullptr: one rank.
  RankGroups* ranks = nullptr;
  // Context-parallel prefill (runtime.md §6.8; tp > 1): a prompt of at least this many
  // positions to compute is split over its owner's TP group chunk by chunk. 0: never.
  int64_t cp_prefill_tokens = 0;
  // Text of the outputs and stop strings (not owned; rank 0). nullptr: token ids only.
  const Tokenizer* tokenizer = nullptr;
  // Test hook: a failure of the forward for this request (request id -> error, ok: none);
  // shows that a request failing inside the engine fails alone.
  std::function<Status(int64_t)> inject_failure;
  // Test hook: this rank's step with this number (counting from 0 the steps that ran rows)
  // fails before its forward (shows how a job ends when one rank fails). -1: off.
  int64_t fail_step = -1;
  // Test hook: a step that ran rows lasts at least this long (the engine waits out the rest),
  // so that tests of timeouts, disconnects and Ctrl-C hold on a machine of any speed. 0: off.
  double min_step_seconds = 0;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const ModelConfig& cfg, const Weights& w,
                                                const Limits& limits, const EngineOptions& opt);
  ~Engine();

  // The checks add_request makes, naming the field and the limit (thread-safe: reads
  // nothing that steps change).
  Status validate(const GenerationRequest& req) const;
  // validate, then the constraint's grammar into req.constraint.compiled (once: a compiled one
  // is kept; GrammarCache shares equal ones). Thread-safe as validate: a server calls it on its
  // parse threads, so the engine thread never compiles for rank 0's requests.
  Status prepare(GenerationRequest& req) const;
  // The largest max_tokens validate accepts for a prompt of n_prompt tokens against the empty
  // cache and max_context (0: none; thread-safe as validate). Servers default max_tokens to it.
  int64_t max_tokens_that_fit(int64_t n_prompt) const;
  // Validates and queues a request; returns its id (ascending from 0; with n choices, choice k
  // reports as id + k). With ranks: rank 0 only.
  Result<int64_t> add_request(GenerationRequest req);
  // Ends a queued or running request at the next step (reason kCancelled or kTimeout).
  void cancel(int64_t id, FinishReason why = FinishReason::kCancelled);
  bool idle() const { return sched_->idle() && unsent_.empty() && cancels_.empty(); }
  int32_t running() const { return sched_->running(); }
  // Compressed-cache pages free now (evictable prefix-cache entries included) and in all;
  // both -1 for a model without compressed layers.
  std::pair<int64_t, int64_t> cache_pages() const;
  int32_t queued() const { return sched_->queued(); }
  // Several ranks: rank 0 ends the job's step loop (the next sync tells every rank); the
  // other ranks step until stopped(). After a failed step it communicates nothing.
  Status stop();
  bool stopped() const { return stopped_; }
  // Several ranks: a step failed on some rank (this one, or a notice from another arrived;
  // polls for notices). A failed step on one rank fails the job: the rank tells the others
  // (Communicator::report_failure), each leaves its step with an error naming the failed
  // rank, and the engine is done (stop() communicates nothing). One rank: false.
  bool job_failed() const;
  int rank() const;
  const Limits& limits() const { return limits_; }
  const ModelConfig& config() const { return cfg_; }
  // Prefix-cache totals per owner rank since the start (Scheduler::prefix_by_rank; rank 0 of
  // several knows every rank's).
  const std::vector<Scheduler::PrefixTotals>& prefix_by_rank() const { return sched_->prefix_by_rank(); }
  // Bytes this rank sent per seam since the start (several ranks; model/runner.h).
  ModelRunner::SeamBytes seam_bytes() const { return runner_->seam_bytes(); }
  ModelRunner::SeamTimes seam_times() const { return runner_->seam_times(); }
  // One step (schedule, forward, sampling, verification, MTP). Its updates follow in updates().
  Result<StepReport> step();
  // The last step's updates, one per request it touched (rank 0 reports; moved out by the caller).
  std::vector<RequestUpdate>& updates() { return sched_->updates(); }

 private:
  class RunnerPages;
  Engine(const ModelConfig& cfg, const Limits& limits, const EngineOptions& opt,
         std::unique_ptr<ModelRunner> runner);
  Status sync_ranks(bool stop);  // rank 0's new requests and cancels (or stop) to every rank
  Result<StepReport> run_step();  // step() before the job-failure handling
  int64_t draft_rows() const;   // rows a verify step adds past a request's last sampled one
  int64_t reach(int64_t n_prompt, int64_t max_tokens) const;
  // The stages of step().
  void collect_cancels();                       // rank 0: timeouts and stop strings
  Status take_requests();                       // new requests and cancels reach the scheduler
  int64_t build_rows(const std::vector<PlannedRows>& plan);  // reqs_ and row_begin_; returns T
  Status run_forward(const std::vector<PlannedRows>& plan);
  Status sample_and_update(const std::vector<PlannedRows>& plan);
  void register_prefixes(const std::vector<PlannedRows>& plan);
  void report_counters(StepReport& rep) const;

  const ModelConfig& cfg_;
  Limits limits_;
  EngineOptions opt_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<RunnerPages> pages_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<RankWire> wire_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Proposer> proposer_;  // MTP or DSpark; nullptr: none
  int64_t next_id_ = 0;
  std::vector<Cancel> cancels_;                        // rank 0: for the next step
  std::unordered_map<int64_t, double> deadlines_;      // rank 0: steady seconds
  mutable GrammarCache grammars_;                      // compiled constraints, bounded in bytes
  std::vector<GenerationRequest> unsent_;              // rank 0 with ranks: added since the last sync
  RankSync received_;                                  // other ranks: the last sync
  // Step buffers, sized once: the main forward's rows per request, each one's first row.
  std::vector<StepRequest> reqs_;
  std::vector<int64_t> row_begin_;
  bool stopped_ = false;
  int64_t rows_steps_ = 0;   // steps that ran rows (fail_step)
};

}  // namespace dsv4
