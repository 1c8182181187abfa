// Test support for the grammar tests: a random walk over the bytes a JsonMatcher allows.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_matcher.h"

namespace dsv4::test {

// A random walk over the allowed bytes (leaning to close after 200 bytes) to a complete value.
// "" with *dead_end set: a state allowed no byte and was not a complete value; "" alone: no
// complete value within the steps.
inline std::string random_walk(const grammar::Grammar& g, std::mt19937& rng, bool* dead_end) {
  grammar::JsonMatcher m(g);
  auto st = std::make_unique<grammar::MatchState>(), next = std::make_unique<grammar::MatchState>();
  m.start(*st);
  std::string text;
  *dead_end = false;
  for (int step = 0; step < 3000; ++step) {
    if (m.accepting(*st) && (rng() % 4 == 0 || text.size() > 200)) return text;
    std::vector<uint8_t> allowed;
    for (int c = 0; c < 256; ++c) {
      m.advance(*st, static_cast<uint8_t>(c), *next);
      if (next->n > 0) allowed.push_back(static_cast<uint8_t>(c));
    }
    if (allowed.empty()) {
      *dead_end = !m.accepting(*st);
      return *dead_end ? "" : text;
    }
    uint8_t c = allowed[rng() % allowed.size()];
    if (text.size() > 200)
      for (uint8_t b : allowed)
        if (b == '}' || b == ']' || b == '"') c = b;
    m.advance(*st, c, *next);
    std::swap(st, next);
    text.push_back(static_cast<char>(c));
  }
  return "";
}

}  // namespace dsv4::test
