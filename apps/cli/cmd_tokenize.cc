// dsv4 tokenize [--model DIR | --tokenizer FILE] (--text S | --file F | --decode IDS) [--special]:
// encodes text to ids printed comma-separated on one line, or decodes ids (inline or
// @FILE, as --prompt-ids) to their text, written as is with no newline added.
// --model reads DIR/tokenizer.json (+ tokenizer_config.json: BOS first when
// add_bos_token says so); without --model or --tokenizer, the built-in model's.
// --special matches added tokens (<think>, <｜User｜>, ...) in the text; without it the
// text is plain text. Invalid UTF-8 input is encoded as U+FFFD (text.md §1.3).
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "io/file_util.h"
#include "text/tokenizer_dir.h"

namespace dsv4::cli {
namespace {
struct TokenizeArgs {
  std::string model, tokenizer, text, file, decode;
  bool special = false;
};

constexpr uint64_t kMaxTextBytes = uint64_t{256} << 20;

Result<TextModel> load_text_model(const TokenizeArgs& a) {
  if (!a.tokenizer.empty()) {
    Result<Tokenizer> t = Tokenizer::load(a.tokenizer);
    if (!t.ok()) return t.status();
    return TextModel{std::move(t.value()), {}};
  }
  Result<std::string> dir = resolve_model_dir(a.model);
  if (!dir.ok()) return dir.status();
  return load_tokenizer_dir(dir.value());
}
}  // namespace

Command add_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand("tokenize", "Encode text to token ids, or decode ids to text");
  CLI::Option* model = sub->add_option("--model", args->model,
                                       "Model directory with tokenizer.json (default: $DSV4_MODEL if set, else the built-in model)");
  sub->add_option("--tokenizer", args->tokenizer, "A tokenizer.json file")->excludes(model);
  CLI::Option* text = sub->add_option("--text", args->text, "Text to encode");
  CLI::Option* file = sub->add_option("--file", args->file, "File whose bytes are encoded")->excludes(text);
  sub->add_option("--decode", args->decode, "Ids to decode: 5,17,42 or @FILE")
      ->excludes(text)
      ->excludes(file);
  sub->add_flag("--special", args->special, "Match added/special token strings in the text");
  return {sub, [args, sub]() {
    const bool encode_text = sub->count("--text") > 0, encode_file = sub->count("--file") > 0;
    const bool decode = sub->count("--decode") > 0;
    if (!encode_text && !encode_file && !decode)
      return fail(Status::error("tokenize: give one of --text, --file, --decode"));
    Result<TextModel> m = load_text_model(*args);
    if (!m.ok()) return fail(m.status());
    if (decode) {
      Result<std::vector<int32_t>> ids = parse_token_list_option("--decode", args->decode);
      if (!ids.ok()) return fail(ids.status());
      Result<std::string> out = m->tokenizer.decode(ids.value());
      if (!out.ok()) return fail(out.status().with_context("--decode"));
      std::fwrite(out->data(), 1, out->size(), stdout);
      return 0;
    }
    std::string input = args->text;
    if (encode_file) {
      Result<std::vector<uint8_t>> bytes = read_file(args->file, kMaxTextBytes);
      if (!bytes.ok()) return fail(bytes.status().with_context("--file"));
      input.assign(bytes->begin(), bytes->end());
    }
    const std::vector<int32_t> ids = encode_prompt(*m, input, args->special);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line += ',';
      line += std::to_string(ids[i]);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    return 0;
  }};
}

}  // namespace dsv4::cli
