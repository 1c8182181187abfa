// dsv4 bench [--preset flash|tiny] [--cases G,...] [--batches B,...] [--spec-rows S,...]
//            [--gammas G,...] [--spec-batches B,...] [--spec-tokens N]
//            [--prefill N,...] [--gemm-rows T,...] [--bandwidth-mib M,...] [--repeats N]
//            [--threads N] [--context N] [--quick] [--no-scaling] [--run-profile] [--cache-dir DIR] [--isa I]
//            [--json FILE]:
// speed against the machine's own roofline (bench/bench_run.h). Layer checkpoints are
// cached under <user cache>/bench unless --cache-dir; tiny-e2e runs the built-in model,
// spec-e2e the built-in model and its DSpark form (models/kjv-9m, models/kjv-9m-dspark).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_run.h"
#include "commands.h"

namespace dsv4::cli {

Command add_bench(CLI::App& app) {
  auto opts = std::make_shared<bench::BenchOptions>();
  auto quick = std::make_shared<bool>(false);
  auto no_scaling = std::make_shared<bool>(false);
  auto isa = std::make_shared<std::string>("auto");
  CLI::App* sub = app.add_subcommand(
      "bench", "Measure bandwidth and compute peak, then time real-size layers, the LM head, the core "
               "GEMV/GEMM (beside oneDNN), tiny end-to-end decode, speculative decoding end to end and (--cases "
               "dspark) the real-size DSpark drafter against them");
  sub->add_option("--preset", opts->preset, "Layer shapes")->check(CLI::IsMember({"flash", "tiny"}))->capture_default_str();
  sub->add_option("--cases", opts->cases,
                  "Case groups: layer-csa, layer-hca, head, gemm, onednn, tiny-e2e, spec-e2e, dspark, spec-flash, "
                  "grammar, request, request_stages (default: all but dspark, spec-flash, grammar, request and "
                  "request_stages)")
      ->delimiter(',');
  sub->add_option("--batches", opts->batches, "Decode requests per step (B)")->delimiter(',')->check(CLI::Range(1, 1024));
  sub->add_option("--spec-rows", opts->spec_rows, "Rows per request in decode (S)")->delimiter(',')->check(CLI::Range(1, 64));
  sub->add_option("--gammas", opts->gammas, "DSpark drafts per round (dspark, spec-e2e)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  sub->add_option("--spec-batches", opts->spec_batches, "spec-e2e: requests per step (B)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  sub->add_option("--spec-tokens", opts->spec_tokens, "spec-e2e: tokens generated per prompt")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  sub->add_option("--prefill", opts->prefill, "Prefill chunk rows")->delimiter(',')->check(CLI::Range(1, 8192));
  sub->add_option("--gemm-rows", opts->gemm_rows, "GEMV/GEMM rows (T)")->delimiter(',')->check(CLI::Range(1, 4096));
  sub->add_option("--bandwidth-mib", opts->bandwidth_mib, "Read-probe buffer sizes, MiB (>= 1024 for a DRAM figure)")
      ->delimiter(',')->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--gemm-span-mib", opts->gemm_span_mib, "MiB of weight copies per GEMM shape")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))->capture_default_str();
  sub->add_option("--repeats", opts->repeats, "Timed steps per case (median)")->check(CLI::Range(1, 1000))->capture_default_str();
  sub->add_option("--threads", opts->threads, "Threads")->check(CLI::Range(1, 1024))->capture_default_str();
  sub->add_option("--context", opts->context, "Prompt positions of every decode sequence")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  sub->add_flag("--quick", *quick,
                "B 1,4,16; S 1,2; gamma 1,5; prefill 64; T 1,16; one 1 GiB probe; 3 repeats (explicit flags win)");
  sub->add_flag("--no-scaling", *no_scaling, "Skip the 1-thread runs");
  sub->add_flag("--run-profile", opts->run_profile,
                "Layer decode cases: print each thread-pool run's time, bytes and GB/s per step");
  sub->add_option("--peer-ggml", opts->peer_ggml,
                  "gemm: time ggml's mul_mat beside the engine, interleaved (DIR holds peer_plain and/or peer_lf "
                  "built from ../shared/tools/ggml_peer)")
      ->check(CLI::ExistingDirectory);
  sub->add_option("--peer-rounds", opts->peer_rounds, "gemm with --peer-ggml: interleaved rounds (median)")
      ->check(CLI::Range(1, 100))->capture_default_str();
  sub->add_option("--from", opts->from,
                  "spec-flash: project from these earlier --json files (repeatable) instead of this run's records")
      ->check(CLI::ExistingFile);
  sub->add_option("--cache-dir", opts->cache_dir, "Layer checkpoints (default: <user cache>/dsv4/bench)");
  sub->add_option("--tokenizer", opts->tokenizer,
                  "grammar: the tokenizer.json whose vocabulary the structured-output masks cover (request: the "
                  "tokenizer of its bodies, else the tiny one)");
  sub->add_option("--isa", *isa, kIsaHelp)->capture_default_str();
  sub->add_option("--json", opts->json, "Write one record per case here, and the throughput PNG beside it");
  return {sub, [opts, quick, no_scaling, isa, sub]() {
    bench::BenchOptions o = *opts;
    if (*quick) {
      bench::apply_quick(o);
      // Explicit flags win over --quick.
      if (sub->count("--batches")) o.batches = opts->batches;
      if (sub->count("--spec-rows")) o.spec_rows = opts->spec_rows;
      if (sub->count("--gammas")) o.gammas = opts->gammas;
      if (sub->count("--prefill")) o.prefill = opts->prefill;
      if (sub->count("--gemm-rows")) o.gemm_rows = opts->gemm_rows;
      if (sub->count("--bandwidth-mib")) o.bandwidth_mib = opts->bandwidth_mib;
      if (sub->count("--repeats")) o.repeats = opts->repeats;
    }
    o.scaling = !*no_scaling;
    // The kernels' variant (checked against the portable one first) and the probes'.
    if (const Status st = select_isa(*isa); !st.ok()) return fail(st);
    o.isa = parse_isa(*isa).value();
    Result<std::string> root = user_cache_root();
    if (o.cache_dir.empty()) {
      if (!root.ok()) return fail(root.status().with_context("--cache-dir not given"));
      o.cache_dir = root.value() + "/bench";
    }
    if (bench::selected(o, "tiny-e2e")) {
      Result<std::string> dir = resolve_model_dir("");
      if (!dir.ok()) return fail(dir.status());
      o.tiny_model_dir = dir.value();
    }
    if (bench::selected(o, "spec-e2e")) {
      // The source tree's models (not $DSV4_MODEL): the DSpark form must hold the same main model.
      const std::filesystem::path builtin = DSV4_BUILTIN_MODEL_DIR;
      o.spec_model_dir = builtin.string();
      o.spec_dspark_dir = (builtin.parent_path() / "kjv-9m-dspark").string();
      o.spec_prompts = kDemoTexts;
    }
    const Status st = bench::run_bench(o);
    return st.ok() ? 0 : fail(st);
  }};
}

}  // namespace dsv4::cli
