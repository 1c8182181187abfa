#include <map>
#include <set>

#include "kernels/logit_adjust/logit_adjust.h"

namespace dsv4::kernels {

void logit_adjust_ref(float* l, int64_t V, const LogitAdjustments& a, const int32_t* tokens, int64_t n_tokens,
                      int64_t prompt_len) {
  if (a.penalizes()) {
    std::map<int32_t, int64_t> count;  // c_v over the generated tokens
    std::set<int32_t> seen;            // P_v
    for (int64_t i = 0; i < n_tokens; ++i) {
      if (i >= prompt_len) ++count[tokens[i]];
      seen.insert(tokens[i]);
    }
    for (const auto& [v, c] : count) {
      const float f_c = a.frequency_penalty * static_cast<float>(c);
      const float after_frequency = l[v] - f_c;
      l[v] = after_frequency - a.presence_penalty;
    }
    for (int32_t v : seen) l[v] = l[v] > 0 ? l[v] / a.repetition_penalty : l[v] * a.repetition_penalty;
  }
  for (const auto& [v, b] : a.logit_bias) l[v] = l[v] + b;
}

}  // namespace dsv4::kernels
