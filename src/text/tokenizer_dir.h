// A model directory's tokenizer (text.md §2): tokenizer.json (required) and
// tokenizer_config.json (optional: add_bos_token / add_eos_token, bos_token /
// eos_token as a string or an AddedToken object, resolved to ids by content).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "text/tokenizer.h"

namespace dsv4 {

struct TokenizerConfig {
  bool add_bos_token = false;
  bool add_eos_token = false;
  int32_t bos_id = -1;  // -1: not named
  int32_t eos_id = -1;
};

// Parses tokenizer_config.json text against a loaded tokenizer. Errors name the
// field: a wrong type, or a bos/eos token the tokenizer does not have; a flag
// set without its token.
Result<TokenizerConfig> parse_tokenizer_config(std::string_view json_text, const std::string& source,
                                               const Tokenizer& tokenizer);

struct TextModel {
  Tokenizer tokenizer;
  TokenizerConfig config;
};

// dir/tokenizer.json and, when present, dir/tokenizer_config.json.
Result<TextModel> load_tokenizer_dir(const std::string& dir);

// Prompt ids of a raw completion prompt: BOS first when add_bos_token says so.
std::vector<int32_t> encode_prompt(const TextModel& model, std::string_view text, bool allow_special);

}  // namespace dsv4
