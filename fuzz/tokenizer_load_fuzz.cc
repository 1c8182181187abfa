// libFuzzer target: Tokenizer::from_json on arbitrary bytes. On success the
// tokenizer must keep its promises on a few texts: every id lies in
// [0, n_vocab), decode(encode(x)) == utf8_lossy(x) for ordinary text (BPE
// merges only join byte-level symbols), and streaming decode == whole decode.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

void check_text(const dsv4::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.encode(text, /*allow_special=*/false);
  for (const int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) std::abort();
  auto decoded = tok.decode(ids);
  if (!decoded.ok() || *decoded != dsv4::utf8_lossy(text)) std::abort();
  dsv4::StreamDecoder stream(tok);
  std::string streamed;
  for (const int32_t id : ids)
    if (!stream.push(id, streamed).ok()) std::abort();
  stream.finish(streamed);
  if (streamed != *decoded) std::abort();
  // With added tokens matched the ids stay in range and decode succeeds.
  const std::vector<int32_t> special_ids = tok.encode(text, /*allow_special=*/true);
  for (const int32_t id : special_ids)
    if (id < 0 || id >= tok.n_vocab()) std::abort();
  if (!tok.decode(special_ids).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto tok = dsv4::Tokenizer::from_json(bytes, "fuzz.json");
  if (!tok.ok()) {
    if (tok.message().rfind("fuzz.json: ", 0) != 0) std::abort();
    return 0;
  }
  if (tok->n_vocab() < 256) std::abort();  // every byte has a token
  check_text(*tok, "Hello, world! 123 4567 你好 \xF0\x9F\x98\x80\r\n\t  x");
  check_text(*tok, "\xC3\x28 \xE2\x82 \xFF ok");  // invalid UTF-8 -> U+FFFD
  check_text(*tok, bytes.substr(0, 256));
  return 0;
}
