#include "text/tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "io/json_bounded.h"
#include "text/byte_level.h"

namespace dsv4 {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxTokenizerBytes = 256ull << 20;

std::string type_name(const json& j) { return j.type_name(); }

// Field access that names the JSON path in every error.
Result<const json*> member(const json& obj, const std::string& path, const char* key,
                           json::value_t type) {
  const auto it = obj.find(key);
  const std::string where = path.empty() ? key : path + "." + key;
  if (it == obj.end()) return Status::errorf("{}: missing", where);
  const bool ok = it->type() == type ||
                  (type == json::value_t::number_integer && it->is_number_unsigned());
  if (!ok)
    return Status::errorf("{}: expected {}, got {}", where, json(type).type_name(),
                          type_name(*it));
  return &*it;
}

// A flag that must be absent, null or equal to `allowed` (false / "" / null).
Status require_neutral(const json& obj, const std::string& path, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (it->is_boolean() && !it->get<bool>()) return {};
  if (it->is_string() && it->get_ref<const std::string&>().empty()) return {};
  return Status::errorf("{}.{}: {} is not supported", path, key, it->dump());
}

Status require_bool(const json& obj, const std::string& path, const char* key, bool value) {
  const auto it = obj.find(key);
  if (it == obj.end()) return {};
  if (!it->is_boolean() || it->get<bool>() != value)
    return Status::errorf("{}.{}: {} is not supported (only {})", path, key, it->dump(), value);
  return {};
}

Result<std::string> block_type(const json& block, const std::string& path) {
  if (!block.is_object()) return Status::errorf("{}: expected object, got {}", path, type_name(block));
  auto t = member(block, path, "type", json::value_t::string);
  if (!t.ok()) return t.status();
  return (*t)->get<std::string>();
}

Status check_normalizer(const json& root) {
  const auto it = root.find("normalizer");
  if (it == root.end() || it->is_null()) return {};
  auto type = block_type(*it, "normalizer");
  if (!type.ok()) return type.status();
  if (*type == "Sequence") {
    auto list = member(*it, "normalizer", "normalizers", json::value_t::array);
    if (!list.ok()) return list.status();
    if ((*list)->empty()) return {};
    auto inner = block_type((**list)[0], "normalizer.normalizers[0]");
    if (!inner.ok()) return inner.status();
    return Status::errorf("normalizer.normalizers[0]: type \"{}\" is not supported", *inner);
  }
  return Status::errorf("normalizer: type \"{}\" is not supported", *type);
}

Status check_byte_level(const json& block, const std::string& path) {
  DSV4_RETURN_IF_ERROR(require_bool(block, path, "add_prefix_space", false));
  DSV4_RETURN_IF_ERROR(require_bool(block, path, "use_regex", false));
  return {};
}

Status check_post_processor(const json& root) {
  const auto it = root.find("post_processor");
  if (it == root.end() || it->is_null()) return {};
  auto type = block_type(*it, "post_processor");
  if (!type.ok()) return type.status();
  if (*type != "ByteLevel")
    return Status::errorf("post_processor: type \"{}\" is not supported", *type);
  return {};
}

Status check_decoder(const json& root) {
  const auto it = root.find("decoder");
  if (it == root.end() || it->is_null()) return Status::error("decoder: missing (need ByteLevel)");
  auto type = block_type(*it, "decoder");
  if (!type.ok()) return type.status();
  if (*type != "ByteLevel") return Status::errorf("decoder: type \"{}\" is not supported", *type);
  return {};
}

}  // namespace

// Per-call buffers of encode().
struct EncodeScratch {
  SplitRegex::Scratch regex;
  std::vector<Span> pieces, next;
  std::vector<int32_t> symbols;
};

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  Result<std::vector<uint8_t>> bytes = read_file(path, kMaxTokenizerBytes);
  if (!bytes.ok()) return bytes.status();
  const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  return from_json(text, path);
}

Result<Tokenizer> Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  auto fail = [&](const Status& st) -> Result<Tokenizer> { return st.with_context(source); };
  Result<json> parsed = parse_json_bounded(json_text);
  if (!parsed.ok()) return fail(parsed.status());
  const json& root = *parsed;
  if (!root.is_object()) return fail(Status::errorf("top level: expected object, got {}", type_name(root)));
  for (const char* key : {"truncation", "padding"}) {
    const auto it = root.find(key);
    if (it != root.end() && !it->is_null())
      return fail(Status::errorf("{}: {} is not supported (only null)", key, it->dump()));
  }

  Tokenizer tok;
  if (Status st = check_normalizer(root); !st.ok()) return fail(st);
  if (Status st = check_post_processor(root); !st.ok()) return fail(st);
  if (Status st = check_decoder(root); !st.ok()) return fail(st);

  // pre_tokenizer: Split* then ByteLevel.
  {
    const auto it = root.find("pre_tokenizer");
    if (it == root.end() || it->is_null())
      return fail(Status::error("pre_tokenizer: missing (need ByteLevel)"));
    auto type = block_type(*it, "pre_tokenizer");
    if (!type.ok()) return fail(type.status());
    std::vector<std::pair<const json*, std::string>> steps;
    if (*type == "Sequence") {
      auto list = member(*it, "pre_tokenizer", "pretokenizers", json::value_t::array);
      if (!list.ok()) return fail(list.status());
      for (size_t i = 0; i < (*list)->size(); ++i)
        steps.push_back({&(**list)[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]"});
    } else {
      steps.push_back({&*it, "pre_tokenizer"});
    }
    bool have_byte_level = false;
    for (const auto& [step, path] : steps) {
      auto st_type = block_type(*step, path);
      if (!st_type.ok()) return fail(st_type.status());
      if (have_byte_level)
        return fail(Status::errorf("{}: type \"{}\" after ByteLevel is not supported", path, *st_type));
      if (*st_type == "ByteLevel") {
        if (Status st = check_byte_level(*step, path); !st.ok()) return fail(st);
        have_byte_level = true;
      } else if (*st_type == "Split") {
        auto behavior = member(*step, path, "behavior", json::value_t::string);
        if (!behavior.ok()) return fail(behavior.status());
        if ((*behavior)->get<std::string>() != "Isolated")
          return fail(Status::errorf("{}.behavior: \"{}\" is not supported (only Isolated)", path,
                                     (*behavior)->get<std::string>()));
        if (Status st = require_bool(*step, path, "invert", false); !st.ok()) return fail(st);
        auto pattern = member(*step, path, "pattern", json::value_t::object);
        if (!pattern.ok()) return fail(pattern.status());
        const bool is_regex = (*pattern)->contains("Regex");
        const bool is_string = (*pattern)->contains("String");
        if (is_regex == is_string)
          return fail(Status::errorf("{}.pattern: expected one of Regex, String", path));
        auto src = member(**pattern, path + ".pattern", is_regex ? "Regex" : "String",
                          json::value_t::string);
        if (!src.ok()) return fail(src.status());
        const std::string& p = (*src)->get_ref<const std::string&>();
        if (p.empty()) return fail(Status::errorf("{}.pattern: empty", path));
        Result<SplitRegex> re = SplitRegex::compile(p, !is_regex);
        if (!re.ok()) return fail(re.status().with_context(path + ".pattern"));
        tok.splits_.push_back(std::move(re.value()));
      } else {
        return fail(Status::errorf("{}: type \"{}\" is not supported", path, *st_type));
      }
    }
    if (!have_byte_level) return fail(Status::error("pre_tokenizer: no ByteLevel step"));
  }

  // model: BPE vocab and merges.
  auto model = member(root, "", "model", json::value_t::object);
  if (!model.ok()) return fail(model.status());
  const json& m = **model;
  auto mtype = member(m, "model", "type", json::value_t::string);
  if (!mtype.ok()) return fail(mtype.status());
  if ((*mtype)->get<std::string>() != "BPE")
    return fail(Status::errorf("model: type \"{}\" is not supported", (*mtype)->get<std::string>()));
  for (const char* key : {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                          "fuse_unk", "byte_fallback", "ignore_merges"})
    if (Status st = require_neutral(m, "model", key); !st.ok()) return fail(st);
  auto vocab = member(m, "model", "vocab", json::value_t::object);
  if (!vocab.ok()) return fail(vocab.status());
  int64_t max_id = -1;
  tok.vocab_.reserve((*vocab)->size());
  for (const auto& [key, value] : (*vocab)->items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= (1 << 30))
      return fail(Status::errorf("model.vocab[\"{}\"]: {} is not an id in [0, 2^30)", key, value.dump()));
    if (utf8_valid_prefix(key) != key.size() || key.empty())
      return fail(Status::errorf("model.vocab: key \"{}\" is empty or not valid UTF-8", key));
    tok.vocab_.emplace(key, static_cast<int32_t>(value.get<int64_t>()));
    max_id = std::max<int64_t>(max_id, value.get<int64_t>());
  }

  // added_tokens
  auto added = member(root, "", "added_tokens", json::value_t::array);
  if (!added.ok()) return fail(added.status());
  for (size_t i = 0; i < (*added)->size(); ++i) {
    const json& a = (**added)[i];
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object()) return fail(Status::errorf("{}: expected object", path));
    auto id = member(a, path, "id", json::value_t::number_integer);
    if (!id.ok()) return fail(id.status());
    auto content = member(a, path, "content", json::value_t::string);
    if (!content.ok()) return fail(content.status());
    AddedToken t;
    const int64_t idv = (*id)->get<int64_t>();
    if (idv < 0 || idv >= (1 << 30)) return fail(Status::errorf("{}.id: {} is not in [0, 2^30)", path, idv));
    t.id = static_cast<int32_t>(idv);
    t.content = (*content)->get<std::string>();
    if (t.content.empty() || utf8_valid_prefix(t.content) != t.content.size())
      return fail(Status::errorf("{}.content: empty or not valid UTF-8", path));
    for (const char* key : {"single_word", "lstrip", "rstrip"})
      if (Status st = require_bool(a, path, key, false); !st.ok()) return fail(st);
    for (const char* key : {"special", "normalized"}) {
      const auto it = a.find(key);
      if (it != a.end() && !it->is_boolean())
        return fail(Status::errorf("{}.{}: expected boolean, got {}", path, key, type_name(*it)));
    }
    t.special = a.value("special", false);
    t.normalized = a.value("normalized", !t.special);  // HF's default
    const auto in_vocab = tok.vocab_.find(t.content);
    if (in_vocab != tok.vocab_.end() && in_vocab->second != t.id)
      return fail(Status::errorf("{}: \"{}\" has id {} but model.vocab gives it {}", path,
                                 t.content, t.id, in_vocab->second));
    if (!tok.added_by_text_.emplace(t.content, t.id).second)
      return fail(Status::errorf("{}: content \"{}\" appears twice", path, t.content));
    max_id = std::max<int64_t>(max_id, t.id);
    tok.added_.push_back(std::move(t));
  }

  // Every id in [0, max_id] names exactly one token, so max_id < the number of
  // entries (checked before the per-id tables are sized by max_id).
  const size_t n_entries = tok.vocab_.size() + tok.added_.size();
  if (static_cast<uint64_t>(max_id) >= n_entries)
    return fail(Status::errorf("id {} is beyond the {} tokens of model.vocab and added_tokens "
                               "(ids must be contiguous from 0)", max_id, n_entries));
  const size_t n = static_cast<size_t>(max_id + 1);
  std::vector<const std::string*> text_of(n, nullptr);
  std::vector<uint8_t> from_added(n, 0);
  for (const auto& [key, id] : tok.vocab_) {
    if (text_of[id] != nullptr)
      return fail(Status::errorf("model.vocab: id {} is given to both \"{}\" and \"{}\"", id,
                                 *text_of[id], key));
    text_of[id] = &key;
  }
  tok.special_.assign(n, 0);
  for (const AddedToken& t : tok.added_) {
    if (from_added[t.id])
      return fail(Status::errorf("added_tokens: id {} appears twice", t.id));
    if (text_of[t.id] != nullptr && *text_of[t.id] != t.content)
      return fail(Status::errorf("added_tokens: id {} is \"{}\" but model.vocab has \"{}\"", t.id,
                                 t.content, *text_of[t.id]));
    text_of[t.id] = &t.content;
    from_added[t.id] = 1;
    tok.special_[t.id] = t.special;
    (t.normalized ? tok.normalized_matcher_ : tok.raw_matcher_).add(t.content, t.id);
  }
  tok.token_bytes_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    if (text_of[id] == nullptr)
      return fail(Status::errorf("id {} has no token (neither model.vocab nor added_tokens; "
                                 "ids must be contiguous from 0 to {})", id, max_id));
    std::string& bytes = tok.token_bytes_[id];
    if (!symbols_to_bytes(*text_of[id], bytes)) bytes = *text_of[id];
  }

  // Byte symbols, then merges.
  for (int b = 0; b < 256; ++b) {
    const std::string sym = bytes_to_symbols(std::string(1, static_cast<char>(b)));
    const auto it = tok.vocab_.find(sym);
    if (it == tok.vocab_.end())
      return fail(Status::errorf("model.vocab: no token for byte 0x{:02X} (symbol \"{}\")", b, sym));
    tok.byte_ids_[b] = it->second;
  }
  auto merges = member(m, "model", "merges", json::value_t::array);
  if (!merges.ok()) return fail(merges.status());
  std::string left, right;
  for (size_t r = 0; r < (*merges)->size(); ++r) {
    const json& e = (**merges)[r];
    const std::string path = "model.merges[" + std::to_string(r) + "]";
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
        return fail(Status::errorf("{}: \"{}\" is not \"left right\"", path, s));
      left.assign(s, 0, sp);
      right.assign(s, sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      return fail(Status::errorf("{}: expected \"left right\" or [left, right], got {}", path, e.dump()));
    }
    const auto li = tok.vocab_.find(left), ri = tok.vocab_.find(right);
    const auto res = tok.vocab_.find(left + right);
    if (li == tok.vocab_.end() || ri == tok.vocab_.end())
      return fail(Status::errorf("{}: \"{}\" is not in model.vocab", path,
                                 li == tok.vocab_.end() ? left : right));
    if (res == tok.vocab_.end())
      return fail(Status::errorf("{}: the merged token \"{}\" is not in model.vocab", path, left + right));
    if (!tok.merges_.add(li->second, ri->second, res->second))
      return fail(Status::errorf("{}: \"{} {}\" appears twice", path, left, right));
  }
  return tok;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view content) const {
  const std::string key(content);
  if (const auto it = added_by_text_.find(key); it != added_by_text_.end()) return it->second;
  if (const auto it = vocab_.find(key); it != vocab_.end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < n_vocab() && special_[id] != 0;
}

void Tokenizer::split_pieces(std::string_view text, Span span, EncodeScratch& s) const {
  s.pieces.clear();
  s.pieces.push_back(span);
  for (const SplitRegex& re : splits_) {
    s.next.clear();
    for (const Span& p : s.pieces) re.split(text, p, s.next, s.regex);
    s.pieces.swap(s.next);
  }
}

void Tokenizer::encode_text(std::string_view text, Span span, std::vector<int32_t>& out,
                            EncodeScratch& s) const {
  if (span.size == 0) return;
  split_pieces(text, span, s);
  for (const Span& p : s.pieces) {
    s.symbols.resize(p.size);
    for (uint32_t i = 0; i < p.size; ++i)
      s.symbols[i] = byte_ids_[static_cast<uint8_t>(text[p.begin + i])];
    merges_.apply(s.symbols);
    out.insert(out.end(), s.symbols.begin(), s.symbols.end());
  }
}

void Tokenizer::encode_append(std::string_view input, bool allow_special,
                              std::vector<int32_t>& out) const {
  std::string sanitized;
  std::string_view text = input;
  if (utf8_valid_prefix(input) != input.size()) {
    sanitized = utf8_lossy(input);
    text = sanitized;
  }
  EncodeScratch scratch;
  if (!allow_special) {
    encode_text(text, {0, static_cast<uint32_t>(text.size())}, out, scratch);
    return;
  }
  // Pass 1 (normalized: false) over the text; pass 2 (normalized: true) over each gap.
  auto pass2 = [&](size_t begin, size_t end) {
    AddedTokenMatcher::Match m;
    size_t pos = begin;
    const std::string_view gap = text.substr(0, end);
    while (pos < end && normalized_matcher_.find(gap, pos, m)) {
      encode_text(text, {static_cast<uint32_t>(pos), static_cast<uint32_t>(m.begin - pos)}, out, scratch);
      out.push_back(m.id);
      pos = m.begin + m.size;
    }
    encode_text(text, {static_cast<uint32_t>(pos), static_cast<uint32_t>(end - pos)}, out, scratch);
  };
  AddedTokenMatcher::Match m;
  size_t pos = 0;
  while (pos < text.size() && raw_matcher_.find(text, pos, m)) {
    pass2(pos, m.begin);
    out.push_back(m.id);
    pos = m.begin + m.size;
  }
  pass2(pos, text.size());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  encode_append(text, allow_special, ids);
  return ids;
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view input) const {
  const std::string text = utf8_lossy(input);
  EncodeScratch scratch;
  split_pieces(text, {0, static_cast<uint32_t>(text.size())}, scratch);
  std::vector<std::string> pieces;
  for (const Span& p : scratch.pieces) pieces.emplace_back(text.substr(p.begin, p.size));
  return pieces;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= n_vocab())
      return Status::errorf("token id {} (position {}) is outside the vocabulary [0, {})", id, i,
                            n_vocab());
    if (skip_special && special_[id]) continue;
    bytes += token_bytes_[id];
  }
  return utf8_lossy(bytes);
}

Status StreamDecoder::push(int32_t id, std::string& out) {
  if (id < 0 || id >= tokenizer_->n_vocab())
    return Status::errorf("token id {} is outside the vocabulary [0, {})", id, tokenizer_->n_vocab());
  utf8_.push(tokenizer_->token_bytes(id), out);
  return {};
}

}  // namespace dsv4
