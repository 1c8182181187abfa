// dsv4 inspect [--model DIR]: prints the config summary, layer schedule, tensor
// statistics and validation results of a checkpoint (model/inspect.h). Without
// --model it inspects the built-in tiny model. Exit code 1 when validation fails.
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "model/inspect.h"

namespace dsv4::cli {
namespace {
struct InspectArgs {
  std::string model;
};
}  // namespace

Command add_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "Print config, layer schedule, tensor statistics and validation of a checkpoint");
  sub->add_option("--model", args->model,
                  "Checkpoint directory (default: the built-in tiny model, generated on "
                  "first use)");
  return {sub, [args]() {
    Result<std::string> dir = resolve_model_dir(args->model);
    if (!dir.ok()) return fail(dir.status());
    const InspectReport report = inspect_checkpoint(dir.value());
    std::fputs(report.text.c_str(), stdout);
    if (!report.ok) return fail(Status::errorf("checkpoint {}: {}", dir.value(), report.error));
    return 0;
  }};
}

}  // namespace dsv4::cli
