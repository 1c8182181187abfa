// A step's forced and logged decisions (model/decisions.h) at the two places the forward
// chooses: the CSA indexer's picks and the routed experts. A forced decision replaces the
// computed one (for routes the route weights are recomputed from the gate scores); the log
// receives every decision used, forced or not, row by row.
#pragma once

#include <cstdint>

#include "cache/step_metadata.h"
#include "kernels/moe_gate/moe_gate.h"
#include "model/decisions.h"

namespace dsv4 {

// Where the decisions belong: block mtp or main (layer: the layer index, 0 in the MTP
// block), or a DSpark stage (dspark_gamma > 0: block rows of rounds of γ rows, keyed by
// stage, anchor pos − 1 − row and block row t mod γ).
struct DecisionSite {
  bool mtp = false;
  int layer = 0;
  int dspark_gamma = 0;
  int stage = 0;
};

// picks [T, stride] with n_picks [T] ids each (a forced entry has exactly n_picks ids).
void apply_pick_decisions(const DecisionIO& dec, const DecisionSite& site, const StepMetadata& rows, int32_t* picks,
                          int64_t stride, const int32_t* n_picks);
// ids, route_w [T, K]; gate_scores [T, E] for forced routes' weights.
void apply_route_decisions(const DecisionIO& dec, const DecisionSite& site, const StepMetadata& rows,
                           const kernels::MoeGateParams& gp, const float* gate_scores, int32_t* ids, float* route_w);

}  // namespace dsv4
