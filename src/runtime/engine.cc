#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

#include "base/check.h"
#include "base/cpu.h"

namespace dsv4 {

struct Engine::Running {
  int id = 0;
  int32_t seq = -1;
  std::vector<int32_t> tokens;  // prompt, then committed outputs
  int64_t prompt_len = 0;
  int64_t n_cached = 0;         // positions in the main caches (and the MTP cache)
  int32_t draft = -1;           // MTP draft for position tokens.size(), or -1
  int32_t owner = 0;            // world rank computing its rows (several ranks)
  bool cp = false;              // its prompt is prefilled context-parallel over the owner's TP group
  int32_t sampler = 0;          // this step: the rank holding its last row (the owner, or the
                                // last TP rank of a split chunk)
  int32_t generated = 0;
  bool done = false;
  // This step:
  int32_t rows = 0;
  int64_t row_begin = 0;
};

Engine::Engine(const ModelConfig& cfg, const Limits& limits, const EngineOptions& opt,
               std::unique_ptr<ModelRunner> runner)
    : cfg_(cfg), limits_(limits), opt_(opt), runner_(std::move(runner)) {
  const int64_t T = limits.max_rows, V = cfg.vocab_size, ND = cfg.hc_mult * cfg.hidden_size;
  seq_used_.assign(limits.max_seqs, 0);
  reqs_.reserve(limits.max_batch);
  planned_.reserve(limits.max_batch);
  mtp_reqs_.reserve(limits.max_batch);
  row_tokens_.resize(T);
  mtp_tokens_.resize(T);
  logits_.resize(static_cast<size_t>(T * V));
  if (opt.mtp) {  // MTP drafts only
    mtp_logits_.resize(static_cast<size_t>(T * V));
    xfinal_.resize(static_cast<size_t>(T * ND));
    mtp_x_.resize(static_cast<size_t>(T * ND));
  }
  sample_scratch_.resize(static_cast<size_t>(kernels::sample_scratch_bytes(V, 1) / 8 + 1));
  sampled_.resize(static_cast<size_t>(2 * limits.max_batch));
  values_.resize(static_cast<size_t>(2 * limits.max_batch));
  gathered_.resize(static_cast<size_t>(2 * limits.max_batch));
  gather_rows_.resize(opt.ranks ? opt.ranks->topo.world : 1);
}

int Engine::rank() const { return opt_.ranks ? opt_.ranks->topo.rank : 0; }

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const ModelConfig& cfg, const Weights& w, const Limits& limits,
                                               const EngineOptions& opt) {
  if (opt.mtp && w.mtp.empty())
    return Status::error("--mtp needs an MTP layer, but num_nextn_predict_layers = 0");
  Limits l = limits;
  if (opt.mtp) l.max_decode_rows = std::max(l.max_decode_rows, 2);
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

Result<int> Engine::add_request(GenerationRequest req) {
  if (rank() != 0) return Status::errorf("requests enter on rank 0 (this is rank {})", rank());
  if (stopped_) return Status::error("the engine was stopped");
  if (req.prompt.empty()) return Status::error("request: prompt is empty (need at least one token id)");
  for (size_t i = 0; i < req.prompt.size(); ++i)
    if (req.prompt[i] < 0 || req.prompt[i] >= cfg_.vocab_size)
      return Status::errorf("request: prompt token {} at index {} outside the vocabulary [0, {})", req.prompt[i], i,
                            cfg_.vocab_size);
  Status st = kernels::validate_sampling_params(req.sampling);
  if (!st.ok()) return st.with_context("request");
  if (req.max_tokens < 1) return Status::errorf("request: max_tokens = {} must be at least 1", req.max_tokens);
  if (static_cast<int64_t>(req.prompt.size()) + 1 > limits_.max_context)
    return Status::errorf("request: prompt of {} tokens leaves no room in max_context = {}", req.prompt.size(),
                          limits_.max_context);
  const int64_t blocks = runner_->blocks_short(-1, static_cast<int64_t>(req.prompt.size()) + 1);
  if (blocks > runner_->total_blocks())
    return Status::errorf("request: prompt of {} tokens needs {} compressed-cache blocks, cache_blocks = {}",
                          req.prompt.size(), blocks, runner_->total_blocks());
  Result<int> id = queue_request(std::move(req));
  if (id.ok() && opt_.ranks) unsent_.push_back(*id);
  return id;
}

Result<int> Engine::queue_request(GenerationRequest req) {
  const int id = static_cast<int>(results_.size());
  RequestResult res;
  res.id = id;
  res.prompt = req.prompt;
  results_.push_back(std::move(res));
  requests_.push_back(std::move(req));
  waiting_.push_back(id);
  return id;
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

// Wire form: stop u8, count u32, then per request: prompt length u32, the ids, temperature,
// top_p, seed, max_tokens, stop_at_eos. Rank 0 broadcasts its size, then the bytes.
Status Engine::sync_requests(bool stop) {
  Communicator& world = *opt_.ranks->world;
  sync_buf_.clear();
  if (rank() == 0) {
    put<uint8_t>(sync_buf_, stop ? 1 : 0);
    put<uint32_t>(sync_buf_, static_cast<uint32_t>(unsent_.size()));
    for (int id : unsent_) {
      const GenerationRequest& g = requests_[id];
      put<uint32_t>(sync_buf_, static_cast<uint32_t>(g.prompt.size()));
      for (int32_t t : g.prompt) put(sync_buf_, t);
      put(sync_buf_, g.sampling.temperature);
      put(sync_buf_, g.sampling.top_p);
      put(sync_buf_, g.sampling.seed);
      put(sync_buf_, g.max_tokens);
      put<uint8_t>(sync_buf_, g.stop_at_eos ? 1 : 0);
    }
    unsent_.clear();
  }
  int64_t n = static_cast<int64_t>(sync_buf_.size());
  DSV4_RETURN_IF_ERROR(world.broadcast(&n, sizeof(n), 0));
  sync_buf_.resize(static_cast<size_t>(n));
  DSV4_RETURN_IF_ERROR(world.broadcast(sync_buf_.data(), n, 0));
  const uint8_t* p = sync_buf_.data();
  stopped_ = take<uint8_t>(p) != 0;
  const uint32_t count = take<uint32_t>(p);
  if (rank() == 0) return Status();
  for (uint32_t i = 0; i < count; ++i) {
    GenerationRequest g;
    g.prompt.resize(take<uint32_t>(p));
    for (int32_t& t : g.prompt) t = take<int32_t>(p);
    g.sampling.temperature = take<float>(p);
    g.sampling.top_p = take<float>(p);
    g.sampling.seed = take<uint64_t>(p);
    g.max_tokens = take<int32_t>(p);
    g.stop_at_eos = take<uint8_t>(p) != 0;
    (void)queue_request(std::move(g));
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

// The running request count per rank decides: fewest first, then the lowest rank.
int32_t Engine::pick_owner() const {
  if (!opt_.ranks) return 0;
  const int world = opt_.ranks->topo.world;
  int32_t best = 0;
  int64_t best_n = INT64_MAX;
  for (int32_t q = 0; q < world; ++q) {
    int64_t n = 0;
    for (const auto& r : running_) n += r->owner == q;
    if (n < best_n) {
      best = q;
      best_n = n;
    }
  }
  return best;
}

// values [planned, per_request]: the entries of the requests this rank owns are set; after
// the call every entry is (each owner's values, all-gathered over the job).
Status Engine::exchange(int32_t* values, int per_request) {
  if (!opt_.ranks) return Status();
  const int world = opt_.ranks->topo.world, me = rank();
  std::fill(gather_rows_.begin(), gather_rows_.end(), 0);
  int64_t mine = 0;
  for (size_t i = 0; i < planned_.size(); ++i) {
    const int from = planned_[i]->sampler;
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
  for (size_t i = 0; i < planned_.size(); ++i) {
    const int64_t at = cursor[planned_[i]->sampler]++;
    for (int j = 0; j < per_request; ++j) values[i * per_request + j] = gathered_[at * per_request + j];
  }
  return Status();
}

int32_t Engine::sample_row(const float* logits, const kernels::SamplingParams& sp, int64_t position, int slot) {
  const kernels::SampleRow row{sp, position, slot};
  int32_t tok = 0;
  kernels::sample(logits, 1, cfg_.vocab_size, &row, &tok, sample_scratch_.data(),
                  static_cast<int64_t>(sample_scratch_.size() * 8), 0, 1);
  return tok;
}

void Engine::finish(Running& r, const char* reason) {
  r.done = true;
  RequestResult& res = results_[r.id];
  res.finished = true;
  res.finish_reason = reason;
  runner_->register_prefix(r.seq, r.tokens.data(), r.prompt_len, opt_.mtp);
  runner_->end_sequence(r.seq);
  seq_used_[r.seq] = 0;
}

Result<StepReport> Engine::step() {
  const auto t0 = std::chrono::steady_clock::now();
  StepReport rep;
  last_error_uniform_ = false;
  if (stopped_) return Status::error("the engine was stopped");
  if (opt_.ranks) {
    DSV4_RETURN_IF_ERROR(sync_requests(false));
    if (stopped_) return rep;
  }
  // Admission, in arrival order: a waiting request takes a free sequence slot once the
  // compressed-cache blocks of its prompt are free (decode growth beyond that is the
  // serving policy's concern; a step that runs out of blocks fails with the cache's error).
  while (!waiting_.empty()) {
    const int64_t prompt_len = static_cast<int64_t>(requests_[waiting_.front()].prompt.size());
    if (runner_->blocks_short(-1, prompt_len) > runner_->free_blocks()) break;
    int32_t seq = -1;
    for (int32_t s = 0; s < limits_.max_seqs; ++s)
      if (!seq_used_[s]) {
        seq = s;
        break;
      }
    if (seq < 0) break;
    const int id = waiting_.front();
    // A prefix-cache hit starts the prompt at the returned position (runtime.md §7.1).
    const GenerationRequest& g = requests_[waiting_.front()];
    Result<int64_t> start = runner_->start_sequence_cached(seq, g.prompt.data(), prompt_len, opt_.mtp);
    if (!start.ok()) return start.status();
    Status st = runner_->reserve_blocks(seq, prompt_len);
    if (!st.ok()) {  // blocks went to running requests meanwhile: wait
      runner_->end_sequence(seq);
      break;
    }
    waiting_.pop_front();
    seq_used_[seq] = 1;
    auto r = std::make_unique<Running>();
    r->id = id;
    r->seq = seq;
    r->tokens = requests_[id].prompt;
    r->prompt_len = static_cast<int64_t>(r->tokens.size());
    r->n_cached = *start;
    r->owner = pick_owner();
    r->cp = opt_.ranks && opt_.ranks->topo.tp > 1 && opt_.cp_prefill_tokens > 0 &&
            r->prompt_len - r->n_cached >= opt_.cp_prefill_tokens;
    rep.prefix_hit_tokens += *start;
    running_.push_back(std::move(r));
  }

  // Plan: rows per request within B_MAX and T_MAX, in admission order.
  reqs_.clear();
  std::vector<Running*>& planned = planned_;
  planned.clear();
  int64_t T = 0;
  for (auto& rp : running_) {
    Running& r = *rp;
    if (static_cast<int32_t>(reqs_.size()) >= limits_.max_batch) break;
    int32_t rows;
    const int32_t* toks;
    if (r.n_cached < r.prompt_len) {
      rows = static_cast<int32_t>(std::min<int64_t>({r.prompt_len - r.n_cached, limits_.max_chunk, limits_.max_rows - T}));
      toks = r.tokens.data() + r.n_cached;
    } else {
      rows = r.draft >= 0 ? 2 : 1;
      if (T + rows > limits_.max_rows) continue;
      row_tokens_[T] = r.tokens.back();
      if (rows == 2) row_tokens_[T + 1] = r.draft;
      toks = row_tokens_.data() + T;
    }
    if (rows <= 0) continue;
    r.rows = rows;
    r.row_begin = T;
    const bool split = r.cp && r.n_cached < r.prompt_len;
    const int tp = opt_.ranks ? opt_.ranks->topo.tp : 1;
    r.sampler = split ? r.owner / tp * tp + tp - 1 : r.owner;
    reqs_.push_back(StepRequest{r.seq, r.n_cached, rows, r.prompt_len, toks, r.owner, split});
    planned.push_back(&r);
    T += rows;
  }
  rep.batch = static_cast<int32_t>(reqs_.size());
  rep.rows = static_cast<int32_t>(T);
  if (reqs_.empty()) return rep;

  // The step's cache blocks, checked here on the replicated state: every rank fails alike.
  int64_t need = 0;
  for (const StepRequest& q : reqs_) need += runner_->blocks_short(q.seq, q.p0 + q.n);
  if (need > runner_->free_blocks()) {
    last_error_uniform_ = true;
    return Status::errorf("compressed cache exhausted: the step needs {} more blocks of {} positions, {} of "
                          "cache_blocks = {} free",
                          need, limits_.page_tokens, runner_->free_blocks(), runner_->total_blocks());
  }
  Status st = runner_->forward(reqs_, logits_.data(), opt_.mtp ? xfinal_.data() : nullptr);
  if (!st.ok()) return st;

  // Sampling (by each request's owner), then verification and commit (everywhere).
  const int64_t V = cfg_.vocab_size, ND = runner_->stream_width();
  const int me = rank();
  int32_t* tok = values_.data();  // [planned, 2]: tokens sampled, −1 none
  for (size_t i = 0; i < planned.size(); ++i) {
    Running& r = *planned[i];
    const GenerationRequest& g = requests_[r.id];
    int32_t* t2 = tok + 2 * i;
    t2[0] = t2[1] = -1;
    if (r.sampler != me) continue;
    const int64_t last = r.row_begin + r.rows - 1;
    if (r.n_cached < r.prompt_len) {
      if (r.n_cached + r.rows == r.prompt_len)  // samples the position after the prompt
        t2[0] = sample_row(logits_.data() + last * V, g.sampling, r.prompt_len, 0);
    } else {
      const int64_t q = static_cast<int64_t>(r.tokens.size());  // position predicted by row 0
      t2[0] = sample_row(logits_.data() + r.row_begin * V, g.sampling, q, 0);
      if (r.rows == 2 && r.draft == t2[0])
        t2[1] = sample_row(logits_.data() + (r.row_begin + 1) * V, g.sampling, q + 1, 0);
    }
  }
  st = exchange(tok, 2);
  if (!st.ok()) return st;
  mtp_reqs_.clear();
  int64_t mtp_T = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    Running& r = *planned[i];
    const GenerationRequest& g = requests_[r.id];
    const int64_t old_cached = r.n_cached;
    const int32_t* t2 = tok + 2 * i;
    auto commit = [&](int32_t t) {
      if (r.done) return;
      r.tokens.push_back(t);
      results_[r.id].output.push_back(t);
      ++r.generated;
      ++rep.committed;
      if (g.stop_at_eos && t == cfg_.eos_token_id) finish(r, "eos");
      else if (r.generated >= g.max_tokens) finish(r, "length");
      else if (static_cast<int64_t>(r.tokens.size()) + 1 >= limits_.max_context) finish(r, "context");
    };
    if (old_cached < r.prompt_len) {
      r.n_cached += r.rows;
      if (r.n_cached == r.prompt_len) commit(t2[0]);
    } else {
      if (r.rows == 2) {
        ++rep.drafts;
        if (t2[1] >= 0) {  // the draft matched the token sampled at row 0
          ++rep.accepted;
          r.n_cached += 2;
          commit(t2[0]);
          commit(t2[1]);
        } else {
          r.n_cached += 1;
          commit(t2[0]);
        }
      } else {
        r.n_cached += 1;
        commit(t2[0]);
      }
      r.draft = -1;
    }
    // MTP rows: the positions committed to the caches this step whose next token is known.
    if (opt_.mtp && !r.done) {
      const int64_t n = r.n_cached - old_cached;
      for (int64_t j = 0; j < n; ++j) mtp_tokens_[mtp_T + j] = r.tokens[old_cached + j + 1];
      // Rows this rank did not compute hold stale values the MTP layer never reads.
      std::memcpy(mtp_x_.data() + mtp_T * ND, xfinal_.data() + r.row_begin * ND, sizeof(bf16) * n * ND);
      const bool split = r.cp && old_cached < r.prompt_len;  // the MTP rows split as the main rows
      mtp_reqs_.push_back(StepRequest{r.seq, old_cached, static_cast<int32_t>(n), r.prompt_len,
                                      mtp_tokens_.data() + mtp_T, r.owner, split});
      r.row_begin = mtp_T;  // reused: the request's first MTP row
      r.rows = static_cast<int32_t>(n);
      mtp_T += n;
    }
  }

  if (opt_.mtp && !mtp_reqs_.empty()) {
    st = runner_->forward_mtp(mtp_reqs_, mtp_x_.data(), mtp_logits_.data());
    if (!st.ok()) return st;
    int32_t* draft = values_.data();  // [planned]
    for (size_t i = 0; i < planned.size(); ++i) {
      Running& r = *planned[i];
      draft[i] = -1;
      if (r.done || r.n_cached < r.prompt_len || r.sampler != me) continue;
      // The last MTP row (position n_cached - 1) predicts position n_cached + 1 = tokens.size().
      const int64_t last = r.row_begin + r.rows - 1;
      const kernels::SamplingParams greedy{0.0f, 1.0f, 0};
      draft[i] = sample_row(mtp_logits_.data() + last * V, greedy, static_cast<int64_t>(r.tokens.size()), 1);
    }
    st = exchange(draft, 1);
    if (!st.ok()) return st;
    for (size_t i = 0; i < planned.size(); ++i) {
      Running& r = *planned[i];
      if (r.done || r.n_cached < r.prompt_len) continue;
      r.draft = draft[i];
      if (opt_.force_draft) {
        const int32_t forced = opt_.force_draft(r.id, static_cast<int64_t>(r.tokens.size()));
        if (forced >= 0) r.draft = forced;
      }
    }
  }

  // Prompt blocks completed this step join the prefix cache.
  for (Running* rp : planned)
    if (!rp->done) runner_->register_prefix(rp->seq, rp->tokens.data(), rp->prompt_len, opt_.mtp);

  running_.erase(std::remove_if(running_.begin(), running_.end(), [](const auto& r) { return r->done; }),
                 running_.end());
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace dsv4
