// dsv4 inspect [--model DIR] [--tp N] [--ep M]: prints the config summary, layer schedule,
// tensor statistics and validation results of a checkpoint (model/inspect.h); with --tp /
// --ep, the weight bytes each rank of such a deployment holds (model/placement.h). Without
// --model it inspects the built-in model (models/kjv-9m). Exit code 1 when validation fails.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "model/config.h"
#include "model/inspect.h"
#include "model/placement.h"
#include "parallel/topology.h"

namespace dsv4::cli {
namespace {
struct InspectArgs {
  std::string model;
  int tp = 0, ep = 0;
};

// Per-rank weight bytes of a tp × (world / tp) deployment with experts over ep ranks.
int print_placement(const std::string& dir, int tp, int ep) {
  Result<ModelConfig> cfg = load_config(dir);
  if (!cfg.ok()) return fail(cfg.status());
  const int world = std::max(tp, ep);
  Result<Topology> t0 = make_topology(world, 0, tp, 0, ep);
  if (!t0.ok()) return fail(t0.status());
  if (Status st = validate_topology(*cfg, *t0); !st.ok()) return fail(st);
  std::printf("placement: world %d, tp %d, dp %d, ep %d (weights per rank, checkpoint form)\n", world, t0->tp, t0->dp,
              t0->ep);
  const bool gib = rank_weights(*cfg, *t0).total() >= (int64_t{1} << 30);
  const double unit = gib ? 1073741824.0 : 1048576.0;
  for (int r = 0; r < world; ++r) {
    const RankWeights w = rank_weights(*cfg, *make_topology(world, r, tp, 0, ep));
    std::printf("  rank %d: %.3f %s", r, static_cast<double>(w.total()) / unit, gib ? "GiB" : "MiB");
    for (int p = 0; p < 5; ++p)
      std::printf("%s %s %.3f", p == 0 ? " =" : " +", placement_name(static_cast<Placement>(p)),
                  static_cast<double>(w.bytes[p]) / unit);
    std::printf("\n");
  }
  return 0;
}
}  // namespace

Command add_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "Print config, layer schedule, tensor statistics and validation of a checkpoint");
  sub->add_option("--model", args->model, kModelHelp);
  sub->add_option("--tp", args->tp, "With --ep: show the weight bytes per rank of a tp-way deployment");
  sub->add_option("--ep", args->ep, "Ranks the routed experts are spread over (default: the world)");
  return {sub, [args]() {
    Result<std::string> dir = resolve_model_dir(args->model);
    if (!dir.ok()) return fail(dir.status());
    const InspectReport report = inspect_checkpoint(dir.value());
    std::fputs(report.text.c_str(), stdout);
    if (!report.ok) return fail(Status::errorf("checkpoint {}: {}", dir.value(), report.error));
    if (args->tp > 0 || args->ep > 0) return print_placement(dir.value(), std::max(args->tp, 1), args->ep);
    return 0;
  }};
}

}  // namespace dsv4::cli
