// dsv4 plan --model DIR|--preset flash|tiny|tiny2 --tp T [--ep E] [--dp D] [--batch B]
//           [--context C] [--mtp] [--hosts N] [--mem-per-host GiB] [--bandwidth-per-host GB/s]
//           [--interconnect GB/s] [--bench FILE] [--quant fp8|none]:
// a deployment on paper (model/deploy_plan.h): per rank the resident weights, the caches of
// its sequences and the bytes each collective of one decode step sends to other ranks; per
// host its memory and the bytes it sends to other hosts; the largest batch x context that
// fits; projected decode tokens/s at B = 1, 8, 64.
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "model/config.h"
#include "model/deploy_plan.h"

namespace dsv4::cli {
namespace {
struct PlanArgs {
  std::string model, preset, quant = "fp8";
  int tp = 1, ep = 0, dp = 1;
  int64_t batch = 16, context = 65536;
  bool mtp = false;
  int hosts = 1;
  double mem_per_host = 256, bandwidth = 200, interconnect = 25;
  std::string bench;
};

Result<ModelConfig> plan_config(const PlanArgs& a) {
  if (a.model.empty() == a.preset.empty()) return Status::error("give exactly one of --model DIR and --preset NAME");
  if (!a.model.empty()) return load_config(a.model);
  Result<ModelConfig> cfg = preset_config(a.preset, a.quant == "fp8");
  if (!cfg.ok()) return cfg.status().with_context("--preset");
  return cfg;
}
}  // namespace

Command add_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Deployment on paper: memory and collective bytes per rank and host, the largest batch x context, "
              "projected decode tokens/s");
  sub->add_option("--model", args->model, "Checkpoint directory (its config.json)");
  sub->add_option("--preset", args->preset, "Built-in config instead of --model")
      ->check(CLI::IsMember({"flash", "tiny", "tiny2"}));
  sub->add_option("--quant", args->quant, "Storage of a --preset: fp8 (released: FP8 + FP4 experts) or none (BF16)")
      ->check(CLI::IsMember({"none", "fp8"}))
      ->capture_default_str();
  sub->add_option("--tp", args->tp, "Ranks per attention (DP) group: token owners, O-proj and vocabulary shards")
      ->capture_default_str();
  sub->add_option("--dp", args->dp, "DP groups (default: ep / tp when --ep is larger than --tp, else 1)");
  sub->add_option("--ep", args->ep, "Ranks the routed experts are spread over (default: the world, dp x tp)");
  sub->add_option("--batch", args->batch, "Requests per DP group per decode step")->capture_default_str();
  sub->add_option("--context", args->context, "Positions per sequence")->capture_default_str();
  sub->add_flag("--mtp", args->mtp, "MTP decoding: 2 rows per request, plus the MTP block and head");
  sub->add_option("--hosts", args->hosts, "Hosts the world's ranks fill in rank order (must divide dp x tp)")
      ->capture_default_str();
  sub->add_option("--mem-per-host", args->mem_per_host, "Memory per host in GiB for the fit")->capture_default_str();
  sub->add_option("--bandwidth-per-host", args->bandwidth, "Memory read bandwidth per host in GB/s")
      ->capture_default_str();
  sub->add_option("--interconnect", args->interconnect, "Bytes per second a host sends to other hosts, in GB/s")
      ->capture_default_str();
  sub->add_option("--bench", args->bench, "A `dsv4 bench --json` file: its measured bandwidth fractions per B");
  return {sub, [args, sub]() {
    Result<ModelConfig> cfg = plan_config(*args);
    if (!cfg.ok()) return fail(cfg.status());
    PlanOptions opt;
    opt.tp = args->tp;
    opt.ep = args->ep;
    opt.dp = sub->count("--dp") > 0 ? args->dp : (args->tp > 0 && args->ep > args->tp ? args->ep / args->tp : 1);
    opt.batch = args->batch;
    opt.context = args->context;
    opt.mtp = args->mtp;
    opt.hosts = args->hosts;
    opt.mem_per_host_gib = args->mem_per_host;
    opt.bandwidth_gbps = args->bandwidth;
    opt.interconnect_gbps = args->interconnect;
    if (!args->bench.empty()) {
      Result<BenchFractions> bench = read_bench_fractions(args->bench);
      if (!bench.ok()) return fail(bench.status());
      opt.bench = *bench;
    }
    Result<DeployPlan> plan = plan_deployment(*cfg, opt);
    if (!plan.ok()) return fail(plan.status());
    std::fputs(deploy_plan_text(*cfg, *plan).c_str(), stdout);
    return 0;
  }};
}

}  // namespace dsv4::cli
