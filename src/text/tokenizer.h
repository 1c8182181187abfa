// Byte-level BPE tokenizer loaded from a HuggingFace tokenizer.json of the
// DeepSeek family (text.md §1):
//   encode(text) = for each segment of split_added_tokens(text) (two passes, §1.4;
//                  encode_spans: matched only inside the given spans):
//                    an added token's id, or
//                    for each piece of Split(R1)..Split(Rk) (§1.5):
//                      bpe(BYTE2CHAR[utf8 bytes of piece]) (§1.6, §1.7)
//   decode(ids)  = lossy_utf8(concat(BYTES[id])) (§1.8)
// Supported blocks, anything else rejected by name: normalizer null or an empty
// Sequence; pre_tokenizer a Sequence of Split (Isolated, not inverted) ending in
// ByteLevel (add_prefix_space false, use_regex false) or that ByteLevel alone;
// post_processor null or ByteLevel (adds no tokens); decoder ByteLevel; model BPE
// without dropout, unk token, prefixes/suffixes, byte fallback or ignore_merges.
// Invalid UTF-8 input: each maximal invalid subsequence is encoded as U+FFFD.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/split_regex.h"
#include "text/utf8.h"

namespace dsv4 {

struct EncodeScratch;  // per-call buffers of encode (tokenizer.cc)

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
};

class Tokenizer {
 public:
  // Parses tokenizer.json text; `source` names it in error messages.
  static Result<Tokenizer> from_json(std::string_view json_text, const std::string& source);
  // Reads and parses a tokenizer.json file (at most 256 MiB).
  static Result<Tokenizer> load(const std::string& path);

  // Number of ids; every id in [0, n_vocab) has a token.
  int32_t n_vocab() const { return static_cast<int32_t>(token_bytes_.size()); }

  // allow_special: added tokens in the text become their ids (the reference
  // behaviour); false: the whole text is ordinary text (for untrusted input).
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const;
  void encode_append(std::string_view text, bool allow_special, std::vector<int32_t>& out) const;
  // Added tokens are matched only inside `special_spans` (sorted, disjoint, inside the text);
  // elsewhere an added-token string is ordinary text. Pieces and BPE run over the text between
  // matched tokens as in encode(): encode(t, true) == encode_spans(t, {{0, |t|}}) and
  // encode(t, false) == encode_spans(t, {}). A chat prompt passes the template's own spans.
  std::vector<int32_t> encode_spans(std::string_view text, std::span<const Span> special_spans) const;

  // Lossy UTF-8 of the tokens' bytes. Error: an id outside [0, n_vocab).
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Raw bytes of one token (§4.1). Precondition: 0 <= id < n_vocab().
  const std::string& token_bytes(int32_t id) const { return token_bytes_[id]; }
  // Id of an added token's content, else of a model.vocab key (byte-level form).
  std::optional<int32_t> token_id(std::string_view content) const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  bool is_special(int32_t id) const;
  size_t n_merges() const { return merges_.size(); }

  // Pre-tokenizer pieces of a text without added tokens (for tests).
  std::vector<std::string> pre_tokenize(std::string_view text) const;

 private:
  Tokenizer() = default;
  // from_json's stages (tokenizer.cc); each error names the JSON path.
  Status read_json(const nlohmann::json& root);
  Status read_vocab(const nlohmann::json& model, int64_t& max_id);
  Status read_added_tokens(const nlohmann::json& root, int64_t& max_id);
  Status index_ids(int64_t max_id);
  Status read_byte_ids();
  Status read_merges(const nlohmann::json& model);
  void find_added(std::string_view text, Span range, std::vector<AddedTokenMatcher::Match>& found) const;
  void encode_spans_append(std::string_view text, std::span<const Span> special_spans,
                           std::vector<int32_t>& out) const;
  void encode_text(std::string_view text, Span span, std::vector<int32_t>& out,
                   EncodeScratch& scratch) const;
  void split_pieces(std::string_view text, Span span, EncodeScratch& scratch) const;

  std::vector<SplitRegex> splits_;
  BpeMerges merges_;
  int32_t byte_ids_[256] = {};
  std::unordered_map<std::string, int32_t> vocab_;         // model.vocab
  std::unordered_map<std::string, int32_t> added_by_text_;  // added token content -> id
  std::vector<AddedToken> added_;
  std::vector<uint8_t> special_;  // [n_vocab]
  AddedTokenMatcher raw_matcher_;         // normalized: false (pass 1)
  AddedTokenMatcher normalized_matcher_;  // normalized: true (pass 2)
  std::vector<std::string> token_bytes_;  // [n_vocab]
};

// Streaming detokenizer (text.md §4.2): pushes each id's bytes through a UTF-8
// assembler, so the text it returns never ends inside a character.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  // Appends the text completed by `id`. Error: id out of range (nothing appended).
  Status push(int32_t id, std::string& out);
  // Appends U+FFFD if a partial character is pending; the decoder can be reused.
  void finish(std::string& out) { utf8_.finish(out); }

 private:
  const Tokenizer* tokenizer_;
  Utf8Assembler utf8_;
};

}  // namespace dsv4
