// Scheduler: the serving policy as a pure state machine (no tensors). Per step:
//   plan()   -> admission, preemption, the rows of every scheduled request (the StepPlan)
//   (the executor runs the rows and samples; engine.h)
//   update() -> commits the sampled tokens, applies stop rules, emits RequestUpdates
//
// Rows. A request holds tokens (prompt, then outputs) and n_cached positions in the caches.
// While n_cached < tokens.size() - 1 it fills: a chunk of up to max_chunk rows of its tokens
// (a prompt, or after a preemption the prompt and the outputs so far). Its last row at
// position tokens.size() - 1 samples the token at tokens.size(); in decode that row is the
// whole step for the request, plus the MTP draft as a second row when there is one.
//
// Admission, in arrival order (a preempted request first): a waiting request takes a free
// sequence slot once the pages (compressed-cache blocks) for its tokens fit. When the step's
// growth does not fit, the newest running request is preempted: its slot and pages are freed
// and it waits again with its tokens so far and its original prompt_len, so its rows keep
// their layout (model.md §0.4.7) and the recompute gives the tokens of an uninterrupted run
// (sampling depends on seed and position only). A request alone that still does not fit fails
// alone. Fairness: the requests served longest ago go first when B_MAX or T_MAX binds.
//
// Ranks (SchedulerOptions::world > 1): slots and pages are per rank (rank r holds slots
// [r·max_seqs, (r+1)·max_seqs) and its own pages); admission, growth and preemption are
// counted on the owner's. The owner of a new request is the rank holding the longest cached
// prefix of its prompt (pick_owner), else the rank with the most free pages, then the fewest
// running requests. A prompt prefilled context-parallel also holds a slot and its prompt's
// pages on every other rank of the owner's TP group (its cp_slots: those ranks write its
// caches while its rows are split) until its prompt is in the caches; when they have no room
// it is prefilled by its owner alone.
//
// Several choices (GenerationRequest::n, ids id .. id + n − 1). The request is admitted as
// choice 0 (the parent); it fills positions [0, L − 1) of its prompt of L tokens, once, and
// is not planned further until the next plan() forks choices 1 .. n − 1 (before admission):
// each takes a free slot whose caches are the parent's (PageBudget::fork: window ring and
// compressor states copied, compressed-cache pages of whole blocks shared by reference, the
// begun block's page copied), with n_cached = L − 1. Then every choice, the parent included,
// computes row L − 1 in its own slot and samples its first token with its own seed
// (choice_seed): as vLLM v1 recomputes the last token of a fully cached prompt, the last
// prompt position is each choice's first sampled row, so positions 0 .. L − 2 are computed
// once and each choice's tokens, logprobs and caches are those of a lone request with its
// seed. A choice whose fork does not fit (no free slot or page) waits at the queue's front
// as a lone request and recomputes the prompt; a parent that ends before the fork ends its
// choices with it. With ranks a choice has its parent's owner.
//
// Finishing: EOS, stop ids, max_tokens and the context limit are decided in update() from the
// tokens; cancellation, timeouts and stop strings (matched on text, so only where the text is
// kept: rank 0) arrive through cancel() and take effect at the next plan(). With ranks every
// rank runs the same scheduler on the same state; rank 0 sends its cancels in the step's sync.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "model/limits.h"
#include "runtime/output_text.h"
#include "runtime/request.h"
#include "runtime/token_seq.h"

namespace dsv4 {

// The executor's pages as the scheduler sees them (the runner's compressed-cache blocks; a
// fake in tests).
class PageBudget {
 public:
  virtual ~PageBudget() = default;
  // Pages a sequence needs in addition to hold positions [0, end) (seq -1: a new one).
  virtual int64_t pages_short(int32_t seq, int64_t end) const = 0;
  virtual int64_t free_pages(int32_t rank) const = 0;
  virtual int64_t total_pages() const = 0;  // of one rank
  // Starts slot seq (on rank Limits::slot_rank(seq)) for tokens with prompt_len in the prefix
  // cache's namespace `salt` (GenerationRequest::cache_salt); returns the first position to
  // compute (a prefix-cache hit on that rank's blocks of that salt skips the positions before
  // it; allow_prefix false: 0).
  virtual Result<int64_t> start(int32_t seq, const std::vector<int32_t>& tokens, int64_t prompt_len,
                                bool allow_prefix, const std::string& salt) = 0;
  // Prompt positions the prefix cache holds on `owner`'s blocks of that salt (what start would
  // skip, before the recomputed last positions; 0: none or no prefix cache).
  virtual int64_t cached_prefix(int32_t /*owner*/, const std::vector<int32_t>& /*tokens*/, int64_t /*prompt_len*/,
                                const std::string& /*salt*/) const {
    return 0;
  }
  // Takes the pages for positions [0, end) now (fails when they are not free).
  virtual Status reserve(int32_t seq, int64_t end) = 0;
  // After a step: completed prompt pages may join the prefix cache.
  virtual void register_prefix(int32_t seq, const std::vector<int32_t>& tokens, int64_t prompt_len) = 0;
  virtual void end(int32_t seq) = 0;
  // Starts slot child as a copy of slot parent holding positions [0, end) (a choice's fork;
  // needs PageBudget pages for the block holding end when begun). Unsupported: an error.
  virtual Status fork(int32_t /*parent*/, int32_t /*child*/, int64_t /*end*/) {
    return Status::error("forks are not supported here");
  }
};

struct SchedulerOptions {
  Limits limits;
  bool mtp = false;                  // decode steps carry the MTP draft as a second row
  int32_t world = 1, tp = 1;         // ranks (each with limits.max_seqs slots and its own pages)
  int64_t cp_prefill_tokens = 0;     // context-parallel prefill from this many positions (tp > 1)
  int32_t eos_token_id = 1;
  const Tokenizer* tokenizer = nullptr;  // text and stop strings (nullptr: tokens only)
};

// One request's rows in the step.
struct PlannedRows {
  int64_t id = 0;
  int32_t seq = -1;
  int64_t p0 = 0;                  // first position
  int32_t n = 0;                   // rows
  int64_t prompt_len = 0;
  const int32_t* tokens = nullptr;  // the rows' tokens (valid until update())
  int32_t owner = 0;               // rank computing the rows
  bool split = false;              // context-parallel prefill chunk over the owner's TP group
  const int32_t* cp_slots = nullptr;  // split: its slot on each TP rank of the group (StepRequest::cp_slots)
  int32_t sampler = 0;             // rank holding the last row (samples it)
  bool samples = false;            // the last (non-draft) row predicts a new token
  int32_t n_drafts = 0;            // decode: rows 1 .. n_drafts are drafts (MTP: 1; DSpark: up to γ)
  // The request, shared by its choices; this choice's sampling (its seed: choice_seed) and
  // whether it reports prompt logprobs (choice 0 only) are its own.
  const GenerationRequest* request = nullptr;
  const SamplingParams* sampling = nullptr;
  bool prompt_logprobs = false;
};

// tokens[S i] of update(): the sampler's structured-output mask allowed no id at the row (a
// grammar dead end). The request then ends with an error naming its constraint; nothing is
// sampled or committed.
constexpr int32_t kGrammarDeadEnd = -2;

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& opt, PageBudget& pages);
  ~Scheduler();

  // Queues a validated request (ids ascend; the caller assigns them).
  void add(int64_t id, GenerationRequest req);
  // Ends a waiting or running request at the next plan() (no-op for unknown ids).
  void cancel(int64_t id, FinishReason why, std::string error = {});
  bool idle() const;
  int32_t running() const { return static_cast<int32_t>(running_.size()); }
  int32_t queued() const { return static_cast<int32_t>(waiting_.size()); }

  // Admission, preemption and rows. Requests that ended (cancelled, failed to fit) report in
  // updates() of this step.
  const std::vector<PlannedRows>& plan();
  // The executor's results for plan()[i], S = limits.max_decode_rows entries each: tokens[S i]
  // the token sampled at the last real row (-1: none), tokens[S i + k] (k >= 1) the one sampled
  // at draft row k when drafts 1..k all matched (-1: none or rejected); logprobs[S i + k]
  // their log-probabilities (when the request asked for them; may be null).
  // prompt_logprobs[i]: this step's prompt logprobs (appended; may be null).
  void update(const int32_t* tokens, TokenLogprob* logprobs,
              std::vector<TokenLogprob>* prompt_logprobs);
  // plan()[i] failed in the executor: it ends alone with the error (at once).
  void fail(size_t i, const std::string& error);
  // After the drafter: the drafts for plan()[i]'s next step (MTP: one; DSpark: γ), up to the
  // first −1 and at most max_decode_rows − 1.
  void set_drafts(size_t i, const int32_t* drafts, int32_t n);
  // plan()[i] still runs after update() (its MTP rows are the positions committed this step).
  bool live(size_t i) const;
  // Positions plan()[i] had in the caches before this step, and its tokens (its request's
  // shared prompt, then its outputs).
  int64_t cached_before(size_t i) const;
  int64_t cached(size_t i) const;
  TokenSeq tokens(size_t i) const;

  // Updates of the last plan()/update(), in request order; moved out by the caller.
  std::vector<RequestUpdate>& updates() { return updates_; }
  // Requests whose stop string matched in update() (rank 0): they are reported finished and
  // end at the next plan() through cancel(); with ranks the engine sends them to every rank.
  std::vector<std::pair<int64_t, FinishReason>> take_local_finishes();
  // Per-step counters.
  struct Counters {
    static constexpr int kMaxAcceptedAt = kMaxDsparkGamma + 1;  // 0 .. γ accepted
    int64_t drafts = 0, accepted = 0, preempted = 0, prefix_hit_tokens = 0, committed = 0;
    int64_t forked = 0;                          // choices that started from their parent's caches
    int64_t rounds = 0;                          // verify steps of requests with drafts
    int64_t accepted_at[kMaxAcceptedAt] = {};    // rounds by drafts accepted (0 .. γ)
  };
  const Counters& counters() const { return counters_; }  // of the last step
  // Since the start, per owner rank: prompt tokens of requests at their first admission and
  // of those the prefix cache held (its hit rate).
  struct PrefixTotals {
    int64_t prompt_tokens = 0, hit_tokens = 0;
  };
  const std::vector<PrefixTotals>& prefix_by_rank() const { return prefix_by_rank_; }

 private:
  struct Req;
  Req* find(int64_t id);
  // plan()'s stages.
  void start_step();
  void plan_rows();
  PlannedRows rows_of(Req& r, int64_t room);
  const int32_t* fill_rows(const Req& r, int32_t n);
  size_t output_room(int64_t prompt_len, int32_t max_tokens) const;
  int32_t rank_short_of_pages() const;
  void make_room(int32_t over);
  void admit();
  void fork_choices();  // parents at their fork position: their choices join (or wait)
  void preempt(Req& r);
  // stop_id: reason kStop by one of the request's stop ids (-1: not).
  void finish(Req& r, FinishReason why, const std::string& error, int32_t stop_id = -1);
  void report_final(Req& r, FinishReason why, const std::string& error, int32_t stop_id = -1);
  void send_prompt_logprobs(Req& r);
  RequestUpdate& update_of(Req& r);
  void end_slot(Req& r);
  int32_t free_seq(int32_t rank) const;  // -1: none
  // Pages the rank's running requests take in their next decode rows (anchor and draft):
  // admission leaves them free, so a new request does not push a running one out at once.
  int64_t growth_on(int32_t rank) const;
  int32_t running_on(int32_t rank) const;
  bool holds_pages_on(const Req& r, int32_t rank) const;  // its slot or one of its cp_slots
  // A context-parallel prompt's slots on the other ranks of its owner's TP group (false: one
  // has no room; nothing taken), and their end.
  bool start_cp_slots(Req& r);
  void end_cp_slots(Req& r);
  // The owner of a new request, among the ranks with a free slot (-1: none): the rank holding
  // the longest cached prefix of its prompt (ties: the fewest running requests, then the lowest
  // rank), unless it runs more than kMaxHitImbalance requests beyond the least loaded rank;
  // misses and the rest go to the rank with the most free pages, then the fewest running
  // requests (so a prefix every prompt shares, a system prompt, does not pin all work on one
  // rank).
  static constexpr int64_t kMaxHitImbalance = 1;
  int32_t pick_owner(const Req& r, bool allow_prefix) const;

  SchedulerOptions opt_;
  PageBudget& pages_;
  std::deque<std::unique_ptr<Req>> waiting_;   // arrival order; preempted ones at the front
  std::vector<std::unique_ptr<Req>> running_;  // admission order
  std::vector<std::unique_ptr<Req>> graveyard_;  // ended in the last update()
  std::vector<uint8_t> seq_used_;          // [world · max_seqs]
  std::vector<int64_t> need_;              // [world] pages a plan's rows take on each rank
  std::vector<std::pair<int64_t, std::pair<FinishReason, std::string>>> cancels_;
  std::vector<std::pair<int64_t, FinishReason>> local_finishes_;
  std::vector<PlannedRows> plan_;
  std::vector<Req*> planned_;
  std::vector<RequestUpdate> updates_;
  std::vector<int32_t> draft_rows_;  // [B_MAX, S_MAX] anchor + draft tokens of decode rows
  std::vector<int32_t> fill_rows_;   // [T_MAX] fill chunks across a prompt's end (fill_rows)
  size_t fill_used_ = 0;             // of fill_rows_, this step
  Counters counters_;
  std::vector<PrefixTotals> prefix_by_rank_;  // [world]
  int64_t step_ = 0;
  int64_t admitted_ = 0;
};

}  // namespace dsv4
