// The pattern regex engine: hand tables of matching and non-matching strings (classes, Unicode,
// quantifier bounds, anchored and unanchored search), refusals and limits with their messages,
// a cross-check against std::regex (ECMAScript, regex_search) on random patterns over ASCII, and
// the length queries against brute-force enumeration.
#include "grammar/regex.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace dsv4::grammar {
namespace regex_test {  // named: the grammar tests build as one unity translation unit

Regex compile(const std::string& pattern) {
  Result<Regex> re = compile_regex(pattern);
  EXPECT_TRUE(re.ok()) << pattern << ": " << re.message();
  return re.ok() ? std::move(*re) : Regex{};
}

struct Case {
  std::string pattern;
  std::vector<std::string> yes, no;
};

TEST(Regex, HandTable) {
  const std::vector<Case> cases = {
      {"abc", {"abc", "xxabcxx", "abcabc"}, {"", "ab", "acb", "ABC"}},
      {"^abc$", {"abc"}, {"abcd", "xabc", "ab"}},
      {"^abc", {"abc", "abcd"}, {"xabc"}},
      {"abc$", {"abc", "xabc"}, {"abcd"}},
      {"", {"", "anything"}, {}},
      {"^$", {""}, {"a"}},
      {"^a|b$", {"ax", "xb", "a"}, {"xa", "bx"}},
      {"(^a|b)c", {"ac", "xbc", "bc"}, {"xac", "c"}},
      {"a$|^b", {"xa", "bxx"}, {"xab", "ab"}},
      {"^[a-c]+$", {"a", "abcabc"}, {"", "abd", "A"}},
      {"^[^a-c]+$", {"d", "é", "日本"}, {"a", "dad"}},
      {"^[\\d_-]+$", {"1-2_3", "-"}, {"a"}},
      {"^[a\\-z]$", {"a", "-", "z"}, {"b"}},
      {"^[-a]$", {"-", "a"}, {"b"}},
      {"^[a-]$", {"-", "a"}, {"b"}},
      {"^[]$", {}, {"", "a"}},
      {"^[^]$", {"a", "\n", "😀"}, {"", "ab"}},
      {"^.$", {"a", "é", "😀", "\t"}, {"\n", "\r", "\u2028", "\u2029", "", "ab"}},
      {"^\\d+$", {"0123456789"}, {"٣", "a", ""}},
      {"^\\D$", {"a", "٣"}, {"5"}},
      {"^\\w+$", {"aZ_09"}, {"é", "-"}},
      {"^\\W$", {"é", "-"}, {"a", "_"}},
      {"^\\s+$", {" \t\n\r\v\f", "\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"}, {"a", "\u200b"}},
      {"^\\S$", {"a", "\u200b"}, {" ", "\u3000"}},
      {"^a.c$", {"abc", "a€c"}, {"a\nc", "ac"}},
      {"^\\.\\\\\\/\\^\\$\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|$", {".\\/^$*+?()[]{}|"}, {}},
      {"^\\t\\n\\r\\f\\v\\0$", {std::string("\t\n\r\f\v\0", 6)}, {}},
      {"^\\x41\\u0042\\u{43}\\u{1F600}\\cJ$", {"ABC😀\n"}, {"ABC"}},
      {"^\\uD83D\\uDE00$", {"😀"}, {}},
      {"^日本語$", {"日本語"}, {"日本", "日本語語"}},
      {"^[α-ω]+$", {"αβγ"}, {"Α"}},
      {"^[\\u{1F600}-\\u{1F64F}]$", {"😀", "🙏"}, {"🚀"}},
      {"^a{3}$", {"aaa"}, {"aa", "aaaa"}},
      {"^a{2,}$", {"aa", "aaaaaaa"}, {"a"}},
      {"^a{2,4}$", {"aa", "aaa", "aaaa"}, {"a", "aaaaa"}},
      {"^a{0}$", {""}, {"a"}},
      {"^a{0,1}b?c*d+$", {"d", "abccdd"}, {"aabd", "abc"}},
      {"^a*?b+?c??d{1,2}?$", {"bd", "aabbcdd"}, {"ad"}},
      {"^(ab|cd)+$", {"ab", "abcdab"}, {"", "abc", "ac"}},
      {"^(?:ab|cd){2}$", {"abcd", "cdcd"}, {"ab", "abcdab"}},
      {"^(?<year>\\d{4})-(?<month>\\d{2})$", {"2024-01"}, {"2024-1"}},
      {"^(a|)+$", {"", "aaa"}, {"b"}},
      {"^()$", {""}, {"a"}},
      {"^(a*)*$", {"", "aaaa"}, {"ab"}},
      {"a|b|c", {"xxcxx"}, {"xyz"}},
      {"^[a-z]+@[a-z]+\\.com$", {"joe@ex.com"}, {"joe@ex.org", "@ex.com"}},
      {"^(\\([0-9]{3}\\))?[0-9]{3}-[0-9]{4}$",
       {"555-1212", "(888)555-1212"},
       {"(888)555-1212 ext. 532", "(800)FLOWERS"}},
  };
  for (const Case& c : cases) {
    const Regex re = compile(c.pattern);
    for (const std::string& s : c.yes)
      EXPECT_TRUE(matches_utf8(re, s)) << "/" << c.pattern << "/ should match \"" << s << "\"";
    for (const std::string& s : c.no)
      EXPECT_FALSE(matches_utf8(re, s)) << "/" << c.pattern << "/ should not match \"" << s << "\"";
  }
}

TEST(Regex, StepsByCodePoint) {
  const Regex re = compile("^[^a]{2}$");
  EXPECT_TRUE(matches(re, U"😀é"));
  EXPECT_FALSE(matches(re, U"😀"));
  EXPECT_EQ(re.step(re.start(), 0x110000), -1);  // beyond Unicode: dead, never a crash
  EXPECT_FALSE(matches_utf8(re, "\xff\xfe"));    // invalid UTF-8 never matches
  const Regex none = compile("[]");
  EXPECT_EQ(none.start(), -1);
  EXPECT_FALSE(matches(none, U""));
  const Regex dead = compile("^a$");
  EXPECT_EQ(dead.step(dead.start(), 'b'), -1);  // no continuation can match: dead at once
}

TEST(Regex, StepsWithinRanges) {
  const Regex re = compile("^[a\\u00e9\\u{1F600}]$");
  EXPECT_TRUE(re.steps_within(re.start(), 0x80, 0x7FF));       // é: a 2-byte sequence
  EXPECT_FALSE(re.steps_within(re.start(), 0x800, 0xFFFF));    // no 3-byte one
  EXPECT_TRUE(re.steps_within(re.start(), 0x1F000, 0x1FFFF));  // 😀
  EXPECT_FALSE(re.steps_within(re.start(), 0x1F601, 0x10FFFF));
  EXPECT_TRUE(re.steps_within(re.start(), 'a', 'a'));
  EXPECT_FALSE(re.steps_within(re.start(), 'b', 0x7F));
  const int32_t done = re.step(re.start(), 'a');
  EXPECT_FALSE(re.steps_within(done, 0, kMaxCodePoint));  // accepted, nothing may follow
}

TEST(Regex, RefusalsNameTheConstructAndOffset) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a(?=b)", "lookahead (?= at offset 1"},
      {"a(?!b)", "negative lookahead (?! at offset 1"},
      {"(?<=a)b", "lookbehind (?<= at offset 0"},
      {"(?<!a)b", "negative lookbehind (?<! at offset 0"},
      {"(a)\\1", "backreference \\1 at offset 3"},
      {"(?<n>a)\\k<n>", "named backreference \\k at offset 7"},
      {"\\p{L}", "Unicode property escape \\p at offset 0"},
      {"[\\P{L}]", "Unicode property escape \\P at offset 1"},
      {"(?i)a", "group modifier '(?' at offset 0"},
      {"(?<1a>x)", "group name other than ASCII letters, digits, '_' and '$' at offset 3"},
      {"(?<>x)", "unterminated or empty group name at offset 0"},
      {"(?<a>x)|(?<a>y)", "duplicate group name 'a' at offset 8"},
      {"*a", "nothing to repeat before quantifier at offset 0"},
      {"a**", "nothing to repeat before quantifier at offset 2"},
      {"^*", "quantifier after an assertion at offset 1"},
      {"a{", "lone quantifier bracket '{' at offset 1"},
      {"a{1", "lone quantifier bracket '{' at offset 1"},
      {"a}", "lone quantifier bracket '}' at offset 1"},
      {"a]", "lone ']' at offset 1"},
      {"a{3,2}", "numbers out of order in quantifier at offset 1"},
      {"[z-a]", "range out of order in character class at offset 1"},
      {"[\\d-z]", "class escape in a range at offset 1"},
      {"(ab", "unterminated group at offset 0"},
      {"ab)", "unmatched ')' at offset 2"},
      {"[ab", "unterminated character class at offset 0"},
      {"a\\", "'\\' at the end of the pattern at offset 1"},
      {"\\q", "invalid escape at offset 0"},
      {"\\-", "invalid escape at offset 0"},
      {"\\01", "invalid escape at offset 0"},
      {"\\u{110000}", "invalid escape at offset 0"},
      {"\xc3", "invalid UTF-8 at byte 0"},
      {"a{1001}", "repetition count 1001 above the limit 1000"},
      {std::string(65, '(') + std::string(65, ')'), "groups nested deeper than 64"},
  };
  for (const auto& [pattern, message] : cases) {
    Result<Regex> re = compile_regex(pattern);
    ASSERT_FALSE(re.ok()) << pattern;
    EXPECT_NE(re.message().find(message), std::string::npos) << pattern << ": " << re.message();
    EXPECT_EQ(re.message().rfind("pattern: ", 0), 0u) << re.message();
  }
}

// Random strings of pattern syntax: compiled or refused with a "pattern: " message, never a
// crash (the sanitizer pass runs this too); a compiled one steps every code point in range.
TEST(Regex, RandomSyntaxIsCompiledOrRefused) {
  const std::string alphabet = "ab^$\\.*+?()[]{}|-,:=!<>0123dDwWsSbBkpuxc";
  std::mt19937 rng(3);
  int compiled = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string pattern;
    const int length = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < length; ++k) pattern += alphabet[rng() % alphabet.size()];
    Result<Regex> re = compile_regex(pattern);
    if (!re.ok()) {
      ASSERT_EQ(re.message().rfind("pattern: ", 0), 0u) << pattern << ": " << re.message();
      continue;
    }
    ++compiled;
    int32_t s = re->start();
    for (uint32_t cp : {0x0u, 0x61u, 0x0Au, 0x7Fu, 0x80u, 0xFFFFu, 0x10FFFFu}) {
      if (s < 0) break;
      s = re->step(s, cp);
      ASSERT_LT(s, re->n_states()) << pattern;
    }
  }
  EXPECT_GT(compiled, 300);
}

TEST(Regex, SizeLimitsAreErrors) {
  Result<Regex> nfa = compile_regex("(a{1000}){1000}");
  ASSERT_FALSE(nfa.ok());
  EXPECT_NE(nfa.message().find("more than 131072 automaton states"), std::string::npos) << nfa.message();
  // (a|b)*a(a|b){n}: the minimal DFA remembers the last n + 1 letters, 2^(n+1) states.
  Result<Regex> minimal = compile_regex("^[ab]*a[ab]{12}$");
  ASSERT_FALSE(minimal.ok());
  EXPECT_NE(minimal.message().find("needs 8192 automaton states, above the limit 4096"), std::string::npos)
      << minimal.message();
  Result<Regex> build = compile_regex("^[ab]*a[ab]{15}$");
  ASSERT_FALSE(build.ok());
  EXPECT_NE(build.message().find("more than 32768 automaton states during construction"), std::string::npos)
      << build.message();
  // Big subsets on many states, or long epsilon chains: bounded work (about a second at most).
  Result<Regex> work = compile_regex("^[ab]*a[ab]{14}(?:a?){1000}");
  ASSERT_FALSE(work.ok());
  EXPECT_NE(work.message().find("automaton construction above its work limit"), std::string::npos) << work.message();
  Result<Regex> chain = compile_regex("^[ab]*(?:(?:){300}){300}a[ab]{14}");  // 30 s before the limit
  ASSERT_FALSE(chain.ok());
  EXPECT_NE(chain.message().find("automaton construction above its work limit"), std::string::npos) << chain.message();
  const Regex fits = compile("^[ab]*a[ab]{10}$");
  EXPECT_EQ(fits.n_states(), 2048);
  EXPECT_EQ(compile("^\\d{1000}$").n_states(), 1001);
}

// Random patterns over {a, b, c} against std::regex_search (ECMAScript), on every string over
// {a, b, c} up to 5 letters and a few with a line feed ('.' refuses it). A group holding an
// unbounded quantifier gets a bounded one at most (nested stars make std::regex backtrack
// exponentially). *unbounded: whether the pattern holds an unbounded quantifier.
std::string random_pattern(std::mt19937& rng, int depth, bool* unbounded = nullptr) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const std::vector<std::string> atoms = {"a", "b", "c", ".", "[ab]", "[^a]", "[a-c]", "\\w", "[^\\n]"};
  static const std::vector<std::string> quants = {"", "", "", "?", "{2}", "{0,2}", "{1,3}", "*", "+", "{1,}", "*?"};
  const int n_bounded = 7;
  std::string out;
  bool any_unbounded = false;
  const int n_terms = 1 + pick(3);
  for (int t = 0; t < n_terms; ++t) {
    std::string atom;
    bool inner = false, inner2 = false;
    if (depth > 0 && pick(4) == 0) {
      atom = (pick(2) ? "(" : "(?:") + random_pattern(rng, depth - 1, &inner) + "|" +
             random_pattern(rng, depth - 1, &inner2) + ")";
    } else if (depth > 0 && pick(5) == 0) {
      atom = "(" + random_pattern(rng, depth - 1, &inner) + ")";
    } else {
      atom = atoms[pick(static_cast<int>(atoms.size()))];
    }
    inner = inner || inner2;
    const int q = pick(inner ? n_bounded : static_cast<int>(quants.size()));
    any_unbounded = any_unbounded || inner || q >= n_bounded;
    out += atom + quants[q];
  }
  if (pick(4) == 0) out = "^" + out;
  if (pick(4) == 0) out += "$";
  if (unbounded != nullptr) *unbounded = any_unbounded;
  return out;
}

// Every string over {a, b, c} up to max_len letters, and a few with a line feed.
std::vector<std::string> ascii_texts(int max_len) {
  std::vector<std::string> texts = {"", "\n", "a\nb", "ab\n", "\nab", "abc\nabc"};
  for (int len = 1, count = 3; len <= max_len; ++len, count *= 3) {
    for (int code = 0; code < count; ++code) {
      std::string s;
      for (int i = 0, rest = code; i < len; ++i, rest /= 3) s += static_cast<char>('a' + rest % 3);
      texts.push_back(s);
    }
  }
  return texts;
}

TEST(Regex, AgreesWithStdRegexOnAscii) {
  const std::vector<std::string> texts = ascii_texts(5);
  std::mt19937 rng(20260);
#ifdef DSV4_SANITIZE
  const int n_patterns = 60;
#else
  const int n_patterns = 400;
#endif
  int n_too_large = 0;
  for (int p = 0; p < n_patterns; ++p) {
    const std::string pattern = random_pattern(rng, 2);
    Result<Regex> compiled = compile_regex(pattern);
    if (!compiled.ok()) {  // a search automaton may need exponentially many states: a limit
      EXPECT_NE(compiled.message().find("automaton"), std::string::npos) << pattern << ": " << compiled.message();
      ++n_too_large;
      continue;
    }
    const Regex& re = *compiled;
    const std::regex reference(pattern, std::regex::ECMAScript);
    for (const std::string& s : texts) {
      ASSERT_EQ(matches_utf8(re, s), std::regex_search(s, reference)) << "/" << pattern << "/ on \"" << s << "\"";
    }
  }
  EXPECT_LE(n_too_large, n_patterns / 20);
}

// Brute force: the states reachable in exactly k steps over one code point per class.
std::vector<std::set<int64_t>> brute_lengths(const Regex& re, const std::vector<uint32_t>& alphabet, int64_t max_k) {
  std::vector<std::set<int64_t>> lengths(static_cast<size_t>(re.n_states()));
  for (int32_t s = 0; s < re.n_states(); ++s) {
    std::set<int32_t> cur = {s};
    for (int64_t k = 0; k <= max_k && !cur.empty(); ++k) {
      std::set<int32_t> next;
      for (int32_t t : cur) {
        if (re.accepting(t)) lengths[static_cast<size_t>(s)].insert(k);
        for (uint32_t cp : alphabet) {
          const int32_t u = re.step(t, cp);
          if (u >= 0) next.insert(u);
        }
      }
      cur = std::move(next);
    }
  }
  return lengths;
}

TEST(Regex, LengthQueriesMatchBruteForce) {
  const std::vector<uint32_t> alphabet = {'a', 'b', 'c', 'x', '\n', 0x2028, 0x4E2D};
  std::vector<std::string> patterns = {"^(aaa)*$",      "^(?:a{3}|b{5})+$",     "^a{7}(bb)*$", "abc", "^a{2,5}$",
                                       "^(ab|c)*x$",    "^(?:a{4})*(?:b{6})*$", "^.{3,}$",     "a$",  "^$",
                                       "(^a{3}$|b{2}c)"};
  std::mt19937 rng(7);
  for (int i = 0; i < 60; ++i) patterns.push_back(random_pattern(rng, 2));
  const int64_t max_k = 40;
  for (const std::string& pattern : patterns) {
    const Regex re = compile(pattern);
    const auto lengths = brute_lengths(re, alphabet, max_k);
    for (int32_t s = 0; s < re.n_states(); ++s) {
      const std::set<int64_t>& set = lengths[static_cast<size_t>(s)];
      ASSERT_FALSE(set.empty()) << pattern << " state " << s << " is live but brute force finds no match";
      EXPECT_EQ(re.shortest_accepting_length(s), *set.begin()) << pattern << " state " << s;
      for (int64_t lo = 0; lo <= max_k; ++lo) {
        const auto it = set.lower_bound(lo);
        const int64_t got = re.accepting_length_at_least(s, lo);
        if (it != set.end()) {
          ASSERT_EQ(got, *it) << pattern << " state " << s << " lo " << lo;
        } else {
          ASSERT_TRUE(got == -1 || got > max_k) << pattern << " state " << s << " lo " << lo << " got " << got;
        }
        for (int64_t hi = lo; hi <= std::min(lo + 4, max_k); ++hi) {
          const bool expect = it != set.end() && *it <= hi;
          ASSERT_EQ(re.accepting_length_in(s, lo, hi), expect)
              << pattern << " state " << s << " [" << lo << ", " << hi << "]";
        }
      }
    }
  }
}

// Minimality against Moore's refinement (the slow oracle): no two states of the compiled
// automaton accept the same continuations.
int32_t moore_block_count(const Regex& re, const std::vector<uint32_t>& alphabet) {
  std::vector<int32_t> block(static_cast<size_t>(re.n_states()));
  for (int32_t s = 0; s < re.n_states(); ++s) block[static_cast<size_t>(s)] = re.accepting(s) ? 1 : 0;
  for (size_t n_blocks = 0;;) {
    std::map<std::vector<int32_t>, int32_t> ids;
    std::vector<int32_t> refined(block.size());
    for (int32_t s = 0; s < re.n_states(); ++s) {
      std::vector<int32_t> signature = {block[static_cast<size_t>(s)]};
      for (uint32_t cp : alphabet) {
        const int32_t t = re.step(s, cp);
        signature.push_back(t < 0 ? -1 : block[static_cast<size_t>(t)]);
      }
      refined[static_cast<size_t>(s)] = ids.try_emplace(signature, static_cast<int32_t>(ids.size())).first->second;
    }
    block = std::move(refined);
    if (ids.size() == n_blocks) return static_cast<int32_t>(n_blocks);
    n_blocks = ids.size();
  }
}

TEST(Regex, MinimalAgainstMoore) {
  const std::vector<uint32_t> alphabet = {'a', 'b', 'c', 'x', '_', '\n', 0x2028, 0x4E2D};
  std::mt19937 rng(11);
#ifdef DSV4_SANITIZE
  const int n_patterns = 50;
#else
  const int n_patterns = 200;
#endif
  for (int i = 0; i < n_patterns; ++i) {
    const std::string pattern = random_pattern(rng, 2);
    Result<Regex> re = compile_regex(pattern);
    if (!re.ok()) continue;
    ASSERT_EQ(moore_block_count(*re, alphabet), re->n_states()) << pattern;
  }
}

TEST(Regex, IntersectionMatchesBoth) {
  std::mt19937 rng(5);
  const std::vector<std::string> texts = ascii_texts(4);
  for (int i = 0; i < 100; ++i) {
    const std::string pa = random_pattern(rng, 1), pb = random_pattern(rng, 1);
    Result<Regex> a = compile_regex(pa), b = compile_regex(pb);
    if (!a.ok() || !b.ok()) continue;
    Result<Regex> both = intersect_regex(*a, *b);
    ASSERT_TRUE(both.ok()) << pa << " & " << pb << ": " << both.message();
    EXPECT_EQ(both->pattern(), pa + " & " + pb);
    for (const std::string& s : texts) {
      ASSERT_EQ(matches_utf8(*both, s), matches_utf8(*a, s) && matches_utf8(*b, s)) << pa << " & " << pb << " on " << s;
    }
  }
  const Regex even = compile("^(?:aa)*$"), three = compile("^(?:aaa)*$");
  Result<Regex> six = intersect_regex(even, three);
  ASSERT_TRUE(six.ok());
  EXPECT_EQ(six->n_states(), 6);
  EXPECT_EQ(six->accepting_length_at_least(six->start(), 1), 6);
  Result<Regex> none = intersect_regex(compile("^a+$"), compile("^b+$"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->start(), -1);
  Result<Regex> big = intersect_regex(compile("^(?:.{67})*$"), compile("^(?:.{71})*$"));  // a cycle of 4757
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.message().find("automaton states, above the limit 4096"), std::string::npos) << big.message();
}

TEST(Regex, LengthQueriesFarOut) {
  const Regex re = compile("^(?:a{3})*(?:b{5})?$");  // lengths 3i and 3i + 5
  const int32_t s = re.start();
  EXPECT_EQ(re.accepting_length_at_least(s, 1000000), 1000001);  // 3 * 333332 + 5
  EXPECT_TRUE(re.accepting_length_in(s, 1000000, 1000001));
  EXPECT_FALSE(re.accepting_length_in(s, 4, 4));
  EXPECT_TRUE(re.accepting_length_in(s, 4, -1));
  const Regex fixed = compile("^a{10}$");
  EXPECT_EQ(fixed.accepting_length_at_least(fixed.start(), 11), -1);
  EXPECT_FALSE(fixed.accepting_length_in(fixed.start(), 0, 9));
  EXPECT_TRUE(fixed.accepting_length_in(fixed.start(), 10, 10));
}

TEST(Regex, LoopsOnJsonText) {
  const Regex unanchored = compile("ab");
  int32_t s = unanchored.start();
  EXPECT_FALSE(unanchored.loops_on_json_text(s));
  s = unanchored.step(unanchored.step(s, 'a'), 'b');
  EXPECT_TRUE(unanchored.accepting(s));
  EXPECT_TRUE(unanchored.loops_on_json_text(s));  // matched: anything may follow
  EXPECT_TRUE(compile("^[^\"]*$").loops_on_json_text(0));
  EXPECT_TRUE(compile("^[\\s\\S]*$").loops_on_json_text(0));
  EXPECT_FALSE(compile("^.*$").loops_on_json_text(0));  // '.' leaves out U+2028/2029
  EXPECT_TRUE(compile("^.*$").loops_on(0, {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x2027}}));
  EXPECT_FALSE(compile("^a*$").loops_on_json_text(0));
}

// JSON Schema Test Suite's `pattern` keyword cases (Debian json-schema-test-suite, installed by
// scripts/setup.sh; skipped when absent).
TEST(Regex, JsonSchemaTestSuitePattern) {
  const std::string path = "/usr/share/json-schema-test-suite/tests/draft7/pattern.json";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << path << " not installed (scripts/setup.sh installs json-schema-test-suite)";
  const nlohmann::json groups = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& group : groups) {
    const Regex re = compile(group["schema"]["pattern"].get<std::string>());
    for (const auto& test : group["tests"]) {
      if (!test["data"].is_string()) continue;
      EXPECT_EQ(matches_utf8(re, test["data"].get<std::string>()), test["valid"].get<bool>()) << test["description"];
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace regex_test
}  // namespace dsv4::grammar
