#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <thread>

#include "base/cpu.h"
#include "grammar/json_schema.h"
#include "runtime/proposer.h"
#include "runtime/sampler.h"

namespace dsv4 {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

// The runner's compressed-cache blocks as the scheduler's pages.
class Engine::RunnerPages final : public PageBudget {
 public:
  RunnerPages(ModelRunner& r, bool mtp) : r_(r), mtp_(mtp) {}
  int64_t pages_short(int32_t seq, int64_t end) const override { return r_.blocks_short(seq, end); }
  int64_t free_pages(int32_t rank) const override { return r_.free_blocks(rank); }
  int64_t total_pages() const override { return r_.total_blocks(); }
  Result<int64_t> start(int32_t seq, const std::vector<int32_t>& tokens, int64_t prompt_len, bool allow_prefix,
                        const std::string& salt) override {
    if (!allow_prefix) {
      DSV4_RETURN_IF_ERROR(r_.start_sequence(seq, salt));  // its blocks still register under its salt
      return int64_t{0};
    }
    return r_.start_sequence_cached(seq, tokens.data(), prompt_len, mtp_, salt);
  }
  int64_t cached_prefix(int32_t owner, const std::vector<int32_t>& tokens, int64_t prompt_len,
                        const std::string& salt) const override {
    return r_.cached_prefix_blocks(owner, tokens.data(), prompt_len, mtp_, salt) * r_.limits().page_tokens;
  }
  Status reserve(int32_t seq, int64_t end) override { return r_.reserve_blocks(seq, end); }
  void register_prefix(int32_t seq, const std::vector<int32_t>& tokens, int64_t prompt_len) override {
    r_.register_prefix(seq, tokens.data(), prompt_len, mtp_);
  }
  void end(int32_t seq) override { r_.end_sequence(seq); }
  Status fork(int32_t parent, int32_t child, int64_t end) override { return r_.fork_sequence(parent, child, end); }

 private:
  ModelRunner& r_;
  bool mtp_;
};

Engine::Engine(const ModelConfig& cfg, const Limits& limits, const EngineOptions& opt,
               std::unique_ptr<ModelRunner> runner)
    : cfg_(cfg), limits_(limits), opt_(opt), runner_(std::move(runner)) {
  const int64_t T = limits.max_rows, S = limits.max_decode_rows, B = limits.max_batch;
  pages_ = std::make_unique<RunnerPages>(*runner_, opt.mtp);
  SchedulerOptions so;
  so.limits = limits;
  so.mtp = opt.mtp;
  so.world = opt.ranks ? opt.ranks->topo.world : 1;
  so.tp = opt.ranks ? opt.ranks->topo.tp : 1;
  so.cp_prefill_tokens = opt.cp_prefill_tokens;
  so.eos_token_id = static_cast<int32_t>(cfg.eos_token_id);
  so.tokenizer = rank() == 0 ? opt.tokenizer : nullptr;
  sched_ = std::make_unique<Scheduler>(so, *pages_);
  reqs_.reserve(static_cast<size_t>(B));
  row_begin_.resize(static_cast<size_t>(B));
  wire_ = std::make_unique<RankWire>(opt.ranks ? opt.ranks->world : nullptr, so.world, rank(), S * B, S * B + T);
  const bool rejection = opt.dspark_gamma > 0 && opt.dspark_rejection;
  sampler_ = std::make_unique<Sampler>(cfg, limits_, runner_->pool(), rank(), rejection, opt.tokenizer,
                                       runner_->job_slots());
  const ProposerContext ctx{cfg, limits_, *runner_, *sched_, *sampler_, *wire_, rank(), opt.force_draft};
  if (opt.mtp) proposer_ = make_mtp_proposer(ctx);
  else if (opt.dspark_gamma > 0) proposer_ = make_dspark_proposer(ctx, opt.dspark_gamma, opt.dspark_rejection);
}

int Engine::rank() const { return opt_.ranks ? opt_.ranks->topo.rank : 0; }

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const ModelConfig& cfg, const Weights& w, const Limits& limits,
                                               const EngineOptions& opt) {
  if (opt.mtp && w.mtp.empty())
    return Status::errorf("--mtp: {}", cfg.no_mtp_reason());
  Limits l = limits;
  if (opt.mtp) l.max_decode_rows = std::max(l.max_decode_rows, 2);
  if (opt.dspark_gamma != 0) {
    if (!w.dspark.present)
      return Status::error("--spec dspark: the checkpoint has no DSpark drafter (config.json has no dspark_* fields; "
                           "dspark.md §1.3)");
    if (opt.mtp) return Status::error("--spec dspark and --mtp exclude each other");
    if (opt.dspark_gamma < 1 || opt.dspark_gamma > kMaxDsparkGamma)
      return Status::errorf("--gamma {} outside [1, {}]", opt.dspark_gamma, kMaxDsparkGamma);
    l.max_decode_rows = std::max(l.max_decode_rows, opt.dspark_gamma + 1);
    l.max_rows = std::max(l.max_rows, l.max_decode_rows);
  } else if (opt.dspark_rejection) {
    return Status::error("--verify rejection needs --spec dspark");
  }
  // The engine's own step buffers: logits of every row (twice with MTP) and final streams.
  const double per_row = 4.0 * static_cast<double>(cfg.vocab_size) * (opt.mtp ? 2 : 1) +
                         (opt.mtp ? 4.0 : 0.0) * static_cast<double>(cfg.hc_mult * cfg.hidden_size);
  const double ram = static_cast<double>(physical_memory_bytes());
  if (ram > 0 && per_row * l.max_rows > ram / 2)
    return Status::errorf("limit max_rows = {} needs {:.1f} GiB of logits buffers, more than half of this machine's "
                          "{:.1f} GiB",
                          l.max_rows, per_row * l.max_rows / (1 << 30), ram / (1 << 30));
  auto runner = ModelRunner::create(cfg, w, l, opt.ranks);
  if (!runner.ok()) return runner.status();
  try {
    return std::unique_ptr<Engine>(new Engine(cfg, l, opt, std::move(*runner)));
  } catch (const std::bad_alloc&) {
    return Status::errorf("limits too large for this machine's memory: max_rows = {}, max_batch = {}", l.max_rows,
                          l.max_batch);
  }
}

int64_t Engine::draft_rows() const { return opt_.mtp || opt_.dspark_gamma > 0 ? limits_.max_decode_rows - 1 : 0; }

// The furthest position a request can write: its last sampling row (prompt + max_tokens - 2)
// and that step's draft rows, within max_context.
int64_t Engine::reach(int64_t n_prompt, int64_t max_tokens) const {
  return std::min(std::max(n_prompt + max_tokens - 1 + draft_rows(), n_prompt), limits_.max_context);
}

int64_t Engine::max_tokens_that_fit(int64_t n_prompt) const {
  const int64_t room = limits_.max_context - n_prompt;
  // As validate: the prompt and one more position must fit the empty cache.
  if (room < 1 || runner_->blocks_short(-1, n_prompt + 1) > runner_->total_blocks()) return 0;
  auto fits = [&](int64_t max_tokens) {
    return runner_->blocks_short(-1, reach(n_prompt, max_tokens)) <= runner_->total_blocks();
  };
  if (fits(room)) return room;
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = room;  // fits(lo), !fits(hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

Status Engine::validate(const GenerationRequest& req) const {
  if (req.prompt.empty()) return Status::error("request: prompt is empty (need at least one token id)");
  for (size_t i = 0; i < req.prompt.size(); ++i)
    if (req.prompt[i] < 0 || req.prompt[i] >= cfg_.vocab_size)
      return Status::errorf("request: prompt token {} at index {} outside the vocabulary [0, {})", req.prompt[i], i,
                            cfg_.vocab_size);
  Status st = kernels::validate_sampling_params(req.sampling);
  if (st.ok()) st = kernels::validate_logit_adjustments(req.adjust, cfg_.vocab_size);
  if (!st.ok()) return st.with_context("request");
  if (req.max_tokens < 0 || (req.max_tokens == 0 && !req.prompt_logprobs))
    return Status::errorf("request: max_tokens = {} must be at least 1 (0 only to score the prompt with "
                          "prompt logprobs)", req.max_tokens);
  if (static_cast<int64_t>(req.prompt.size()) + 1 > limits_.max_context)
    return Status::errorf("request: prompt of {} tokens leaves no room in max_context = {}", req.prompt.size(),
                          limits_.max_context);
  const int64_t blocks = runner_->blocks_short(-1, static_cast<int64_t>(req.prompt.size()) + 1);
  if (blocks > runner_->total_blocks())
    return Status::errorf("request: prompt of {} tokens needs {} compressed-cache blocks, cache_blocks = {}",
                          req.prompt.size(), blocks, runner_->total_blocks());
  // Against the empty cache, so a request that can never fit is refused before anything is computed.
  const int64_t drafts = draft_rows();
  const int64_t n_prompt = static_cast<int64_t>(req.prompt.size());
  if (const int64_t pages = runner_->blocks_short(-1, reach(n_prompt, req.max_tokens));
      pages > runner_->total_blocks())
    return Status::errorf("max_tokens: prompt ({} tokens) + max_tokens ({}){} needs {} compressed-cache pages of {} "
                          "positions, the cache has only {} (cache_blocks)",
                          n_prompt, req.max_tokens,
                          drafts > 0 ? fmt::format(" + {} draft row{}", drafts, drafts > 1 ? "s" : "") : "", pages,
                          limits_.page_tokens, runner_->total_blocks());
  for (size_t i = 0; i < req.stop_ids.size(); ++i)
    if (req.stop_ids[i] < 0 || req.stop_ids[i] >= cfg_.vocab_size)
      return Status::errorf("request: stop id {} at index {} outside the vocabulary [0, {})", req.stop_ids[i], i,
                            cfg_.vocab_size);
  if (!req.stop_strings.empty() && !opt_.tokenizer)
    return Status::error("request: stop strings need the model's tokenizer (tokenizer.json), which is not loaded");
  if (req.logprobs < -1 || req.logprobs > kMaxTopLogprobs)
    return Status::errorf("request: top logprobs = {} outside [0, {}]", req.logprobs, kMaxTopLogprobs);
  if (req.n < 1 || req.n > kMaxChoices)
    return Status::errorf("n: {} choices outside [1, {}]", req.n, kMaxChoices);
  if (req.n > 1 && req.max_tokens == 0)
    return Status::error("n: several choices need max_tokens >= 1 (scoring a prompt has one result)");
  if (req.timeout_seconds < 0 || !std::isfinite(req.timeout_seconds))
    return Status::errorf("request: timeout = {} s must be finite and not negative", req.timeout_seconds);
  if (req.constraint.active()) {
    const std::string field = req.constraint.field_name();
    if (!opt_.tokenizer)
      return Status::errorf("{}: constrained decoding needs the model's tokenizer (tokenizer.json)", field);
    if (!req.stop_at_eos) return Status::errorf("{}: constrained output ends at EOS, so it cannot ignore EOS", field);
    if (!req.constraint.compiled) DSV4_RETURN_IF_ERROR(grammars_.get(req.constraint).status());
  }
  return Status();
}

Status Engine::prepare(GenerationRequest& req) const {
  DSV4_RETURN_IF_ERROR(validate(req));
  if (req.constraint.active() && !req.constraint.compiled) {
    Result<std::shared_ptr<const grammar::Grammar>> g = grammars_.get(req.constraint);  // found: validate compiled it
    if (!g.ok()) return g.status();
    req.constraint.compiled = std::move(*g);
  }
  return Status();
}

Result<int64_t> Engine::add_request(GenerationRequest req) {
  if (rank() != 0) return Status::errorf("requests enter on rank 0 (this is rank {})", rank());
  if (stopped_) return Status::error("the engine was stopped");
  DSV4_RETURN_IF_ERROR(prepare(req));
  const int64_t id = next_id_;
  next_id_ += req.n;  // choice k has id + k
  if (req.timeout_seconds > 0)
    for (int32_t k = 0; k < req.n; ++k) deadlines_[id + k] = now_seconds() + req.timeout_seconds;
  if (opt_.ranks) unsent_.push_back(std::move(req));
  else sched_->add(id, std::move(req));
  return id;
}

std::pair<int64_t, int64_t> Engine::cache_pages() const {
  const int64_t total = runner_->total_blocks();
  if (total == INT64_MAX) return {-1, -1};
  return {runner_->free_blocks(), total};
}

void Engine::cancel(int64_t id, FinishReason why) {
  if (rank() == 0 && id >= 0 && id < next_id_) cancels_.push_back({id, why});
}

// Several ranks: rank 0's new requests and cancels (or the stop signal) to every rank; the
// requests take the next ids in order on every rank (n each: choice k has id + k).
Status Engine::sync_ranks(bool stop) {
  DSV4_RETURN_IF_ERROR(wire_->sync(stop, unsent_, cancels_, received_));
  stopped_ = received_.stop;
  if (rank() == 0) {
    int64_t id = next_id_;
    for (const GenerationRequest& g : unsent_) id -= g.n;
    for (GenerationRequest& g : unsent_) {
      const int32_t n = g.n;
      sched_->add(id, std::move(g));
      id += n;
    }
    unsent_.clear();
    for (const auto& [id, why] : cancels_) sched_->cancel(id, why);
    cancels_.clear();
    return Status();
  }
  for (GenerationRequest& g : received_.requests) {
    // Rank 0 validated and compiled it; a follower compiles the text once, as it arrives.
    if (g.constraint.active()) {
      Result<std::shared_ptr<const grammar::Grammar>> compiled = grammars_.get(g.constraint);
      DSV4_CHECK(compiled.ok(), "rank {}: a constraint rank 0 accepted: {}", rank(), compiled.message());
      g.constraint.compiled = std::move(*compiled);
    }
    const int32_t n = g.n;
    sched_->add(next_id_, std::move(g));
    next_id_ += n;
  }
  for (const auto& [id, why] : received_.cancels) sched_->cancel(id, why);
  return Status();
}

Status Engine::stop() {
  if (!opt_.ranks) {
    stopped_ = true;
    return Status();
  }
  if (rank() != 0) return Status::error("only rank 0 stops the engine");
  if (stopped_) return Status();
  if (job_failed()) return Status::error("the job failed: the other ranks have left their step loops");
  return sync_ranks(true);
}

bool Engine::job_failed() const { return opt_.ranks && !opt_.ranks->world->job_status().ok(); }

// Timeouts that ended (rank 0) and stop strings matched in the last update: cancels for this step.
void Engine::collect_cancels() {
  if (rank() == 0 && !deadlines_.empty()) {
    const double now = now_seconds();
    for (auto it = deadlines_.begin(); it != deadlines_.end();)
      if (it->second <= now) {
        cancels_.push_back({it->first, FinishReason::kTimeout});
        it = deadlines_.erase(it);
      } else {
        ++it;
      }
  }
  for (const auto& f : sched_->take_local_finishes()) cancels_.push_back(f);
}

Status Engine::take_requests() {
  // Rank 0 without news and without work sends no header (its peers sleep until one comes).
  if (opt_.ranks && (rank() != 0 || !unsent_.empty() || !cancels_.empty() || !sched_->idle()))
    return sync_ranks(false);
  for (const auto& [id, why] : cancels_) sched_->cancel(id, why);
  cancels_.clear();
  return Status();
}

int64_t Engine::build_rows(const std::vector<PlannedRows>& plan) {
  reqs_.clear();
  int64_t T = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    reqs_.push_back(StepRequest{p.seq, p.p0, p.n, p.prompt_len, p.tokens, p.owner, p.split, p.cp_slots});
    row_begin_[i] = T;
    T += p.n;
  }
  return T;
}

// The main forward over the plan (logits of the sampler's head rows, the proposer's taps). On
// one rank a failed step is retried request by request, so that a request failing inside the
// engine fails alone and the others go on (cache writes are position-addressed: the retry
// writes the same values).
Status Engine::run_forward(const std::vector<PlannedRows>& plan) {
  auto injected = [&](std::span<const StepRequest> q, size_t first) -> Status {
    if (opt_.inject_failure)
      for (size_t i = 0; i < q.size(); ++i) DSV4_RETURN_IF_ERROR(opt_.inject_failure(plan[first + i].id));
    return Status();
  };
  const Proposer::Taps taps = proposer_ ? proposer_->taps() : Proposer::Taps{};
  sampler_->plan_head_rows(plan, row_begin_.data(), *sched_);
  Status st = injected(reqs_, 0);
  if (st.ok()) st = runner_->forward(reqs_, sampler_->logits(), taps.xfinal, {}, sampler_->head_rows(), taps.features);
  if (st.ok() || opt_.ranks) return st;
  if (reqs_.size() == 1) {  // nothing to retry: the one request fails alone
    sched_->fail(0, st.message());
    return Status();
  }
  const int64_t ND = runner_->stream_width();
  for (size_t i = 0; i < reqs_.size(); ++i) {
    std::span<const StepRequest> one(&reqs_[i], 1);
    Status si = injected(one, i);
    const HeadRows head = sampler_->head_rows_of(i, row_begin_[i]);
    if (si.ok())
      si = runner_->forward(one, sampler_->logits_of(i), taps.xfinal ? taps.xfinal + row_begin_[i] * ND : nullptr, {},
                            head, taps.features ? taps.features + row_begin_[i] * taps.features_width : nullptr);
    if (!si.ok()) sched_->fail(i, si.message());
  }
  return Status();
}

// Sampling (by the rank holding each request's last row), verification, the samplers' tokens and
// logprobs to every rank, then the scheduler's commit.
Status Engine::sample_and_update(const std::vector<PlannedRows>& plan) {
  bool any_prompt_lp = sampler_->sample(plan, row_begin_.data(), *sched_, proposer_.get());
  const int32_t S = sampler_->entries_per_request();
  DSV4_RETURN_IF_ERROR(wire_->exchange(plan, RankWire::Source::kSampler, sampler_->tokens(), S));
  if (opt_.ranks) {
    DSV4_RETURN_IF_ERROR(wire_->exchange_logprobs(plan, S, sampler_->logprobs(), sampler_->prompt_logprobs()));
    for (const PlannedRows& p : plan) any_prompt_lp |= p.prompt_logprobs;
  }
  sched_->update(sampler_->tokens(), sampler_->logprobs(), any_prompt_lp ? sampler_->prompt_logprobs() : nullptr);
  return Status();
}

void Engine::report_counters(StepReport& rep) const {
  const Scheduler::Counters& c = sched_->counters();
  rep.committed = static_cast<int32_t>(c.committed);
  rep.drafts = static_cast<int32_t>(c.drafts);
  rep.accepted = static_cast<int32_t>(c.accepted);
  rep.rounds = static_cast<int32_t>(c.rounds);
  for (int k = 0; k < StepReport::kMaxAcceptedAt; ++k) rep.accepted_at[k] = static_cast<int32_t>(c.accepted_at[k]);
}

// Prompt blocks completed this step join the prefix cache.
void Engine::register_prefixes(const std::vector<PlannedRows>& plan) {
  for (size_t i = 0; i < plan.size(); ++i)
    if (sched_->live(i)) runner_->register_prefix(plan[i].seq, sched_->tokens(i).prompt().data(), plan[i].prompt_len, opt_.mtp);
}

// With ranks, a failed step fails the job: the other ranks hear of it and leave their step.
// (Once the job failed, run_step fails at once with the failure: Communicator::job_status.)
Result<StepReport> Engine::step() {
  Result<StepReport> rep = run_step();
  if (!rep.ok() && opt_.ranks) opt_.ranks->world->report_failure(rep.status().message());
  return rep;
}

Result<StepReport> Engine::run_step() {
  const auto t0 = std::chrono::steady_clock::now();
  StepReport rep;
  if (stopped_) return Status::error("the engine was stopped");
  if (opt_.ranks) DSV4_RETURN_IF_ERROR(opt_.ranks->world->job_status());
  collect_cancels();
  DSV4_RETURN_IF_ERROR(take_requests());
  if (stopped_) return rep;
  const std::vector<PlannedRows>& plan = sched_->plan();  // schedule
  rep.prefix_hit_tokens = sched_->counters().prefix_hit_tokens;
  rep.preempted = static_cast<int32_t>(sched_->counters().preempted);
  rep.forked = static_cast<int32_t>(sched_->counters().forked);
  rep.batch = static_cast<int32_t>(plan.size());
  rep.rows = static_cast<int32_t>(build_rows(plan));
  if (!plan.empty()) {
    if (rows_steps_++ == opt_.fail_step)
      return Status::errorf("test failure injected at step {} on rank {}", opt_.fail_step, rank());
    DSV4_RETURN_IF_ERROR(run_forward(plan));  // execute
    DSV4_RETURN_IF_ERROR(sample_and_update(plan));  // update
    report_counters(rep);
    if (proposer_) {  // the drafts of the next step
      DSV4_RETURN_IF_ERROR(proposer_->commit(plan, row_begin_.data()));
      DSV4_RETURN_IF_ERROR(proposer_->propose(plan));
    }
    register_prefixes(plan);
  }
  for (const RequestUpdate& u : sched_->updates())
    if (u.finished) deadlines_.erase(u.id);
  if (opt_.min_step_seconds > 0 && rep.rows > 0)
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(opt_.min_step_seconds));
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace dsv4
