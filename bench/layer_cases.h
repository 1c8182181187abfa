// Timed steps of one mapped layer through ModelRunner::forward (no logits: the layer
// alone, embedding included) and of the LM head kernel.
//
// Decode: every sequence 0 .. max(B) − 1 is first prefilled with `context` random
// tokens; then per (B, S) `warmup` + `repeats` steps of S rows for each of the first B
// sequences (all rows accepted: the positions advance by S), the steps of one B's cases
// interleaved (S = 1, 2, 4, ..., then again), so host noise falls on every S alike. Prefill: per chunk size n,
// `repeats` fresh one-request steps of n rows at positions 0 .. n − 1 (its own slot).
// Each case: median step time; bytes and FLOPs per roofline.h with the experts the
// step's routing hit (from the decision log), averaged over the timed steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/config.h"
#include "model/decisions.h"
#include "model/weights.h"
#include "numeric/bf16.h"
#include "report.h"

namespace dsv4::bench {

struct StepSets {
  std::vector<int> batches;    // B
  std::vector<int> spec_rows;  // S
  std::vector<int> prefill;    // chunk rows
  int repeats = 5;
  int warmup = 2;
  int context = 128;           // prompt positions before decode
  bool run_profile = false;    // print each decode case's per-run breakdown (run_breakdown.h)
  double read_gbps = 0;        // the breakdown's bandwidth denominator (the same-run probe)
};

// Decode and prefill cases of the layer (cfg has one main layer) with `threads` threads,
// named "layer-<kind>".
Result<std::vector<CaseResult>> run_layer_cases(const ModelConfig& cfg, const Weights& w, const std::string& name,
                                                const StepSets& sets, int threads);

// The LM head matrix (lm_head kernel; hc_head and the final norm are not run) over T = B
// rows per B; bytes and FLOPs of the head matrix alone.
std::vector<CaseResult> run_head_cases(const ModelConfig& cfg, const Weights& w, const std::vector<int>& batches,
                                       int repeats, int threads);

// Distinct routed experts of layer 0 (dspark: of DSpark stage 0) in a step's decision log.
int64_t experts_hit(const std::vector<Decision>& log, bool dspark = false);

// One LM head call (lm_head kernel) over T rows of y [T, D] into logits [T, V], ms.
double head_ms(const Weights& w, int64_t vocab, const bf16* y, int64_t T, float* logits, ThreadPool& pool);

}  // namespace dsv4::bench
