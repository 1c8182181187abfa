// Test support for the grammar tests: a text run through a JsonMatcher byte by byte.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "grammar/json_matcher.h"

namespace dsv4::test {

// -1: the whole text is a complete value; else the first byte refused (text.size(): a prefix).
inline int64_t match_at(const grammar::Grammar& g, const std::string& text) {
  grammar::JsonMatcher m(g);
  auto st = std::make_unique<grammar::MatchState>(), next = std::make_unique<grammar::MatchState>();
  m.start(*st);
  for (size_t i = 0; i < text.size(); ++i) {
    m.advance(*st, static_cast<uint8_t>(text[i]), *next);
    if (next->n == 0) return static_cast<int64_t>(i);
    std::swap(st, next);
  }
  return m.accepting(*st) ? -1 : static_cast<int64_t>(text.size());
}

}  // namespace dsv4::test
