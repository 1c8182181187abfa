// Level-B ("float reference", model.md §0.3) forward of DeepSeek-V4 over one whole
// sequence: the `--numerics float` mode of `dsv4 logits` and the model-level oracle of the
// Level-A engine (whose logits are close to these, not equal).
//
// Numerics: every weight dequantized exactly to fp32 (checkpoint.md §4), fp32 activations,
// fp32 hyper-connection streams, fp32 accumulation; no actq / fp8sim / fp4sim / Hadamard /
// bf16 rounding anywhere (per-head query RMS in fp32, compressor pooled vector unrounded,
// indexer scores fp32). Exact ties in a top-k go to the lower index.
//
// Semantics: teacher-forced over tokens[0..n) at positions 0..n-1 in one call without
// caches; each row is computed from the per-position definitions (model.md §2–§11), so the
// first k rows of a call equal, bit for bit, a call on tokens[0..k).
//   logits      [n, V]    row p predicts token p+1 (model.md §2.1, §10.1)
//   mtp_logits  [n-1, V]  row p from Xfinal_p and embed(tokens[p+1]) through the mtp.0 block
//                         (own SWA over MTP rows <= p); predicts token p+2 (model.md §11)
//
// float_dspark: the DSpark drafter at Level B (dspark.md §2-§3.8, §3.10), teacher-forced as
// `dsv4 logits --dspark` defines it: target features H(p) from one whole-sequence call, then
// for each anchor a = 0..n-2 (context = positions 0..a, anchor token t_{a+1}) the γ-row block
// through the stages (context keys of positions max(0, a-W+1)..a plus every block key, no
// causal mask), the drafter head and the Markov chain following the drafter's own argmax
// drafts (exact ties -> lowest id).
//   logits  [n-1, γ, V]  λ_0 .. λ_{γ-1} per anchor
//   drafts  [n-1, γ]     d_1 .. d_γ per anchor
// Memory: weights are dequantized a block of rows at a time; routed experts only when a
// token of the call selects them.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "model/decisions.h"
#include "model/weights.h"

namespace dsv4 {

struct FloatForwardOutput {
  int64_t n_tokens = 0;
  int64_t vocab = 0;
  std::vector<float> logits;             // [n, V]
  std::vector<float> mtp_logits;         // [n-1, V] with mtp, else empty
  // Every decision used (model/decisions.h; seq 0), per block in order: per layer idx rows,
  // moe rows. The MTP block is layer 0.
  std::vector<Decision> decisions;
};

struct FloatDsparkOutput {
  int64_t n_anchors = 0;      // n - 1
  int64_t gamma = 0;
  int64_t vocab = 0;
  std::vector<float> logits;  // [n-1, γ, V]
  std::vector<int32_t> drafts;  // [n-1, γ]
  std::vector<Decision> decisions;  // the target's, then each round's stage MoE and drafts
};

// `forced` (decision replay, nullptr: none) replaces the routed experts and indexer picks it
// lists (seq 0), with the route weights of the forced ids.
// Errors: empty `tokens`, a token outside [0, vocab_size), `mtp` without an MTP layer.
Result<FloatForwardOutput> float_forward(const ModelConfig& cfg, const Weights& w,
                                         const std::vector<int32_t>& tokens, bool mtp,
                                         const DecisionTable* forced = nullptr);

// Errors: no DSpark drafter, fewer than 2 tokens, gamma outside [1, 64], a token outside
// [0, vocab_size).
// `forced` replaces the decisions it lists: the target model's and the drafter's (dspark.md
// §3.10; a forced draft continues the chain).
Result<FloatDsparkOutput> float_dspark(const ModelConfig& cfg, const Weights& w,
                                       const std::vector<int32_t>& tokens, int gamma,
                                       const DecisionTable* forced = nullptr);

}  // namespace dsv4
