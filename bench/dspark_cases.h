// The DSpark drafter's cases (dspark.md §3-§4) on the mapped DSpark checkpoint
// (layer_checkpoint.h, kind dspark: one CSA main layer as the target, one stage).
//
// Every sequence 0 .. max(B) − 1 first prefills `context` random tokens and commits their
// target features to the drafter's rings. Then per (B, γ), `warmup` + `repeats` iterations
// in the engine's order, each piece timed alone (median over the repeats; phase "spec"):
//   dspark-target  ModelRunner::forward of B requests x (1 + γ) rows with the target
//                  features (layer_step_cost)
//   dspark-thead   the LM head over those B·(1 + γ) rows (the target's verify logits)
//   dspark-commit  dspark_commit of the B x (1 + γ) rows (every draft accepted: the most a
//                  step commits; dspark_commit_cost)
//   dspark-round   dspark_propose of B rounds at the new anchors (dspark_round_cost)
//   dspark-head    the LM head over the B·γ block rows (the drafter head's matrix)
//   dspark-markov  the Markov chain (§3.8) of those rounds again on the same kernels
//                  (markov_cost)
// The routed experts hit (target layer, stage) come from the decision logs of the warm-up
// iterations: timed steps run without a log, which allocates (uniform routing's expectation
// when warmup = 0). One dspark-share row per (B, γ): a decode step of the full model (`full`: NS stages,
// L layers) extrapolated from the one measured stage and layer:
//   stage   = round − head − markov              (one stage over B·γ rows, derived; >= 0)
//   drafter = round + (NS − 1)·stage + commit     (= NS·stage + head + markov + commit)
//   target  = L·target-layer + thead
//   share   = drafter / (drafter + target); its step_ms and bytes are drafter + target's.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "model/weights.h"
#include "report.h"

namespace dsv4::bench {

struct DsparkSets {
  std::vector<int> batches;  // B
  std::vector<int> gammas;   // γ, each in [1, kMaxDsparkGamma]
  int repeats = 5;
  int warmup = 1;
  int context = 128;         // prompt positions before decode
};

// cfg: the DSpark bench checkpoint's config (w its weights); full: the model it was cut from.
Result<std::vector<CaseResult>> run_dspark_cases(const ModelConfig& cfg, const ModelConfig& full, const Weights& w,
                                                 const DsparkSets& sets, int threads);

// One line per dspark-share row: the pieces, the extrapolated step and the drafter's share.
void print_dspark_shares(const std::vector<CaseResult>& cases, const ModelConfig& full);

}  // namespace dsv4::bench
