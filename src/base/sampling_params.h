// The sampling parameters a request carries (model.md §10.2): plain values, no kernel behind
// them, so runtime/request.h and the HTTP protocol library (apps/server) hold them without
// including or linking a kernel. The sampling kernel reads and validates them
// (kernels/sample/sample.h: validate_sampling_params, SampleRow, RejectionRound).
#pragma once

#include <cstdint>

namespace dsv4 {

// Per-request parameters, fixed at admission (kernels::validate_sampling_params).
struct SamplingParams {
  float temperature = 0.0f;  // T ≥ 0, 0 = greedy
  float top_p = 1.0f;        // 0 < top_p ≤ 1
  uint64_t seed = 0;
  int32_t top_k = 0;         // ≥ 0, 0 = off (docs/numerics.md: top_k, min_p)
  float min_p = 0.0f;        // 0 ≤ min_p ≤ 1, 0 = off
};

// The sampling kernel's spelling (kernels/sample/sample.h and its callers).
namespace kernels {
using ::dsv4::SamplingParams;
}  // namespace kernels

}  // namespace dsv4
