// Reference attention index list: entry by entry, straight from model.md §0.4.7.
#include "base/check.h"
#include "kernels/attn_select/attn_select.h"

namespace dsv4::kernels {

void attn_select_ref(const AttnSelectParams& p, int64_t T, const int64_t* pos, const int32_t* wc,
                     const int32_t* picks, int64_t picks_stride, const int32_t* n_picks,
                     int32_t* list, int32_t* len) {
  DSV4_CHECK(p.kind != AttnKind::kHCA || p.ratio > 0, "HCA ratio {}", p.ratio);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pt = pos[t];
    const int64_t w0 = pt - p.window + 1 > 0 ? pt - p.window + 1 : 0;
    const int64_t n_keys = pt - w0 + 1;  // min(p+1, W)
    DSV4_CHECK(wc[t] >= n_keys && wc[t] <= p.window, "row {}: Wc {} outside [{}, {}]", t, wc[t],
               n_keys, p.window);
    int32_t* row = list + t * p.stride;
    int64_t j = 0;
    for (int64_t k = 0; k < wc[t]; ++k) {
      DSV4_CHECK(j < p.stride, "row {}: list capacity {} exceeded", t, p.stride);
      row[j++] = w0 + k <= pt ? static_cast<int32_t>(w0 + k) : -1;
    }
    if (p.kind == AttnKind::kHCA) {
      for (int64_t i = 0; i * p.ratio + p.ratio - 1 <= pt; ++i) {
        DSV4_CHECK(j < p.stride, "row {}: list capacity {} exceeded", t, p.stride);
        row[j++] = static_cast<int32_t>(i);
      }
    } else if (p.kind == AttnKind::kCSA) {
      DSV4_CHECK(n_picks[t] <= picks_stride, "row {}: {} picks", t, n_picks[t]);
      for (int64_t k = 0; k < n_picks[t]; ++k) {
        DSV4_CHECK(j < p.stride, "row {}: list capacity {} exceeded", t, p.stride);
        row[j++] = picks[t * picks_stride + k];
      }
    }
    len[t] = static_cast<int32_t>(j);
  }
}

}  // namespace dsv4::kernels
