// dsv4 plan --model DIR|--preset flash|tiny|tiny2 --tp T [--ep E] [--dp D] [--batch B]
//           [--context C] [--mtp] [--host-memory GiB] [--quant fp8|none]:
// a deployment on paper (model/deploy_plan.h): per rank the resident weights, the caches of
// its sequences, whether both fit in the host memory, and the bytes each collective of one
// decode step sends to other ranks.
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
  double host_memory = 128;
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
      "plan", "Deployment on paper: weights, caches and collective bytes per rank of a tp x dp / ep layout");
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
  sub->add_option("--host-memory", args->host_memory, "Memory per rank in GiB for the fit verdict")
      ->capture_default_str();
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
    opt.host_memory_gib = args->host_memory;
    Result<DeployPlan> plan = plan_deployment(*cfg, opt);
    if (!plan.ok()) return fail(plan.status());
    std::fputs(deploy_plan_text(*cfg, *plan).c_str(), stdout);
    return 0;
  }};
}

}  // namespace dsv4::cli
