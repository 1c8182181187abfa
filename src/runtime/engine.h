// Engine: continuous batching over one ModelRunner (runtime.md §1, §3, §4). One step:
// schedule (runtime/scheduler.h: admission, preemption, rows) -> execute (forward, sampling,
// MTP) -> update (commit, stop rules) -> the step's RequestUpdates, which the caller streams.
// Each running request contributes a prompt chunk (<= max_chunk) while it prefills, then 1
// row per decode step (2 with an MTP draft), so B changes from step to step. Sampling
// (model.md §10.2) depends only on the request's seed and the position, so a request's
// tokens never depend on its batch. A finished request's state is released at once.
//
// MTP speculative decode (model.md §11, runtime.md §3.2, §4): after the main
// forward, the MTP layer runs on every position committed this step (its
// Xfinal from this step, its next token now known); the last one's argmax is
// the draft for the position after the next. The next step verifies it by
// exact match against the token the target samples there; rejected rows leave
// cache content behind that position-addressed writes later overwrite.
//
// Several ranks (EngineOptions::ranks, runtime.md §6): requests enter on rank 0 only. Each
// step starts with rank 0's broadcast of the requests added since the last step (in full,
// once) or of the stop signal; every rank then runs the same scheduler on the same state,
// so admission, owners (the rank with the fewest running requests) and the StepPlan agree
// everywhere. Owners sample their requests' rows and the sampled tokens (then the MTP
// drafts) are all-gathered: the per-step deltas every rank applies. Ranks other than 0
// call step() until stopped(); rank 0 calls stop() when done.
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
#include "runtime/request.h"
#include "runtime/scheduler.h"

namespace dsv4 {

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
  // Validates and queues a request; returns its id (ascending from 0). With ranks: rank 0 only.
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
  // other ranks step until stopped().
  Status stop();
  bool stopped() const { return stopped_; }
  // The last failed step failed on every rank at the same point, before any collective
  // (a deterministic check of the replicated state), so no rank waits on another.
  bool last_error_uniform() const { return last_error_uniform_; }
  int rank() const;
  const Limits& limits() const { return limits_; }
  const ModelConfig& config() const { return cfg_; }
  // Bytes this rank sent per seam since the start (several ranks; model/runner.h).
  ModelRunner::SeamBytes seam_bytes() const { return runner_->seam_bytes(); }
  // One step (schedule, forward, sampling, verification, MTP). Its updates follow in updates().
  Result<StepReport> step();
  // The last step's updates, one per request it touched (rank 0 reports; moved out by the caller).
  std::vector<RequestUpdate>& updates() { return sched_->updates(); }

 private:
  class RunnerPages;
  Engine(const ModelConfig& cfg, const Limits& limits, const EngineOptions& opt,
         std::unique_ptr<ModelRunner> runner);
  void plan_head_rows(const std::vector<PlannedRows>& plan);
  // The queued sample tasks (then the logprob tasks) over the runner's pool, rows split over
  // threads; each row's result is the serial one (a pure function of the row).
  void run_sample_tasks();
  void run_logprob_tasks();
  void run_rejection_tasks(int64_t n);
  void add_sample(const float* row, const kernels::SamplingParams& sp, int64_t position, int slot, int32_t* out);
  void add_logprobs(const float* row, int32_t token, int32_t top, TokenLogprob* out);
  Status sync_requests(bool stop);      // rank 0's new requests and cancels (or stop) to every rank
  // The values of the planned requests to all ranks, from each request's sampler (by_owner:
  // from its owner, which holds its DSpark rings).
  Status exchange(int32_t* values, int per_request, bool by_owner = false);
  Status run_forward(const std::vector<PlannedRows>& plan);
  Status run_dspark(const std::vector<PlannedRows>& plan);
  Status exchange_logprobs(const std::vector<PlannedRows>& plan);  // samplers' logprobs to all
  void logprobs_of(const float* row, int32_t token, int32_t top, TokenLogprob& out) const;

  const ModelConfig& cfg_;
  Limits limits_;
  EngineOptions opt_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<RunnerPages> pages_;
  std::unique_ptr<Scheduler> sched_;
  int64_t next_id_ = 0;
  std::vector<std::pair<int64_t, FinishReason>> cancels_;  // rank 0: for the next step
  std::unordered_map<int64_t, double> deadlines_;          // rank 0: steady seconds
  // Step buffers, sized once.
  std::vector<StepRequest> reqs_, mtp_reqs_;
  std::vector<int64_t> row_begin_, mtp_begin_;
  std::vector<int32_t> mtp_tokens_;
  std::vector<float> logits_, mtp_logits_;
  std::vector<bf16> xfinal_, mtp_x_;
  std::vector<uint64_t> sample_scratch_;   // per pool thread
  // Rows whose logits this rank reads (ascending step rows) and the logits row of each step
  // row (−1: none); per planned request its first entry in head_rows_ and their count.
  std::vector<int32_t> head_rows_, head_at_, one_rows_;
  std::vector<int64_t> head_begin_, head_count_;
  int64_t n_head_ = 0;
  std::vector<int32_t> mtp_head_rows_;      // [B_MAX] MTP rows whose draft is sampled
  // Sampling and logprob tasks of a step.
  std::vector<const float*> sample_logits_;
  std::vector<kernels::SampleRow> sample_rows_;
  std::vector<int32_t> sample_tokens_;
  std::vector<int32_t*> sample_out_;
  int64_t n_sample_ = 0;
  struct LogprobTask {
    const float* row;
    int32_t token, top;
    TokenLogprob* out;
  };
  std::vector<LogprobTask> logprob_tasks_;
  int64_t n_logprob_ = 0;
  std::vector<int32_t> draft_tok_;          // [B_MAX] the sampled token of each draft row
  std::vector<TokenLogprob> logprobs_;      // [B_MAX, 2] (token -1: none)
  std::vector<std::vector<TokenLogprob>> prompt_logprobs_;  // [B_MAX]
  // Several ranks.
  std::vector<GenerationRequest> unsent_;   // rank 0: added since the last sync
  std::vector<uint8_t> sync_buf_;
  std::vector<int32_t> values_;             // [B_MAX · S] sampled tokens / drafts per planned request
  std::vector<int32_t> sampled_, gathered_;  // [B_MAX · S] the exchange's own and gathered records
  std::vector<int64_t> gather_rows_;
  struct LogprobRecord;                       // one TokenLogprob on the wire
  std::vector<LogprobRecord> lp_send_, lp_recv_;  // [2 B_MAX + T_MAX]
  const std::vector<PlannedRows>* plan_ = nullptr;
  int32_t S_ = 2;  // limits.max_decode_rows: entries per request in values_, draft_tok_, logprobs_
  // DSpark: features of every row [T_MAX, |Lt|·D], the step's rounds (and their plan index),
  // the drafter's λ [T_MAX, V] and drafts [T_MAX].
  std::vector<bf16> ds_features_;
  std::vector<ModelRunner::DsparkCommit> ds_commits_;
  std::vector<ModelRunner::DsparkRound> ds_rounds_;
  std::vector<int32_t> ds_round_of_;
  std::vector<float> ds_lambda_;
  std::vector<int32_t> ds_drafts_;
  // Mode rejection: per sequence slot the λ rows of its round [max_seqs, γ, V] (kept on the
  // owner until the verify step), the step's rounds to verify, per-thread scratch.
  std::vector<float> ds_kept_;
  struct RejectionTask {
    size_t plan_index;
    kernels::RejectionRound round;
    const float* target[kMaxDsparkGamma + 1];
    const float* draft[kMaxDsparkGamma];
  };
  std::vector<RejectionTask> rejection_tasks_;
  std::vector<uint64_t> rejection_scratch_;  // per pool thread
  bool rejects(const PlannedRows& p) const;  // the request's drafts are verified by rejection
  bool stopped_ = false;
  bool last_error_uniform_ = false;
};

}  // namespace dsv4
