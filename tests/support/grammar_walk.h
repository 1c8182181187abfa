// Test support for the grammar tests: random walks over the bytes a JsonMatcher allows, to a
// complete value; a dead end (no byte allowed, value not complete) fails the test. valid_walks:
// the values of n walks, each checked against a schema by json_schema_check.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_matcher.h"
#include "support/json_schema_check.h"

namespace dsv4::test {

// After 200 bytes, every other step takes the first allowed of '"', ']', '}' (strings close,
// then containers; a pattern may need other bytes first); "": no complete value within the steps.
// A dead end fails the test, or with dead_end given sets *dead_end instead (and returns "").
inline std::string random_walk(const grammar::Grammar& g, std::mt19937& rng, bool* dead_end = nullptr) {
  grammar::JsonMatcher m(g);
  auto st = std::make_unique<grammar::MatchState>(), next = std::make_unique<grammar::MatchState>();
  m.start(*st);
  std::string text;
  if (dead_end != nullptr) *dead_end = false;
  for (int step = 0; step < 3000; ++step) {
    if (m.accepting(*st) && (rng() % 4 == 0 || text.size() > 200)) return text;
    std::vector<uint8_t> allowed;
    for (int c = 0; c < 256; ++c) {
      m.advance(*st, static_cast<uint8_t>(c), *next);
      if (next->n > 0) allowed.push_back(static_cast<uint8_t>(c));
    }
    if (allowed.empty()) {
      if (dead_end != nullptr) *dead_end = !m.accepting(*st);
      else EXPECT_TRUE(m.accepting(*st)) << "dead end after " << text;
      return m.accepting(*st) ? text : "";
    }
    uint8_t c = allowed[rng() % allowed.size()];
    if (text.size() > 200 && rng() % 2 == 0)
      for (const uint8_t closer : {'"', ']', '}'})
        if (std::find(allowed.begin(), allowed.end(), closer) != allowed.end()) {
          c = closer;
          break;
        }
    m.advance(*st, c, *next);
    std::swap(st, next);
    text.push_back(static_cast<char>(c));
  }
  return "";
}

// n_walks walks of g from seed: none dead-ends, each complete one is JSON that `check` accepts,
// and more than half complete. Returns their values.
inline std::vector<Json> valid_walks(const grammar::Grammar& g, const Json& check, int n_walks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Json> values;
  for (int i = 0; i < n_walks; ++i) {
    bool dead_end = false;
    const std::string text = random_walk(g, rng, &dead_end);
    EXPECT_FALSE(dead_end) << check.dump() << " after " << text;
    if (text.empty()) continue;
    const Json v = Json::parse(text, nullptr, false);
    EXPECT_FALSE(v.is_discarded()) << text;
    if (v.is_discarded()) continue;
    EXPECT_TRUE(schema_valid(v, check)) << text << " for " << check.dump();
    values.push_back(v);
  }
  EXPECT_GT(values.size(), static_cast<size_t>(n_walks / 2)) << check.dump();
  return values;
}

}  // namespace dsv4::test
