// dsv4 subcommands. Each command lives in its own cmd_<name>.cc: add_<name>()
// registers its subcommand and options on the app and returns it with the
// function main() runs when it was chosen (exit code: 0 success, 1 error).
// Parsed options live in state owned by that function; nothing is global.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace CLI {
class App;
}

namespace dsv4::cli {

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

Command add_make_tiny(CLI::App& app);
Command add_inspect(CLI::App& app);
Command add_logits(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_chat(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_check_schema(CLI::App& app);

// Prints "dsv4: error: <message>" to stderr (unless error printing is off: ranks other
// than 0, which meet the same errors) and returns exit code 1.
int fail(const Status& status);
void set_error_printing(bool on);

// --model DIR if given, else $DSV4_MODEL when set and not empty, else the built-in model:
// models/kjv-9m of the source tree this binary was built from (DSV4_BUILTIN_MODEL_DIR, set by
// apps/cli/CMakeLists.txt); an error naming that path when its config.json is missing. This is
// the only place the CLI reads the environment for a model.
Result<std::string> resolve_model_dir(const std::string& model_flag);
// <XDG_CACHE_HOME or ~/.cache>/dsv4 (dsv4 bench keeps its layer checkpoints there).
Result<std::string> user_cache_root();
inline constexpr const char* kModelHelp =
    "Checkpoint directory (default: $DSV4_MODEL if set, else the built-in model models/kjv-9m)";

// The token ids of a list option such as --tokens or --prompt-ids: either inline,
// "5,17,42" (parse_token_ids, io/token_ids.h), or "@FILE", a regular file
// of at most 256 MiB whose ids are separated by commas and/or whitespace
// (one trailing separator is fine; two commas in a row leave an empty item, an error).
// Errors name the option, and for a file its path, plus the item index (from 0) and text.
Result<std::vector<int32_t>> parse_token_list_option(const std::string& option,
                                                     const std::string& value);

// The demo prompts of `dsv4 generate` (and bench's spec-e2e): text in the style of the built-in
// model's corpus (the King James Bible).
inline const std::vector<std::string> kDemoTexts = {"In the beginning", "And the LORD spake unto Moses, saying,",
                                                    "Blessed are the", "The LORD is my shepherd;"};

// Applies an --isa value ("auto" or a variant name) to the SIMD kernels, after the start-up
// self-test that the variant reproduces the scalar one (model/isa_self_test.h).
Status select_isa(const std::string& isa_flag);
inline constexpr const char* kIsaHelp =
    "SIMD variant of the kernels: auto, scalar, avx2, avx512, avx512bf16 (all give the same bits, checked at start-up)";

}  // namespace dsv4::cli
