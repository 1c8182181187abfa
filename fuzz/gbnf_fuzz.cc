// libFuzzer target: GBNF grammars (compile_gbnf_output, grammar/gbnf.h) on arbitrary bytes.
// Input: the grammar, then optionally a NUL and a text to step through its matcher. Invariants:
// an error is a message; a compiled grammar never dead-ends: along the text's allowed prefix,
// every state reached either accepts or allows some next byte.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <utility>

#include "grammar/json_matcher.h"
#include "grammar/text_constraint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsv4::grammar;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  auto g = compile_gbnf_output(input.substr(0, nul));
  if (!g.ok()) {
    if (g.message().empty()) std::abort();
    return 0;
  }
  JsonMatcher m(*g);
  auto st = std::make_unique<MatchState>(), next = std::make_unique<MatchState>();
  m.start(*st);
  for (unsigned char c : text) {
    bool any = m.accepting(*st);
    for (int b = 0; b < 256 && !any; ++b) {
      m.advance(*st, static_cast<uint8_t>(b), *next);
      any = next->n > 0;
    }
    if (!any) std::abort();  // a dead end
    m.advance(*st, c, *next);
    if (next->n == 0) break;
    std::swap(st, next);
  }
  return 0;
}
