// dsv4 make-tiny --out DIR [--preset tiny|tiny2|tiny-ds|tiny-ds-w80|tiny2-ds] [--seed N] [--quant none|fp8] [--max-position N]:
// writes a random tiny checkpoint in the released format (oracle/tiny_checkpoint.h);
// --max-position sets max_position_embeddings in its config.json (weights unchanged).
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "oracle/tiny_checkpoint.h"

namespace dsv4::cli {
namespace {
struct MakeTinyArgs {
  std::string out;
  std::string preset = "tiny";
  std::string seed = "0";  // parsed by parse_seed (CLI11 accepts -1 and wraps)
  std::string quant = "fp8";
  std::string max_position;  // empty: the preset's value; parsed by parse_max_position
};

// Decimal digits only, no sign, within uint64.
Result<uint64_t> parse_seed(const std::string& text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end)
    return Status::errorf("--seed: \"{}\" is not an integer in 0 .. 18446744073709551615", text);
  return v;
}

// Decimal digits with an optional '-' (CLI11 would read "010" as octal); the range is
// left to the config validation, which names the field and the limit.
Result<int64_t> parse_max_position(const std::string& text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end)
    return Status::errorf("--max-position: \"{}\" is not a decimal integer in int64 range", text);
  return v;
}
}  // namespace

Command add_make_tiny(CLI::App& app) {
  auto args = std::make_shared<MakeTinyArgs>();
  CLI::App* sub = app.add_subcommand(
      "make-tiny", "Write a random tiny checkpoint (config.json, generation_config.json, "
                   "model.safetensors) in the released format");
  sub->add_option("--out", args->out, "Output directory (created; existing files are replaced)")
      ->required();
  sub->add_option("--preset", args->preset, "Model preset")
      ->check(CLI::IsMember({"tiny", "tiny2", "tiny-ds", "tiny-ds-w80", "tiny2-ds"}))
      ->capture_default_str();
  sub->add_option("--seed", args->seed, "Random seed, 0 .. 2^64-1")->capture_default_str();
  sub->add_option("--quant", args->quant,
                  "Storage: fp8 (released layout: FP8 128x128 + FP4 experts) or none (BF16)")
      ->check(CLI::IsMember({"none", "fp8"}))
      ->capture_default_str();
  sub->add_option("--max-position", args->max_position,
                  "max_position_embeddings in config.json (default: the preset's, 1024)");
  return {sub, [args, sub]() {
    Result<uint64_t> seed = parse_seed(args->seed);
    if (!seed.ok()) return fail(seed.status());
    Result<TinyQuant> quant = parse_tiny_quant(args->quant);
    if (!quant.ok()) return fail(quant.status());
    TinyOverrides overrides;
    if (sub->count("--max-position") > 0) {
      Result<int64_t> n = parse_max_position(args->max_position);
      if (!n.ok()) return fail(n.status());
      overrides.max_position_embeddings = *n;
      // The config validation's error, led by the option that caused it.
      Result<ModelConfig> cfg = tiny_config(args->preset, quant.value(), overrides);
      if (!cfg.ok()) return fail(cfg.status().with_context("--max-position " + args->max_position));
    }
    const Status st =
        make_tiny_checkpoint(args->out, args->preset, seed.value(), quant.value(), overrides);
    if (!st.ok()) return fail(st);
    std::printf("wrote checkpoint (preset %s, seed %llu, quant %s", args->preset.c_str(),
                static_cast<unsigned long long>(seed.value()), args->quant.c_str());
    if (overrides.max_position_embeddings)
      std::printf(", max_position_embeddings %lld",
                  static_cast<long long>(*overrides.max_position_embeddings));
    std::printf(") to %s\n", args->out.c_str());
    return 0;
  }};
}

}  // namespace dsv4::cli
