#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <thread>

#include "base/check.h"
#include "base/cpu.h"
#include "base/math.h"

namespace dsv4 {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

// One TokenLogprob on the wire (several ranks): token -1 marks an empty record.
struct Engine::LogprobRecord {
  int32_t token = -1;
  float logprob = 0;
  int32_t n_top = 0;
  int32_t top_id[kMaxTopLogprobs] = {};
  float top_lp[kMaxTopLogprobs] = {};
};

// The runner's compressed-cache blocks as the scheduler's pages.
class Engine::RunnerPages final : public PageBudget {
 public:
  RunnerPages(ModelRunner& r, bool mtp) : r_(r), mtp_(mtp) {}
  int64_t pages_short(int32_t seq, int64_t end) const override { return r_.blocks_short(seq, end); }
  int64_t free_pages() const override { return r_.free_blocks(); }
  int64_t total_pages() const override { return r_.total_blocks(); }
  Result<int64_t> start(int32_t seq, const std::vector<int32_t>& tokens, int64_t prompt_len,
                        bool allow_prefix) override {
    if (!allow_prefix) {
      DSV4_RETURN_IF_ERROR(r_.start_sequence(seq));
      return int64_t{0};
    }
    return r_.start_sequence_cached(seq, tokens.data(), prompt_len, mtp_);
  }
  Status reserve(int32_t seq, int64_t end) override { return r_.reserve_blocks(seq, end); }
  void register_prefix(int32_t seq, const std::vector<int32_t>& tokens, int64_t prompt_len) override {
    r_.register_prefix(seq, tokens.data(), prompt_len, mtp_);
  }
  void end(int32_t seq) override { r_.end_sequence(seq); }

 private:
  ModelRunner& r_;
  bool mtp_;
};

Engine::Engine(const ModelConfig& cfg, const Limits& limits, const EngineOptions& opt,
               std::unique_ptr<ModelRunner> runner)
    : cfg_(cfg), limits_(limits), opt_(opt), runner_(std::move(runner)) {
  const int64_t T = limits.max_rows, V = cfg.vocab_size, ND = cfg.hc_mult * cfg.hidden_size;
  const size_t S = static_cast<size_t>(S_ = limits.max_decode_rows), B = static_cast<size_t>(limits.max_batch);
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
  reqs_.reserve(limits.max_batch);
  mtp_reqs_.reserve(limits.max_batch);
  row_begin_.resize(limits.max_batch);
  mtp_begin_.resize(limits.max_batch);
  mtp_tokens_.resize(T);
  logits_.resize(static_cast<size_t>(T * V));
  if (opt.mtp) {  // MTP drafts only
    mtp_logits_.resize(static_cast<size_t>(T * V));
    xfinal_.resize(static_cast<size_t>(T * ND));
    mtp_x_.resize(static_cast<size_t>(T * ND));
  }
  const int threads = runner_->pool().size();
  sample_scratch_.resize(static_cast<size_t>(kernels::sample_scratch_bytes(V, threads) / 8 + 1));
  head_rows_.resize(T);
  head_at_.resize(T);
  one_rows_.resize(T);
  head_begin_.resize(limits.max_batch);
  head_count_.resize(limits.max_batch);
  mtp_head_rows_.resize(limits.max_batch);
  if (opt.dspark_gamma > 0) {  // DSpark: every row's features, the drafter's rounds and logits
    ds_features_.resize(static_cast<size_t>(T * static_cast<int64_t>(cfg.dspark->target_layer_ids.size()) *
                                            cfg.hidden_size));
    ds_commits_.reserve(B);
    ds_rounds_.reserve(B);
    ds_round_of_.resize(B);
    ds_lambda_.resize(static_cast<size_t>(T * V));
    ds_drafts_.resize(static_cast<size_t>(T));
    if (opt.dspark_rejection) {
      ds_kept_.resize(static_cast<size_t>(limits.max_seqs * static_cast<int64_t>(opt.dspark_gamma) * V));
      rejection_tasks_.resize(B);
      rejection_scratch_.resize(
          static_cast<size_t>(kernels::rejection_scratch_bytes(V) / 8 + 1) * runner_->pool().size());
    }
  }
  sample_logits_.resize(S * B);
  sample_rows_.resize(sample_logits_.size());
  sample_tokens_.resize(sample_logits_.size());
  sample_out_.resize(sample_logits_.size());
  logprob_tasks_.resize(S * B + static_cast<size_t>(T));
  draft_tok_.resize(S * B);
  logprobs_.resize(S * B);
  for (TokenLogprob& lp : logprobs_) lp.top.reserve(kMaxTopLogprobs);  // the step allocates nothing
  prompt_logprobs_.resize(limits.max_batch);
  sampled_.resize(S * B);
  values_.resize(S * B);
  gathered_.resize(S * B);
  gather_rows_.resize(opt.ranks ? opt.ranks->topo.world : 1);
  if (opt.ranks) {
    lp_send_.resize(S * B + static_cast<size_t>(T));
    lp_recv_.resize(lp_send_.size());
  }
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

Status Engine::validate(const GenerationRequest& req) const {
  if (req.prompt.empty()) return Status::error("request: prompt is empty (need at least one token id)");
  for (size_t i = 0; i < req.prompt.size(); ++i)
    if (req.prompt[i] < 0 || req.prompt[i] >= cfg_.vocab_size)
      return Status::errorf("request: prompt token {} at index {} outside the vocabulary [0, {})", req.prompt[i], i,
                            cfg_.vocab_size);
  Status st = kernels::validate_sampling_params(req.sampling);
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
  for (size_t i = 0; i < req.stop_ids.size(); ++i)
    if (req.stop_ids[i] < 0 || req.stop_ids[i] >= cfg_.vocab_size)
      return Status::errorf("request: stop id {} at index {} outside the vocabulary [0, {})", req.stop_ids[i], i,
                            cfg_.vocab_size);
  if (!req.stop_strings.empty() && !opt_.tokenizer)
    return Status::error("request: stop strings need the model's tokenizer (tokenizer.json), which is not loaded");
  if (req.logprobs < -1 || req.logprobs > kMaxTopLogprobs)
    return Status::errorf("request: top logprobs = {} outside [0, {}]", req.logprobs, kMaxTopLogprobs);
  if (req.timeout_seconds < 0 || !std::isfinite(req.timeout_seconds))
    return Status::errorf("request: timeout = {} s must be finite and not negative", req.timeout_seconds);
  return Status();
}

Result<int64_t> Engine::add_request(GenerationRequest req) {
  if (rank() != 0) return Status::errorf("requests enter on rank 0 (this is rank {})", rank());
  if (stopped_) return Status::error("the engine was stopped");
  DSV4_RETURN_IF_ERROR(validate(req));
  const int64_t id = next_id_++;
  if (req.timeout_seconds > 0) deadlines_[id] = now_seconds() + req.timeout_seconds;
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

namespace {

template <class T>
void put(std::vector<uint8_t>& b, const T& v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}
template <class T>
T take(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

}  // namespace

// Wire form: stop u8, request count u32, cancel count u32; per request: prompt length u32,
// the ids, temperature, top_p, seed, max_tokens, stop_at_eos, stop id count u32 and the ids,
// logprobs i32, prompt_logprobs u8;
// per cancel: id i64, reason u8. Rank 0 broadcasts the size, then the bytes. Requests take
// the next ids in order on every rank.
Status Engine::sync_requests(bool stop) {
  Communicator& world = *opt_.ranks->world;
  sync_buf_.clear();
  if (rank() == 0) {
    put<uint8_t>(sync_buf_, stop ? 1 : 0);
    put<uint32_t>(sync_buf_, static_cast<uint32_t>(unsent_.size()));
    put<uint32_t>(sync_buf_, static_cast<uint32_t>(cancels_.size()));
    for (const GenerationRequest& g : unsent_) {
      put<uint32_t>(sync_buf_, static_cast<uint32_t>(g.prompt.size()));
      for (int32_t t : g.prompt) put(sync_buf_, t);
      put(sync_buf_, g.sampling.temperature);
      put(sync_buf_, g.sampling.top_p);
      put(sync_buf_, g.sampling.seed);
      put(sync_buf_, g.max_tokens);
      put<uint8_t>(sync_buf_, g.stop_at_eos ? 1 : 0);
      put<uint32_t>(sync_buf_, static_cast<uint32_t>(g.stop_ids.size()));
      for (int32_t t : g.stop_ids) put(sync_buf_, t);
      put<int32_t>(sync_buf_, g.logprobs);
      put<uint8_t>(sync_buf_, g.prompt_logprobs ? 1 : 0);
    }
    for (const auto& [id, why] : cancels_) {
      put<int64_t>(sync_buf_, id);
      put<uint8_t>(sync_buf_, static_cast<uint8_t>(why));
    }
  }
  int64_t n = static_cast<int64_t>(sync_buf_.size());
  DSV4_RETURN_IF_ERROR(world.broadcast(&n, sizeof(n), 0));
  sync_buf_.resize(static_cast<size_t>(n));
  DSV4_RETURN_IF_ERROR(world.broadcast(sync_buf_.data(), n, 0));
  const uint8_t* p = sync_buf_.data();
  stopped_ = take<uint8_t>(p) != 0;
  const uint32_t count = take<uint32_t>(p), n_cancel = take<uint32_t>(p);
  if (rank() == 0) {
    const int64_t first = next_id_ - static_cast<int64_t>(unsent_.size());
    for (size_t i = 0; i < unsent_.size(); ++i) sched_->add(first + static_cast<int64_t>(i), std::move(unsent_[i]));
    unsent_.clear();
    for (const auto& [id, why] : cancels_) sched_->cancel(id, why);
    cancels_.clear();
    return Status();
  }
  for (uint32_t i = 0; i < count; ++i) {
    GenerationRequest g;
    g.prompt.resize(take<uint32_t>(p));
    for (int32_t& t : g.prompt) t = take<int32_t>(p);
    g.sampling.temperature = take<float>(p);
    g.sampling.top_p = take<float>(p);
    g.sampling.seed = take<uint64_t>(p);
    g.max_tokens = take<int32_t>(p);
    g.stop_at_eos = take<uint8_t>(p) != 0;
    g.stop_ids.resize(take<uint32_t>(p));
    for (int32_t& t : g.stop_ids) t = take<int32_t>(p);
    g.logprobs = take<int32_t>(p);
    g.prompt_logprobs = take<uint8_t>(p) != 0;
    sched_->add(next_id_++, std::move(g));
  }
  for (uint32_t i = 0; i < n_cancel; ++i) {
    const int64_t id = take<int64_t>(p);
    sched_->cancel(id, static_cast<FinishReason>(take<uint8_t>(p)));
  }
  return Status();
}

Status Engine::stop() {
  if (!opt_.ranks) {
    stopped_ = true;
    return Status();
  }
  if (rank() != 0) return Status::error("only rank 0 stops the engine");
  if (stopped_) return Status();
  return sync_requests(true);
}

// values [planned, per_request]: the entries of the requests this rank owns are set; after
// the call every entry is (each owner's values, all-gathered over the job).
Status Engine::exchange(int32_t* values, int per_request, bool by_owner) {
  if (!opt_.ranks) return Status();
  const int world = opt_.ranks->topo.world, me = rank();
  auto source = [&](size_t i) { return by_owner ? (*plan_)[i].owner : (*plan_)[i].sampler; };
  std::fill(gather_rows_.begin(), gather_rows_.end(), 0);
  int64_t mine = 0;
  for (size_t i = 0; i < plan_->size(); ++i) {
    const int from = source(i);
    ++gather_rows_[from];
    if (from == me)
      for (int j = 0; j < per_request; ++j) sampled_[mine * per_request + j] = values[i * per_request + j];
    mine += from == me;
  }
  DSV4_RETURN_IF_ERROR(opt_.ranks->world->all_gather_rows(sampled_.data(), gather_rows_,
                                                         per_request * sizeof(int32_t), gathered_.data()));
  std::vector<int64_t>& cursor = gather_rows_;  // reused: each owner's next record
  int64_t off = 0;
  for (int q = 0; q < world; ++q) {
    const int64_t n = cursor[q];
    cursor[q] = off;
    off += n;
  }
  for (size_t i = 0; i < plan_->size(); ++i) {
    const int64_t at = cursor[source(i)]++;
    for (int j = 0; j < per_request; ++j) values[i * per_request + j] = gathered_[at * per_request + j];
  }
  return Status();
}

void Engine::add_sample(const float* row, const kernels::SamplingParams& sp, int64_t position, int slot,
                        int32_t* out) {
  sample_logits_[n_sample_] = row;
  sample_rows_[n_sample_] = kernels::SampleRow{sp, position, slot};
  sample_out_[n_sample_++] = out;
}

void Engine::run_sample_tasks() {
  const int64_t n = n_sample_, V = cfg_.vocab_size, bytes = static_cast<int64_t>(sample_scratch_.size() * 8);
  auto part = [&](int tid, int nt) {
    kernels::sample(sample_logits_.data(), n, V, sample_rows_.data(), sample_tokens_.data(), sample_scratch_.data(),
                    bytes, tid, nt);
  };
  if (n == 1) part(0, 1);  // one row: no other thread has work, so no run (and no barrier)
  else if (n > 1) runner_->pool().run(part);
  for (int64_t i = 0; i < n; ++i) *sample_out_[i] = sample_tokens_[i];
  n_sample_ = 0;
}

bool Engine::rejects(const PlannedRows& p) const {
  return opt_.dspark_rejection && p.n_drafts > 0 && p.request->sampling.temperature > 0.0f;
}

// Rounds verified by rejection (dspark.md §4.3), one round per task, over the pool: the
// committed tokens d_1 … d_{n_acc}, b into the request's values_ entries.
void Engine::run_rejection_tasks(int64_t n) {
  const int64_t V = cfg_.vocab_size, bytes = kernels::rejection_scratch_bytes(V);
  const int64_t words = bytes / 8 + 1;
  auto part = [&](int tid, int nt) {
    const Range r = split_range(n, tid, nt);
    for (int64_t t = r.begin; t < r.end; ++t) {
      RejectionTask& task = rejection_tasks_[t];
      kernels::rejection_verify(task.round, V, values_.data() + S_ * task.plan_index,
                                rejection_scratch_.data() + tid * words, bytes);
    }
  };
  if (n == 1) part(0, 1);
  else if (n > 1) runner_->pool().run(part);
}

void Engine::add_logprobs(const float* row, int32_t token, int32_t top, TokenLogprob* out) {
  logprob_tasks_[n_logprob_++] = LogprobTask{row, token, top, out};
}

void Engine::run_logprob_tasks() {
  const int64_t n = n_logprob_;
  auto part = [&](int tid, int nt) {
    const Range r = split_range(n, tid, nt);
    for (int64_t i = r.begin; i < r.end; ++i) {
      const LogprobTask& k = logprob_tasks_[i];
      logprobs_of(k.row, k.token, k.top, *k.out);
    }
  };
  if (n == 1) part(0, 1);
  else if (n > 1) runner_->pool().run(part);
  n_logprob_ = 0;
}

// The rows whose logits this rank reads: of each live request it samples, the rows scored for
// prompt logprobs and the sampled rows (the last real row, and the draft row).
void Engine::plan_head_rows(const std::vector<PlannedRows>& plan) {
  const int me = rank();
  n_head_ = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    head_begin_[i] = n_head_;
    for (int32_t j = 0; j < p.n; ++j) head_at_[row_begin_[i] + j] = -1;
    if (p.sampler == me && sched_->live(i)) {
      const int32_t real = p.n - p.n_drafts;
      for (int32_t j = 0; j < p.n; ++j) {
        const bool prompt_lp = p.request->prompt_logprobs && p.p0 + j + 1 < p.prompt_len;
        const bool sampled = p.samples && j >= real - 1;
        if (!prompt_lp && !sampled) continue;
        head_at_[row_begin_[i] + j] = static_cast<int32_t>(n_head_);
        head_rows_[n_head_++] = static_cast<int32_t>(row_begin_[i] + j);
      }
    }
    head_count_[i] = n_head_ - head_begin_[i];
  }
}

// log-softmax of the raw row: the token's value and the `top` most likely ids (ties: lower id).
void Engine::logprobs_of(const float* row, int32_t token, int32_t top, TokenLogprob& out) const {
  const int64_t V = cfg_.vocab_size;
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

// Several ranks: each sampler's logprobs of its requests (2 records for the sampled tokens
// when asked, then one per row for prompt logprobs) to every rank, in plan order per sampler.
Status Engine::exchange_logprobs(const std::vector<PlannedRows>& plan) {
  const int32_t S = S_;
  auto records = [S](const PlannedRows& p) -> int64_t {
    return (p.request->logprobs >= 0 ? S : 0) + (p.request->prompt_logprobs ? p.n : 0);
  };
  int64_t total = 0;
  for (const PlannedRows& p : plan) total += records(p);
  if (total == 0) return Status();
  auto pack = [](const TokenLogprob& lp, LogprobRecord& r) {
    r = LogprobRecord{};
    r.token = lp.token;
    r.logprob = lp.logprob;
    r.n_top = static_cast<int32_t>(lp.top.size());
    for (int32_t k = 0; k < r.n_top; ++k) {
      r.top_id[k] = lp.top[k].first;
      r.top_lp[k] = lp.top[k].second;
    }
  };
  auto unpack = [](const LogprobRecord& r, TokenLogprob& lp) {
    lp.token = r.token;
    lp.logprob = r.logprob;
    lp.top.resize(static_cast<size_t>(r.n_top));
    for (int32_t k = 0; k < r.n_top; ++k) lp.top[k] = {r.top_id[k], r.top_lp[k]};
  };
  const int me = rank();
  std::fill(gather_rows_.begin(), gather_rows_.end(), 0);
  int64_t mine = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    gather_rows_[p.sampler] += records(p);
    if (p.sampler != me) continue;
    if (p.request->logprobs >= 0)
      for (int j = 0; j < S; ++j) pack(logprobs_[S * i + j], lp_send_[mine++]);
    if (p.request->prompt_logprobs)
      for (int32_t j = 0; j < p.n; ++j) {
        if (j < static_cast<int32_t>(prompt_logprobs_[i].size())) pack(prompt_logprobs_[i][j], lp_send_[mine]);
        else lp_send_[mine] = LogprobRecord{};
        ++mine;
      }
  }
  DSV4_RETURN_IF_ERROR(opt_.ranks->world->all_gather_rows(lp_send_.data(), gather_rows_, sizeof(LogprobRecord),
                                                         lp_recv_.data()));
  std::vector<int64_t>& cursor = gather_rows_;  // each sampler's next record
  int64_t off = 0;
  for (int64_t& c : cursor) {
    const int64_t n = c;
    c = off;
    off += n;
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    int64_t& at = cursor[p.sampler];
    if (p.request->logprobs >= 0)
      for (int j = 0; j < S; ++j) unpack(lp_recv_[at++], logprobs_[S * i + j]);
    if (p.request->prompt_logprobs) {
      prompt_logprobs_[i].clear();
      for (int32_t j = 0; j < p.n; ++j, ++at)
        if (lp_recv_[at].token >= 0) {
          prompt_logprobs_[i].emplace_back();
          unpack(lp_recv_[at], prompt_logprobs_[i].back());
        }
    }
  }
  return Status();
}

// The main forward over the plan. On one rank a failed step is retried request by request,
// so that a request failing inside the engine fails alone and the others go on (cache
// writes are position-addressed: the retry writes the same values).
Status Engine::run_forward(const std::vector<PlannedRows>& plan) {
  auto injected = [&](std::span<const StepRequest> q, size_t first) -> Status {
    if (opt_.inject_failure)
      for (size_t i = 0; i < q.size(); ++i) DSV4_RETURN_IF_ERROR(opt_.inject_failure(plan[first + i].id));
    return Status();
  };
  bf16* xf = opt_.mtp ? xfinal_.data() : nullptr;
  bf16* feat = opt_.dspark_gamma > 0 ? ds_features_.data() : nullptr;
  const int64_t F = opt_.dspark_gamma > 0 ? static_cast<int64_t>(cfg_.dspark->target_layer_ids.size()) * cfg_.hidden_size : 0;
  plan_head_rows(plan);
  Status st = injected(reqs_, 0);
  if (st.ok()) st = runner_->forward(reqs_, logits_.data(), xf, {}, HeadRows{head_rows_.data(), n_head_}, feat);
  if (st.ok() || opt_.ranks) return st;
  if (reqs_.size() == 1) {  // nothing to retry: the one request fails alone
    sched_->fail(0, st.message());
    return Status();
  }
  const int64_t V = cfg_.vocab_size, ND = runner_->stream_width();
  for (size_t i = 0; i < reqs_.size(); ++i) {
    std::span<const StepRequest> one(&reqs_[i], 1);
    Status si = injected(one, i);
    for (int64_t k = 0; k < head_count_[i]; ++k)
      one_rows_[k] = head_rows_[head_begin_[i] + k] - static_cast<int32_t>(row_begin_[i]);
    if (si.ok())
      si = runner_->forward(one, logits_.data() + head_begin_[i] * V, xf ? xf + row_begin_[i] * ND : nullptr, {},
                            HeadRows{one_rows_.data(), head_count_[i]}, feat ? feat + row_begin_[i] * F : nullptr);
    if (!si.ok()) sched_->fail(i, si.message());
  }
  return Status();
}

// DSpark (dspark.md §4.2, §4.4): every position committed this step (prompt rows, and the
// verified rows 0..n_acc of a round) goes to the drafter's rings; each request whose next
// anchor token is known then gets a round: anchor a = committed length − 1, x0 = the token at
// a + 1, γ drafts (fewer near max_context), verified by the next step. With ranks each
// request's owner commits and drafts (the stages join the seams on every rank); the drafts
// then go to every rank's scheduler.
Status Engine::run_dspark(const std::vector<PlannedRows>& plan) {
  const int64_t F = static_cast<int64_t>(cfg_.dspark->target_layer_ids.size()) * cfg_.hidden_size;
  const int32_t G = opt_.dspark_gamma;
  ds_commits_.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    if (!sched_->live(i)) continue;
    const int64_t old = sched_->cached_before(i), n = sched_->cached(i) - old;
    if (n > 0)
      ds_commits_.push_back(
          {plan[i].seq, old, static_cast<int32_t>(n), ds_features_.data() + row_begin_[i] * F, plan[i].owner});
  }
  DSV4_RETURN_IF_ERROR(runner_->dspark_commit(ds_commits_));
  ds_rounds_.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    const int64_t len = sched_->live(i) ? static_cast<int64_t>(sched_->tokens(i).size()) : 0;
    if (!sched_->live(i) || sched_->cached(i) != len - 1) continue;
    // After a prefix hit the rings hold positions from the slot's start only (dspark.md §4.9).
    const int64_t anchor = len - 2, context_start = runner_->dspark_context_start(plan[i].seq);
    if (context_start > 0 && anchor - cfg_.sliding_window + 1 < context_start) continue;
    ds_round_of_[ds_rounds_.size()] = static_cast<int32_t>(i);
    ModelRunner::DsparkRound round{plan[i].seq, anchor, sched_->tokens(i)[len - 1], plan[i].owner};
    if (opt_.dspark_rejection) round.sample = plan[i].request->sampling;  // drafts drawn at T > 0
    ds_rounds_.push_back(round);
  }
  if (ds_rounds_.empty()) return Status();  // the same on every rank (replicated schedulers)
  // Rounds in groups that fit max_rows (γ block rows each); each round's drafts to values_
  // [planned, G] on its owner.
  int32_t* drafts = values_.data();
  std::fill_n(drafts, plan.size() * G, -1);
  const int64_t per_call = std::max<int64_t>(1, limits_.max_rows / G);
  for (size_t r0 = 0; r0 < ds_rounds_.size(); r0 += per_call) {
    const size_t n = std::min<size_t>(per_call, ds_rounds_.size() - r0);
    DSV4_RETURN_IF_ERROR(runner_->dspark_propose(std::span<const ModelRunner::DsparkRound>(ds_rounds_.data() + r0, n),
                                                 G, ds_lambda_.data(), ds_drafts_.data()));
    for (size_t r = 0; r < n; ++r) {
      const ModelRunner::DsparkRound& q = ds_rounds_[r0 + r];
      if (q.owner != rank()) continue;
      std::copy_n(ds_drafts_.data() + r * G, G, drafts + ds_round_of_[r0 + r] * G);
      if (q.sample.temperature > 0.0f)  // λ_0 .. λ_{γ−1} until the verify step (mode rejection)
        std::copy_n(ds_lambda_.data() + r * G * cfg_.vocab_size, G * cfg_.vocab_size,
                    ds_kept_.data() + static_cast<int64_t>(q.seq) * G * cfg_.vocab_size);
    }
  }
  DSV4_RETURN_IF_ERROR(exchange(drafts, G, true));
  for (size_t r = 0; r < ds_rounds_.size(); ++r) {
    const size_t i = static_cast<size_t>(ds_round_of_[r]);
    const int64_t len = static_cast<int64_t>(sched_->tokens(i).size());
    int32_t* d = drafts + i * G;
    // Verify rows len-1 .. len-1+ℓ must stay inside max_context.
    const int32_t ell = static_cast<int32_t>(std::clamp<int64_t>(limits_.max_context - len, 0, G));
    if (opt_.force_draft)
      for (int32_t k = 0; k < ell; ++k)
        if (const int32_t f = opt_.force_draft(plan[i].id, len + k); f >= 0) d[k] = f;
    sched_->set_drafts(i, d, ell);
  }
  return Status();
}

Result<StepReport> Engine::step() {
  const auto t0 = std::chrono::steady_clock::now();
  StepReport rep;
  last_error_uniform_ = false;
  if (stopped_) return Status::error("the engine was stopped");
  if (rank() == 0 && !deadlines_.empty()) {  // timeouts end at this step
    const double now = now_seconds();
    for (auto it = deadlines_.begin(); it != deadlines_.end();)
      if (it->second <= now) {
        cancels_.push_back({it->first, FinishReason::kTimeout});
        it = deadlines_.erase(it);
      } else {
        ++it;
      }
  }
  for (const auto& f : sched_->take_local_finishes()) cancels_.push_back(f);  // stop strings
  if (opt_.ranks) {
    DSV4_RETURN_IF_ERROR(sync_requests(false));
    if (stopped_) return rep;
  } else {
    for (const auto& [id, why] : cancels_) sched_->cancel(id, why);
    cancels_.clear();
  }
  const std::vector<PlannedRows>& plan = sched_->plan();
  plan_ = &plan;
  rep.prefix_hit_tokens = sched_->counters().prefix_hit_tokens;
  rep.preempted = static_cast<int32_t>(sched_->counters().preempted);
  reqs_.clear();
  int64_t T = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    reqs_.push_back(StepRequest{p.seq, p.p0, p.n, p.prompt_len, p.tokens, p.owner, p.split});
    row_begin_[i] = T;
    T += p.n;
  }
  rep.batch = static_cast<int32_t>(plan.size());
  rep.rows = static_cast<int32_t>(T);
  if (!plan.empty()) {
    DSV4_RETURN_IF_ERROR(run_forward(plan));

    // Sampling (by the rank holding each request's last row), then verification and commit.
    const int64_t V = cfg_.vocab_size;
    const int me = rank();
    const int32_t S = S_;
    int32_t* tok = values_.data();  // [planned, S]: tokens sampled, −1 none
    bool any_prompt_lp = false;
    int64_t n_rejection = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      const PlannedRows& p = plan[i];
      const GenerationRequest& g = *p.request;
      int32_t* t2 = tok + S * i;
      std::fill_n(t2, S, -1);
      std::fill_n(draft_tok_.data() + S * i, S, -1);
      prompt_logprobs_[i].clear();
      if (p.sampler != me || !sched_->live(i)) continue;
      auto row = [&](int64_t j) { return logits_.data() + head_at_[row_begin_[i] + j] * V; };
      if (g.prompt_logprobs) {  // row j predicts the prompt token at p0 + j + 1
        any_prompt_lp = true;
        const int64_t n_lp = std::max<int64_t>(0, std::min<int64_t>(p.n, p.prompt_len - p.p0 - 1));
        prompt_logprobs_[i].resize(static_cast<size_t>(n_lp));
        for (int64_t j = 0; j < n_lp; ++j)
          add_logprobs(row(j), g.prompt[p.p0 + j + 1], std::max(g.logprobs, 0), &prompt_logprobs_[i][j]);
      }
      if (!p.samples) continue;
      const int32_t real = p.n - p.n_drafts;
      const int64_t q = p.p0 + real;  // the position the last real row predicts
      if (rejects(p)) {  // dspark.md §4.3 mode rejection: the whole round in one task
        RejectionTask& task = rejection_tasks_[n_rejection++];
        task.plan_index = i;
        for (int32_t k = 0; k <= p.n_drafts; ++k) task.target[k] = row(real - 1 + k);
        const float* kept = ds_kept_.data() + static_cast<int64_t>(p.seq) * opt_.dspark_gamma * V;
        for (int32_t k = 0; k < p.n_drafts; ++k) task.draft[k] = kept + k * V;
        task.round = kernels::RejectionRound{task.target, task.draft, p.tokens + 1, p.n_drafts, g.sampling, q};
        continue;
      }
      add_sample(row(real - 1), g.sampling, q, 0, &t2[0]);
      for (int32_t k = 1; k <= p.n_drafts; ++k)  // kept if drafts 1..k are accepted
        add_sample(row(real - 1 + k), g.sampling, q + k, 0, &draft_tok_[S * i + k]);
    }
    run_sample_tasks();
    run_rejection_tasks(n_rejection);
    for (size_t i = 0; i < plan.size(); ++i) {
      const PlannedRows& p = plan[i];
      int32_t* t2 = tok + S * i;
      if (t2[0] < 0) continue;
      const int32_t real = p.n - p.n_drafts;
      auto row = [&](int64_t j) { return logits_.data() + head_at_[row_begin_[i] + j] * V; };
      // Exact match (runtime.md §3.2): draft k is accepted when it equals the target's token at
      // its position and every earlier draft was accepted. (Rejection rounds are decided.)
      if (!rejects(p))
        for (int32_t k = 1; k <= p.n_drafts && p.tokens[k] == t2[k - 1]; ++k) t2[k] = draft_tok_[S * i + k];
      const int32_t top = p.request->logprobs;
      if (top < 0) continue;
      for (int32_t k = 0; k < S && t2[k] >= 0; ++k) add_logprobs(row(real - 1 + k), t2[k], top, &logprobs_[S * i + k]);
    }
    run_logprob_tasks();
    DSV4_RETURN_IF_ERROR(exchange(tok, S));
    if (opt_.ranks) {
      DSV4_RETURN_IF_ERROR(exchange_logprobs(plan));
      for (const PlannedRows& p : plan) any_prompt_lp |= p.request->prompt_logprobs;
    }
    sched_->update(tok, logprobs_.data(), any_prompt_lp ? prompt_logprobs_.data() : nullptr);
    const Scheduler::Counters& c = sched_->counters();
    rep.committed = static_cast<int32_t>(c.committed);
    rep.drafts = static_cast<int32_t>(c.drafts);
    rep.accepted = static_cast<int32_t>(c.accepted);
    rep.rounds = static_cast<int32_t>(c.rounds);
    for (int k = 0; k < StepReport::kMaxAcceptedAt; ++k) rep.accepted_at[k] = static_cast<int32_t>(c.accepted_at[k]);

    // MTP rows: the positions committed to the caches this step whose next token is known.
    if (opt_.mtp) {
      const int64_t ND = runner_->stream_width();
      mtp_reqs_.clear();
      int64_t mtp_T = 0;
      for (size_t i = 0; i < plan.size(); ++i) {
        if (!sched_->live(i)) continue;
        const PlannedRows& p = plan[i];
        const std::vector<int32_t>& toks = sched_->tokens(i);
        const int64_t old = sched_->cached_before(i), n = sched_->cached(i) - old;
        for (int64_t j = 0; j < n; ++j) mtp_tokens_[mtp_T + j] = toks[old + j + 1];
        // Rows this rank did not compute hold stale values the MTP layer never reads.
        std::memcpy(mtp_x_.data() + mtp_T * ND, xfinal_.data() + row_begin_[i] * ND, sizeof(bf16) * n * ND);
        mtp_reqs_.push_back(StepRequest{p.seq, old, static_cast<int32_t>(n), p.prompt_len,
                                        mtp_tokens_.data() + mtp_T, p.owner, p.split});
        mtp_begin_[i] = mtp_T;
        mtp_T += n;
      }
      if (!mtp_reqs_.empty()) {
        // The last MTP row (position len - 2) of each request that gets a draft predicts position len.
        int64_t n_mtp_head = 0;
        for (size_t i = 0; i < plan.size(); ++i) {
          const int64_t len = static_cast<int64_t>(sched_->tokens(i).size());
          if (!sched_->live(i) || sched_->cached(i) != len - 1 || plan[i].sampler != me) continue;
          mtp_head_rows_[n_mtp_head++] =
              static_cast<int32_t>(mtp_begin_[i] + (sched_->cached(i) - sched_->cached_before(i)) - 1);
        }
        DSV4_RETURN_IF_ERROR(runner_->forward_mtp(mtp_reqs_, mtp_x_.data(), mtp_logits_.data(), {},
                                                  HeadRows{mtp_head_rows_.data(), n_mtp_head}));
        int32_t* draft = values_.data();  // [planned]
        int64_t k = 0;
        for (size_t i = 0; i < plan.size(); ++i) {
          draft[i] = -1;
          const int64_t len = static_cast<int64_t>(sched_->tokens(i).size());
          if (!sched_->live(i) || sched_->cached(i) != len - 1 || plan[i].sampler != me) continue;
          const kernels::SamplingParams greedy{0.0f, 1.0f, 0};
          add_sample(mtp_logits_.data() + k++ * V, greedy, len, 1, &draft[i]);
        }
        run_sample_tasks();
        DSV4_RETURN_IF_ERROR(exchange(draft, 1));
        for (size_t i = 0; i < plan.size(); ++i) {
          const int64_t len = static_cast<int64_t>(sched_->tokens(i).size());
          if (!sched_->live(i) || sched_->cached(i) != len - 1) continue;
          int32_t d = draft[i];
          if (opt_.force_draft) {
            const int32_t forced = opt_.force_draft(plan[i].id, len);
            if (forced >= 0) d = forced;
          }
          sched_->set_drafts(i, &d, 1);
        }
      }
    }
    if (opt_.dspark_gamma > 0) DSV4_RETURN_IF_ERROR(run_dspark(plan));
    // Prompt blocks completed this step join the prefix cache.
    for (size_t i = 0; i < plan.size(); ++i)
      if (sched_->live(i))
        runner_->register_prefix(plan[i].seq, sched_->tokens(i).data(), plan[i].prompt_len, opt_.mtp);
  }
  for (const RequestUpdate& u : sched_->updates())
    if (u.finished) deadlines_.erase(u.id);
  if (opt_.min_step_seconds > 0 && rep.rows > 0)
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(opt_.min_step_seconds));
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace dsv4
