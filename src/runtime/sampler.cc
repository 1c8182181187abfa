#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/math.h"
#include "base/thread_pool.h"
#include "runtime/proposer.h"
#include "text/tokenizer.h"

namespace dsv4 {

Sampler::Sampler(const ModelConfig& cfg, const Limits& limits, ThreadPool& pool, int rank, bool rejection,
                 const Tokenizer* tokenizer, int32_t slots)
    : vocab_(cfg.vocab_size),
      S_(limits.max_decode_rows),
      pool_(pool),
      rank_(rank),
      tokenizer_(tokenizer),
      eos_(static_cast<int32_t>(cfg.eos_token_id)) {
  const int64_t T = limits.max_rows;
  const size_t S = static_cast<size_t>(S_), B = static_cast<size_t>(limits.max_batch);
  logits_.resize(static_cast<size_t>(T * vocab_));
  head_rows_.resize(T);
  head_at_.resize(T);
  rows_of_one_.resize(T);
  head_begin_.resize(B);
  head_count_.resize(B);
  tokens_.resize(S * B);
  draft_tokens_.resize(S * B);
  logprobs_.resize(S * B);
  for (TokenLogprob& lp : logprobs_) lp.top.reserve(kMaxTopLogprobs);  // the step allocates nothing
  prompt_logprobs_.resize(B);
  sample_logits_.resize(S * B);
  sample_rows_.resize(sample_logits_.size());
  sample_tokens_.resize(sample_logits_.size());
  sample_out_.resize(sample_logits_.size());
  sample_scratch_.resize(static_cast<size_t>(kernels::sample_scratch_bytes(vocab_, pool.size()) / 8 + 1));
  logprob_tasks_.resize(S * B + static_cast<size_t>(T));
  if (slots <= 0) slots = limits.max_seqs;
  slot_counts_.resize(static_cast<size_t>(slots));
  slot_grammar_.resize(static_cast<size_t>(slots));
  dead_row_.resize(B);
  if (rejection) {
    rejection_tasks_.resize(B);
    rejection_scratch_.resize(static_cast<size_t>(kernels::rejection_scratch_bytes(vocab_) / 8 + 1) * pool.size());
  }
}

void Sampler::plan_head_rows(const std::vector<PlannedRows>& plan, const int64_t* row_begin, const Scheduler& sched) {
  n_head_ = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    head_begin_[i] = n_head_;
    for (int32_t j = 0; j < p.n; ++j) head_at_[row_begin[i] + j] = -1;
    if (p.sampler == rank_ && sched.live(i)) {
      const int32_t real = p.n - p.n_drafts;
      for (int32_t j = 0; j < p.n; ++j) {
        const bool prompt_lp = p.prompt_logprobs && p.p0 + j + 1 < p.prompt_len;
        const bool sampled = p.samples && j >= real - 1;
        if (!prompt_lp && !sampled) continue;
        head_at_[row_begin[i] + j] = static_cast<int32_t>(n_head_);
        head_rows_[n_head_++] = static_cast<int32_t>(row_begin[i] + j);
      }
    }
    head_count_[i] = n_head_ - head_begin_[i];
  }
}

HeadRows Sampler::head_rows_of(size_t i, int64_t row_begin) {
  for (int64_t k = 0; k < head_count_[i]; ++k)
    rows_of_one_[k] = head_rows_[head_begin_[i] + k] - static_cast<int32_t>(row_begin);
  return HeadRows{rows_of_one_.data(), head_count_[i]};
}

bool Sampler::sample(const std::vector<PlannedRows>& plan, const int64_t* row_begin, const Scheduler& sched,
                     const Proposer* proposer) {
  const bool any_prompt_lp = queue_rows(plan, row_begin, sched, proposer);
  run_sample_tasks();
  run_rejection_tasks();
  verify_and_score(plan, row_begin, proposer);
  run_logprob_tasks();
  return any_prompt_lp;
}

// The sample tasks of the rows this rank samples, the rejection rounds, the prompt logprobs.
bool Sampler::queue_rows(const std::vector<PlannedRows>& plan, const int64_t* row_begin, const Scheduler& sched,
                         const Proposer* proposer) {
  bool any_prompt_lp = false;
  const float* rows[kMaxDsparkGamma + 1];
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    const GenerationRequest& g = *p.request;
    int32_t* tok = tokens_.data() + S_ * i;
    std::fill_n(tok, S_, -1);
    std::fill_n(draft_tokens_.data() + S_ * i, S_, -1);
    prompt_logprobs_[i].clear();
    dead_row_[i] = -1;
    if (p.sampler != rank_ || !sched.live(i)) continue;
    const int64_t first = row_begin[i];
    if (p.prompt_logprobs) {  // row j predicts the prompt token at p0 + j + 1
      any_prompt_lp = true;
      const int64_t n_lp = std::max<int64_t>(0, std::min<int64_t>(p.n, p.prompt_len - p.p0 - 1));
      prompt_logprobs_[i].resize(static_cast<size_t>(n_lp));
      for (int64_t j = 0; j < n_lp; ++j)
        add_logprobs(row(first + j), g.prompt[p.p0 + j + 1], std::max(g.logprobs, 0), &prompt_logprobs_[i][j]);
    }
    if (!p.samples) continue;
    const int32_t real = p.n - p.n_drafts;
    const int64_t q = p.p0 + real;  // the position the last real row predicts
    if (g.adjust.any() || g.constraint.active()) dead_row_[i] = adjust_rows(p, first + real - 1, sched.tokens(i));
    if (dead_row_[i] == 0) {  // nothing may follow: the request fails (scheduler.h), no token is sampled
      tok[0] = kGrammarDeadEnd;
      continue;
    }
    if (const float* lambda = proposer ? proposer->verify(p).draft_lambda : nullptr) {
      for (int32_t k = 0; k <= p.n_drafts; ++k) rows[k] = row(first + real - 1 + k);
      queue_rejection(i, p, rows, lambda);  // the whole round in one task
      continue;
    }
    add_sample(row(first + real - 1), *p.sampling, q, 0, &tok[0]);
    for (int32_t k = 1; k <= p.n_drafts; ++k)  // kept if drafts 1..k are accepted
      add_sample(row(first + real - 1 + k), *p.sampling, q + k, 0, &draft_tokens_[S_ * i + k]);
  }
  return any_prompt_lp;
}

// The rows p samples, first_sampled and its drafts', take the request's logit adjustments in
// place: row k's history is the committed tokens and drafts 1..k (the token it predicts is kept
// only when those drafts are), counted for the row and rolled back after it.
int32_t Sampler::adjust_rows(const PlannedRows& p, int64_t first_sampled, const TokenSeq& history) {
  const LogitAdjustments& a = p.request->adjust;
  kernels::TokenCounts* counts = counts_for(p, history);
  SlotGrammar* gr = grammar_for(p, history);
  // Row k's matcher state: the committed one, then drafts 1..k read (started: the constraint
  // is on at row k).
  const grammar::MatchState* state = gr ? gr->state.get() : nullptr;
  bool started = gr && gr->started;
  int32_t dead = -1;
  for (int32_t k = 0; k <= p.n_drafts; ++k) {
    if (k > 0 && counts) counts->add_output(p.tokens[k]);
    if (k > 0 && gr) {
      const int32_t d = p.tokens[k];
      if (started && d != eos_) {
        const std::string& b = tokenizer_->token_bytes(d);
        gr->matcher->feed(*state, b.data(), static_cast<int64_t>(b.size()), round_states_[k], *scratch_state_);
        state = &round_states_[k];
      } else if (!started && d == p.request->constraint.start_after) {
        started = true;
        gr->matcher->start(round_states_[k]);
        state = &round_states_[k];
      }
    }
    float* row = logits_.data() + head_at_[first_sampled + k] * vocab_;
    if (a.any()) kernels::logit_adjust(row, a, counts);
    if (started && !mask_row(row, *gr->matcher, *state) && dead < 0) dead = k;
  }
  for (int32_t k = p.n_drafts; k > 0 && counts; --k) counts->remove_output(p.tokens[k]);
  return dead;
}

void Sampler::adjust_row(const PlannedRows& p, const TokenSeq& history, float* row) {
  if (p.request->adjust.any()) kernels::logit_adjust(row, p.request->adjust, counts_for(p, history));
  if (SlotGrammar* gr = grammar_for(p, history); gr && gr->started) mask_row(row, *gr->matcher, *gr->state);
}

Sampler::SlotGrammar* Sampler::grammar_for(const PlannedRows& p, const TokenSeq& history) {
  const OutputConstraint& c = p.request->constraint;
  if (!c.active()) return nullptr;
  SlotGrammar& slot = slot_grammar_[static_cast<size_t>(p.seq)];
  if (slot.id != p.id) {  // a new request in this slot: its grammar, then its generated tokens read once
    if (!mask_vocab_) {   // the first constrained request: the vocabulary's tries, the buffers
      const Tokenizer& t = *tokenizer_;
      mask_vocab_ = std::make_unique<grammar::MaskVocab>(
          t.n_vocab(), [&](int32_t id) { return std::string_view(t.token_bytes(id)); },
          [&](int32_t id) { return t.is_special(id); });
      masker_ = std::make_unique<grammar::TokenMasker>(*mask_vocab_);
      round_states_.resize(static_cast<size_t>(S_));
      scratch_state_ = std::make_unique<grammar::MatchState>();
      spare_state_ = std::make_unique<grammar::MatchState>();
      mask_.resize(static_cast<size_t>((t.n_vocab() + 63) / 64));
    }
    DSV4_CHECK(c.compiled, "request {}: its constraint was not compiled (Engine::prepare)", p.id);
    slot.id = p.id;
    slot.grammar = c.compiled;
    slot.matcher = std::make_unique<grammar::JsonMatcher>(*c.compiled);
    masker_->prepare(*c.compiled);  // its small automata's masks, once per grammar while cached
    if (!slot.state) slot.state = std::make_unique<grammar::MatchState>();
    slot.started = c.start_after < 0;
    if (slot.started) slot.matcher->start(*slot.state);
    slot.synced = static_cast<size_t>(p.prompt_len);
  }
  for (; slot.synced < history.size(); ++slot.synced) {
    const int32_t t = history[slot.synced];
    if (!slot.started) {
      if (t == c.start_after) {
        slot.started = true;
        slot.matcher->start(*slot.state);
      }
      continue;
    }
    if (t == eos_) continue;
    const std::string& b = tokenizer_->token_bytes(t);
    slot.matcher->feed(*slot.state, b.data(), static_cast<int64_t>(b.size()), *spare_state_, *scratch_state_);
    std::swap(slot.state, spare_state_);
  }
  return &slot;
}

// −inf for every id the state does not allow; EOS keeps its logit where the value is whole (or
// no reading is left: a draft row after a draft the grammar refused, whose token is never kept).
// A live state that allows nothing is a grammar dead end: false (the caller fails the request).
bool Sampler::mask_row(float* row, const grammar::JsonMatcher& m, const grammar::MatchState& state) {
  const float eos_logit = row[eos_];
  const int64_t n_text = mask_vocab_->all.n_vocab();
  const int64_t allowed = state.n > 0 ? masker_->fill(m, state, mask_.data()) : 0;
  if (state.n == 0) std::fill(mask_.begin(), mask_.end(), 0);
  grammar::apply_token_mask(mask_.data(), n_text, row, vocab_);
  const bool eos = state.n == 0 || m.accepting(state);
  if (eos) row[eos_] = eos_logit;
  return allowed > 0 || eos;
}

kernels::TokenCounts* Sampler::counts_for(const PlannedRows& p, const TokenSeq& history) {
  if (!p.request->adjust.penalizes()) return nullptr;
  SlotCounts& slot = slot_counts_[static_cast<size_t>(p.seq)];
  if (slot.id != p.id) {  // a new request in this slot: count its history once
    if (!slot.counts.sized()) slot.counts.resize(vocab_);
    slot.counts.clear();
    slot.id = p.id;
    slot.synced = 0;
  }
  for (; slot.synced < history.size(); ++slot.synced) {
    const int32_t id = history[slot.synced];
    static_cast<int64_t>(slot.synced) < p.prompt_len ? slot.counts.add_prompt(id) : slot.counts.add_output(id);
  }
  return &slot.counts;
}

// dspark.md §4.3 mode rejection: rows [n_drafts + 1] the verify rows, draft_lambda
// [n_drafts, V] the drafter's λ_0 … λ_{n_drafts−1}.
void Sampler::queue_rejection(size_t i, const PlannedRows& p, const float* const* rows, const float* draft_lambda) {
  RejectionTask& task = rejection_tasks_[n_rejection_++];
  task.plan_index = i;
  for (int32_t k = 0; k <= p.n_drafts; ++k) task.target[k] = rows[k];
  for (int32_t k = 0; k < p.n_drafts; ++k) task.draft[k] = draft_lambda + k * vocab_;
  const int64_t q = p.p0 + (p.n - p.n_drafts);
  task.round = kernels::RejectionRound{task.target, task.draft, p.tokens + 1, p.n_drafts, *p.sampling, q};
}

// Exact match (runtime.md §3.2): draft k is accepted when it equals the target's token at its
// position and every earlier draft was accepted (rejection rounds are decided). Then the
// logprobs of the tokens kept.
void Sampler::verify_and_score(const std::vector<PlannedRows>& plan, const int64_t* row_begin,
                               const Proposer* proposer) {
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    int32_t* tok = tokens_.data() + S_ * i;
    if (tok[0] < 0) continue;
    const int32_t real = p.n - p.n_drafts;
    const bool rejection = proposer && proposer->verify(p).draft_lambda;
    if (!rejection)
      for (int32_t k = 1; k <= p.n_drafts && p.tokens[k] == tok[k - 1]; ++k) tok[k] = draft_tokens_[S_ * i + k];
    if (dead_row_[i] > 0 && tok[dead_row_[i]] >= 0) {  // the drafts reached a dead end: fail, keep nothing
      std::fill_n(tok, S_, -1);
      tok[0] = kGrammarDeadEnd;
      continue;
    }
    const int32_t top = p.request->logprobs;
    if (top < 0) continue;
    for (int32_t k = 0; k < S_ && tok[k] >= 0; ++k)
      add_logprobs(row(row_begin[i] + real - 1 + k), tok[k], top, &logprobs_[S_ * i + k]);
  }
}

void Sampler::add_sample(const float* row, const kernels::SamplingParams& sp, int64_t position, int draft_slot,
                         int32_t* out) {
  sample_logits_[n_sample_] = row;
  sample_rows_[n_sample_] = kernels::SampleRow{sp, position, draft_slot};
  sample_out_[n_sample_++] = out;
}

void Sampler::run_sample_tasks() {
  const int64_t n = n_sample_, V = vocab_, bytes = static_cast<int64_t>(sample_scratch_.size() * 8);
  auto part = [&](int tid, int nt) {
    kernels::sample(sample_logits_.data(), n, V, sample_rows_.data(), sample_tokens_.data(), sample_scratch_.data(),
                    bytes, tid, nt);
  };
  if (n == 1) part(0, 1);  // one row: no other thread has work, so no run (and no barrier)
  else if (n > 1) pool_.run(part);
  for (int64_t i = 0; i < n; ++i) *sample_out_[i] = sample_tokens_[i];
  n_sample_ = 0;
}

// The rounds verified by rejection (dspark.md §4.3), one round per task: the committed tokens
// d_1 … d_{n_acc}, b into the request's tokens().
void Sampler::run_rejection_tasks() {
  const int64_t n = n_rejection_, V = vocab_, bytes = kernels::rejection_scratch_bytes(V);
  const int64_t words = bytes / 8 + 1;
  auto part = [&](int tid, int nt) {
    const Range r = split_range(n, tid, nt);
    for (int64_t t = r.begin; t < r.end; ++t) {
      RejectionTask& task = rejection_tasks_[t];
      kernels::rejection_verify(task.round, V, tokens_.data() + S_ * task.plan_index,
                                rejection_scratch_.data() + tid * words, bytes);
    }
  };
  if (n == 1) part(0, 1);
  else if (n > 1) pool_.run(part);
  n_rejection_ = 0;
}

void Sampler::add_logprobs(const float* row, int32_t token, int32_t top, TokenLogprob* out) {
  logprob_tasks_[n_logprob_++] = LogprobTask{row, token, top, out};
}

void Sampler::run_logprob_tasks() {
  const int64_t n = n_logprob_, V = vocab_;
  auto part = [&](int tid, int nt) {
    const Range r = split_range(n, tid, nt);
    for (int64_t i = r.begin; i < r.end; ++i) {
      const LogprobTask& k = logprob_tasks_[i];
      logprobs_of(k.row, V, k.token, k.top, *k.out);
    }
  };
  if (n == 1) part(0, 1);
  else if (n > 1) pool_.run(part);
  n_logprob_ = 0;
}

void Sampler::logprobs_of(const float* row, int64_t V, int32_t token, int32_t top, TokenLogprob& out) {
  float mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
  const double lse = mx + std::log(sum);
  out.token = token;
  out.logprob = static_cast<float>(row[token] - lse);
  out.top.clear();
  auto better = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  for (int64_t v = 0; v < V && top > 0; ++v) {
    const std::pair<int32_t, float> c{static_cast<int32_t>(v), row[v]};
    if (static_cast<int32_t>(out.top.size()) < top) {
      out.top.insert(std::upper_bound(out.top.begin(), out.top.end(), c, better), c);
    } else if (better(c, out.top.back())) {
      out.top.pop_back();
      out.top.insert(std::upper_bound(out.top.begin(), out.top.end(), c, better), c);
    }
  }
  for (auto& [id, lp] : out.top) lp = static_cast<float>(lp - lse);
}

}  // namespace dsv4
