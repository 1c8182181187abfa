// `dsv4 bench`: one run measures the machine (read bandwidth, dot peak), then times
// each case against it (report.h): real-size layers of each kind (layer_cases.h, one
// kind mapped at a time), the LM head, the engine's FP8/FP4 GEMV/GEMM beside oneDNN
// bf16 (gemm_cases.h, onednn_cases.h), end-to-end decode of the tiny model
// (tiny_e2e.h), 1-thread vs N-thread scaling; on request the real-size DSpark drafter
// (dspark_cases.h); speculative decoding end to end on the built-in models (spec_e2e.h);
// prints a table per case group, writes the JSON and the throughput-vs-batch PNG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/cpu.h"
#include "base/status.h"

namespace dsv4::bench {

// Case groups a run can select. The default run (no --cases) runs all but kOptInGroups:
// dspark maps its own real-size checkpoint (8.8 GiB resident on flash, written once) and
// times six pieces per (B, γ), 28 points at the default sets (up to 512 verify rows).
// spec-flash projects from the records of layer-*, head, dspark and spec-e2e (this run's or --from).
// grammar (grammar_cases.h) needs --tokenizer; request and request_stages (request_cases.h) take
// it when given.
inline constexpr const char* kCaseGroups[] = {"layer-csa", "layer-hca",  "head",    "gemm",
                                              "onednn",    "tiny-e2e",   "dspark",  "spec-e2e",
                                              "spec-flash", "grammar",   "request", "request_stages"};
inline constexpr const char* kOptInGroups[] = {"dspark", "spec-flash", "grammar", "request", "request_stages"};

struct BenchOptions {
  std::string preset = "flash";           // layer shapes: flash | tiny
  std::string cache_dir;                  // layer checkpoints live in <cache_dir>/<preset>-<kind>
  std::string tiny_model_dir;             // tiny-e2e's model (empty: tiny-e2e skipped)
  std::string spec_model_dir;             // spec-e2e: plain and MTP (models/kjv-9m)
  std::string spec_dspark_dir;            // spec-e2e: DSpark (models/kjv-9m-dspark)
  std::vector<std::string> spec_prompts;  // spec-e2e: prompt texts (the CLI's demo prompts)
  std::vector<std::string> cases;         // kCaseGroups subset; empty: all but kOptInGroups
  std::vector<int> batches = {1, 2, 4, 8, 16, 32, 64};
  std::vector<int> spec_rows = {1, 2, 4, 8};
  std::vector<int> gammas = {1, 3, 5, 7};  // DSpark drafts per round (dspark, spec-e2e)
  std::vector<int> spec_batches = {1, 4};  // spec-e2e: B
  int spec_tokens = 64;                    // spec-e2e: tokens generated per prompt
  std::vector<int> prefill = {64, 256, 1024};
  std::vector<int> gemm_rows = {1, 4, 16, 64};
  std::vector<int64_t> bandwidth_mib = {1024, 2048, 4096};
  int repeats = 5;
  int threads = 2;
  int context = 128;                      // prompt positions of every decode sequence
  int64_t gemm_span_mib = 96;
  bool scaling = true;                    // also time the scaling subset at 1 thread
  bool run_profile = false;               // layer decode cases: print the per-run breakdown
  std::string peer_ggml;                  // gemm: ggml peer executables here (ggml_peer.h); empty: none
  int peer_rounds = 5;                    // gemm with a peer: interleaved rounds
  std::vector<std::string> from;          // spec-flash: earlier bench JSON files to project from
  std::string json;                       // empty: no JSON (and no PNG)
  std::string tokenizer;                  // grammar: the vocabulary's tokenizer.json
  Isa isa = detect_isa();                 // the kernels' variant (set by the caller) and the probes'
};

// The --quick sets: B {1, 4, 16}, S {1, 2}, γ {1, 5}, prefill {64}, T {1, 16}, one 1 GiB
// buffer, 3 repeats (flags given explicitly still win; the caller applies them after).
void apply_quick(BenchOptions& o);

// Whether the run times `group` (--cases, or the default run).
bool selected(const BenchOptions& o, const std::string& group);

Status run_bench(const BenchOptions& o);

}  // namespace dsv4::bench
