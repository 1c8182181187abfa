// Teacher-forced logits of one token sequence (`dsv4 logits`, the interface of
// external conformance checks; model.md §0.3, §11, §12; runtime.md §1.1a).
//
// Tokens t[0..n) sit at positions 0..n-1 of one sequence.
//   main:  logits [n, V]    row p = head(Xfinal_p), predicts t[p+1]
//   --mtp: logits [n-1, V]  row p = MTP head from Xfinal_p and embed(t[p+1]),
//                           predicts t[p+2] (model.md §11); needs n >= 2
//   --dspark: logits [n-1, G, V]  per anchor a, the drafter's Markov-corrected logits
//                           λ_0..λ_{G-1} (dspark.md §3.8, oracle/float_forward.h
//                           float_dspark; ReferenceModel::dspark_propose;
//                           ModelRunner::dspark_propose at demo numerics); needs n >= 2
// Feeding (demo numerics, the Level-A ModelRunner):
//   default   the whole sequence is the prompt (prompt_len = n), prefilled in
//             calls of `chunk` rows (chunk 0: one call, or calls of
//             kMaxTeacherForcedCall rows when n is larger; the engine is
//             row-invariant, so the split does not change any value)
//   decode    t[0] is a one-token prompt (prompt_len = 1), every later token
//             its own one-row decode step (list layout Wc = W, model.md §0.4.7)
//   mtp       after each main call over positions [p0, p0+c), the MTP layer
//             runs over the rows p in [p0, min(p0+c, n-1)) with tokens t[p+1]
//             and the Xfinal rows of that call (one MTP row per decode step)
// Reference numerics: the same feeding through ReferenceModel (Level A, its own plain caches).
// Float numerics (Level B): float_forward over the whole sequence; chunk and
// decode are validated and accepted but do not change Level-B results.
//
// Decisions: every discrete decision of the run, main block and (with mtp)
// MTP block: kind moe = the routed experts of the token at pos in layer L in
// the order the engine produced them (hash layers included), kind idx = the
// compressed entries the indexer picked for the query at pos in list order
// (CSA layers only, one entry per row, empty while no entry is visible). The
// MTP block is layer 0. With mtp the main block's decisions are listed too:
// the MTP logits depend on them through Xfinal, so replay needs both.
// With dspark, the drafter's too (block dspark: the stage MoE by stage, anchor and row, and
// the drafts by anchor and row, dspark.md §3.10).
// Sorted by (block main < mtp < dspark, layer, pos, kind idx < moe) in every numerics.
// Forced decisions (opt.forced) replace the listed ones in every numerics; the decisions
// reported are those used.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "model/decisions.h"
#include "model/weights.h"
#include "parallel/rank_groups.h"

namespace dsv4 {

// kDemo: the Level-A engine (ModelRunner); kReference: the Level-A whole-model reference
// (ReferenceModel: single-threaded, the `_ref` kernels); kFloat: the Level-B float_forward.
enum class Numerics { kDemo, kReference, kFloat };

// "demo" | "reference" | "float".
Result<Numerics> parse_numerics(std::string_view name);
std::string_view numerics_name(Numerics n);

// Largest prefill call of a teacher-forced run (rows per ModelRunner step).
constexpr int32_t kMaxTeacherForcedCall = 512;

struct TeacherForcedOptions {
  bool mtp = false;         // MTP head's logits [n-1, V] instead of the main [n, V]
  int32_t dspark_gamma = 0; // > 0: the DSpark drafter's logits [n-1, γ, V]
  int32_t chunk = 0;        // prefill rows per call; 0 = whole prompt
  bool decode = false;      // one-token prompt, then one decode step per token
  Numerics numerics = Numerics::kDemo;
  bool collect_decisions = false;
  const DecisionTable* forced = nullptr;  // decision replay (every numerics); nullptr: none
  int32_t n_threads = 1;    // demo numerics only
  // Demo numerics on several ranks (runtime.md §6): rank 0 owns the sequence and its
  // logits; the other ranks join the sharded seams. nullptr: one rank.
  RankGroups* ranks = nullptr;
};

struct TeacherForcedOutput {
  int64_t rows = 0;                  // n, or n-1 with mtp or dspark
  int64_t gamma = 0;                 // γ with dspark (logits [rows, γ, V]), else 0
  int64_t vocab = 0;                 // V
  std::vector<float> logits;         // [rows, V] or [rows, γ, V]
  std::vector<int32_t> drafts;       // [rows, γ] with dspark: the drafter's argmax chain
  std::vector<Decision> decisions;   // sorted as above; empty unless collected
};

// Errors: empty tokens; a token id outside [0, vocab_size) (names the id and its
// index); chunk < 0 or > kMaxTeacherForcedCall; decode together with chunk > 0;
// mtp with n < 2 or without an MTP layer; dspark with n < 2, without a DSpark drafter, with
// mtp; decisions at demo numerics; any error of the runner.
Result<TeacherForcedOutput> teacher_forced_logits(const ModelConfig& cfg, const Weights& w,
                                                  const std::vector<int32_t>& tokens,
                                                  const TeacherForcedOptions& opt);

}  // namespace dsv4
