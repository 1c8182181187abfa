// Results of `dsv4 bench`: one CaseResult per timed case, the machine's denominators,
// the printed tables, the JSON file and the throughput-vs-batch PNG (gnuplot).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "roofline.h"

namespace dsv4::bench {

// Denominators measured in the run, per thread count.
struct Machine {
  std::string isa, read_probe, dot_probe;
  struct BandwidthRow {
    int threads = 0;
    int64_t bytes = 0;
    double gbps = 0;
  };
  std::vector<BandwidthRow> bandwidth;  // every size probed
  std::map<int, double> read_gbps;      // threads -> best over sizes
  std::map<int, double> peak_gflops;    // threads -> dot peak
  double read(int threads) const { return read_gbps.count(threads) ? read_gbps.at(threads) : 0; }
  double peak(int threads) const { return peak_gflops.count(threads) ? peak_gflops.at(threads) : 0; }
};

struct CaseResult {
  std::string name;     // layer-csa, layer-hca, head, gemm-fp8, gemm-fp4, onednn-bf16, tiny-e2e,
                        // dspark-*, spec-e2e
  std::string phase;    // decode | prefill | gemm
  std::string shape;    // gemm cases: "wq_a 1024x4096"; dspark: "gamma 5"; spec-e2e: the variant
  int B = 0, S = 0, T = 0, threads = 0;
  double step_ms = 0;   // median of the repeats
  Cost cost;            // per step
  double experts_hit = -1;  // layer cases: mean distinct routed experts per step
  double pool_runs = -1;    // layer cases: thread-pool runs (each ends in a barrier) per step
  Fractions frac;       // filled by finish()
  double measured_tokens_per_s = -1;  // spec-e2e: generated tokens / wall time; -1: T / step_ms
  // Further JSON fields of the record: numbers, then lists of numbers.
  std::vector<std::pair<std::string, double>> extra;
  std::vector<std::pair<std::string, std::vector<double>>> extra_lists;
  double extra_value(const std::string& key) const {  // 0 when absent
    for (const auto& [k, v] : extra)
      if (k == key) return v;
    return 0;
  }
  double tokens_per_s() const {
    if (measured_tokens_per_s >= 0) return measured_tokens_per_s;
    return step_ms > 0 ? T / (step_ms / 1e3) : 0;
  }
};

// A case with step_ms = median(ms), T = B·S; cost per step.
CaseResult timed_case(std::string name, std::string phase, std::string shape, int B, int S, int threads,
                      const std::vector<double>& ms, const Cost& cost);

// Fills c.frac from its cost, time and the machine at its thread count.
void finish(CaseResult& c, const Machine& m);

double median(std::vector<double> v);

void print_machine(const Machine& m);
// A table of the cases (a title line, then one row per case).
void print_cases(const std::string& title, const std::vector<CaseResult>& cases);

// Verify overhead of every decode record with S > 1 against its S = 1 twin (same case, B,
// threads): (t_S / t_1) / (roof_S / roof_1), roof = max(bytes / bandwidth, flops / peak) at
// the record's thread count. 1 means the S-row step costs what its extra bytes and FLOPs
// cost; a speculative verify step pays the excess. Stored as the extra fields
// "verify_overhead" and "verify_time_ratio" (t_S / t_1); finish() must have run.
void annotate_verify_overhead(std::vector<CaseResult>& cases, const Machine& m);
// Those records as a table (nothing when none).
void print_verify_overhead(const std::vector<CaseResult>& cases);

// Thread-pool runs (each ends in a barrier) of a whole model's decode step from the layer
// records: per (B, S), Σ over kinds of layers_of_kind · pool_runs(kind) plus the head's runs.
// `layers` maps a case name ("layer-csa") to the model's layer count of that kind (a kind
// without records is counted with the given stand-in's runs, named in the line).
struct LayerCount {
  std::string case_name, stand_in;  // stand_in: "" or the case whose runs count for this kind
  int layers = 0;
};
void print_step_barriers(const std::vector<CaseResult>& cases, const std::vector<LayerCount>& layers,
                         const std::string& model);

// {"machine": {isa, read_probe, dot_probe, read_bandwidth: [{threads, bytes, gbps}],
// read_gbps: {"<threads>": best}, peak_gflops: {"<threads>": peak}}, "peak_rss_bytes": N, "notes": [...], "cases": [{case, phase, shape,
// B, S, T, threads, step_ms, tokens_per_s, bytes, gbps, bandwidth_fraction, flops, gflops,
// compute_fraction, roofline_fraction, experts_hit, pool_runs, and the case's extra fields}]}.
Status write_json(const std::string& path, const Machine& m, const std::vector<CaseResult>& cases,
                  int64_t peak_rss, const std::vector<std::string>& notes);

// Path of gnuplot on PATH, or empty.
std::string find_gnuplot();
// Whether the throughput plot draws the case: decode, S = 1, the thread count given.
bool plottable(const CaseResult& c, int threads);
// Draws tokens/s against B of the plottable cases, one line per case name, into png_path
// (data and script beside it, .dat / .gp). Error: no such case, or gnuplot failed.
Status plot_throughput(const std::string& gnuplot, const std::string& png_path,
                       const std::vector<CaseResult>& cases, int threads);

}  // namespace dsv4::bench
