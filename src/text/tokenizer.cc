#include "text/tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "io/file_util.h"
#include "io/json_bounded.h"
#include "text/byte_level.h"

namespace dsv4 {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxTokenizerBytes = 256ull << 20;

// Field access that names the JSON path in every error.
Result<const json*> member(const json& obj, const std::string& path, const char* key, JsonType type) {
  const std::string where = json_path(path, key);
  const json* v = json_member(obj, key);
  if (v == nullptr) return Status::errorf("{}: missing", where);
  if (!json_is(*v, type))
    return Status::errorf("{}: expected {}, got {}", where, json_type_name(type), json_kind(*v));
  return v;
}

// A flag that must be absent, null or neutral (false / "").
Status require_neutral(const json& obj, const std::string& path, const char* key) {
  const json* v = json_optional(obj, key);
  if (v == nullptr) return {};
  if (v->is_boolean() && !v->get<bool>()) return {};
  if (v->is_string() && v->get_ref<const std::string&>().empty()) return {};
  return Status::errorf("{}.{}: {} is not supported", path, key, v->dump());
}

// A flag that must be absent or equal to `value`.
Status require_bool(const json& obj, const std::string& path, const char* key, bool value) {
  const json* v = json_member(obj, key);
  if (v == nullptr) return {};
  if (!v->is_boolean() || v->get<bool>() != value)
    return Status::errorf("{}.{}: {} is not supported (only {})", path, key, v->dump(), value);
  return {};
}

Result<std::string> block_type(const json& block, const std::string& path) {
  if (!block.is_object()) return Status::errorf("{}: expected object, got {}", path, json_kind(block));
  auto t = member(block, path, "type", JsonType::kString);
  if (!t.ok()) return t.status();
  return (*t)->get<std::string>();
}

Status check_normalizer(const json& root) {
  const json* block = json_optional(root, "normalizer");
  if (block == nullptr) return {};
  auto type = block_type(*block, "normalizer");
  if (!type.ok()) return type.status();
  if (*type == "Sequence") {
    auto list = member(*block, "normalizer", "normalizers", JsonType::kArray);
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
  const json* block = json_optional(root, "post_processor");
  if (block == nullptr) return {};
  auto type = block_type(*block, "post_processor");
  if (!type.ok()) return type.status();
  if (*type != "ByteLevel")
    return Status::errorf("post_processor: type \"{}\" is not supported", *type);
  return {};
}

Status check_decoder(const json& root) {
  const json* block = json_optional(root, "decoder");
  if (block == nullptr) return Status::error("decoder: missing (need ByteLevel)");
  auto type = block_type(*block, "decoder");
  if (!type.ok()) return type.status();
  if (*type != "ByteLevel") return Status::errorf("decoder: type \"{}\" is not supported", *type);
  return {};
}


// The top level: an object with no truncation or padding.
Status check_top_level(const json& root) {
  if (!root.is_object()) return Status::errorf("top level: expected object, got {}", json_kind(root));
  for (const char* key : {"truncation", "padding"}) {
    if (const json* v = json_optional(root, key))
      return Status::errorf("{}: {} is not supported (only null)", key, v->dump());
  }
  return {};
}

// One Split step: Isolated, not inverted, a non-empty Regex or String pattern.
Result<SplitRegex> read_split_step(const json& step, const std::string& path) {
  auto behavior = member(step, path, "behavior", JsonType::kString);
  if (!behavior.ok()) return behavior.status();
  if ((*behavior)->get<std::string>() != "Isolated")
    return Status::errorf("{}.behavior: \"{}\" is not supported (only Isolated)", path,
                          (*behavior)->get<std::string>());
  DSV4_RETURN_IF_ERROR(require_bool(step, path, "invert", false));
  auto pattern = member(step, path, "pattern", JsonType::kObject);
  if (!pattern.ok()) return pattern.status();
  const bool is_regex = (*pattern)->contains("Regex");
  const bool is_string = (*pattern)->contains("String");
  if (is_regex == is_string) return Status::errorf("{}.pattern: expected one of Regex, String", path);
  auto src = member(**pattern, path + ".pattern", is_regex ? "Regex" : "String", JsonType::kString);
  if (!src.ok()) return src.status();
  const std::string& p = (*src)->get_ref<const std::string&>();
  if (p.empty()) return Status::errorf("{}.pattern: empty", path);
  Result<SplitRegex> re = SplitRegex::compile(p, !is_regex);
  if (!re.ok()) return re.status().with_context(path + ".pattern");
  return re;
}

// pre_tokenizer: Split* then ByteLevel (a Sequence, or ByteLevel alone). Returns the splits.
Result<std::vector<SplitRegex>> read_pre_tokenizer(const json& root) {
  const json* pre = json_optional(root, "pre_tokenizer");
  if (pre == nullptr) return Status::error("pre_tokenizer: missing (need ByteLevel)");
  auto type = block_type(*pre, "pre_tokenizer");
  if (!type.ok()) return type.status();
  std::vector<std::pair<const json*, std::string>> steps;
  if (*type == "Sequence") {
    auto list = member(*pre, "pre_tokenizer", "pretokenizers", JsonType::kArray);
    if (!list.ok()) return list.status();
    for (size_t i = 0; i < (*list)->size(); ++i)
      steps.push_back({&(**list)[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]"});
  } else {
    steps.push_back({pre, "pre_tokenizer"});
  }
  std::vector<SplitRegex> splits;
  bool have_byte_level = false;
  for (const auto& [step, path] : steps) {
    auto step_type = block_type(*step, path);
    if (!step_type.ok()) return step_type.status();
    if (have_byte_level)
      return Status::errorf("{}: type \"{}\" after ByteLevel is not supported", path, *step_type);
    if (*step_type == "ByteLevel") {
      DSV4_RETURN_IF_ERROR(check_byte_level(*step, path));
      have_byte_level = true;
    } else if (*step_type == "Split") {
      Result<SplitRegex> re = read_split_step(*step, path);
      if (!re.ok()) return re.status();
      splits.push_back(std::move(re.value()));
    } else {
      return Status::errorf("{}: type \"{}\" is not supported", path, *step_type);
    }
  }
  if (!have_byte_level) return Status::error("pre_tokenizer: no ByteLevel step");
  return splits;
}

// model: a BPE block with every optional feature off.
Result<const json*> bpe_model(const json& root) {
  auto model = member(root, "", "model", JsonType::kObject);
  if (!model.ok()) return model.status();
  const json& m = **model;
  auto type = member(m, "model", "type", JsonType::kString);
  if (!type.ok()) return type.status();
  if ((*type)->get<std::string>() != "BPE")
    return Status::errorf("model: type \"{}\" is not supported", (*type)->get<std::string>());
  for (const char* key : {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                          "fuse_unk", "byte_fallback", "ignore_merges"})
    DSV4_RETURN_IF_ERROR(require_neutral(m, "model", key));
  return model;
}

// One entry of added_tokens (its id in [0, 2^30), content valid UTF-8, no strip options).
Result<AddedToken> read_added_token(const json& a, const std::string& path) {
  if (!a.is_object()) return Status::errorf("{}: expected object", path);
  auto id = member(a, path, "id", JsonType::kInteger);
  if (!id.ok()) return id.status();
  auto content = member(a, path, "content", JsonType::kString);
  if (!content.ok()) return content.status();
  AddedToken t;
  const int64_t idv = (*id)->get<int64_t>();
  if (idv < 0 || idv >= (1 << 30)) return Status::errorf("{}.id: {} is not in [0, 2^30)", path, idv);
  t.id = static_cast<int32_t>(idv);
  t.content = (*content)->get<std::string>();
  if (t.content.empty() || utf8_valid_prefix(t.content) != t.content.size())
    return Status::errorf("{}.content: empty or not valid UTF-8", path);
  for (const char* key : {"single_word", "lstrip", "rstrip"})
    DSV4_RETURN_IF_ERROR(require_bool(a, path, key, false));
  for (const char* key : {"special", "normalized"}) {
    const json* v = json_member(a, key);
    if (v != nullptr && !v->is_boolean())
      return Status::errorf("{}.{}: expected boolean, got {}", path, key, json_kind(*v));
  }
  t.special = a.value("special", false);
  t.normalized = a.value("normalized", !t.special);  // HF's default
  return t;
}

// One merge: "left right" (one space, both sides non-empty) or [left, right].
Status merge_pair(const json& e, const std::string& path, std::string& left, std::string& right) {
  if (e.is_string()) {
    const std::string& s = e.get_ref<const std::string&>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
      return Status::errorf("{}: \"{}\" is not \"left right\"", path, s);
    left.assign(s, 0, sp);
    right.assign(s, sp + 1);
  } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
    left = e[0].get<std::string>();
    right = e[1].get<std::string>();
  } else {
    return Status::errorf("{}: expected \"left right\" or [left, right], got {}", path, e.dump());
  }
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
  Result<json> parsed = parse_json_bounded(json_text);
  if (!parsed.ok()) return parsed.status().with_context(source);
  Tokenizer tok;
  if (Status st = tok.read_json(*parsed); !st.ok()) return st.with_context(source);
  return tok;
}

Status Tokenizer::read_json(const json& root) {
  DSV4_RETURN_IF_ERROR(check_top_level(root));
  DSV4_RETURN_IF_ERROR(check_normalizer(root));
  DSV4_RETURN_IF_ERROR(check_post_processor(root));
  DSV4_RETURN_IF_ERROR(check_decoder(root));
  Result<std::vector<SplitRegex>> splits = read_pre_tokenizer(root);
  if (!splits.ok()) return splits.status();
  splits_ = std::move(*splits);
  Result<const json*> model = bpe_model(root);
  if (!model.ok()) return model.status();
  int64_t max_id = -1;
  DSV4_RETURN_IF_ERROR(read_vocab(**model, max_id));
  DSV4_RETURN_IF_ERROR(read_added_tokens(root, max_id));
  DSV4_RETURN_IF_ERROR(index_ids(max_id));
  DSV4_RETURN_IF_ERROR(read_byte_ids());
  return read_merges(**model);
}

// model.vocab: byte-level token text -> id.
Status Tokenizer::read_vocab(const json& model, int64_t& max_id) {
  auto vocab = member(model, "model", "vocab", JsonType::kObject);
  if (!vocab.ok()) return vocab.status();
  vocab_.reserve((*vocab)->size());
  for (const auto& [key, value] : (*vocab)->items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= (1 << 30))
      return Status::errorf("model.vocab[\"{}\"]: {} is not an id in [0, 2^30)", key, value.dump());
    if (utf8_valid_prefix(key) != key.size() || key.empty())
      return Status::errorf("model.vocab: key \"{}\" is empty or not valid UTF-8", key);
    vocab_.emplace(key, static_cast<int32_t>(value.get<int64_t>()));
    max_id = std::max<int64_t>(max_id, value.get<int64_t>());
  }
  return {};
}

// added_tokens: each one's id, content and flags; an id model.vocab also has must agree.
Status Tokenizer::read_added_tokens(const json& root, int64_t& max_id) {
  auto added = member(root, "", "added_tokens", JsonType::kArray);
  if (!added.ok()) return added.status();
  for (size_t i = 0; i < (*added)->size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    Result<AddedToken> t = read_added_token((**added)[i], path);
    if (!t.ok()) return t.status();
    const auto in_vocab = vocab_.find(t->content);
    if (in_vocab != vocab_.end() && in_vocab->second != t->id)
      return Status::errorf("{}: \"{}\" has id {} but model.vocab gives it {}", path, t->content, t->id,
                            in_vocab->second);
    if (!added_by_text_.emplace(t->content, t->id).second)
      return Status::errorf("{}: content \"{}\" appears twice", path, t->content);
    max_id = std::max<int64_t>(max_id, t->id);
    added_.push_back(std::move(*t));
  }
  return {};
}

// Every id in [0, max_id] names exactly one token: the per-id tables (text, special flag,
// bytes) and the added-token matchers.
Status Tokenizer::index_ids(int64_t max_id) {
  // max_id < the number of entries, checked before the tables are sized by max_id.
  const size_t n_entries = vocab_.size() + added_.size();
  if (static_cast<uint64_t>(max_id) >= n_entries)
    return Status::errorf("id {} is beyond the {} tokens of model.vocab and added_tokens "
                          "(ids must be contiguous from 0)", max_id, n_entries);
  const size_t n = static_cast<size_t>(max_id + 1);
  std::vector<const std::string*> text_of(n, nullptr);
  std::vector<uint8_t> from_added(n, 0);
  for (const auto& [key, id] : vocab_) {
    if (text_of[id] != nullptr)
      return Status::errorf("model.vocab: id {} is given to both \"{}\" and \"{}\"", id, *text_of[id], key);
    text_of[id] = &key;
  }
  special_.assign(n, 0);
  for (const AddedToken& t : added_) {
    if (from_added[t.id]) return Status::errorf("added_tokens: id {} appears twice", t.id);
    if (text_of[t.id] != nullptr && *text_of[t.id] != t.content)
      return Status::errorf("added_tokens: id {} is \"{}\" but model.vocab has \"{}\"", t.id, t.content,
                            *text_of[t.id]);
    text_of[t.id] = &t.content;
    from_added[t.id] = 1;
    special_[t.id] = t.special;
    (t.normalized ? normalized_matcher_ : raw_matcher_).add(t.content, t.id);
  }
  token_bytes_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    if (text_of[id] == nullptr)
      return Status::errorf("id {} has no token (neither model.vocab nor added_tokens; "
                            "ids must be contiguous from 0 to {})", id, max_id);
    std::string& bytes = token_bytes_[id];
    if (!symbols_to_bytes(*text_of[id], bytes)) bytes = *text_of[id];
  }
  return {};
}

// The token of each byte's symbol (text.md §1.6).
Status Tokenizer::read_byte_ids() {
  for (int b = 0; b < 256; ++b) {
    const std::string sym = bytes_to_symbols(std::string(1, static_cast<char>(b)));
    const auto it = vocab_.find(sym);
    if (it == vocab_.end())
      return Status::errorf("model.vocab: no token for byte 0x{:02X} (symbol \"{}\")", b, sym);
    byte_ids_[b] = it->second;
  }
  return {};
}

// model.merges: "left right" or [left, right], in rank order; each side and the merged
// token in model.vocab.
Status Tokenizer::read_merges(const json& model) {
  auto merges = member(model, "model", "merges", JsonType::kArray);
  if (!merges.ok()) return merges.status();
  std::string left, right;
  for (size_t r = 0; r < (*merges)->size(); ++r) {
    const json& e = (**merges)[r];
    const std::string path = "model.merges[" + std::to_string(r) + "]";
    DSV4_RETURN_IF_ERROR(merge_pair(e, path, left, right));
    const auto li = vocab_.find(left), ri = vocab_.find(right);
    const auto res = vocab_.find(left + right);
    if (li == vocab_.end() || ri == vocab_.end())
      return Status::errorf("{}: \"{}\" is not in model.vocab", path, li == vocab_.end() ? left : right);
    if (res == vocab_.end())
      return Status::errorf("{}: the merged token \"{}\" is not in model.vocab", path, left + right);
    if (!merges_.add(li->second, ri->second, res->second))
      return Status::errorf("{}: \"{} {}\" appears twice", path, left, right);
  }
  return {};
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

// Added-token matches inside `range` in text order: pass 1 (normalized: false) over the
// range, pass 2 (normalized: true) over each gap it leaves (§1.4).
void Tokenizer::find_added(std::string_view text, Span range,
                           std::vector<AddedTokenMatcher::Match>& found) const {
  auto pass2 = [&](size_t begin, size_t end) {
    AddedTokenMatcher::Match m;
    const std::string_view gap = text.substr(0, end);
    for (size_t pos = begin; pos < end && normalized_matcher_.find(gap, pos, m); pos = m.begin + m.size)
      found.push_back(m);
  };
  const size_t end = size_t{range.begin} + range.size;
  const std::string_view upto = text.substr(0, end);
  AddedTokenMatcher::Match m;
  size_t pos = range.begin;
  while (pos < end && raw_matcher_.find(upto, pos, m)) {
    pass2(pos, m.begin);
    found.push_back(m);
    pos = m.begin + m.size;
  }
  pass2(pos, end);
}

void Tokenizer::encode_spans_append(std::string_view input, std::span<const Span> special_spans,
                                    std::vector<int32_t>& out) const {
  size_t last_end = 0;
  for (const Span& s : special_spans) {
    DSV4_CHECK(s.begin >= last_end && size_t{s.begin} + s.size <= input.size(),
               "special spans must be sorted, disjoint and inside the text ({}+{} of {})", s.begin, s.size,
               input.size());
    last_end = size_t{s.begin} + s.size;
  }
  // Invalid UTF-8: each piece between span edges made lossy on its own, the spans moved with it.
  std::string sanitized;
  std::vector<Span> moved;
  std::string_view text = input;
  if (utf8_valid_prefix(input) != input.size()) {
    size_t pos = 0;
    auto copy_to = [&](size_t end) {
      sanitized += utf8_lossy(input.substr(pos, end - pos));
      pos = end;
    };
    for (const Span& s : special_spans) {
      copy_to(s.begin);
      const size_t begin = sanitized.size();
      copy_to(size_t{s.begin} + s.size);
      moved.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(sanitized.size() - begin)});
    }
    copy_to(input.size());
    text = sanitized;
    special_spans = moved;
  }
  std::vector<AddedTokenMatcher::Match> found;
  for (const Span& s : special_spans) find_added(text, s, found);
  EncodeScratch scratch;
  size_t pos = 0;
  for (const AddedTokenMatcher::Match& m : found) {
    encode_text(text, {static_cast<uint32_t>(pos), static_cast<uint32_t>(m.begin - pos)}, out, scratch);
    out.push_back(m.id);
    pos = m.begin + m.size;
  }
  encode_text(text, {static_cast<uint32_t>(pos), static_cast<uint32_t>(text.size() - pos)}, out, scratch);
}

void Tokenizer::encode_append(std::string_view text, bool allow_special, std::vector<int32_t>& out) const {
  const Span whole{0, static_cast<uint32_t>(text.size())};
  encode_spans_append(text, allow_special ? std::span<const Span>(&whole, 1) : std::span<const Span>(), out);
}

std::vector<int32_t> Tokenizer::encode_spans(std::string_view text, std::span<const Span> special_spans) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  encode_spans_append(text, special_spans, ids);
  return ids;
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
