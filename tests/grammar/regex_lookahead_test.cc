// Lookahead at the string's start and word boundaries (regex_lookahead.h, regex.h): hand cases
// from SchemaStore, refusals where a lookahead is not at the start, and random patterns against
// std::regex_search (ECMAScript) over {a, b, -} (word and non-word code points).
#include "grammar/regex_lookahead.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

namespace dsv4::grammar {
namespace regex_lookahead_test {  // named: the grammar tests build as one unity translation unit

struct Case {
  std::string pattern;
  std::vector<std::string> yes, no;
};

TEST(RegexLookahead, HandTable) {
  const std::vector<Case> cases = {
      {"^(?!@@)[@a-zA-Z0-9_-]+$", {"a", "@a", "a@@"}, {"@@", "@@x", ""}},
      {"^(?!pattern$).*$", {"", "patterns", "patter", "xpattern"}, {"pattern"}},
      {"^(?!io\\.papermc\\.)([a-zA-Z_$][a-zA-Z\\d_$]*\\.)*[a-zA-Z_$][a-zA-Z\\d_$]*$",
       {"io.paper", "com.x.Main", "io.papermcx.A"},
       {"io.papermc.A", "io.papermc.", "1a"}},
      {"^(?!.*\\bnative\\b)[a-zA-Z][a-zA-Z0-9_]*(\\.[a-zA-Z][a-zA-Z0-9_]*)+$",
       {"com.nativex.app", "a.natives", "a.b_native"},
       {"com.native.app", "native.a", "a.native", "abc"}},
      {"^(?![ \\t\\n]*\\(default(.*)\\))[\\s\\S]*", {"", "x(default())", "(default"}, {"(default())", " \n(default(x))y"}},
      {"^(?=a)(?!ab)\\w+", {"a", "ac", "a-"}, {"ab", "b", "-a"}},
      {"^(?=.*\\d)(?=.*[a-z]).{4,}$", {"abc1", "1abc"}, {"abcd", "1234", "a1"}},
      {"x|^(?!a)b", {"b", "bx", "ax"}, {"ab", "c"}},
      {"^(?:(?!a)[a-c]|a)$", {"a", "b", "c"}, {"d", "ab"}},
      {"^(?!(?!a))", {"a", "ab"}, {"", "b"}},
      {"\\bab\\b", {"ab", "x ab", "ab-c", "-ab-"}, {"abc", "cab", "a b"}},
      {"\\Bb", {"ab", "abc"}, {"b", "-b", "c b"}},
      {"^\\b", {"a"}, {"", "-"}},
      {"\\b$", {"a", "-a"}, {"", "a-"}},
      {"^\\B$", {""}, {"a"}},
      {"a\\b", {"a", "a-", "ba!"}, {"ab"}},
      {"^https?:\\/\\/(www\\.)?[-a-zA-Z0-9@:%._\\+~#=]{1,256}\\.[a-zA-Z0-9()]{1,6}\\b([-a-zA-Z0-9()@:%_\\+.~#?&//=]*)$",
       {"https://github.com/Shougo/dein.vim", "http://a.io"},
       {"https://a.-", "ftp://a.io"}},
  };
  for (const Case& c : cases) {
    Result<Regex> re = compile_regex(c.pattern);
    ASSERT_TRUE(re.ok()) << c.pattern << ": " << re.message();
    EXPECT_EQ(re->pattern(), c.pattern);
    for (const std::string& s : c.yes)
      EXPECT_TRUE(matches_utf8(*re, s)) << "/" << c.pattern << "/ should match \"" << s << "\"";
    for (const std::string& s : c.no)
      EXPECT_FALSE(matches_utf8(*re, s)) << "/" << c.pattern << "/ should not match \"" << s << "\"";
  }
}

TEST(RegexLookahead, RefusedAwayFromTheStart) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a(?=b)", "lookahead (?= at offset 1: supported only at the string's start"},
      {"(?!b)a", "negative lookahead (?! at offset 0"},
      {"^a*(?!b)", "negative lookahead (?! at offset 3"},
      {"^(?:(?!b)a)+", "negative lookahead (?! at offset 4"},
      {"^(?=a)*", "quantifier after an assertion at offset 6"},
      {"\\b+", "quantifier after an assertion at offset 2"},
      {"^(?=a)(?=b)(?=c)(?=d)(?=e)", "5 lookaheads, above the limit 4"},
  };
  for (const auto& [pattern, message] : cases) {
    Result<Regex> re = compile_regex(pattern);
    ASSERT_FALSE(re.ok()) << pattern;
    EXPECT_NE(re.message().find(message), std::string::npos) << pattern << ": " << re.message();
  }
}

// Random patterns over {a, b, -}: terms, groups, quantifiers, \b \B, ^ and $.
std::string random_body(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const std::vector<std::string> atoms = {"a", "b", "-", ".", "[ab]", "\\w", "\\W", "\\b", "\\B"};
  static const std::vector<std::string> quants = {"", "", "", "?", "{2}", "{0,2}"};
  std::string out;
  const int n_terms = 1 + pick(3);
  for (int t = 0; t < n_terms; ++t) {
    const std::string atom = depth > 0 && pick(4) == 0
                                 ? "(?:" + random_body(rng, depth - 1) + "|" + random_body(rng, depth - 1) + ")"
                                 : atoms[pick(static_cast<int>(atoms.size()))];
    out += atom + (atom[0] == '\\' && (atom[1] == 'b' || atom[1] == 'B') ? "" : quants[pick(6)]);
  }
  if (pick(5) == 0) out += "$";
  return out;
}

TEST(RegexLookahead, AgreesWithStdRegex) {
  std::vector<std::string> texts = {""};
  for (size_t i = 0; i < texts.size() && texts[i].size() < 5; ++i)
    for (char c : std::string("ab-")) texts.push_back(texts[i] + c);
  std::mt19937 rng(39);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int compiled = 0;
  for (int p = 0; p < 300; ++p) {
    std::string pattern = random_body(rng, 1);
    if (pick(3) > 0) {  // one or two lookaheads after ^, maybe in an alternation
      pattern = std::string("^(?") + "=!"[pick(2)] + random_body(rng, 1) + ")" + pattern;
      if (pick(2)) pattern = std::string("^(?") + "=!"[pick(2)] + random_body(rng, 1) + ")" + pattern.substr(1);
      if (pick(3) == 0) pattern = random_body(rng, 0) + "|" + pattern;
    }
    Result<Regex> re = compile_regex(pattern);
    ASSERT_TRUE(re.ok()) << pattern << ": " << re.message();
    ++compiled;
    const std::regex reference(pattern, std::regex::ECMAScript);
    for (const std::string& s : texts)
      ASSERT_EQ(matches_utf8(*re, s), std::regex_search(s, reference)) << "/" << pattern << "/ on \"" << s << "\"";
  }
  EXPECT_EQ(compiled, 300);
}

}  // namespace regex_lookahead_test
}  // namespace dsv4::grammar
