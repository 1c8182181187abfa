// `dsv4 inspect`: a human-readable report on a checkpoint directory.
//   config      dims, experts, indexer, hc, RoPE, storage forms (checkpoint.md §5.7)
//   schedule    one line per layer incl. MTP: index, name, ratio, SWA/CSA/HCA,
//               hash/score router, RoPE profile (model.md §1.2)
//   tensors     counts and bytes by dtype, as stored in the files
//   validation  validate, validate_level_a, load_weights (unexpected tensors, warnings)
#pragma once

#include <string>

namespace dsv4 {

struct InspectReport {
  bool ok = false;   // config loads, validates and every tensor loads
  std::string text;  // the report, newline-terminated lines
  std::string error; // the first failure (empty when ok)
};

InspectReport inspect_checkpoint(const std::string& dir);

}  // namespace dsv4
