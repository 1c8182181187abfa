// End-to-end decode through the Engine (schedule, forward, sampling, commit) on a model
// directory (the built-in tiny model): per B, B requests of an 8-token prompt decode
// `warmup` + `repeats` tokens greedily; the step time is the median over the steps
// where all B requests decoded one row. Bytes and FLOPs: every main layer
// (roofline.h, the routed experts hit counted at their expectation under uniform
// routing) plus the head, at the middle position of the timed steps.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "report.h"

namespace dsv4::bench {

Result<std::vector<CaseResult>> run_tiny_e2e(const std::string& model_dir, const std::vector<int>& batches,
                                             int warmup, int repeats, int threads);

}  // namespace dsv4::bench
