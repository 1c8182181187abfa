// `dsv4 bench --peer-ggml DIR`: ggml's CPU mul_mat timed on the engine's GEMM shapes in the
// same run, interleaved with the engine's own timing (round 1: engine shape A, ggml shape A,
// engine shape B, ggml shape B, ...; then round 2), so both see the same machine state.
// ggml is not a dependency: DIR holds executables built outside the repository from ggml's
// public source with the harness in ../shared/tools/ggml_peer (its README has the build
// lines): `peer_plain` (plain CPU buffers) and/or `peer_lf` (run with --repack, ggml's
// CPU_REPACK layout). Each invocation prints CSV (mode,case,type,rows,K,T,n_copies,
// weight_bytes,median_us,GBps,min_us,max_us,buft,relerr); where both builds exist the faster
// per case and T is "ggml", as the harness README asks. Shapes the harness does not offer
// (it has the Flash ones: q8_0 1024x4096 and 4096x8192, mxfp4 2048x4096 and 4096x2048) are
// timed for the engine only, with a note.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "gemm_cases.h"
#include "report.h"

namespace dsv4::bench {

// One ggml CSV row.
struct PeerRow {
  std::string case_name;  // "mxfp4_2048x4096"
  int T = 0;
  double weight_bytes = 0, median_us = 0;
};

// The harness's case name for an engine shape: "<type>_<out>x<in>" with FP4 -> mxfp4, FP8 ->
// q8_0, BF16 -> bf16 (ggml's closest formats; the comparison is of speed only).
std::string peer_case_name(const GemmShape& s);

// Parses the harness's CSV output (comment lines start with '#'; the header is skipped);
// a malformed row is an error naming the line.
Result<std::vector<PeerRow>> parse_peer_csv(const std::string& text);

struct PeerSets {
  std::string dir;        // --peer-ggml DIR
  std::vector<int> rows;  // T
  int rounds = 5;         // interleaved rounds (median over them)
  int repeats = 5;        // engine passes per round; ggml's --reps
  int64_t span_bytes = int64_t{96} << 20;
};

// Engine "gemm-fp8"/"gemm-fp4" and peer "ggml-q8_0"/"ggml-mxfp4" cases per shape and T (step_ms
// the median over rounds of each round's median), timed interleaved; notes for skipped shapes.
Result<std::vector<CaseResult>> run_gemm_with_peer(const std::vector<GemmShape>& shapes, const PeerSets& sets,
                                                   int threads, std::vector<std::string>& notes);

// The side-by-side table: per shape and T, engine and ggml ms and GB/s and the speed ratio
// (ggml time / engine time: above 1, the engine is faster).
void print_peer_comparison(const std::vector<CaseResult>& cases, int rounds);

}  // namespace dsv4::bench
