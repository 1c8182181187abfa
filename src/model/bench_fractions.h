// Measured bandwidth fractions of a `dsv4 bench --json` file (bench/report.h), per batch
// size, for the decode projection of `dsv4 plan --bench`. Records used: phase "decode",
// S = 1, the cases a decode step is made of (case "head" and every "layer-*"), at the
// file's largest thread count. Per B the fraction of the whole step:
//   f(B) = Σ_i bandwidth_fraction_i · step_ms_i / Σ_i step_ms_i
// (bandwidth_fraction = bytes / step time / the run's read bandwidth, so f(B) is the
// records' bytes over their summed time over that bandwidth).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace dsv4 {

struct BenchFraction {
  int64_t batch = 0;    // B of the records
  double fraction = 0;  // f(B), > 0
};

struct BenchFractions {
  std::string path;
  int threads = 0;                  // the thread count of the records used
  std::vector<BenchFraction> by_batch;  // ascending B
  // The entry at the benchmarked B nearest b on a log scale (ties: the smaller B).
  const BenchFraction& nearest(int64_t b) const;
};

// Errors name --bench, the file and what is missing or malformed. Per record used: B and
// threads integers in [1, 2^20], step_ms in (0, 1e9], bandwidth_fraction in (0, 100].
Result<BenchFractions> read_bench_fractions(const std::string& path);
// The same over the file's text (path: for the messages).
Result<BenchFractions> parse_bench_fractions(std::string_view text, const std::string& path);

}  // namespace dsv4
