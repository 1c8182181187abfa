// Reference combine: per row, the distinct ids sorted ascending, then one fp32 add each.
#include <algorithm>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/moe_combine/moe_combine.h"

namespace dsv4::kernels {

void moe_combine_ref(const bf16* routed, const int32_t* route_row, const int32_t* ids,
                     const bf16* shared, const MoeCombineParams& p, int64_t T, bf16* m) {
  const int64_t D = p.hidden, K = p.num_experts_per_tok;
  for (int64_t t = 0; t < T; ++t) {
    // (expert id, row of its output), first slot of each distinct id, ascending id.
    std::vector<std::pair<int32_t, int64_t>> terms;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = ids[t * K + k];
      bool seen = false;
      for (const auto& [e2, r2] : terms) seen = seen || e2 == e;
      if (seen) continue;
      const int64_t r = route_row ? route_row[t * K + k] : t * K + k;
      DSV4_CHECK(r >= 0, "route ({}, {}) has no output row", t, k);
      terms.emplace_back(e, r);
    }
    std::sort(terms.begin(), terms.end());
    for (int64_t d = 0; d < D; ++d) {
      float y = 0.0f;
      for (const auto& [e, r] : terms) y = y + routed[r * D + d].to_float();
      y = y + shared[t * D + d].to_float();
      m[t * D + d] = bf16::from_float(y);
    }
  }
}

}  // namespace dsv4::kernels
