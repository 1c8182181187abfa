// Engine attention index list: rows split over threads; each row written with
// contiguous fills (window run, empty tail, compressed run).
#include <cstring>

#include "base/check.h"
#include "base/math.h"
#include "kernels/attn_select/attn_select.h"

namespace dsv4::kernels {

void attn_select(const AttnSelectParams& p, int64_t T, const int64_t* pos, const int32_t* wc,
                 const int32_t* picks, int64_t picks_stride, const int32_t* n_picks, int32_t* list,
                 int32_t* len, int tid, int nthreads) {
  DSV4_CHECK(p.kind != AttnKind::kHCA || p.ratio > 0, "HCA ratio {}", p.ratio);
  const Range rows = split_range(T, tid, nthreads);
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    const int64_t pt = pos[t];
    const int64_t w0 = pt - p.window + 1 > 0 ? pt - p.window + 1 : 0;
    const int64_t n_keys = pt - w0 + 1;
    const int64_t n_win = wc[t];
    DSV4_CHECK(n_win >= n_keys && n_win <= p.window, "row {}: Wc {} outside [{}, {}]", t, n_win,
               n_keys, p.window);
    int64_t n_cmp = 0;
    if (p.kind == AttnKind::kHCA) n_cmp = visible_entries(pt, p.ratio);
    if (p.kind == AttnKind::kCSA) {
      n_cmp = n_picks[t];
      DSV4_CHECK(n_cmp <= picks_stride, "row {}: {} picks", t, n_cmp);
    }
    DSV4_CHECK(n_win + n_cmp <= p.stride, "row {}: list of {} entries exceeds capacity {}", t,
               n_win + n_cmp, p.stride);
    int32_t* row = list + t * p.stride;
    for (int64_t k = 0; k < n_keys; ++k) row[k] = static_cast<int32_t>(w0 + k);
    for (int64_t k = n_keys; k < n_win; ++k) row[k] = -1;
    int32_t* cmp = row + n_win;
    if (p.kind == AttnKind::kHCA)
      for (int64_t i = 0; i < n_cmp; ++i) cmp[i] = static_cast<int32_t>(i);
    if (p.kind == AttnKind::kCSA && n_cmp > 0)
      std::memcpy(cmp, picks + t * picks_stride, static_cast<size_t>(n_cmp) * sizeof(int32_t));
    len[t] = static_cast<int32_t>(n_win + n_cmp);
  }
}

}  // namespace dsv4::kernels
