// Test support for the token-mask tests: a small random vocabulary of the pieces string bodies
// meet, and random walks of a grammar over it on which every masker's mask must equal the tokens
// JsonMatcher::feed takes (the brute force).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/token_mask.h"

namespace dsv4::test {

using grammar::Grammar;
using grammar::JsonMatcher;
using grammar::MatchState;
using grammar::TokenMasker;

// Every byte alone, then random runs of pieces a string body meets: text, digits, escapes,
// UTF-8 (whole and split), quotes, the DSML closing tag and its parts, and a few long ones.
inline std::vector<std::string> random_vocab(uint32_t seed) {
  std::vector<std::string> vocab;
  for (int b = 1; b < 256; ++b) vocab.push_back(std::string(1, static_cast<char>(b)));
  const std::vector<std::string> pieces = {"a", "b", "c", "z", "ab", "T", "Z", "-", ":", ".", "@", "0", "1", "9", "12",
                                           " ", "x", "\"", "\\", "\\n", "\\\"", "\\u00", "\\u001f", "\\ud83d",
                                           "\\ude00", "é", "\xc3", "\xa9", "€", "\xe2\x82", "<", "</", "｜DSML｜",
                                           "</｜DSML｜parameter>", ", ", "\": \"", "{\"", "}", "\n"};
  std::mt19937 rng(seed);
  for (int t = 0; t < 700; ++t) {
    std::string token;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < n; ++k) token += pieces[rng() % pieces.size()];
    vocab.push_back(token);
  }
  vocab.push_back(std::string(24, 'a'));
  vocab.push_back(std::string(17, 'b') + "-123");
  return vocab;
}

struct Walker {
  const std::vector<std::string>& vocab;
  const Grammar& g;
  std::vector<TokenMasker*> maskers;  // each compared with the brute force

  // Random walks; at each state every masker's mask equals the tokens feed() takes.
  void run(uint32_t seed, int walks, int steps) {
    JsonMatcher m(g);
    std::mt19937 rng(seed);
    auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
    std::vector<uint64_t> mask((vocab.size() + 63) / 64);
    for (int walk = 0; walk < walks; ++walk) {
      m.start(*st);
      for (int step = 0; step < steps && !(m.accepting(*st) && rng() % 3 == 0); ++step) {
        std::vector<int32_t> want, closing;
        for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id)
          if (m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp)) {
            want.push_back(id);
            if (vocab[id].find_first_of("\"<}") != std::string::npos) closing.push_back(id);
          }
        for (TokenMasker* masker : maskers) {
          const int64_t n = masker->fill(m, *st, mask.data());
          std::vector<int32_t> got;
          for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id)
            if (mask[id >> 6] >> (id & 63) & 1) got.push_back(id);
          ASSERT_EQ(got, want) << "walk " << walk << " step " << step;
          ASSERT_EQ(n, static_cast<int64_t>(want.size()));
        }
        if (want.empty()) break;
        const std::vector<int32_t>& pick = !closing.empty() && rng() % 5 == 0 ? closing : want;
        const int32_t id = pick[rng() % pick.size()];
        ASSERT_TRUE(m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp));
        std::swap(st, out);
      }
    }
  }
};

}  // namespace dsv4::test
