#include "runtime/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace dsv4 {

struct Scheduler::Req {
  int64_t id = 0;
  // One per request, shared by its choices (prompt, stops, constraint: never copied per choice).
  std::shared_ptr<const GenerationRequest> g;
  SamplingParams sampling;       // this choice's: the request's with choice_seed(seed, k)
  bool prompt_logprobs = false;  // choice 0 only
  // Its tokens are g->prompt (one array, shared by the choices) then its committed outputs
  // (identical on every rank; reserved up front, so commits never reallocate).
  std::vector<int32_t> outputs;
  TokenSeq tokens() const { return TokenSeq(g->prompt, outputs); }
  int64_t len() const { return prompt_len + static_cast<int64_t>(outputs.size()); }
  int64_t prompt_len = 0;
  int64_t n_cached = 0;         // positions in the caches (main and MTP)
  int32_t seq = -1;
  std::vector<int32_t> drafts;  // drafts for positions len() .. (MTP: one; DSpark: γ)
  int32_t owner = 0;
  std::vector<int32_t> cp_slots;  // context-parallel prompt: its slot on each TP rank of the owner's group
  int32_t generated = 0;
  int64_t last_served = -1;     // step of the last rows
  bool ended = false;           // replicated: leaves at the end of this plan/update
  bool reported = false;        // rank-local: its final update was delivered
  std::unique_ptr<OutputText> text;
  std::vector<TokenLogprob> prompt_lp;
  bool prompt_lp_sent = false;
  int64_t update_step = -1;     // updates_[update_at] is this step's update
  size_t update_at = 0;
  int64_t cached_before = 0;    // this step
  int64_t prompt_hits = -1;     // prompt positions the prefix cache held at the first admission
  int32_t forks = 0;            // choices 1 .. forks not forked yet (ids id + k)
  int64_t fork_at() const { return prompt_len - 1; }
};

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kContext: return "context";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kTimeout: return "timeout";
    case FinishReason::kError: return "error";
  }
  return "?";
}

Scheduler::Scheduler(const SchedulerOptions& opt, PageBudget& pages) : opt_(opt), pages_(pages) {
  opt_.world = std::max(opt.world, 1);
  seq_used_.assign(static_cast<size_t>(opt.limits.max_seqs) * opt_.world, 0);
  need_.resize(static_cast<size_t>(opt_.world));
  prefix_by_rank_.resize(static_cast<size_t>(opt_.world));
  plan_.reserve(opt.limits.max_batch);
  planned_.reserve(opt.limits.max_batch);
  updates_.reserve(2 * static_cast<size_t>(opt.limits.max_batch));  // a step's updates: mostly the batch's
  draft_rows_.resize(static_cast<size_t>(opt.limits.max_decode_rows) * opt.limits.max_batch);
  fill_rows_.resize(static_cast<size_t>(std::max<int64_t>(opt.limits.max_rows, 1)));
}

Scheduler::~Scheduler() = default;

void Scheduler::add(int64_t id, GenerationRequest req) {
  auto r = std::make_unique<Req>();
  r->id = id;
  r->prompt_len = static_cast<int64_t>(req.prompt.size());
  r->outputs.reserve(output_room(r->prompt_len, req.max_tokens));
  if (opt_.tokenizer) r->text = std::make_unique<OutputText>(*opt_.tokenizer, req.stop_strings);
  r->forks = std::max(req.n, 1) - 1;
  r->sampling = req.sampling;
  r->prompt_logprobs = req.prompt_logprobs;
  r->g = std::make_shared<const GenerationRequest>(std::move(req));
  waiting_.push_back(std::move(r));
}

// Room for every output token a choice can reach, so that commits in a step never reallocate.
size_t Scheduler::output_room(int64_t prompt_len, int32_t max_tokens) const {
  const int64_t most = std::min<int64_t>(prompt_len + std::max(max_tokens, 0), opt_.limits.max_context);
  return static_cast<size_t>(std::max<int64_t>(most - prompt_len, 0) + opt_.limits.max_decode_rows);
}

void Scheduler::cancel(int64_t id, FinishReason why, std::string error) {
  cancels_.push_back({id, {why, std::move(error)}});
}

bool Scheduler::idle() const { return waiting_.empty() && running_.empty() && cancels_.empty(); }

Scheduler::Req* Scheduler::find(int64_t id) {
  for (auto& r : running_)
    if (r->id == id) return r.get();
  for (auto& r : waiting_)
    if (r->id == id) return r.get();
  return nullptr;
}

RequestUpdate& Scheduler::update_of(Req& r) {
  if (r.update_step != step_) {
    r.update_step = step_;
    r.update_at = updates_.size();
    updates_.emplace_back();
    updates_.back().id = r.id;
    const auto S = static_cast<size_t>(opt_.limits.max_decode_rows);
    updates_.back().tokens.reserve(S);                          // one allocation,
    if (r.g->logprobs >= 0) updates_.back().logprobs.reserve(S);  // and one for logprobs
  }
  return updates_[r.update_at];
}

void Scheduler::end_slot(Req& r) {
  if (r.seq < 0) return;
  end_cp_slots(r);
  pages_.register_prefix(r.seq, r.g->prompt, r.prompt_len);
  pages_.end(r.seq);
  seq_used_[r.seq] = 0;
  r.seq = -1;
}

// The prompt logprobs go out once, with the first update after the prompt (or the last one).
void Scheduler::send_prompt_logprobs(Req& r) {
  if (!r.prompt_logprobs || r.prompt_lp_sent || r.reported) return;
  update_of(r).prompt_logprobs = std::move(r.prompt_lp);
  r.prompt_lp_sent = true;
}

// The request's last update (rank-local: the caller decides whether it also ends now).
void Scheduler::report_final(Req& r, FinishReason why, const std::string& error, int32_t stop_id) {
  if (r.reported) return;
  send_prompt_logprobs(r);
  RequestUpdate& u = update_of(r);
  if (r.text) r.text->finish(u.text);  // the held-back text (nothing after a stop string)
  u.finished = true;
  u.reason = why;
  u.error = error;
  u.stop_id = stop_id;
  if (why == FinishReason::kStop && r.text && r.text->stopped()) u.stop_string = r.text->matched();
  u.prompt_tokens = r.prompt_len;
  u.completion_tokens = r.generated;
  u.cached_tokens = std::max<int64_t>(r.prompt_hits, 0);
  r.reported = true;
}

void Scheduler::finish(Req& r, FinishReason why, const std::string& error, int32_t stop_id) {
  r.ended = true;
  end_slot(r);
  report_final(r, why, error, stop_id);
  for (int32_t k = 1; k <= r.forks; ++k) {  // choices never forked end with their parent
    RequestUpdate& u = updates_.emplace_back();
    u.id = r.id + k;
    u.finished = true;
    u.reason = why;
    u.error = error;
    u.prompt_tokens = r.prompt_len;
  }
  r.forks = 0;
}

std::vector<std::pair<int64_t, FinishReason>> Scheduler::take_local_finishes() {
  std::vector<std::pair<int64_t, FinishReason>> v;
  v.swap(local_finishes_);
  return v;
}

int32_t Scheduler::running_on(int32_t rank) const {
  int32_t n = 0;
  for (const auto& o : running_) n += o->owner == rank;
  return n;
}

bool Scheduler::holds_pages_on(const Req& r, int32_t rank) const {
  if (r.owner == rank) return true;
  for (int32_t seq : r.cp_slots)
    if (opt_.limits.slot_rank(seq) == rank) return true;
  return false;
}

int64_t Scheduler::growth_on(int32_t rank) const {
  int64_t growth = 0;
  for (const auto& q : running_)
    if (q->owner == rank)
      growth += pages_.pages_short(q->seq, q->len() +
                                               std::max(1, opt_.limits.max_decode_rows - 1));
  return growth;
}

int32_t Scheduler::pick_owner(const Req& r, bool allow_prefix) const {
  int32_t hit_rank = -1, roomy_rank = -1;
  int64_t best_hit = -1, hit_load = INT64_MAX, min_load = INT64_MAX, roomy_free = -1, roomy_load = INT64_MAX;
  for (int32_t q = 0; q < opt_.world; ++q) {
    if (free_seq(q) < 0) continue;
    const int64_t hit = allow_prefix ? pages_.cached_prefix(q, r.g->prompt, r.prompt_len, r.g->cache_salt) : 0;
    const int64_t n = running_on(q), free = pages_.free_pages(q) - growth_on(q);
    if (hit > best_hit || (hit == best_hit && n < hit_load)) {
      hit_rank = q;
      best_hit = hit;
      hit_load = n;
    }
    min_load = std::min(min_load, n);
    if (free > roomy_free || (free == roomy_free && n < roomy_load)) {
      roomy_rank = q;
      roomy_free = free;
      roomy_load = n;
    }
  }
  return best_hit > 0 && hit_load <= min_load + kMaxHitImbalance ? hit_rank : roomy_rank;
}

bool Scheduler::start_cp_slots(Req& r) {
  const int32_t tp = opt_.tp, base = r.owner / tp * tp;
  const int64_t len = r.prompt_len;  // the split rows: the prompt's
  r.cp_slots.assign(static_cast<size_t>(tp), -1);
  bool ok = true;
  for (int32_t j = 0; j < tp && ok; ++j) {
    const int32_t rank = base + j;
    if (rank == r.owner) {
      r.cp_slots[j] = r.seq;
      continue;
    }
    const int32_t seq = free_seq(rank);
    ok = seq >= 0 && pages_.pages_short(-1, len) + growth_on(rank) <= pages_.free_pages(rank) &&
         pages_.start(seq, r.g->prompt, r.prompt_len, /*allow_prefix=*/false, r.g->cache_salt).ok();
    if (!ok) break;
    seq_used_[seq] = 1;
    r.cp_slots[j] = seq;
    ok = pages_.reserve(seq, len).ok();
  }
  if (!ok) end_cp_slots(r);
  return ok;
}

void Scheduler::end_cp_slots(Req& r) {
  for (int32_t seq : r.cp_slots)
    if (seq >= 0 && seq != r.seq) {
      pages_.end(seq);
      seq_used_[seq] = 0;
    }
  r.cp_slots.clear();
}

void Scheduler::preempt(Req& r) {
  end_cp_slots(r);
  pages_.end(r.seq);
  seq_used_[r.seq] = 0;
  r.seq = -1;
  r.n_cached = 0;
  if (!r.prompt_lp_sent) r.prompt_lp.clear();  // the recompute scores the prompt again from position 1
  r.drafts.clear();
  ++counters_.preempted;
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == &r; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
}

int32_t Scheduler::free_seq(int32_t rank) const {
  const int32_t first = opt_.limits.job_slot(rank, 0);
  for (int32_t s = first; s < first + opt_.limits.max_seqs; ++s)
    if (!seq_used_[s]) return s;
  return -1;
}

void Scheduler::fork_choices() {
  std::vector<std::unique_ptr<Req>> lone;  // choices that wait as lone requests
  const size_t n_running = running_.size();
  for (size_t i = 0; i < n_running; ++i) {
    Req& parent = *running_[i];
    if (parent.forks == 0 || parent.ended || parent.n_cached != parent.fork_at()) continue;
    const int64_t end = parent.fork_at(), P = opt_.limits.page_tokens;
    const int64_t pages = pages_.pages_short(-1, end) - pages_.pages_short(-1, end / P * P);
    for (int32_t k = 1; k <= parent.forks; ++k) {
      auto c = std::make_unique<Req>();
      c->id = parent.id + k;
      c->g = parent.g;
      c->sampling = parent.sampling;
      c->sampling.seed = choice_seed(parent.sampling.seed, k);
      c->prompt_len = parent.prompt_len;
      c->outputs.reserve(parent.outputs.capacity());  // the prompt stays the parent's (g->prompt)
      if (opt_.tokenizer) c->text = std::make_unique<OutputText>(*opt_.tokenizer, c->g->stop_strings);
      c->prompt_hits = parent.prompt_hits;
      const int32_t seq = free_seq(parent.owner);
      if (seq < 0 || pages > pages_.free_pages(parent.owner) || !pages_.fork(parent.seq, seq, end).ok()) {
        lone.push_back(std::move(c));
        continue;
      }
      seq_used_[seq] = 1;
      c->seq = seq;
      c->n_cached = end;
      c->owner = parent.owner;
      c->last_served = parent.last_served;
      ++counters_.forked;
      running_.push_back(std::move(c));
    }
    parent.forks = 0;
  }
  for (auto it = lone.rbegin(); it != lone.rend(); ++it) waiting_.push_front(std::move(*it));
}

void Scheduler::admit() {
  while (!waiting_.empty()) {
    Req& r = *waiting_.front();
    const int64_t len = r.len();
    // Prompt logprobs need every prompt row computed: no prefix-cache hit for them.
    const bool allow_prefix = !r.prompt_logprobs;
    const int32_t owner = pick_owner(r, allow_prefix);
    if (owner < 0) break;  // no free slot on any rank
    if (pages_.pages_short(-1, len) + growth_on(owner) > pages_.free_pages(owner)) break;
    const int32_t seq = free_seq(owner);
    Result<int64_t> start = pages_.start(seq, r.g->prompt, r.prompt_len, allow_prefix, r.g->cache_salt);
    if (!start.ok()) {
      std::unique_ptr<Req> gone = std::move(waiting_.front());
      waiting_.pop_front();
      finish(*gone, FinishReason::kError, start.message());
      continue;
    }
    if (!pages_.reserve(seq, len).ok()) {  // pages went to running requests meanwhile: wait
      pages_.end(seq);
      break;
    }
    seq_used_[seq] = 1;
    r.seq = seq;
    r.n_cached = *start;
    r.owner = owner;
    // Context-parallel prefill from position 0 only: a prefix hit's rows live on the owner alone.
    if (opt_.tp > 1 && opt_.cp_prefill_tokens > 0 && !r.prompt_logprobs && r.n_cached == 0 &&
        r.prompt_len >= opt_.cp_prefill_tokens)
      start_cp_slots(r);
    counters_.prefix_hit_tokens += *start;
    if (r.prompt_hits < 0) {  // not a preempted one's re-admission
      r.prompt_hits = std::min(*start, r.prompt_len);
      prefix_by_rank_[static_cast<size_t>(owner)].prompt_tokens += r.prompt_len;
      prefix_by_rank_[static_cast<size_t>(owner)].hit_tokens += r.prompt_hits;
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

const std::vector<PlannedRows>& Scheduler::plan() {
  start_step();
  for (;;) {
    plan_rows();
    const int32_t over = rank_short_of_pages();
    if (over < 0) break;
    make_room(over);
  }
  for (Req* r : planned_) {
    r->last_served = step_;
    r->cached_before = r->n_cached;
  }
  return plan_;
}

// Cancels, ended requests out, then forks and admission.
void Scheduler::start_step() {
  ++step_;
  plan_.clear();
  planned_.clear();
  updates_.clear();
  graveyard_.clear();
  fill_used_ = 0;
  counters_ = {};
  for (auto& [id, why] : cancels_)
    if (Req* r = find(id)) finish(*r, why.first, why.second);
  cancels_.clear();
  auto ended = [](const auto& r) { return r->ended; };
  running_.erase(std::remove_if(running_.begin(), running_.end(), ended), running_.end());
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), ended), waiting_.end());
  for (auto& r : running_)  // split prompts in the caches: their slots on the TP group go
    if (r->n_cached >= r->prompt_len) end_cp_slots(*r);
  fork_choices();
  admit();
  fork_choices();  // a parent admitted at its fork position (a one-token prompt)
}

// The rows of every running request that fits the batch, served longest ago first, then in
// arrival order; planned_ holds the planned requests, need_ their pages per owner rank.
void Scheduler::plan_rows() {
  const Limits& L = opt_.limits;
  std::vector<Req*>& order = planned_;
  order.clear();
  for (auto& r : running_) order.push_back(r.get());
  std::sort(order.begin(), order.end(), [](const Req* a, const Req* b) {
    return a->last_served != b->last_served ? a->last_served < b->last_served : a->id < b->id;
  });
  plan_.clear();
  std::fill(need_.begin(), need_.end(), 0);
  int64_t T = 0;
  size_t kept = 0;
  for (Req* rp : order) {
    Req& r = *rp;
    if (static_cast<int32_t>(plan_.size()) >= L.max_batch) break;
    if (r.forks > 0 && r.n_cached == r.fork_at()) continue;  // forks at the next plan()
    PlannedRows p = rows_of(r, L.max_rows - T);
    if (p.n <= 0) continue;
    need_[static_cast<size_t>(r.owner)] += pages_.pages_short(r.seq, p.p0 + p.n);  // split: reserved
    plan_.push_back(p);
    order[kept++] = rp;
    T += p.n;
  }
  order.resize(kept);
}

// The tokens of a fill chunk of n rows from r.n_cached: in place within the prompt or within the
// outputs; a chunk across the prompt's end (a preempted request's recompute) is copied into
// fill_rows_ (T_MAX entries: a step's rows never exceed them).
const int32_t* Scheduler::fill_rows(const Req& r, int32_t n) {
  const int64_t p0 = r.n_cached;
  if (p0 + n <= r.prompt_len) return r.g->prompt.data() + p0;
  if (p0 >= r.prompt_len) return r.outputs.data() + (p0 - r.prompt_len);
  DSV4_CHECK(fill_used_ + static_cast<size_t>(n) <= fill_rows_.size());
  int32_t* rows = fill_rows_.data() + fill_used_;
  const TokenSeq seq = r.tokens();
  for (int32_t k = 0; k < n; ++k) rows[k] = seq[static_cast<size_t>(p0 + k)];
  fill_used_ += static_cast<size_t>(n);
  return rows;
}

// One request's rows within `room` rows (n 0: none this step).
PlannedRows Scheduler::rows_of(Req& r, int64_t room) {
  const Limits& L = opt_.limits;
  const int64_t len = r.len();
  PlannedRows p;
  p.id = r.id;
  p.seq = r.seq;
  p.p0 = r.n_cached;
  p.prompt_len = r.prompt_len;
  p.owner = r.owner;
  p.request = r.g.get();
  p.sampling = &r.sampling;
  p.prompt_logprobs = r.prompt_logprobs;
  if (len - r.n_cached > 1) {  // fill: a chunk of the tokens, not across the split prompt's end
    p.split = !r.cp_slots.empty() && r.n_cached < r.prompt_len;
    if (p.split) p.cp_slots = r.cp_slots.data();
    const int64_t end = r.forks > 0 ? r.fork_at() : p.split ? r.prompt_len : len;
    p.n = static_cast<int32_t>(std::min<int64_t>({end - r.n_cached, L.max_chunk, room}));
    p.tokens = fill_rows(r, p.n);
    p.samples = r.n_cached + p.n == len;
  } else {  // decode: the last token, and the drafts
    p.n_drafts = static_cast<int32_t>(r.drafts.size());
    p.n = 1 + p.n_drafts;
    if (p.n > room) {
      p.n = 0;
      return p;
    }
    int32_t* rows = draft_rows_.data() + static_cast<size_t>(L.max_decode_rows) * plan_.size();
    rows[0] = r.tokens().back();
    std::copy(r.drafts.begin(), r.drafts.end(), rows + 1);
    p.tokens = rows;
    p.samples = true;
  }
  p.sampler = p.split ? r.owner / opt_.tp * opt_.tp + opt_.tp - 1 : r.owner;
  return p;
}

// The first rank whose planned growth does not fit its free pages, or -1.
int32_t Scheduler::rank_short_of_pages() const {
  for (int32_t q = 0; q < opt_.world; ++q)
    if (need_[static_cast<size_t>(q)] > 0 && need_[static_cast<size_t>(q)] > pages_.free_pages(q)) return q;
  return -1;
}

// The step's growth does not fit on rank `over`: the newest request holding pages there (its
// own, or a context-parallel prompt's) waits, or, alone there, fails.
void Scheduler::make_room(int32_t over) {
  Req* newest = nullptr;
  int32_t holders = 0;
  for (auto& r : running_)
    if (holds_pages_on(*r, over)) {
      ++holders;
      if (!newest || r->id > newest->id) newest = r.get();
    }
  DSV4_CHECK(newest != nullptr, "rank {} needs pages but no request holds any", over);
  if (holders > 1) return preempt(*newest);
  const Limits& L = opt_.limits;
  finish(*newest, FinishReason::kError,
         fmt::format("the compressed cache cannot hold this request: {} positions need more than the "
                     "{} free of cache_blocks = {} pages of {} positions{}",
                     newest->len() + 1, pages_.free_pages(over), pages_.total_pages(), L.page_tokens,
                     opt_.world > 1 ? fmt::format(" on rank {}", over) : std::string()));
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == newest; });
  graveyard_.push_back(std::move(*it));
  running_.erase(it);
}

void Scheduler::update(const int32_t* tokens, TokenLogprob* logprobs,
                       std::vector<TokenLogprob>* prompt_logprobs) {
  for (size_t i = 0; i < planned_.size(); ++i) {
    Req& r = *planned_[i];
    if (r.ended) continue;  // failed in the executor
    const PlannedRows& p = plan_[i];
    if (prompt_logprobs && r.prompt_logprobs && !r.prompt_lp_sent)
      for (TokenLogprob& lp : prompt_logprobs[i]) r.prompt_lp.push_back(std::move(lp));
    auto commit = [&](int32_t t, TokenLogprob* lp) {
      if (r.ended) return;
      r.outputs.push_back(t);
      ++r.generated;
      ++counters_.committed;
      const bool eos = r.g->stop_at_eos && t == opt_.eos_token_id;
      const bool stop_id = eos || std::find(r.g->stop_ids.begin(), r.g->stop_ids.end(), t) != r.g->stop_ids.end();
      bool text_stop = false;
      if (!r.reported) {
        RequestUpdate& u = update_of(r);
        u.tokens.push_back(t);
        if (lp && r.g->logprobs >= 0) u.logprobs.push_back(*lp);  // a copy: the executor keeps its buffer
        if (r.text && !stop_id) text_stop = r.text->push(t, u.text);
      }
      if (stop_id) finish(r, FinishReason::kStop, {}, eos ? -1 : t);
      else if (r.generated >= r.g->max_tokens) finish(r, FinishReason::kLength, {});
      else if (r.len() + 1 >= opt_.limits.max_context)
        finish(r, FinishReason::kContext, {});
      else if (text_stop) {  // reported now; every rank ends it at the next plan (cancel)
        report_final(r, FinishReason::kStop, {});
        local_finishes_.push_back({r.id, FinishReason::kStop});
      }
    };
    if (!p.samples) {
      r.n_cached += p.n;
      continue;
    }
    if (r.g->max_tokens == 0) {  // scoring a prompt only
      r.n_cached += p.n;
      finish(r, FinishReason::kLength, {});
      continue;
    }
    send_prompt_logprobs(r);
    const int64_t S = opt_.limits.max_decode_rows;
    const int32_t* t = tokens + S * i;
    if (t[0] == kGrammarDeadEnd) {
      const std::string field = r.g->constraint.field_name();
      const std::string what = field == "response_format" ? "response_format (json_schema)" : field;
      finish(r, FinishReason::kError, fmt::format("{}: the grammar allows no next token (empty mask)", what));
      continue;
    }
    DSV4_CHECK(t[0] >= 0);
    TokenLogprob* lp = logprobs ? logprobs + S * i : nullptr;
    // Row 0's token, then one more per accepted draft (t[k] >= 0 iff drafts 1..k matched).
    int32_t n_acc = 0;
    while (n_acc < p.n_drafts && t[n_acc + 1] >= 0) ++n_acc;
    counters_.drafts += p.n_drafts;
    counters_.accepted += n_acc;
    if (p.n_drafts > 0) {
      ++counters_.rounds;
      ++counters_.accepted_at[std::min<int32_t>(n_acc, Counters::kMaxAcceptedAt - 1)];
    }
    r.n_cached += p.n_drafts > 0 ? 1 + n_acc : p.n;
    for (int32_t k = 0; k <= n_acc; ++k) commit(t[k], lp ? lp + k : nullptr);
    r.drafts.clear();
  }
  // planned_ points into this step's requests: those that ended stay alive until the next plan().
  size_t kept = 0;
  for (auto& r : running_) {
    if (r->ended) graveyard_.push_back(std::move(r));
    else running_[kept++] = std::move(r);
  }
  running_.resize(kept);
}

void Scheduler::fail(size_t i, const std::string& error) { finish(*planned_[i], FinishReason::kError, error); }

void Scheduler::set_drafts(size_t i, const int32_t* drafts, int32_t n) {
  Req& r = *planned_[i];
  r.drafts.clear();
  if (r.ended) return;
  for (int32_t k = 0; k < n && k + 1 < opt_.limits.max_decode_rows && drafts[k] >= 0; ++k) r.drafts.push_back(drafts[k]);
}

bool Scheduler::live(size_t i) const { return !planned_[i]->ended; }
int64_t Scheduler::cached_before(size_t i) const { return planned_[i]->cached_before; }
int64_t Scheduler::cached(size_t i) const { return planned_[i]->n_cached; }
TokenSeq Scheduler::tokens(size_t i) const { return planned_[i]->tokens(); }

}  // namespace dsv4
