// Helpers shared by the subcommands: error reporting and model-directory resolution.
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "base/cpu.h"
#include "kernels/linear/linear.h"
#include "model/tiny_checkpoint.h"

namespace dsv4::cli {

int fail(const Status& status) {
  std::fprintf(stderr, "dsv4: error: %s\n", status.message().c_str());
  return 1;
}

Result<std::string> user_cache_root() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  // XDG base-directory rule: a relative path is invalid and ignored.
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/dsv4";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return std::string(home) + "/.cache/dsv4";
  return Status::error(
      "cannot locate the cache directory for the built-in model: neither XDG_CACHE_HOME nor "
      "HOME is set to an absolute path (pass --model DIR instead)");
}

Result<std::string> resolve_model_dir(const std::string& model_flag) {
  if (!model_flag.empty()) return model_flag;
  Result<std::string> root = user_cache_root();
  if (!root.ok()) return root.status();
  return builtin_model_dir(root.value());
}

Status select_isa(const std::string& isa_flag) {
  Result<Isa> isa = parse_isa(isa_flag);
  if (!isa.ok()) return isa.status().with_context("--isa");
  kernels::set_linear_isa(*isa);
  return Status();
}

}  // namespace dsv4::cli
