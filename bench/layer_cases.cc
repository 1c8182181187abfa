// Layer and head steps (layer_cases.h).
#include "layer_cases.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <span>

#include <fmt/format.h>

#include "base/math.h"
#include "base/thread_pool.h"
#include "cache/step_metadata.h"
#include "kernels/lm_head/lm_head.h"
#include "model/decisions.h"
#include "model/limits.h"
#include "model/runner.h"

#include "bench_util.h"
#include "run_breakdown.h"

namespace dsv4::bench {
namespace {

class LayerStepper {
 public:
  LayerStepper(const ModelConfig& cfg, const StepSets& sets) : cfg_(cfg), sets_(sets), rng_{12345} {}

  Status init(const Weights& w, int threads) {
    const int max_b = max_of(sets_.batches, 1), max_s = max_of(sets_.spec_rows, 1);
    const int max_chunk = std::max(max_of(sets_.prefill, 1), sets_.context);
    const int steps = sets_.warmup + sets_.repeats;
    int64_t decode_positions = 0;
    for (int s : sets_.spec_rows) decode_positions += int64_t{steps} * s * static_cast<int64_t>(sets_.batches.size());
    Limits lim;
    lim.max_batch = max_b;
    lim.max_seqs = max_b + 1;  // + the prefill slot
    lim.max_decode_rows = max_s;
    lim.max_chunk = max_chunk;
    lim.max_rows = std::max({max_b * max_s, max_chunk, std::min(max_b, 8) * sets_.context});
    lim.max_context = std::max<int64_t>(max_chunk, sets_.context + decode_positions) + 16;
    lim.max_context = ceil_div<int64_t>(lim.max_context, lim.page_tokens) * lim.page_tokens;
    lim.max_context = std::min(lim.max_context, cfg_.max_position_embeddings);
    lim.n_threads = threads;
    Result<std::unique_ptr<ModelRunner>> r = ModelRunner::create(cfg_, w, lim);
    if (!r.ok()) return r.status();
    runner_ = std::move(r.value());
    prefill_slot_ = max_b;
    tokens_.resize(static_cast<size_t>(std::max(lim.max_rows, max_chunk)));
    reqs_.resize(static_cast<size_t>(max_b));
    pos_.assign(static_cast<size_t>(max_b), 0);
    return prefill_context(max_b, lim.max_rows);
  }

  // The decode cases of one B, their steps interleaved (S1, S2, ..., S1, S2, ...) so that a noisy
  // host's slow phases fall on every S alike: the verify overhead compares them.
  Result<std::vector<CaseResult>> decode(int B, const std::vector<int>& spec_rows) {
    struct Acc {
      std::vector<double> ms;
      Cost sum;
      double experts = 0, runs = 0;
      RunBreakdown breakdown;
    };
    std::vector<Acc> acc;
    for (size_t i = 0; i < spec_rows.size(); ++i) acc.push_back(Acc{{}, {}, 0, 0, RunBreakdown(cfg_)});
    runner_->pool().attach(sets_.run_profile ? &profile_ : nullptr);
    for (int it = 0; it < sets_.warmup + sets_.repeats; ++it)
      for (size_t i = 0; i < spec_rows.size(); ++i) {
        const int S = spec_rows[i];
        Acc& a = acc[i];
        std::vector<RequestRows> rows(static_cast<size_t>(B));
        for (int r = 0; r < B; ++r) {
          for (int j = 0; j < S; ++j) tokens_[static_cast<size_t>(r * S + j)] = token();
          reqs_[r] = StepRequest{r, pos_[r], S, sets_.context, &tokens_[static_cast<size_t>(r * S)]};
          rows[r] = RequestRows{pos_[r], S};
        }
        log_.clear();
        profile_.clear();
        const uint64_t runs0 = runner_->pool().runs();
        const auto t0 = std::chrono::steady_clock::now();
        DSV4_RETURN_IF_ERROR(
            runner_->forward(std::span(reqs_.data(), B), nullptr, nullptr, DecisionIO{nullptr, &log_}));
        const double t = ms_since(t0);
        for (int r = 0; r < B; ++r) pos_[r] += S;
        if (it < sets_.warmup) continue;
        a.ms.push_back(t);
        a.runs += static_cast<double>(runner_->pool().runs() - runs0);
        const int64_t hit = experts_hit(log_);
        a.experts += static_cast<double>(hit);
        a.sum += layer_step_cost(cfg_, 0, rows, hit);
        if (sets_.run_profile) a.breakdown.add_step(profile_.records(), rows, hit, t, profile_.dropped());
      }
    runner_->pool().attach(nullptr);
    std::vector<CaseResult> out;
    for (size_t i = 0; i < spec_rows.size(); ++i) {
      const Acc& a = acc[i];
      if (sets_.run_profile)
        std::printf("%s", a.breakdown
                              .table(fmt::format("runs of a decode step, B = {}, S = {}, {} threads", B, spec_rows[i],
                                                 threads()),
                                     sets_.read_gbps)
                              .c_str());
      CaseResult c = make_case("decode", B, spec_rows[i], a.ms, a.sum, a.experts);
      c.pool_runs = a.runs / static_cast<double>(std::max<size_t>(1, a.ms.size()));
      out.push_back(std::move(c));
    }
    return out;
  }

  Result<CaseResult> prefill(int n) {
    std::vector<double> ms;
    Cost sum;
    double experts = 0;
    for (int it = 0; it < sets_.repeats; ++it) {
      if (runner_->active(prefill_slot_)) runner_->end_sequence(prefill_slot_);
      DSV4_RETURN_IF_ERROR(runner_->start_sequence(prefill_slot_));
      for (int j = 0; j < n; ++j) tokens_[static_cast<size_t>(j)] = token();
      const StepRequest req{prefill_slot_, 0, n, n, tokens_.data()};
      log_.clear();
      const auto t0 = std::chrono::steady_clock::now();
      DSV4_RETURN_IF_ERROR(runner_->forward(std::span(&req, 1), nullptr, nullptr, DecisionIO{nullptr, &log_}));
      ms.push_back(ms_since(t0));
      const int64_t hit = experts_hit(log_);
      experts += static_cast<double>(hit);
      const RequestRows rows{0, n};
      sum += layer_step_cost(cfg_, 0, std::span(&rows, 1), hit);
    }
    return make_case("prefill", 1, n, ms, sum, experts);
  }

  int threads() const { return runner_->limits().n_threads; }

 private:
  int32_t token() { return static_cast<int32_t>(rng_.next() % static_cast<uint64_t>(cfg_.vocab_size)); }

  // Every decode sequence gets `context` prompt positions, as many requests per step as fit.
  Status prefill_context(int n_seqs, int max_rows) {
    const int per_step = std::max(1, max_rows / sets_.context);
    std::vector<int32_t> prompt(static_cast<size_t>(n_seqs) * sets_.context);
    for (int32_t& t : prompt) t = token();
    for (int s0 = 0; s0 < n_seqs; s0 += per_step) {
      const int n = std::min(per_step, n_seqs - s0);
      std::vector<StepRequest> reqs;
      for (int s = s0; s < s0 + n; ++s) {
        DSV4_RETURN_IF_ERROR(runner_->start_sequence(s));
        reqs.push_back(StepRequest{s, 0, sets_.context, sets_.context, &prompt[static_cast<size_t>(s) * sets_.context]});
        pos_[s] = sets_.context;
      }
      DSV4_RETURN_IF_ERROR(runner_->forward(reqs, nullptr, nullptr));
    }
    return Status();
  }

  CaseResult make_case(const char* phase, int B, int S, const std::vector<double>& ms, const Cost& sum,
                       double experts) const {
    const double n = static_cast<double>(std::max<size_t>(1, ms.size()));
    CaseResult c = timed_case("", phase, "", B, S, threads(), ms, Cost{sum.bytes / n, sum.flops / n});
    c.experts_hit = experts / n;
    return c;
  }

  const ModelConfig& cfg_;
  StepSets sets_;
  Rng rng_;
  std::unique_ptr<ModelRunner> runner_;
  int32_t prefill_slot_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<StepRequest> reqs_;
  std::vector<int64_t> pos_;
  std::vector<Decision> log_;
  RunProfile profile_{4096};  // runs of one step (a one-layer step makes about 30)
};

}  // namespace

int64_t experts_hit(const std::vector<Decision>& log, bool dspark) {
  std::set<int32_t> distinct;
  for (const Decision& d : log)
    if (!d.idx && !d.mtp && !d.draft && d.dspark == dspark && d.layer == 0)
      distinct.insert(d.selected.begin(), d.selected.end());
  return static_cast<int64_t>(distinct.size());
}

double head_ms(const Weights& w, int64_t vocab, const bf16* y, int64_t T, float* logits, ThreadPool& pool) {
  const kernels::LmHeadParams p{0, vocab, vocab};
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](int tid, int n) { kernels::lm_head(p, w.head.w, y, T, logits, tid, n); });
  return ms_since(t0);
}

Result<std::vector<CaseResult>> run_layer_cases(const ModelConfig& cfg, const Weights& w, const std::string& name,
                                                const StepSets& sets, int threads) {
  LayerStepper stepper(cfg, sets);
  DSV4_RETURN_IF_ERROR(stepper.init(w, threads));
  std::vector<CaseResult> out;
  for (int B : sets.batches) {
    Result<std::vector<CaseResult>> c = stepper.decode(B, sets.spec_rows);
    if (!c.ok()) return c.status();
    for (CaseResult& r : c.value()) out.push_back(std::move(r));
  }
  for (int n : sets.prefill) {
    Result<CaseResult> c = stepper.prefill(n);
    if (!c.ok()) return c.status();
    out.push_back(std::move(c.value()));
  }
  for (CaseResult& c : out) c.name = name;
  return out;
}

std::vector<CaseResult> run_head_cases(const ModelConfig& cfg, const Weights& w, const std::vector<int>& batches,
                                       int repeats, int threads) {
  const int max_b = max_of(batches, 1);
  const int64_t D = cfg.hidden_size, V = cfg.vocab_size;
  std::vector<bf16> y(static_cast<size_t>(max_b * D));
  Rng rng{777};
  for (bf16& v : y) v = bf16::from_float(rng.uniform());
  std::vector<float> logits(static_cast<size_t>(max_b * V));
  ThreadPool pool(threads);
  std::vector<CaseResult> out;
  for (int B : batches) {
    std::vector<double> ms;
    for (int it = 0; it < repeats + 1; ++it) {
      const double t = head_ms(w, V, y.data(), B, logits.data(), pool);
      if (it > 0) ms.push_back(t);
    }
    out.push_back(timed_case("head", "decode", "", B, 1, threads, ms, matrix_cost(StorageForm::kBF16, V, D, B)));
  }
  return out;
}

}  // namespace dsv4::bench
