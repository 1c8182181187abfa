#include "model/step_decisions.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace dsv4 {

void apply_pick_decisions(const DecisionIO& dec, const DecisionSite& site, const StepMetadata& rows, int32_t* picks,
                          int64_t stride, const int32_t* n_picks) {
  const int64_t T = rows.T;
  if (dec.forced)
    for (int64_t t = 0; t < T; ++t)
      if (const Decision* f = dec.forced->find(site.mtp, true, site.layer, rows.row_key[t], rows.pos[t]))
        std::copy(f->selected.begin(), f->selected.end(), picks + t * stride);
  if (dec.log)
    for (int64_t t = 0; t < T; ++t)
      dec.log->push_back({site.mtp, true, site.layer, rows.row_key[t], rows.pos[t],
                          std::vector<int32_t>(picks + t * stride, picks + t * stride + n_picks[t])});
}

void apply_route_decisions(const DecisionIO& dec, const DecisionSite& site, const StepMetadata& rows,
                           const kernels::MoeGateParams& gp, const float* gate_scores, int32_t* ids, float* route_w) {
  const int64_t T = rows.T, E = gp.n_routed_experts, K = gp.num_experts_per_tok;
  const bool ds = site.dspark_gamma > 0;
  auto ds_row = [&](int64_t t) { return static_cast<int32_t>(t % site.dspark_gamma); };
  auto find = [&](int64_t t) {
    return ds ? dec.forced->find_dspark(false, site.stage, rows.row_key[t], rows.pos[t] - 1 - ds_row(t), ds_row(t))
              : dec.forced->find(site.mtp, false, site.layer, rows.row_key[t], rows.pos[t]);
  };
  if (dec.forced)
    for (int64_t t = 0; t < T; ++t)
      if (const Decision* f = find(t)) {
        std::copy(f->selected.begin(), f->selected.end(), ids + t * K);
        kernels::moe_route_weights(gate_scores + t * E, ids + t * K, gp, route_w + t * K);
      }
  if (dec.log)
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> sel(ids + t * K, ids + (t + 1) * K);
      if (ds)
        dec.log->push_back({false, false, site.stage, rows.row_key[t], rows.pos[t] - 1 - ds_row(t), std::move(sel),
                            true, false, ds_row(t)});
      else
        dec.log->push_back({site.mtp, false, site.layer, rows.row_key[t], rows.pos[t], std::move(sel)});
    }
}

}  // namespace dsv4
