// Engine: continuous batching over one ModelRunner (runtime.md §1, §3, §4).
// Each step the scheduler gives every running request rows of one forward:
// a prompt chunk (<= max_chunk) while it prefills, then 1 row per decode step
// (2 with an MTP draft: the last committed token and the draft). Requests join
// when a sequence slot is free and leave when they finish, so B changes from
// step to step. Sampling (model.md §10.2) depends only on the request's seed
// and the position, so a request's tokens never depend on its batch.
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
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/sample/sample.h"
#include "model/runner.h"
#include "parallel/rank_groups.h"

namespace dsv4 {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  kernels::SamplingParams sampling;  // temperature 0 = greedy
  int32_t max_tokens = 32;
  bool stop_at_eos = true;
};

struct RequestResult {
  int id = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::string finish_reason;  // "length" | "eos" | "context"
  bool finished = false;
};

struct StepReport {
  int32_t batch = 0;          // requests in the step (B)
  int32_t rows = 0;           // rows of the main forward (T)
  int32_t committed = 0;      // tokens committed to outputs this step
  int32_t drafts = 0;         // MTP drafts verified this step
  int32_t accepted = 0;       // of which accepted
  int64_t prefix_hit_tokens = 0;  // prompt positions admitted requests skipped (prefix cache)
  double seconds = 0;
};

struct EngineOptions {
  bool mtp = false;
  // Forced drafts (runtime.md §8: forced accept patterns): when set, the MTP
  // layer still runs, but the draft for (request id, position) is this
  // function's value unless it returns -1.
  std::function<int32_t(int, int64_t)> force_draft;
  // The job's communicators when several ranks share each step (not owned); nullptr: one rank.
  RankGroups* ranks = nullptr;
  // Context-parallel prefill (runtime.md §6.8; tp > 1): a prompt of at least this many
  // positions to compute is split over its owner's TP group chunk by chunk. 0: never.
  int64_t cp_prefill_tokens = 0;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const ModelConfig& cfg, const Weights& w,
                                                const Limits& limits, const EngineOptions& opt);
  ~Engine();

  // Validates and queues a request; returns its id. With ranks: rank 0 only.
  Result<int> add_request(GenerationRequest req);
  bool idle() const { return waiting_.empty() && running_.empty() && unsent_.empty(); }
  // Several ranks: rank 0 ends the job's step loop (the next sync tells every rank); the
  // other ranks step until stopped().
  Status stop();
  bool stopped() const { return stopped_; }
  // The last failed step failed on every rank at the same point, before any collective
  // (a deterministic check of the replicated state), so no rank waits on another.
  bool last_error_uniform() const { return last_error_uniform_; }
  int rank() const;
  // Bytes this rank sent per seam since the start (several ranks; model/runner.h).
  ModelRunner::SeamBytes seam_bytes() const { return runner_->seam_bytes(); }
  // One scheduling step (admission, forward, sampling, verification, MTP).
  Result<StepReport> step();
  const RequestResult& result(int id) const { return results_[id]; }
  int n_requests() const { return static_cast<int>(results_.size()); }

 private:
  struct Running;
  Engine(const ModelConfig& cfg, const Limits& limits, const EngineOptions& opt,
         std::unique_ptr<ModelRunner> runner);
  int32_t sample_row(const float* logits, const kernels::SamplingParams& sp, int64_t position, int slot);
  void finish(Running& r, const char* reason);
  Result<int> queue_request(GenerationRequest req);
  Status sync_requests(bool stop);      // rank 0's new requests (or stop) to every rank
  Status exchange(int32_t* values, int per_request);  // samplers' values of the planned requests to all
  int32_t pick_owner() const;

  const ModelConfig& cfg_;
  Limits limits_;
  EngineOptions opt_;
  std::unique_ptr<ModelRunner> runner_;
  std::deque<int> waiting_;
  std::vector<std::unique_ptr<Running>> running_;
  std::vector<RequestResult> results_;
  std::vector<GenerationRequest> requests_;
  std::vector<uint8_t> seq_used_;
  // Step buffers, sized once.
  std::vector<StepRequest> reqs_, mtp_reqs_;
  std::vector<Running*> planned_;
  std::vector<int32_t> row_tokens_, mtp_tokens_;
  std::vector<float> logits_, mtp_logits_;
  std::vector<bf16> xfinal_, mtp_x_;
  std::vector<uint64_t> sample_scratch_;
  // Several ranks.
  std::vector<int> unsent_;           // rank 0: ids added since the last sync
  std::vector<uint8_t> sync_buf_;
  std::vector<int32_t> values_;             // [B_MAX · 2] sampled tokens / drafts per planned request
  std::vector<int32_t> sampled_, gathered_;  // [B_MAX · 2] the exchange's own and gathered records
  std::vector<int64_t> gather_rows_;
  bool stopped_ = false;
  bool last_error_uniform_ = false;
};

}  // namespace dsv4
