// Routing counts of one rank's rows in one MoE forward, per EP peer d in [0, P): what the
// expert-parallel seam sends (parallel/moe_seam.h) and the deployment plan predicts
// (model/deploy_plan.h).
#pragma once

#include <cstdint>
#include <vector>

namespace dsv4 {

struct MoeRouting {
  std::vector<int64_t> rows_to;    // [P] rows with >= 1 route to an expert of rank d
  std::vector<int64_t> routes_to;  // [P] distinct (row, expert) routes to experts of rank d
};

}  // namespace dsv4
