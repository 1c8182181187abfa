// ReferenceModel: the whole-model Level-A oracle of ModelRunner, as each kernel's `_ref` is
// the oracle of its engine. Same calls and the same step semantics (model.md §2, §11, §12;
// runtime.md §1-§2): prefill chunks, decode rows, speculative rows, the MTP layer, several
// requests per step, decision replay. Built only from the `_ref` kernels, single-threaded,
// with its own plain caches:
//   window KV          [positions, Dh] per layer and sequence, by absolute position (no ring)
//   compressed KV      [entries, Dh], indexer keys [entries, Di], by entry index
//   compressor inputs  A and B (ape included) of every position seen, [positions, κc]; each
//                      row runs the streaming compressor on a state rebuilt from them, so any
//                      position can be recomputed (a step may start at any p0 <= length:
//                      rejected speculative rows are simply overwritten)
// Requests of a step are independent sequences; the reference runs them one after the other
// and writes their rows in step order. It allocates freely and is meant for tests and
// `dsv4 logits --numerics reference`, not for serving.
//
// Where the engine and the reference may legitimately differ (model.md §0.3): the summation
// order of reductions (so logits agree to a tolerance, not bit for bit) and, through it,
// near-tied decisions. Decision replay (DecisionIO::forced) holds decisions equal; the
// reference then reports every forced decision that differs from its own choice, with the
// score gap between the two, so a test can tell a near-tie from a wrong decision.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "cache/step_metadata.h"
#include "model/config.h"
#include "model/decisions.h"
#include "model/weights.h"
#include "numeric/bf16.h"

namespace dsv4 {

// A forced decision that differs from the one the reference would have made.
struct ForcedDifference {
  Decision forced;              // key and the ids used
  std::vector<int32_t> own;     // the reference's own choice, in its order
  // max over slots k of |key(own[k]) − key(forced[k])|, key = the ranking score in the
  // reference (idx: the bf16 indexer score; moe: f32(s + bias)); +inf on a hash layer,
  // whose choice is a table lookup. `scale`: the largest |key| of the compared ids.
  float gap = 0.0f;
  float scale = 0.0f;
};

class ReferenceModel {
 public:
  static Result<std::unique_ptr<ReferenceModel>> create(const ModelConfig& cfg, const Weights& w);
  ~ReferenceModel();

  Status start_sequence(int32_t seq);
  void end_sequence(int32_t seq);

  // As ModelRunner::forward / forward_mtp. A request's p0 may be at most the positions the
  // sequence has seen (main model, resp. MTP layer): no gaps. `features_out` (a DSpark
  // checkpoint; may be null): the target features H(p) [rows, |Lt|·D] of every row
  // (dspark.md §2, A17).
  Status forward(std::span<const StepRequest> reqs, float* logits, bf16* xfinal_out,
                 const DecisionIO& dec = {}, bf16* features_out = nullptr);
  Status forward_mtp(std::span<const StepRequest> reqs, const bf16* X, float* logits,
                     const DecisionIO& dec = {});

  // The DSpark drafter (dspark.md §3, Level A §3.10), the oracle of the engine's:
  // dspark_commit writes the context rows c_s(p) of positions p0 .. p0+n-1 from their target
  // features [n, |Lt|·D] into every stage's rows of the sequence (by absolute position, so
  // commits may repeat or arrive in any order); dspark_propose runs one round for anchor a
  // (every position of max(0, a-W+1) .. a committed) with anchor token x0 and γ rows:
  // lambda [γ, V] (may be null) and drafts [γ]; dec forces and logs the round's decisions
  // (stage MoE and drafts, keyed by anchor, dspark.md §3.10; a forced draft continues the chain).
  Status dspark_commit(int32_t seq, int64_t p0, int64_t n, const bf16* features);
  Status dspark_propose(int32_t seq, int64_t a, int32_t x0, int gamma, float* lambda, int32_t* drafts,
                        const DecisionIO& dec = {});
  int64_t feature_width() const;  // |Lt|·D (0 without a DSpark drafter)

  int64_t vocab_size() const { return cfg_.vocab_size; }
  int64_t stream_width() const { return cfg_.hc_mult * cfg_.hidden_size; }  // N·D

  // Forced decisions that differed from the reference's own, since creation.
  const std::vector<ForcedDifference>& forced_differences() const { return differences_; }

 private:
  struct Sequence;
  struct Request;  // one request's rows of a step
  static Request request_of(const StepRequest& q);
  ReferenceModel(const ModelConfig& cfg, const Weights& w);
  Status check_step(std::span<const StepRequest> reqs, bool mtp) const;
  void run_block(const LayerWeights& lw, bool mtp_block, Sequence& sq, const Request& rq, bf16* X,
                 const DecisionIO& dec);
  // Block_l with `attend(a, out)` as the attention sub-block (a, out [T, D]).
  void run_block_with(const LayerWeights& lw, bool mtp_block, const Request& rq, bf16* X, const DecisionIO& dec,
                      const std::function<void(const bf16*, bf16*)>& attend);
  // A17: if layer l is a DSpark target layer, its slice of H for rows X [T, N·D] (row stride
  // feature_width()).
  void stream_means(int l, const bf16* X, int64_t T, bf16* features) const;
  void dspark_attention(const LayerWeights& lw, const std::vector<bf16>& ctx, int64_t n_ctx, const Request& rq,
                        const bf16* a, bf16* out);
  void attention(const LayerWeights& lw, bool mtp_block, Sequence& sq, const Request& rq, const bf16* a,
                 bf16* out, const DecisionIO& dec);
  void moe(const LayerWeights& lw, bool mtp_block, const Request& rq, const bf16* f, bf16* out,
           const DecisionIO& dec);
  void head(const HcParams& hc, const bf16* norm, const bf16* X, int64_t T, float* logits) const;

  const ModelConfig& cfg_;
  const Weights& w_;
  std::vector<float> inv_main_, inv_compress_;  // RoPE tables of both profiles
  std::map<int32_t, std::unique_ptr<Sequence>> seqs_;
  std::vector<ForcedDifference> differences_;
};

}  // namespace dsv4
