// What `generate` and `serve` share: the engine's flags (limits, MTP, ISA, ranks) and loading
// a checkpoint on every rank of the job.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "model/limits.h"
#include "model/weights.h"
#include "runtime/engine.h"
#include "ranks.h"

namespace CLI {
class App;
}

namespace dsv4::cli {

struct EngineFlags {
  std::string model;
  bool mtp = false;         // --mtp, the alias of --spec mtp
  std::string spec = "none";  // --spec none|mtp|dspark
  int gamma = 0;            // --gamma: DSpark drafts per round (0: the checkpoint's dspark_block_size)
  std::string verify = "exact";  // --verify exact|rejection (DSpark, dspark.md §4.3)
  int batch_size = 4;
  int threads = 2;
  int max_chunk = 64;
  int64_t max_context = 1024;
  int page_tokens = 128;
  int64_t cache_blocks = 0;
  int prefix_blocks = 0;
  std::string isa = "auto";
  RankFlags ranks;
  int64_t cp_prefill = 64;
  double test_min_step_seconds = 0;  // hidden test hook: EngineOptions::min_step_seconds
};

// --model, --mtp, --batch-size, --threads, --max-chunk, --max-context, --page-tokens,
// --cache-blocks, --prefix-blocks, --isa, --tp/--dp/--ep, --cp-prefill (defaults: *f).
void add_engine_options(CLI::App* sub, EngineFlags* f);
// The hidden test hooks (--test-min-step-seconds: EngineOptions::min_step_seconds).
void add_test_hooks(CLI::App* sub, double* min_step_seconds);
// The deployment limits the flags give (errors name the flag).
// world: the ranks of the job (--batch-size and --cache-blocks are per rank).
Result<Limits> engine_limits(const EngineFlags& f, int world);
// The engine options the flags give (speculative decoding, ranks, context-parallel prefill, test
// hooks); errors name the flag (--gamma without --spec dspark, --mtp with --spec other than mtp).
// The caller sets the tokenizer.
Result<EngineOptions> engine_options(const EngineFlags& f, const ModelConfig& cfg, RankSession& rs);
// "MTP" / "DSpark (gamma G)" / "" for the run's summary line.
std::string spec_label(const EngineOptions& eo);

// --frequency-penalty, --presence-penalty, --repetition-penalty, --logit-bias ID=BIAS... (generate
// and chat; docs/numerics.md "Penalties and logit_bias").
struct PenaltyFlags {
  LogitAdjustments adjust;
  std::vector<std::string> logit_bias;  // "ID=BIAS"
  // adjust with logit_bias parsed and sorted by id, its ranges checked for a vocabulary of V.
  Result<LogitAdjustments> adjustments(int64_t V) const;
};
void add_penalty_options(CLI::App* sub, PenaltyFlags* f);

// A checkpoint loaded on every rank (a failure on any rank fails all of them): config and
// weights; the topology bound to the model.
struct LoadedModel {
  std::string dir;
  ModelConfig cfg;
  Weights weights;
};
// Starts with --isa; the result stays put (the engine keeps references into it).
Result<std::unique_ptr<LoadedModel>> load_model(RankSession& rs, const EngineFlags& f);
// The job's rank session and the model loaded on every rank of it (generate, serve).
struct ModelSession {
  std::unique_ptr<RankSession> ranks;
  std::unique_ptr<LoadedModel> model;
};
Result<ModelSession> start_model_session(const EngineFlags& f);

// Ranks other than 0: step with rank 0 until it stops the engine; the exit code.
int follow_rank0(Engine& engine, RankSession& rs);

}  // namespace dsv4::cli
