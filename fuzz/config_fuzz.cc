// libFuzzer target: config.json parsing (parse_config_json) and validation on
// arbitrary bytes. Invariants: errors name the source; a config that passes
// validate() survives to_config_json_text -> parse unchanged; its checkpoint
// tensor table (the next consumer of the parsed values) builds without
// overflow when small enough to enumerate per input.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/checkpoint_table.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = dsv4::parse_config_json(text, "fuzz/config.json");
  if (!cfg.ok()) {
    if (cfg.message().rfind("fuzz/config.json: ", 0) != 0) std::abort();
    return 0;
  }
  const dsv4::Status valid = dsv4::validate(*cfg);
  (void)dsv4::validate_level_a(*cfg);
  if (!valid.ok()) return 0;

  const std::string written = dsv4::to_config_json_text(*cfg);
  auto again = dsv4::parse_config_json(written, "written");
  if (!again.ok() || dsv4::to_config_json(*again) != dsv4::to_config_json(*cfg)) std::abort();
  if (!dsv4::validate(*again).ok()) std::abort();

  // Bounded enumeration: the table has ~(layers + 1) x experts x 6 entries.
  const int64_t n_entries = int64_t{cfg->n_layers_total()} * (cfg->n_routed_experts + 16);
  if (n_entries <= 4096) {
    for (const dsv4::TensorSpec& t : dsv4::expected_tensors(*cfg))
      for (const int64_t d : t.shape)
        if (d < 0) std::abort();
  }
  return 0;
}
