// Structured output's cost (issue 29): schema compilation and one token mask per decode step on
// a real vocabulary (--tokenizer: DeepSeek's 128,815-token tokenizer.json, e.g. the npm
// conformance package's), at the matcher states a JSON answer passes through. With layer-csa,
// layer-hca and head at B = 1 in the same run, each mask is also shown as a share of the
// extrapolated Flash decode step (21 CSA + 22 HCA layers + the head; EXTRAPOLATED). Then the
// per-token cost on sampled paths (grammar_paths.h; max(16, 4 x repeats) paths per schema).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "report.h"

namespace dsv4::bench {

Status run_grammar_cases(const std::string& tokenizer_path, int repeats, const std::vector<CaseResult>& layer_cases);

}  // namespace dsv4::bench
