// DSpark drafter cases (dspark_cases.h).
#include "dspark_cases.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>

#include <fmt/format.h>

#include "base/math.h"
#include "kernels/linear/linear.h"
#include "layer_cases.h"
#include "model/decisions.h"
#include "model/limits.h"
#include "model/runner.h"

#include "bench_util.h"

namespace dsv4::bench {
namespace {

// The timed pieces of one iteration (ms), in the order of their cases.
enum Piece { kTarget, kThead, kCommit, kRound, kHead, kMarkov, kPieces };
constexpr const char* kPieceNames[kPieces] = {"dspark-target", "dspark-thead", "dspark-commit",
                                              "dspark-round",  "dspark-head",  "dspark-markov"};
using Pieces = double[kPieces];

class DsparkStepper {
 public:
  DsparkStepper(const ModelConfig& cfg, const Weights& w, const DsparkSets& sets)
      : cfg_(cfg), w_(w), sets_(sets), rng_{4242} {}

  Status init(int threads) {
    const int max_b = max_of(sets_.batches, 1), max_g = max_of(sets_.gammas, 1);
    const int steps = sets_.warmup + sets_.repeats;
    int64_t decode_positions = 0;  // sequence 0 joins every (B, γ)
    for (int g : sets_.gammas)
      decode_positions += int64_t{steps} * (1 + g) * static_cast<int64_t>(sets_.batches.size());
    Limits lim;
    lim.max_batch = max_b;
    lim.max_seqs = max_b;
    lim.max_decode_rows = 1 + max_g;
    lim.max_chunk = sets_.context;
    lim.max_rows = std::max(max_b * (1 + max_g), sets_.context);
    lim.max_context = ceil_div<int64_t>(sets_.context + decode_positions + 16, lim.page_tokens) * lim.page_tokens;
    lim.max_context = std::min(lim.max_context, cfg_.max_position_embeddings);
    lim.n_threads = threads;
    Result<std::unique_ptr<ModelRunner>> r = ModelRunner::create(cfg_, w_, lim);
    if (!r.ok()) return r.status();
    runner_ = std::move(r.value());
    const int64_t V = cfg_.vocab_size, D = cfg_.hidden_size, Rm = cfg_.dspark->markov_rank;
    const int64_t rows = lim.max_rows;
    F_ = static_cast<int64_t>(cfg_.dspark->target_layer_ids.size()) * D;
    tokens_.resize(static_cast<size_t>(rows));
    features_.resize(static_cast<size_t>(rows * F_));
    y_.resize(static_cast<size_t>(rows * D));
    for (bf16& v : y_) v = bf16::from_float(rng_.uniform());
    logits_.resize(static_cast<size_t>(rows * V));
    lambda_.resize(static_cast<size_t>(max_b * max_g * V));
    drafts_.resize(static_cast<size_t>(max_b * max_g));
    m_.resize(static_cast<size_t>(max_b * Rm));
    beta_.resize(static_cast<size_t>(max_b * V));
    prev_.resize(static_cast<size_t>(max_b));
    reqs_.resize(static_cast<size_t>(max_b));
    commits_.resize(static_cast<size_t>(max_b));
    rounds_.resize(static_cast<size_t>(max_b));
    pos_.assign(static_cast<size_t>(max_b), 0);
    return prefill_context(max_b, lim.max_rows);
  }

  // One (B, γ): the six timed pieces per iteration, then their cases and the share row.
  Result<std::vector<CaseResult>> run(int B, int gamma, const ModelConfig& full) {
    const int S = 1 + gamma;
    std::vector<double> ms[kPieces];
    std::vector<std::vector<RequestRows>> timed_rows;
    double target_hit = 0, stage_hit = 0;
    int64_t anchor = 0;
    for (int it = 0; it < sets_.warmup + sets_.repeats; ++it) {
      const bool warm = it < sets_.warmup;
      std::vector<RequestRows> rows(static_cast<size_t>(B));
      for (int r = 0; r < B; ++r) rows[r] = RequestRows{pos_[r], S};
      Pieces p;
      log_.clear();
      DSV4_RETURN_IF_ERROR(step(B, S, warm, p));
      DSV4_RETURN_IF_ERROR(commit_and_round(B, gamma, warm, p));
      if (warm) {
        target_hit += static_cast<double>(experts_hit(log_)) / sets_.warmup;
        stage_hit += static_cast<double>(experts_hit(log_, /*dspark=*/true)) / sets_.warmup;
        continue;
      }
      for (int k = 0; k < kPieces; ++k) ms[k].push_back(p[k]);
      timed_rows.push_back(std::move(rows));
      anchor += pos_[0] - 1;
    }
    if (sets_.warmup == 0) {
      target_hit = expected_experts_hit(cfg_.n_routed_experts, cfg_.num_experts_per_tok, int64_t{B} * S);
      stage_hit = expected_experts_hit(cfg_.n_routed_experts, cfg_.num_experts_per_tok, int64_t{B} * gamma);
    }
    Cost target_cost;
    for (const std::vector<RequestRows>& rows : timed_rows)
      target_cost += layer_step_cost(cfg_, 0, rows, std::llround(target_hit));
    const double n = static_cast<double>(std::max(1, sets_.repeats));
    const int64_t mid_anchor = anchor / std::max(1, sets_.repeats);
    const std::string shape = fmt::format("gamma {}", gamma);
    std::vector<CaseResult> out;
    auto add = [&](Piece k, int s, const Cost& cost) -> CaseResult& {
      out.push_back(timed_case(kPieceNames[k], "spec", shape, B, s, threads(), ms[k], cost));
      out.back().extra.push_back({"gamma", gamma});
      return out.back();
    };
    add(kTarget, S, Cost{target_cost.bytes / n, target_cost.flops / n}).experts_hit = target_hit;
    add(kThead, S, head_cost(cfg_, int64_t{B} * S));
    add(kCommit, S, dspark_commit_cost(cfg_, int64_t{B} * S));
    add(kRound, gamma, dspark_round_cost(cfg_, B, gamma, mid_anchor, stage_hit)).experts_hit = stage_hit;
    add(kHead, gamma, head_cost(cfg_, int64_t{B} * gamma));
    add(kMarkov, gamma, markov_cost(cfg_, B, gamma));
    out.push_back(share_case(out, B, gamma, mid_anchor, stage_hit, full));
    return out;
  }

  int threads() const { return runner_->limits().n_threads; }

 private:
  int32_t token() { return static_cast<int32_t>(rng_.next() % static_cast<uint64_t>(cfg_.vocab_size)); }

  // Every sequence gets `context` prompt positions with their features committed, as many
  // requests per step as fit.
  Status prefill_context(int n_seqs, int max_rows) {
    const int per_step = std::max(1, max_rows / sets_.context);
    for (int s0 = 0; s0 < n_seqs; s0 += per_step) {
      const int n = std::min(per_step, n_seqs - s0);
      for (int s = s0; s < s0 + n; ++s) {
        DSV4_RETURN_IF_ERROR(runner_->start_sequence(s));
        int32_t* t = &tokens_[static_cast<size_t>((s - s0) * sets_.context)];
        for (int j = 0; j < sets_.context; ++j) t[j] = token();
        reqs_[s - s0] = StepRequest{s, 0, sets_.context, sets_.context, t};
        const bf16* f = &features_[static_cast<size_t>((s - s0) * sets_.context * F_)];
        commits_[s - s0] = ModelRunner::DsparkCommit{s, 0, sets_.context, f, 0};
        pos_[s] = sets_.context;
      }
      DSV4_RETURN_IF_ERROR(runner_->forward(std::span(reqs_.data(), n), nullptr, nullptr, {}, {}, features_.data()));
      DSV4_RETURN_IF_ERROR(runner_->dspark_commit(std::span(commits_.data(), n)));
    }
    return Status();
  }

  // The verify step: B requests of S rows with their features, then the target's head.
  // logged: the step's decisions go to log_.
  Status step(int B, int S, bool logged, Pieces& p) {
    for (int r = 0; r < B; ++r) {
      int32_t* t = &tokens_[static_cast<size_t>(r * S)];
      for (int j = 0; j < S; ++j) t[j] = token();
      reqs_[r] = StepRequest{r, pos_[r], S, sets_.context, t};
    }
    const DecisionIO dec{nullptr, logged ? &log_ : nullptr};
    const auto t0 = std::chrono::steady_clock::now();
    DSV4_RETURN_IF_ERROR(runner_->forward(std::span(reqs_.data(), B), nullptr, nullptr, dec, {}, features_.data()));
    p[kTarget] = ms_since(t0);
    p[kThead] = head_ms(w_, cfg_.vocab_size, y_.data(), int64_t{B} * S, logits_.data(), runner_->pool());
    return Status();
  }

  // Every row of the step committed (positions advance by S), then the next round of each
  // request (logged: its decisions go to log_), the drafter head's matrix alone and the
  // Markov chain alone.
  Status commit_and_round(int B, int gamma, bool logged, Pieces& p) {
    const int S = 1 + gamma;
    for (int r = 0; r < B; ++r) {
      commits_[r] = ModelRunner::DsparkCommit{r, pos_[r], S, &features_[static_cast<size_t>(r * S * F_)], 0};
      pos_[r] += S;
      rounds_[r] = ModelRunner::DsparkRound{r, pos_[r] - 1, token(), 0};
    }
    auto t0 = std::chrono::steady_clock::now();
    DSV4_RETURN_IF_ERROR(runner_->dspark_commit(std::span(commits_.data(), B)));
    p[kCommit] = ms_since(t0);
    const DecisionIO dec{nullptr, logged ? &log_ : nullptr};
    t0 = std::chrono::steady_clock::now();
    DSV4_RETURN_IF_ERROR(
        runner_->dspark_propose(std::span(rounds_.data(), B), gamma, lambda_.data(), drafts_.data(), dec));
    p[kRound] = ms_since(t0);
    p[kHead] = head_ms(w_, cfg_.vocab_size, y_.data(), int64_t{B} * gamma, logits_.data(), runner_->pool());
    p[kMarkov] = markov_ms(B, gamma);
    return Status();
  }

  // dspark.md §3.8 on λ [B·γ, V] (the round's corrected logits, updated again in place): per
  // block row the W1 rows of the previous drafts, β = W2·m for the B rows, λ += β, argmax.
  double markov_ms(int B, int gamma) {
    const int64_t V = cfg_.vocab_size, Rm = cfg_.dspark->markov_rank;
    const LinearWeight w2{WeightFormat::kBF16, V, Rm, w_.dspark.markov_w2, nullptr};
    ThreadPool& pool = runner_->pool();
    for (int r = 0; r < B; ++r) prev_[r] = rounds_[r].x0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < gamma; ++i) {
      for (int r = 0; r < B; ++r) std::copy_n(w_.dspark.markov_w1 + prev_[r] * Rm, Rm, m_.begin() + r * Rm);
      pool.run([&](int tid, int n) { kernels::linear_f32(w2, m_.data(), B, beta_.data(), tid, n); });
      pool.run([&](int tid, int n) {
        const Range mine = split_range(B, tid, n);
        for (int64_t r = mine.begin; r < mine.end; ++r) {
          float* lam = &lambda_[static_cast<size_t>((r * gamma + i) * V)];
          std::transform(lam, lam + V, &beta_[static_cast<size_t>(r * V)], lam, std::plus<float>());
          prev_[r] = static_cast<int32_t>(std::max_element(lam, lam + V) - lam);  // ties: lowest id
        }
      });
    }
    return ms_since(t0);
  }

  // The extrapolated full step (dspark_cases.h) from the six cases of this (B, γ).
  CaseResult share_case(const std::vector<CaseResult>& c, int B, int gamma, int64_t anchor, double stage_hit,
                        const ModelConfig& full) const {
    const double NS = full.n_dspark_stages(), L = full.num_hidden_layers;
    const CaseResult &target = c[kTarget], &thead = c[kThead], &commit = c[kCommit], &round = c[kRound];
    const CaseResult &head = c[kHead], &markov = c[kMarkov];
    const double stage = std::max(0.0, round.step_ms - head.step_ms - markov.step_ms);
    const double drafter = round.step_ms + (NS - 1) * stage + commit.step_ms;
    const double verify = L * target.step_ms + thead.step_ms;
    Cost cost = round.cost;
    const Cost one_stage = dspark_stages_cost(cfg_, B, gamma, anchor, stage_hit);
    cost += Cost{(NS - 1) * one_stage.bytes, (NS - 1) * one_stage.flops};
    cost += commit.cost;
    cost += Cost{L * target.cost.bytes, L * target.cost.flops};
    cost += thead.cost;
    CaseResult s = timed_case("dspark-share", "spec", round.shape, B, 1 + gamma, threads(), {drafter + verify}, cost);
    s.extra = {{"gamma", gamma},       {"stage_ms", stage},       {"drafter_ms", drafter}, {"target_ms", verify},
               {"share", drafter / (drafter + verify)}, {"n_stages", NS}, {"n_layers", L}, {"extrapolated", 1}};
    return s;
  }

  const ModelConfig& cfg_;
  const Weights& w_;
  DsparkSets sets_;
  Rng rng_;
  std::unique_ptr<ModelRunner> runner_;
  int64_t F_ = 0;  // |Lt|·D
  std::vector<int32_t> tokens_;
  std::vector<bf16> features_, y_, m_;
  std::vector<float> logits_, lambda_, beta_;
  std::vector<int32_t> drafts_, prev_;
  std::vector<StepRequest> reqs_;
  std::vector<ModelRunner::DsparkCommit> commits_;
  std::vector<ModelRunner::DsparkRound> rounds_;
  std::vector<int64_t> pos_;
  std::vector<Decision> log_;
};

}  // namespace

Result<std::vector<CaseResult>> run_dspark_cases(const ModelConfig& cfg, const ModelConfig& full, const Weights& w,
                                                 const DsparkSets& sets, int threads) {
  if (!cfg.dspark || !full.dspark) return Status::error("dspark cases: the configs have no DSpark drafter");
  for (int g : sets.gammas)
    if (g < 1 || g > kMaxDsparkGamma) return Status::errorf("--gammas: {} outside [1, {}]", g, kMaxDsparkGamma);
  DsparkStepper stepper(cfg, w, sets);
  DSV4_RETURN_IF_ERROR(stepper.init(threads));
  std::vector<CaseResult> out;
  for (int B : sets.batches)
    for (int g : sets.gammas) {
      Result<std::vector<CaseResult>> c = stepper.run(B, g, full);
      if (!c.ok()) return c.status();
      out.insert(out.end(), c->begin(), c->end());
    }
  return out;
}

void print_dspark_shares(const std::vector<CaseResult>& cases, const ModelConfig& full) {
  std::printf("\ndrafter's share of a decode step of the full model (NS = %d stages, L = %d layers; EXTRAPOLATED: "
              "L x the one measured target layer, NS x the one measured stage, stage = round - head - markov):\n",
              full.n_dspark_stages(), full.num_hidden_layers);
  std::printf("%4s %5s %9s %9s %9s %9s %9s %9s %9s %11s %11s %7s\n", "B", "gamma", "round", "stage", "head", "markov",
              "commit", "target", "thead", "drafter ms", "step ms", "share");
  const CaseResult* row[kPieces] = {};
  for (const CaseResult& c : cases) {
    for (int k = 0; k < kPieces; ++k)
      if (c.name == kPieceNames[k]) row[k] = &c;
    if (c.name != "dspark-share" || std::find(std::begin(row), std::end(row), nullptr) != std::end(row)) continue;
    std::printf("%4d %5d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11.2f %11.2f %6.1f%%\n", c.B,
                static_cast<int>(c.extra_value("gamma")), row[kRound]->step_ms, c.extra_value("stage_ms"),
                row[kHead]->step_ms, row[kMarkov]->step_ms, row[kCommit]->step_ms, row[kTarget]->step_ms,
                row[kThead]->step_ms, c.extra_value("drafter_ms"),
                c.step_ms, 100 * c.extra_value("share"));
  }
  std::fflush(stdout);
}

}  // namespace dsv4::bench
