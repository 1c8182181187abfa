// Lossy UTF-8 decoding and the streaming assembler (text.md §4.2): the
// assembler fed in any chunking equals whole-buffer lossy decoding.
#include "text/utf8.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace dsv4 {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

// Plain reference: at each position decode one character or one maximal subpart.
std::string lossy_oracle(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    int n = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0x80) n = 1;
    else if (b >= 0xC2 && b <= 0xDF) n = 2;
    else if (b == 0xE0) { n = 3; lo = 0xA0; }
    else if (b == 0xED) { n = 3; hi = 0x9F; }
    else if (b >= 0xE1 && b <= 0xEF) n = 3;
    else if (b == 0xF0) { n = 4; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) n = 4;
    else if (b == 0xF4) { n = 4; hi = 0x8F; }
    if (n == 0) { out += kFFFD; ++i; continue; }
    int j = 1;
    while (j < n && i + j < s.size()) {
      const auto c = static_cast<uint8_t>(s[i + j]);
      if (j == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
      ++j;
    }
    if (j == n) { out.append(s, i, n); i += n; }
    else { out += kFFFD; i += j; }
  }
  return out;
}

TEST(Utf8Test, LossyKnownCases) {
  EXPECT_EQ(utf8_lossy("abc"), "abc");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x99\x82"), "\xF0\x9F\x99\x82");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x99"), kFFFD);              // truncated: one U+FFFD
  EXPECT_EQ(utf8_lossy("a\x80z"), "a" + kFFFD + "z");          // stray continuation
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), kFFFD + kFFFD);            // overlong lead
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // surrogate
  EXPECT_EQ(utf8_lossy("\xE2\x82x"), kFFFD + "x");
  EXPECT_EQ(utf8_lossy("\xF5\xFF"), kFFFD + kFFFD);
  EXPECT_EQ(utf8_valid_prefix("ab\xE2\x82\xAC\xFF"), 5u);
}

TEST(Utf8Test, AssemblerEqualsLossyOnRandomChunking) {
  std::mt19937 rng(7);
  const uint8_t interesting[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1,
                                 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF};
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    const int len = static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k)
      s += static_cast<char>(rng() % 3 ? interesting[rng() % sizeof interesting] : rng() % 256);
    const std::string want = lossy_oracle(s);
    ASSERT_EQ(utf8_lossy(s), want);
    Utf8Assembler a;
    std::string got;
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t n = std::min<size_t>(s.size() - pos, rng() % 5);
      std::string part;
      a.push(std::string_view(s).substr(pos, n), part);
      // Never a split character: every returned chunk is valid UTF-8 on its own.
      ASSERT_EQ(utf8_valid_prefix(part), part.size());
      got += part;
      pos += n;
    }
    a.finish(got);
    ASSERT_EQ(got, want) << "iteration " << iter;
  }
}

TEST(Utf8Test, EmojiSplitAcrossPushes) {
  Utf8Assembler a;
  std::string out;
  a.push("\xF0\x9F\x99", out);
  EXPECT_EQ(out, "");
  EXPECT_TRUE(a.has_pending());
  a.push("\x82", out);
  EXPECT_EQ(out, "\xF0\x9F\x99\x82");
  a.push("\xF0\x9F", out);
  a.finish(out);
  EXPECT_EQ(out, "\xF0\x9F\x99\x82" + kFFFD);
}

}  // namespace
}  // namespace dsv4
