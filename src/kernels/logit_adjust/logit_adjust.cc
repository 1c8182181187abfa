#include "kernels/logit_adjust/logit_adjust.h"

#include <cmath>

#include "base/check.h"

namespace dsv4::kernels {

Status validate_logit_adjustments(const LogitAdjustments& a, int64_t V) {
  auto penalty = [](float x, const char* name) {
    return std::isfinite(x) && x >= -2.0f && x <= 2.0f
               ? Status()
               : Status::errorf("{} = {} outside [-2, 2]", name, x);
  };
  if (Status st = penalty(a.presence_penalty, "presence_penalty"); !st.ok()) return st;
  if (Status st = penalty(a.frequency_penalty, "frequency_penalty"); !st.ok()) return st;
  if (!std::isfinite(a.repetition_penalty) || a.repetition_penalty <= 0.0f)
    return Status::errorf("repetition_penalty = {} must be finite and greater than 0", a.repetition_penalty);
  if (a.logit_bias.size() > static_cast<size_t>(kMaxLogitBias))
    return Status::errorf("logit_bias: {} entries, at most {}", a.logit_bias.size(), kMaxLogitBias);
  for (size_t i = 0; i < a.logit_bias.size(); ++i) {
    const auto [v, b] = a.logit_bias[i];
    if (v < 0 || v >= V) return Status::errorf("logit_bias: token id {} outside the vocabulary [0, {})", v, V);
    if (i > 0 && v <= a.logit_bias[i - 1].first)
      return Status::errorf("logit_bias: token id {} after {} (ids must ascend, each once)", v, a.logit_bias[i - 1].first);
    if (!(b >= -100.0f && b <= 100.0f) && b != -INFINITY)
      return Status::errorf("logit_bias: bias {} for token id {} outside [-100, 100]", b, v);
  }
  return Status();
}

void TokenCounts::resize(int64_t V) {
  output_.assign(static_cast<size_t>(V), 0);
  in_prompt_.assign(static_cast<size_t>(V), 0);
  seen_.resize(static_cast<size_t>(V));
  n_seen_ = 0;
}

void TokenCounts::clear() {
  for (int64_t i = 0; i < n_seen_; ++i) {
    output_[seen_[i]] = 0;
    in_prompt_[seen_[i]] = 0;
  }
  n_seen_ = 0;
}

void TokenCounts::add_prompt(int32_t id) {
  if (!in_prompt_[id] && output_[id] == 0) seen_[n_seen_++] = id;
  in_prompt_[id] = 1;
}

void TokenCounts::add_output(int32_t id) {
  if (!in_prompt_[id] && output_[id] == 0) seen_[n_seen_++] = id;
  ++output_[id];
}

void TokenCounts::remove_output(int32_t id) {
  DSV4_CHECK(output_[id] > 0);
  if (--output_[id] == 0 && !in_prompt_[id]) {
    DSV4_CHECK(n_seen_ > 0 && seen_[n_seen_ - 1] == id);  // last in, first out
    --n_seen_;
  }
}

void logit_adjust(float* l, const LogitAdjustments& a, const TokenCounts* c) {
  if (a.penalizes()) {
    const float f = a.frequency_penalty, p = a.presence_penalty, r = a.repetition_penalty;
    for (int64_t i = 0; i < c->n_seen_; ++i) {
      const int32_t v = c->seen_[i];
      float x = l[v];
      if (const int32_t n = c->output_[v]; n > 0) {
        const float f_c = f * static_cast<float>(n);
        x = x - f_c;
        x = x - p;
      }
      l[v] = x > 0 ? x / r : x * r;
    }
  }
  for (const auto& [v, b] : a.logit_bias) l[v] = l[v] + b;
}

}  // namespace dsv4::kernels
