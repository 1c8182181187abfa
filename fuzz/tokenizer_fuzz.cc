// libFuzzer target: encode / decode / streaming decode of the tiny tokenizer
// (text.md §5) on arbitrary bytes. Invariants:
//   - every encoded id lies in [0, n_vocab); ordinary-text encoding never yields
//     an added token's id;
//   - decode(encode(x)) == utf8_lossy(x), with and without added tokens (the tiny
//     markers decode to their own text);
//   - decode of an id list fails exactly when an id is out of range; its text is
//     valid UTF-8, and skip_special drops exactly the special tokens;
//   - streaming: each push appends valid UTF-8, and pushes + finish == decode;
//   - BPE: per pre-tokenizer piece, the linear scan and the heap give the same ids,
//     and their concatenation is encode(x) (the merges rebuilt here from the JSON).
// Input: byte 0 selects the mode, the rest is text, or (mode odd) an id list of
// little-endian uint16 values taken modulo 600 (so some ids are out of range), or
// (mode % 4 == 2) tokenizer_config.json text, parsed against the tiny tokenizer:
// errors name the file; bos/eos ids are -1 or in range, and set when add_*_token.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"
#include "text/tokenizer_dir.h"
#include "text/utf8.h"

namespace {

using dsv4::Tokenizer;

const Tokenizer& tiny() {
  static const Tokenizer tok = [] {
    auto files = dsv4::make_tiny_tokenizer();
    if (!files.ok()) std::abort();
    auto t = Tokenizer::from_json(files->tokenizer_json, "tiny tokenizer.json");
    if (!t.ok()) std::abort();
    return std::move(*t);
  }();
  return tok;
}

// The tiny tokenizer's merges and byte ids, rebuilt from its JSON.
struct Merges {
  dsv4::BpeMerges merges;
  int32_t byte_ids[256] = {};
};

const Merges& tiny_merges() {
  static const Merges m = [] {
    Merges out;
    const auto j = nlohmann::json::parse(dsv4::make_tiny_tokenizer()->tokenizer_json);
    const auto& vocab = j["model"]["vocab"];
    for (int b = 0; b < 256; ++b)
      out.byte_ids[b] = vocab.at(dsv4::bytes_to_symbols(std::string(1, static_cast<char>(b)))).get<int32_t>();
    for (const auto& e : j["model"]["merges"]) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      const std::string left = s.substr(0, sp), right = s.substr(sp + 1);
      if (!out.merges.add(vocab.at(left).get<int32_t>(), vocab.at(right).get<int32_t>(),
                          vocab.at(left + right).get<int32_t>()))
        std::abort();
    }
    return out;
  }();
  return m;
}

// Scan and heap agree on every piece; the pieces' ids concatenated are encode(text).
void check_bpe(const Tokenizer& tok, std::string_view text) {
  const Merges& m = tiny_merges();
  std::vector<int32_t> all, scan, heap;
  for (const std::string& piece : tok.pre_tokenize(text)) {
    scan.clear();
    for (const char c : piece) scan.push_back(m.byte_ids[static_cast<uint8_t>(c)]);
    heap = scan;
    m.merges.apply_scan(scan);
    m.merges.apply_heap(heap);
    if (scan != heap) std::abort();
    all.insert(all.end(), scan.begin(), scan.end());
  }
  if (all != tok.encode(text, /*allow_special=*/false)) std::abort();
}

bool valid_utf8(std::string_view s) { return dsv4::utf8_valid_prefix(s) == s.size(); }

// Stream-decodes ids; aborts unless every piece is valid UTF-8 and the whole
// equals `whole`.
void check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& whole) {
  dsv4::StreamDecoder stream(tok);
  std::string streamed, piece;
  for (const int32_t id : ids) {
    piece.clear();
    if (!stream.push(id, piece).ok() || !valid_utf8(piece)) std::abort();
    streamed += piece;
  }
  stream.finish(streamed);
  if (streamed != whole) std::abort();
}

void check_text(const Tokenizer& tok, std::string_view text) {
  const std::string lossy = dsv4::utf8_lossy(text);
  for (const bool allow_special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, allow_special);
    for (const int32_t id : ids) {
      if (id < 0 || id >= tok.n_vocab()) std::abort();
      if (!allow_special) {
        for (const dsv4::AddedToken& t : tok.added_tokens())
          if (t.id == id && t.id >= 3) std::abort();  // 0..2 also live in model.vocab
      }
    }
    auto decoded = tok.decode(ids);
    if (!decoded.ok() || *decoded != lossy) std::abort();
    check_stream(tok, ids, *decoded);
  }
}

void check_ids(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  bool in_range = true;
  std::vector<int32_t> kept;  // ids without the special tokens
  for (const int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) in_range = false;
    else if (!tok.is_special(id)) kept.push_back(id);
  }
  auto decoded = tok.decode(ids);
  if (decoded.ok() != in_range) std::abort();
  if (!in_range) {
    dsv4::StreamDecoder stream(tok);
    std::string out;
    for (const int32_t id : ids) {
      const size_t before = out.size();
      const bool ok = stream.push(id, out).ok();
      if (ok != (id >= 0 && id < tok.n_vocab())) std::abort();
      if (!ok && out.size() != before) std::abort();  // an error appends nothing
    }
    return;
  }
  if (!valid_utf8(*decoded)) std::abort();
  check_stream(tok, ids, *decoded);
  auto skipped = tok.decode(ids, /*skip_special=*/true);
  auto plain = tok.decode(kept);
  if (!skipped.ok() || !plain.ok() || *skipped != *plain) std::abort();
  // The decoded text is valid UTF-8, so it round-trips through encode.
  check_text(tok, *decoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Tokenizer& tok = tiny();
  const uint8_t mode = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((mode & 3) == 2) {
    auto cfg = dsv4::parse_tokenizer_config(rest, "fuzz/tokenizer_config.json", tok);
    if (!cfg.ok()) {
      if (cfg.message().rfind("fuzz/tokenizer_config.json: ", 0) != 0) std::abort();
      return 0;
    }
    for (const int32_t id : {cfg->bos_id, cfg->eos_id})
      if (id < -1 || id >= tok.n_vocab()) std::abort();
    if ((cfg->add_bos_token && cfg->bos_id < 0) || (cfg->add_eos_token && cfg->eos_id < 0)) std::abort();
  } else if (mode & 1) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < rest.size(); i += 2) {
      const auto v = static_cast<uint16_t>(static_cast<uint8_t>(rest[i]) | static_cast<uint8_t>(rest[i + 1]) << 8);
      ids.push_back(static_cast<int32_t>(v % 600) - ((mode & 2) ? 1 : 0));  // -1 possible too
    }
    check_ids(tok, ids);
  } else {
    check_text(tok, rest);
    check_bpe(tok, rest);
  }
  return 0;
}
