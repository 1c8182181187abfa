// `dsv4 bench --cases spec-flash`: what speculation buys a whole model, PROJECTED (not run)
// from records measured on one real-size layer of each kind, the LM head, the DSpark drafter
// and the built-in models' acceptance, taken from this run or from earlier bench JSON files
// (--from). Per B (1 and 8 where measured) and method (plain; MTP, γ = 1 as the engine serves
// it; DSpark γ = 1..7) and acceptance profile:
//   t_target(B, S) = Σ_kind layers_of_kind · t_layer(kind, B, S) + t_head(B·S)
//                    (SWA layers, which the bench does not time, as the HCA layer: an upper bound)
//   t_round        = t_target(B, 1 + γ) + t_draft(B, γ)
//                    MTP:    γ · (t_layer(MTP layer's kind, B, 1) + t_head(B) + e_proj/h_proj at roofline)
//                    DSpark: the dspark-share record's drafter_ms (NS stages extrapolated, dspark_cases.h)
//   E[tokens/round] = 1 + Σ_{k ≤ γ} P(at least k drafts accepted)
//   tokens/s       = B · E / t_round
// and the same with every term at its roofline, max(bytes / bandwidth, FLOPs / peak): the ideal
// the machine allows. t_layer at an unmeasured S is interpolated (or extrapolated) linearly in S
// between measured S; t_head at an unmeasured row count scales from the nearest measured one by
// the roofline ratio. Profiles: spec-e2e's measured acceptance_at on the built-in models, the
// DeepSeek-V3 technical report's MTP second-token acceptance (85-90 %: 0.85), and i.i.d.
// per-position rates p = 0.6 and 0.8 (hypothetical, for scale). One CaseResult "spec-flash"
// (phase "projection") per row.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "model/config.h"
#include "report.h"

namespace dsv4::bench {

// An earlier run's JSON (report.h write_json): its machine and its records.
struct BenchRecords {
  Machine machine;
  std::vector<CaseResult> cases;
};
Result<BenchRecords> read_bench_json(const std::string& path);

// The projection rows (empty with notes naming what is missing when the records cannot
// support any). full: the whole model (layer kinds, MTP layer kind, D for e_proj/h_proj).
std::vector<CaseResult> project_spec_flash(const std::vector<CaseResult>& cases, const Machine& m,
                                           const ModelConfig& full, int threads, std::vector<std::string>& notes);

void print_spec_flash(const std::vector<CaseResult>& rows, const std::string& model);

}  // namespace dsv4::bench
