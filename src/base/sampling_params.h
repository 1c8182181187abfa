// The sampling parameters a request carries (model.md §10.2): plain values, no kernel behind
// them, so runtime/request.h and the HTTP protocol library (apps/server) hold them without
// including or linking a kernel. The sampling kernel reads and validates them
// (kernels/sample/sample.h: validate_sampling_params, SampleRow, RejectionRound).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace dsv4 {

// Per-request parameters, fixed at admission (kernels::validate_sampling_params).
struct SamplingParams {
  float temperature = 0.0f;  // T ≥ 0, 0 = greedy
  float top_p = 1.0f;        // 0 < top_p ≤ 1
  uint64_t seed = 0;
  int32_t top_k = 0;         // ≥ 0, 0 = off (docs/numerics.md: top_k, min_p)
  float min_p = 0.0f;        // 0 ≤ min_p ≤ 1, 0 = off
};

constexpr int kMaxLogitBias = 300;  // OpenAI's limit on logit_bias entries

// Per-request changes to the logits before temperature (docs/numerics.md: penalties and
// logit_bias), in this order: frequency and presence (over the generated tokens), repetition
// (over prompt and generated tokens), then logit_bias. Fixed at admission
// (kernels::validate_logit_adjustments); kept out of SamplingParams, which rows copy.
struct LogitAdjustments {
  float presence_penalty = 0.0f;    // [-2, 2], 0 = off
  float frequency_penalty = 0.0f;   // [-2, 2], 0 = off
  float repetition_penalty = 1.0f;  // > 0, 1 = off
  // (token id, bias) by ascending unique id; bias in [-100, 100] from clients, −inf (forbid the
  // id) from the server itself (e.g. tool_choice "none").
  std::vector<std::pair<int32_t, float>> logit_bias;
  bool penalizes() const { return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f; }
  bool any() const { return penalizes() || !logit_bias.empty(); }
};

// The sampling kernel's spelling (kernels/sample/sample.h and its callers).
namespace kernels {
using ::dsv4::SamplingParams;
}  // namespace kernels

}  // namespace dsv4
