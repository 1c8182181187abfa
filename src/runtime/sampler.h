// Sampler: the step's logits -> tokens and log-probabilities (model.md §10.2; the sampler stage of
// vLLM v1). Per step, on the rank holding each request's last row (its sampler):
//   plan_head_rows()  before the forward: the rows whose logits this rank reads (the head rows):
//                     of each live request it samples, the rows scored for prompt logprobs and
//                     the sampled rows (the last real row and the draft rows)
//   sample()          after it: the sampled rows' logits take the request's penalties and
//                     logit_bias (kernels/logit_adjust; draft row k's history holds drafts
//                     1..k, added to the counts and rolled back) and its structured-output
//                     mask (grammar/: ids the JSON value cannot continue with get −inf, EOS
//                     only where the value is whole; row k's matcher state has read drafts
//                     1..k), then per planned request [S]
//                     tokens: the last real row's token, then
//                     the token of each draft row kept while the drafts match (exact match,
//                     runtime.md §3.2), or a round decided by speculative sampling against the
//                     drafter's distributions (dspark.md §4.3); their logprobs [S] and the prompt
//                     logprobs.
// Sampling depends only on the request's seed and the position. The rows are split over the
// runner's pool; each row's result is the serial one (a pure function of the row). Buffers are
// sized once: the step allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include <map>
#include <memory>
#include <string>

#include "grammar/token_mask.h"
#include "kernels/logit_adjust/logit_adjust.h"
#include "kernels/sample/sample.h"
#include "model/config.h"
#include "model/limits.h"
#include "model/runner.h"
#include "runtime/request.h"
#include "runtime/scheduler.h"

namespace dsv4 {

class Proposer;
class ThreadPool;
class Tokenizer;


class Sampler {
 public:
  // rejection: rounds may be verified by speculative sampling (DSpark mode rejection).
  // tokenizer: the vocabulary's bytes for structured output (nullptr: none is served).
  // slots: the job's sequence slots (with ranks: every rank's; 0: limits.max_seqs), whose
  // penalty counts and grammar states are kept per slot.
  Sampler(const ModelConfig& cfg, const Limits& limits, ThreadPool& pool, int rank, bool rejection,
          const Tokenizer* tokenizer, int32_t slots = 0);

  // Before the forward. row_begin [planned]: each request's first row in the step.
  void plan_head_rows(const std::vector<PlannedRows>& plan, const int64_t* row_begin, const Scheduler& sched);
  HeadRows head_rows() const { return HeadRows{head_rows_.data(), n_head_}; }
  // plan[i]'s head rows relative to its first row, and where its logits go.
  HeadRows head_rows_of(size_t i, int64_t row_begin);
  float* logits() { return logits_.data(); }  // [T_MAX, V]: the head rows' logits, in order
  float* logits_of(size_t i) { return logits_.data() + head_begin_[i] * vocab_; }

  // After the forward: tokens(), logprobs() and prompt_logprobs() of every planned request this
  // rank samples (−1 / empty elsewhere). proposer: verifies drafts (nullptr: no drafts). Returns
  // whether any of them asked for prompt logprobs.
  bool sample(const std::vector<PlannedRows>& plan, const int64_t* row_begin, const Scheduler& sched,
              const Proposer* proposer);
  int32_t* tokens() { return tokens_.data(); }                    // [B_MAX, S], −1: none
  TokenLogprob* logprobs() { return logprobs_.data(); }           // [B_MAX, S] (token -1: none)
  std::vector<TokenLogprob>* prompt_logprobs() { return prompt_logprobs_.data(); }  // [B_MAX]
  int32_t entries_per_request() const { return S_; }              // S = limits.max_decode_rows

  // The task queues (also for the drafters' rows): add rows, then run them all over the pool.
  // draft_slot: kernels::SampleRow's j (0 target, 1 drafter).
  void add_sample(const float* row, const kernels::SamplingParams& sp, int64_t position, int draft_slot,
                  int32_t* out);
  void run_sample_tasks();
  // One row predicting position history.size() of p's request takes its logit adjustments and
  // mask in place (MTP's draft row: drafts proposed from that distribution pass more often).
  void adjust_row(const PlannedRows& p, const TokenSeq& history, float* row);
  void add_logprobs(const float* row, int32_t token, int32_t top, TokenLogprob* out);
  void run_logprob_tasks();

  // log-softmax of the raw row [V]: the token's value and the `top` most likely ids (ties: lower
  // id), the sum in double. No allocation while out.top holds `top`.
  static void logprobs_of(const float* row, int64_t V, int32_t token, int32_t top, TokenLogprob& out);

 private:
  bool queue_rows(const std::vector<PlannedRows>& plan, const int64_t* row_begin, const Scheduler& sched,
                  const Proposer* proposer);
  void queue_rejection(size_t i, const PlannedRows& p, const float* const* rows, const float* draft_lambda);
  void verify_and_score(const std::vector<PlannedRows>& plan, const int64_t* row_begin, const Proposer* proposer);
  void run_rejection_tasks();
  // Returns the first row (0: the last real row, k: draft row k) whose mask allowed nothing
  // with its grammar state live (a dead end), −1: none.
  int32_t adjust_rows(const PlannedRows& p, int64_t first_sampled, const TokenSeq& history);
  // The slot's counts synced to history (nullptr when p's request does not penalize).
  kernels::TokenCounts* counts_for(const PlannedRows& p, const TokenSeq& history);
  // Structured output: the slot's matcher synced to history (nullptr when p's request has no
  // constraint); rows[k] = −inf where the state after `state` forbids the id.
  struct SlotGrammar;
  SlotGrammar* grammar_for(const PlannedRows& p, const TokenSeq& history);
  // false: the state is live and no id (EOS included) is allowed.
  bool mask_row(float* row, const grammar::JsonMatcher& m, const grammar::MatchState& state);
  const float* row(int64_t step_row) const { return logits_.data() + head_at_[step_row] * vocab_; }

  int64_t vocab_;
  int32_t S_;
  ThreadPool& pool_;
  int rank_;
  std::vector<float> logits_;  // [T_MAX, V]
  // Head rows (ascending step rows), the logits row of each step row (−1: none), per planned
  // request its first entry in head_rows_ and their count; one request's rows (head_rows_of).
  std::vector<int32_t> head_rows_, head_at_, rows_of_one_;
  std::vector<int64_t> head_begin_, head_count_;
  int64_t n_head_ = 0;
  // Results of the step.
  std::vector<int32_t> tokens_;           // [B_MAX, S]
  std::vector<int32_t> draft_tokens_;     // [B_MAX, S] the token sampled at each draft row
  std::vector<TokenLogprob> logprobs_;    // [B_MAX, S]
  std::vector<std::vector<TokenLogprob>> prompt_logprobs_;  // [B_MAX]
  // Sample tasks.
  std::vector<const float*> sample_logits_;
  std::vector<kernels::SampleRow> sample_rows_;
  std::vector<int32_t> sample_tokens_;
  std::vector<int32_t*> sample_out_;
  int64_t n_sample_ = 0;
  std::vector<uint64_t> sample_scratch_;  // per pool thread
  // Logprob tasks.
  struct LogprobTask {
    const float* row;
    int32_t token, top;
    TokenLogprob* out;
  };
  std::vector<LogprobTask> logprob_tasks_;
  int64_t n_logprob_ = 0;
  // Rounds verified by rejection, one task each, and per-thread scratch.
  struct RejectionTask {
    size_t plan_index;
    kernels::RejectionRound round;
    const float* target[kMaxDsparkGamma + 1];
    const float* draft[kMaxDsparkGamma];
  };
  std::vector<RejectionTask> rejection_tasks_;
  int64_t n_rejection_ = 0;
  std::vector<uint64_t> rejection_scratch_;  // per pool thread
  // Penalty counts per sequence slot, sized at a penalizing request's first row there and kept;
  // synced holds how many of request id's tokens they count (tokens only grow).
  struct SlotCounts {
    int64_t id = -1;
    size_t synced = 0;
    kernels::TokenCounts counts;
  };
  std::vector<SlotCounts> slot_counts_;  // [slots]
  // Structured output: the vocabulary prepared at the first constrained request (each request
  // brings its compiled grammar: OutputConstraint::compiled), per slot the matcher state after
  // the committed tokens, a round's states.
  const Tokenizer* tokenizer_;
  int32_t eos_;
  std::unique_ptr<grammar::MaskVocab> mask_vocab_;
  std::unique_ptr<grammar::TokenMasker> masker_;
  struct SlotGrammar {
    int64_t id = -1;
    size_t synced = 0;
    bool started = false;
    std::shared_ptr<const grammar::Grammar> grammar;
    std::unique_ptr<grammar::JsonMatcher> matcher;
    std::unique_ptr<grammar::MatchState> state;
  };
  std::vector<SlotGrammar> slot_grammar_;  // [slots]
  std::vector<grammar::MatchState> round_states_;  // [S]
  std::unique_ptr<grammar::MatchState> scratch_state_, spare_state_;
  std::vector<uint64_t> mask_;  // [ceil(V / 64)]
  std::vector<int32_t> dead_row_;  // [B_MAX] per planned request: adjust_rows' dead-end row
};

}  // namespace dsv4
