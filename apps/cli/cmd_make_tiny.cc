// dsv4 make-tiny --out DIR [--preset tiny|tiny2] [--seed N] [--quant none|fp8]:
// writes a random tiny checkpoint in the released format (model/tiny_checkpoint.h).
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "model/tiny_checkpoint.h"

namespace dsv4::cli {
namespace {
struct MakeTinyArgs {
  std::string out;
  std::string preset = "tiny";
  std::string seed = "0";  // parsed by parse_seed (CLI11 accepts -1 and wraps)
  std::string quant = "fp8";
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
}  // namespace

Command add_make_tiny(CLI::App& app) {
  auto args = std::make_shared<MakeTinyArgs>();
  CLI::App* sub = app.add_subcommand(
      "make-tiny", "Write a random tiny checkpoint (config.json, generation_config.json, "
                   "model.safetensors) in the released format");
  sub->add_option("--out", args->out, "Output directory (created; existing files are replaced)")
      ->required();
  sub->add_option("--preset", args->preset, "Model preset")
      ->check(CLI::IsMember({"tiny", "tiny2"}))
      ->capture_default_str();
  sub->add_option("--seed", args->seed, "Random seed, 0 .. 2^64-1")->capture_default_str();
  sub->add_option("--quant", args->quant,
                  "Storage: fp8 (released layout: FP8 128x128 + FP4 experts) or none (BF16)")
      ->check(CLI::IsMember({"none", "fp8"}))
      ->capture_default_str();
  return {sub, [args]() {
    Result<uint64_t> seed = parse_seed(args->seed);
    if (!seed.ok()) return fail(seed.status());
    Result<TinyQuant> quant = parse_tiny_quant(args->quant);
    if (!quant.ok()) return fail(quant.status());
    const Status st = make_tiny_checkpoint(args->out, args->preset, seed.value(), quant.value());
    if (!st.ok()) return fail(st);
    std::printf("wrote checkpoint (preset %s, seed %llu, quant %s) to %s\n",
                args->preset.c_str(), static_cast<unsigned long long>(seed.value()),
                args->quant.c_str(), args->out.c_str());
    return 0;
  }};
}

}  // namespace dsv4::cli
