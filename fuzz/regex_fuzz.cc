// libFuzzer target: JSON Schema `pattern` compilation (compile_regex) on arbitrary bytes. Input:
// the pattern, then optionally a NUL and a UTF-8 text to step through. Invariants: an error
// starts "pattern: " (the schema compiler prefixes its JSON path); a compiled automaton keeps
// every state in range or -1, and from each live state some accepting continuation exists,
// of length 0 exactly when the state accepts.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "grammar/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view pattern = input.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  auto re = dsv4::grammar::compile_regex(pattern);
  if (!re.ok()) {
    if (re.message().rfind("pattern: ", 0) != 0) std::abort();
    return 0;
  }
  int32_t state = re->start();
  for (unsigned char c : text) {
    if (state < 0) break;
    if (state >= re->n_states()) std::abort();
    const int64_t shortest = re->shortest_accepting_length(state);
    if (shortest < 0 || (shortest == 0) != re->accepting(state)) std::abort();
    // Bytes as code points, and a few far ones: every class is reachable.
    state = re->step(state, c < 0xF0 ? c : 0x10000u + (c - 0xF0u) * 0x10000u);
  }
  if (state >= re->n_states()) std::abort();
  (void)dsv4::grammar::matches_utf8(*re, text);
  return 0;
}
