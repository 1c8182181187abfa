// Logit adjustments before sampling (docs/numerics.md: penalties and logit_bias): a request's
// logits row l [V] fp32 changes in place, a pure function of the row, the request's
// LogitAdjustments and the tokens before the row's position (prompt_len of them the prompt,
// the rest generated). With c_v the count of id v among the generated tokens and P_v "v is in
// the prompt or c_v > 0", in this order:
//   1. frequency and presence, where c_v > 0:  l_v = f32(f32(l_v − f32(f · c_v)) − p)
//   2. repetition r, where P_v:                l_v = l_v > 0 ? f32(l_v / r) : f32(l_v · r)
//   3. logit_bias, each (v, b):                l_v = f32(l_v + b)
// Stages 1–2 run only when the request penalizes (LogitAdjustments::penalizes()), stage 3 only
// over its entries; ids neither seen nor biased keep their logit bit for bit.
//
// Engine: TokenCounts keeps c_v, the prompt's ids and the distinct ids seen, updated per token
// (no pass over the history); the row's cost is O(distinct ids seen + bias entries).
#pragma once

#include <cstdint>
#include <vector>

#include "base/sampling_params.h"
#include "base/status.h"

namespace dsv4::kernels {

// Ranges (naming the field): presence and frequency in [−2, 2], repetition finite and > 0,
// at most kMaxLogitBias bias entries with ids in [0, V) ascending and unique, each bias in
// [−100, 100] or −inf.
Status validate_logit_adjustments(const LogitAdjustments& a, int64_t V);

// --- reference (single-threaded, obviously correct; allocates) ---
// tokens [n_tokens]: the history before the row's position, the first prompt_len the prompt.
void logit_adjust_ref(float* l, int64_t V, const LogitAdjustments& a, const int32_t* tokens, int64_t n_tokens,
                      int64_t prompt_len);

// --- engine ---
// The counts a request's rows read. resize() allocates (at a request's first use of a slot);
// every other call is O(1) or O(distinct ids) and allocates nothing.
class TokenCounts {
 public:
  void resize(int64_t V);
  bool sized() const { return !output_.empty(); }
  void clear();                    // O(distinct ids seen)
  void add_prompt(int32_t id);
  void add_output(int32_t id);
  // Undoes add_output(id), last in first out (a draft's temporary count rolls back).
  void remove_output(int32_t id);
  int64_t distinct() const { return n_seen_; }

 private:
  friend void logit_adjust(float* l, const LogitAdjustments& a, const TokenCounts* c);
  std::vector<int32_t> output_;    // c_v [V]
  std::vector<uint8_t> in_prompt_; // [V]
  std::vector<int32_t> seen_;      // the ids with P_v, in first-seen order [V]
  int64_t n_seen_ = 0;
};

// l [V] of the TokenCounts' V; c: the request's counts (needed when a.penalizes(); else may be
// null).
void logit_adjust(float* l, const LogitAdjustments& a, const TokenCounts* c);

}  // namespace dsv4::kernels
