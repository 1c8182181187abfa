// The `dsv4 bench` run (bench_run.h).
#include "bench_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/cpu.h"
#include "base/thread_pool.h"
#include "dspark_cases.h"
#include "gemm_cases.h"
#include "grammar_cases.h"
#include "request_cases.h"
#include "ggml_peer.h"
#include "layer_cases.h"
#include "layer_checkpoint.h"
#include "onednn_cases.h"
#include "probe.h"
#include "report.h"
#include "spec_e2e.h"
#include "spec_flash.h"
#include "tiny_e2e.h"

namespace dsv4::bench {
namespace {

constexpr int kProbeReps = 5;
constexpr double kPeakSeconds = 0.2;

std::vector<int> thread_counts(const BenchOptions& o) {
  if (o.scaling && o.threads > 1) return {1, o.threads};
  return {o.threads};
}

Machine probe_machine(const BenchOptions& o) {
  Machine m;
  const Isa isa = o.isa;
  m.isa = isa_name(isa);
  m.read_probe = read_probe_name(isa);
  m.dot_probe = dot_probe_name(isa);
  for (int t : thread_counts(o)) {
    ThreadPool pool(t);
    double best = 0;
    for (int64_t mib : o.bandwidth_mib) {
      const int64_t bytes = mib << 20;
      const double gbps = read_bandwidth_gbps(pool, bytes, kProbeReps, isa);
      m.bandwidth.push_back({t, bytes, gbps});
      best = std::max(best, gbps);
    }
    m.read_gbps[t] = best;
    m.peak_gflops[t] = dot_peak_gflops(pool, kProbeReps, kPeakSeconds, isa);
  }
  return m;
}

void add_cases(std::vector<CaseResult>& all, std::vector<CaseResult> some, const Machine& m) {
  for (CaseResult& c : some) finish(c, m);
  all.insert(all.end(), some.begin(), some.end());
}

std::vector<CaseResult> slice(const std::vector<CaseResult>& all, size_t from) {
  return std::vector<CaseResult>(all.begin() + static_cast<std::ptrdiff_t>(from), all.end());
}

// The checkpoint of a layer kind, written once, mapped and touched.
Result<std::unique_ptr<MappedLayer>> map_kind(const BenchOptions& o, const ModelConfig& cfg, LayerKind kind,
                                              const std::string& name) {
  const std::string dir = fmt::format("{}/{}-{}", o.cache_dir, o.preset, layer_kind_name(kind));
  DSV4_RETURN_IF_ERROR(ensure_layer_checkpoint(cfg, dir));
  Result<std::unique_ptr<MappedLayer>> layer = MappedLayer::open(dir, cfg);
  if (!layer.ok()) return layer.status();
  std::printf("\n%s: %s mapped and touched (RSS %.2f GiB)\n", name.c_str(), dir.c_str(),
              static_cast<double>(current_rss_bytes()) / (1 << 30));
  std::fflush(stdout);
  return layer;
}

void drop_kind(std::unique_ptr<MappedLayer>& layer, const std::string& name) {
  layer.reset();  // munmap + POSIX_FADV_DONTNEED
  std::printf("%s dropped: RSS %.2f GiB, peak RSS so far %.2f GiB\n", name.c_str(),
              static_cast<double>(current_rss_bytes()) / (1 << 30), static_cast<double>(peak_rss_bytes()) / (1 << 30));
}

// One layer kind: mapped, timed, dropped.
Status run_layer_kind(const BenchOptions& o, LayerKind kind, const Machine& m, bool time_layer, bool with_head,
                      std::vector<CaseResult>& all) {
  Result<ModelConfig> cfg = bench_layer_config(o.preset, kind);
  if (!cfg.ok()) return cfg.status();
  const std::string name = fmt::format("layer-{}", layer_kind_name(kind));
  Result<std::unique_ptr<MappedLayer>> layer = map_kind(o, cfg.value(), kind, name);
  if (!layer.ok()) return layer.status();
  const size_t first = all.size();
  if (time_layer) {
    StepSets sets{o.batches, o.spec_rows, o.prefill, o.repeats, 2, o.context};
    sets.run_profile = o.run_profile;
    sets.read_gbps = m.read(o.threads);
    Result<std::vector<CaseResult>> cases = run_layer_cases(cfg.value(), (*layer)->weights(), name, sets, o.threads);
    if (!cases.ok()) return cases.status();
    add_cases(all, std::move(cases.value()), m);
  }
  if (time_layer && o.scaling && o.threads > 1) {
    const StepSets one{{1}, {1}, {}, o.repeats, 2, o.context};
    Result<std::vector<CaseResult>> c1 = run_layer_cases(cfg.value(), (*layer)->weights(), name, one, 1);
    if (!c1.ok()) return c1.status();
    add_cases(all, std::move(c1.value()), m);
  }
  if (with_head) {
    add_cases(all, run_head_cases(cfg.value(), (*layer)->weights(), o.batches, o.repeats, o.threads), m);
    if (o.scaling && o.threads > 1) add_cases(all, run_head_cases(cfg.value(), (*layer)->weights(), {1}, o.repeats, 1), m);
  }
  print_cases(fmt::format("{} ({} preset, one layer; head: {} vocabulary rows), median of {}", name, o.preset,
                          cfg.value().vocab_size, o.repeats),
              slice(all, first));
  drop_kind(layer.value(), name);
  return Status();
}

// The DSpark drafter: its checkpoint mapped, timed, dropped.
Status run_dspark(const BenchOptions& o, const Machine& m, std::vector<CaseResult>& all) {
  Result<ModelConfig> cfg = bench_layer_config(o.preset, LayerKind::kDspark);
  if (!cfg.ok()) return cfg.status();
  Result<ModelConfig> full = bench_preset_config(o.preset, LayerKind::kDspark);
  if (!full.ok()) return full.status();
  Result<std::unique_ptr<MappedLayer>> layer = map_kind(o, cfg.value(), LayerKind::kDspark, "dspark");
  if (!layer.ok()) return layer.status();
  const size_t first = all.size();
  const DsparkSets sets{o.batches, o.gammas, o.repeats, 1, o.context};
  Result<std::vector<CaseResult>> cases =
      run_dspark_cases(cfg.value(), full.value(), (*layer)->weights(), sets, o.threads);
  if (!cases.ok()) return cases.status();
  add_cases(all, std::move(cases.value()), m);
  print_cases(fmt::format("dspark ({} preset: one CSA target layer, one stage, head over {} vocabulary rows, Markov "
                          "rank {}), median of {}",
                          o.preset, cfg->vocab_size, cfg->dspark->markov_rank, o.repeats),
              slice(all, first));
  print_dspark_shares(slice(all, first), full.value());
  drop_kind(layer.value(), "dspark");
  return Status();
}

Status run_gemms(const BenchOptions& o, const Machine& m, std::vector<CaseResult>& all,
                 std::vector<std::string>& notes) {
  Result<ModelConfig> cfg = bench_layer_config(o.preset, LayerKind::kCsa);
  if (!cfg.ok()) return cfg.status();
  const std::vector<GemmShape> shapes = gemm_shapes(cfg.value());
  const GemmSets sets{o.gemm_rows, o.repeats, o.gemm_span_mib << 20};
  const size_t first = all.size();
  for (int t : thread_counts(o)) {
    if (selected(o, "gemm") && !o.peer_ggml.empty() && t == o.threads) {
      const PeerSets ps{o.peer_ggml, o.gemm_rows, o.peer_rounds, o.repeats, o.gemm_span_mib << 20};
      Result<std::vector<CaseResult>> g = run_gemm_with_peer(shapes, ps, t, notes);
      if (!g.ok()) return g.status();
      add_cases(all, std::move(g.value()), m);
    } else if (selected(o, "gemm")) {
      add_cases(all, run_gemm_cases(shapes, sets, t), m);
    }
    if (!selected(o, "onednn")) continue;
    if (!onednn_available()) {
      if (t == o.threads) {
        notes.push_back("oneDNN rows skipped: built without libdnnl-dev");
        std::printf("\noneDNN: not found at configure time (libdnnl-dev); its rows are skipped\n");
      }
      continue;
    }
    Result<std::vector<CaseResult>> d = run_onednn_cases(shapes, sets, t);
    if (!d.ok()) {  // e.g. no bf16 matmul on a CPU without AVX-512: the comparison rows only
      if (t == o.threads) {
        notes.push_back(fmt::format("oneDNN rows skipped: {}", d.message()));
        std::printf("\n%s; its rows are skipped\n", d.message().c_str());
      }
      continue;
    }
    add_cases(all, std::move(d.value()), m);
  }
  // Side by side: engine and oneDNN rows of one shape and T next to each other.
  std::vector<CaseResult> rows = slice(all, first);
  std::stable_sort(rows.begin(), rows.end(), [](const CaseResult& a, const CaseResult& b) {
    return std::tie(a.threads, a.shape, a.T) < std::tie(b.threads, b.shape, b.T);
  });
  print_cases(fmt::format("core GEMV/GEMM at the {} shapes: engine FP8/FP4 beside oneDNN bf16{}, median of {} passes",
                          o.preset, o.peer_ggml.empty() ? "" : " and ggml", o.repeats),
              rows);
  if (!o.peer_ggml.empty()) print_peer_comparison(rows, o.peer_rounds);
  return Status();
}

// After the layer kinds: verify overhead per decode record, barriers per whole-model step
// (the preset's layers by kind; SWA layers, which the bench does not time, counted with the
// HCA layer's runs, an upper bound: an SWA layer runs a subset of an HCA layer's phases).
Status print_layer_summaries(const BenchOptions& o, const Machine& m, std::vector<CaseResult>& all) {
  annotate_verify_overhead(all, m);
  print_verify_overhead(all);
  Result<ModelConfig> full = bench_preset_config(o.preset, LayerKind::kCsa);
  if (!full.ok()) return full.status();
  int swa = 0, csa = 0, hca = 0;
  for (int l = 0; l < full->num_hidden_layers; ++l) {
    const int r = full->layer_ratio(l);
    (r == 0 ? swa : r == 4 ? csa : hca) += 1;
  }
  std::vector<LayerCount> layers{{"layer-csa", "", csa}, {"layer-hca", "", hca}};
  if (swa > 0) layers.push_back({"layer-swa", "layer-hca", swa});
  print_step_barriers(all, layers, fmt::format("{} ({} CSA, {} HCA, {} SWA layers)", o.preset, csa, hca, swa));
  return Status();
}

// Every case timed at 1 thread beside its N-thread twin.
void print_scaling(const std::vector<CaseResult>& all, int threads) {
  std::map<std::tuple<std::string, std::string, std::string, int, int>, const CaseResult*> multi;
  for (const CaseResult& c : all)
    if (c.threads == threads) multi[{c.name, c.phase, c.shape, c.B, c.S}] = &c;
  bool header = false;
  for (const CaseResult& c : all) {
    if (c.threads != 1) continue;
    auto it = multi.find({c.name, c.phase, c.shape, c.B, c.S});
    if (it == multi.end()) continue;
    if (!header) {
      std::printf("\nscaling: 1 thread vs %d threads (same case)\n%-12s %-18s %4s %2s %10s %10s %8s\n", threads, "case",
                  "shape", "B", "S", "ms 1T", fmt::format("ms {}T", threads).c_str(), "speed-up");
      header = true;
    }
    std::printf("%-12s %-18s %4d %2d %10.3f %10.3f %7.2fx\n", c.name.c_str(), c.shape.c_str(), c.B, c.S, c.step_ms,
                it->second->step_ms, it->second->step_ms > 0 ? c.step_ms / it->second->step_ms : 0.0);
  }
}

}  // namespace

bool selected(const BenchOptions& o, const std::string& group) {
  if (!o.cases.empty()) return std::find(o.cases.begin(), o.cases.end(), group) != o.cases.end();
  return std::find(std::begin(kOptInGroups), std::end(kOptInGroups), group) == std::end(kOptInGroups);
}

void apply_quick(BenchOptions& o) {
  o.batches = {1, 4, 16};
  o.spec_rows = {1, 2};
  o.gammas = {1, 5};
  o.prefill = {64};
  o.gemm_rows = {1, 16};
  o.bandwidth_mib = {1024};
  o.repeats = 3;
}

Status run_bench(const BenchOptions& o) {
  for (const std::string& c : o.cases)
    if (std::find_if(std::begin(kCaseGroups), std::end(kCaseGroups), [&](const char* g) { return c == g; }) ==
        std::end(kCaseGroups))
      return Status::errorf("--cases: unknown group '{}' (known: {})", c, fmt::join(kCaseGroups, ", "));
  if (!o.from.empty() && !selected(o, "spec-flash"))
    return Status::errorf("--from: only --cases spec-flash reads earlier records");
  // spec-flash alone from earlier records: their machine, nothing timed.
  const bool only_projection = !o.from.empty() && o.cases == std::vector<std::string>{"spec-flash"};
  std::vector<BenchRecords> earlier;
  for (const std::string& f : o.from) {
    Result<BenchRecords> r = read_bench_json(f);
    if (!r.ok()) return r.status();
    earlier.push_back(std::move(r.value()));
  }
  const Machine m = only_projection ? earlier.front().machine : probe_machine(o);
  if (only_projection) std::printf("machine: from %s (isa %s)\n", o.from.front().c_str(), m.isa.c_str());
  else print_machine(m);
  std::vector<CaseResult> all;
  std::vector<std::string> notes;
  const bool head = selected(o, "head");
  bool head_done = false;
  for (LayerKind kind : {LayerKind::kCsa, LayerKind::kHca}) {
    const bool layer = selected(o, fmt::format("layer-{}", layer_kind_name(kind)));
    if (!layer && !(head && !head_done)) continue;
    DSV4_RETURN_IF_ERROR(run_layer_kind(o, kind, m, layer, head && !head_done, all));
    head_done = head_done || head;
  }
  if (selected(o, "layer-csa") || selected(o, "layer-hca")) DSV4_RETURN_IF_ERROR(print_layer_summaries(o, m, all));
  if (selected(o, "gemm") || selected(o, "onednn")) DSV4_RETURN_IF_ERROR(run_gemms(o, m, all, notes));
  if (selected(o, "tiny-e2e")) {
    if (o.tiny_model_dir.empty()) {
      notes.push_back("tiny-e2e skipped: no model directory");
    } else {
      const size_t first = all.size();
      for (int t : thread_counts(o)) {
        Result<std::vector<CaseResult>> c = run_tiny_e2e(o.tiny_model_dir, o.batches, 2, o.repeats, t);
        if (!c.ok()) return c.status();
        add_cases(all, std::move(c.value()), m);
      }
      print_cases(fmt::format("tiny-e2e: Engine decode steps of the built-in model, median of {}", o.repeats),
                  slice(all, first));
    }
  }
  if (selected(o, "dspark")) DSV4_RETURN_IF_ERROR(run_dspark(o, m, all));
  if (selected(o, "grammar")) {
    if (o.tokenizer.empty()) return Status::error("--cases grammar needs --tokenizer (a tokenizer.json)");
    DSV4_RETURN_IF_ERROR(run_grammar_cases(o.tokenizer, o.repeats, all));
  }
  if (selected(o, "request")) DSV4_RETURN_IF_ERROR(run_request_cases(o.tokenizer, o.repeats));
  if (selected(o, "request_stages")) DSV4_RETURN_IF_ERROR(run_request_stages(o.tokenizer, o.repeats));
  if (selected(o, "spec-e2e")) {
    if (o.spec_model_dir.empty() || o.spec_dspark_dir.empty()) {
      notes.push_back("spec-e2e skipped: no model directories");
    } else {
      const SpecE2eSets sets{o.spec_batches, o.gammas, o.spec_tokens, o.repeats, o.threads};
      Result<std::vector<CaseResult>> c = run_spec_e2e(o.spec_model_dir, o.spec_dspark_dir, o.spec_prompts, sets);
      if (!c.ok()) return c.status();
      print_spec_e2e(c.value(), sets);
      add_cases(all, std::move(c.value()), m);
    }
  }
  if (selected(o, "spec-flash")) {
    std::vector<CaseResult> inputs = all;
    for (const BenchRecords& r : earlier) inputs.insert(inputs.end(), r.cases.begin(), r.cases.end());
    Result<ModelConfig> full = bench_preset_config(o.preset, LayerKind::kCsa);
    if (!full.ok()) return full.status();
    std::vector<CaseResult> rows = project_spec_flash(inputs, m, full.value(), o.threads, notes);
    for (const std::string& n : notes)
      if (n.rfind("spec-flash", 0) == 0) std::printf("%s\n", n.c_str());
    if (rows.empty()) return Status::errorf("spec-flash: nothing to project from (see the notes above)");
    print_spec_flash(rows, o.preset);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  if (o.scaling && o.threads > 1) print_scaling(all, o.threads);
  const int64_t peak = peak_rss_bytes();
  std::printf("\npeak RSS %.2f GiB\n", static_cast<double>(peak) / (1 << 30));
  if (o.json.empty()) return Status();
  DSV4_RETURN_IF_ERROR(write_json(o.json, m, all, peak, notes));
  std::printf("wrote %s\n", o.json.c_str());
  const std::string png = std::filesystem::path(o.json).replace_extension(".png").string();
  if (std::none_of(all.begin(), all.end(), [&](const CaseResult& c) { return plottable(c, o.threads); })) {
    std::printf("no decode rows at S = 1 and %d threads: no PNG drawn\n", o.threads);
    return Status();
  }
  const std::string gnuplot = find_gnuplot();
  if (gnuplot.empty()) {
    std::printf("gnuplot not found (Debian: gnuplot-nox): no PNG drawn\n");
    return Status();
  }
  DSV4_RETURN_IF_ERROR(plot_throughput(gnuplot, png, all, o.threads));
  std::printf("wrote %s\n", png.c_str());
  return Status();
}

}  // namespace dsv4::bench
