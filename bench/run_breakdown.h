// Per-run breakdown of a layer's decode step (issue 38): the ThreadPool's RunProfile records
// of the timed steps, summed per run name (or call site), with the bytes each named run reads
// (weights as roofline.h counts them; caches per row), so every run shows its own GB/s:
//   attn.B  wq_a, wkv, both compressors' wkv + wgate    attn.D  wq_b, the indexer's wq_b and
//   weights_proj;  attn.F idx_select  the visible indexer keys;  attn.H  the attended KV rows;
//   attn.wo_a, attn.wo_b+post  wo_a, wo_b;  *.hc_mix  hc_*_fn and the stream X;
//   *.hc_pre  the stream X;  moe.gate  gate;  moe.up+act  w1 + w3, moe.down+post  w2 of the
//   experts hit and the shared expert.  Other runs: no bytes counted (activations only).
// "caller" is the step's time outside every run (serial work on the calling thread). "busy GB/s"
// divides the bytes by the longest thread's time inside the run: on a loaded machine, where a
// worker waits for a core, it still shows what the run's kernels reach while they run.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/run_profile.h"
#include "model/config.h"
#include "roofline.h"

namespace dsv4::bench {

class RunBreakdown {
 public:
  explicit RunBreakdown(const ModelConfig& cfg) : cfg_(cfg) {}

  // One timed step: its records, rows, distinct experts hit and wall time; `dropped` runs went past
  // the profile's capacity (their time shows in "caller", and the table says how many).
  void add_step(std::span<const RunRecord> records, std::span<const RequestRows> rows, int64_t experts_hit,
                double step_ms, uint64_t dropped = 0);
  // The table, per step (means over the steps added), against the read bandwidth in GB/s.
  std::string table(const std::string& title, double read_gbps) const;

 private:
  struct Sum {
    int order = 0;  // first appearance in a step
    double runs = 0, wall_ms = 0, busy_max_ms = 0, busy_min_ms = 0, wake_max_us = 0, bytes = 0;
  };
  double run_bytes(const std::string& name, std::span<const RequestRows> rows, int64_t experts_hit) const;

  const ModelConfig& cfg_;
  std::map<std::string, Sum> sums_;
  int steps_ = 0;
  double step_ms_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace dsv4::bench
