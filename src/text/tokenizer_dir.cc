#include "text/tokenizer_dir.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "io/json_bounded.h"

namespace dsv4 {
namespace {

using json = nlohmann::json;

// bos_token / eos_token: absent, null, a string, or {"content": string, ...}.
Result<int32_t> token_field(const json& root, const char* key, const Tokenizer& tok) {
  const json* v = json_optional(root, key);
  if (v == nullptr) return -1;
  std::string content;
  const json* inner = v->is_object() ? json_member(*v, "content") : nullptr;
  if (json_read(*v, content) != JsonRead::kOk && (inner == nullptr || json_read(*inner, content) != JsonRead::kOk))
    return Status::errorf("{}: expected a string or an object with \"content\", got {}", key, v->dump());
  const std::optional<int32_t> id = tok.token_id(content);
  if (!id) return Status::errorf("{}: \"{}\" is not a token of tokenizer.json", key, content);
  return *id;
}

Result<bool> bool_field(const json& root, const char* key) {
  const json* v = json_optional(root, key);
  bool value = false;
  if (v != nullptr && json_read(*v, value) != JsonRead::kOk)
    return Status::errorf("{}: expected boolean, got {}", key, v->dump());
  return value;
}

}  // namespace

Result<TokenizerConfig> parse_tokenizer_config(std::string_view json_text, const std::string& source,
                                               const Tokenizer& tokenizer) {
  Result<json> parsed = parse_json_bounded(json_text);
  if (!parsed.ok()) return parsed.status().with_context(source);
  const json& root = *parsed;
  if (!root.is_object()) return Status::errorf("{}: top level: expected object", source);
  TokenizerConfig cfg;
  Result<bool> add_bos = bool_field(root, "add_bos_token");
  Result<bool> add_eos = bool_field(root, "add_eos_token");
  Result<int32_t> bos = token_field(root, "bos_token", tokenizer);
  Result<int32_t> eos = token_field(root, "eos_token", tokenizer);
  for (const Status& st : {add_bos.status(), add_eos.status(), bos.status(), eos.status()})
    if (!st.ok()) return st.with_context(source);
  cfg.add_bos_token = *add_bos;
  cfg.add_eos_token = *add_eos;
  cfg.bos_id = *bos;
  cfg.eos_id = *eos;
  if (cfg.add_bos_token && cfg.bos_id < 0)
    return Status::errorf("{}: add_bos_token is true but bos_token is not set", source);
  if (cfg.add_eos_token && cfg.eos_id < 0)
    return Status::errorf("{}: add_eos_token is true but eos_token is not set", source);
  return cfg;
}

Result<TextModel> load_tokenizer_dir(const std::string& dir) {
  Result<Tokenizer> tok = Tokenizer::load(dir + "/tokenizer.json");
  if (!tok.ok()) return tok.status();
  TextModel model{std::move(tok.value()), {}};
  const std::string cfg_path = dir + "/tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(cfg_path, ec)) {
    Result<std::vector<uint8_t>> bytes = read_file(cfg_path, 16u << 20);
    if (!bytes.ok()) return bytes.status();
    const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    Result<TokenizerConfig> cfg = parse_tokenizer_config(text, cfg_path, model.tokenizer);
    if (!cfg.ok()) return cfg.status();
    model.config = *cfg;
  }
  return model;
}

std::vector<int32_t> encode_prompt(const TextModel& model, std::string_view text, bool allow_special) {
  std::vector<int32_t> ids;
  if (model.config.add_bos_token) ids.push_back(model.config.bos_id);
  model.tokenizer.encode_append(text, allow_special, ids);
  if (model.config.add_eos_token) ids.push_back(model.config.eos_id);
  return ids;
}

}  // namespace dsv4
