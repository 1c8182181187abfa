// Whole-output text constraints (text_constraint.h, gbnf.h): a regex anchored on the whole
// output, a choice list, and GBNF grammars run through the JsonMatcher byte by byte (accepted and
// refused texts, the empty output, UTF-8); GBNF parse errors with their line, column and rule;
// recursion and the limits refused by name; and no dead end on random walks.
#include "grammar/text_constraint.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/json_matcher.h"
#include "support/grammar_match.h"

namespace dsv4::grammar {
namespace text_constraint_test {  // named: the grammar tests build as one unity translation unit

using test::match_at;

Grammar must(Result<Grammar> g) {
  EXPECT_TRUE(g.ok()) << g.message();
  return g.ok() ? std::move(*g) : Grammar{};
}

void expect_matches(const Grammar& g, const std::vector<std::string>& yes, const std::vector<std::string>& no) {
  for (const std::string& s : yes) EXPECT_EQ(match_at(g, s), -1) << "should match: '" << s << "'";
  for (const std::string& s : no) EXPECT_NE(match_at(g, s), -1) << "should not match: '" << s << "'";
}

TEST(TextConstraint, RegexMatchesTheWholeOutput) {
  expect_matches(must(compile_regex_output("[0-9]{3}-[0-9]{4}")), {"555-1234"},
                 {"", "555-123", "x555-1234", "555-12345", "555-1234\n"});
  expect_matches(must(compile_regex_output("a|bc")), {"a", "bc"}, {"abc", "b", "ac"});  // alternation stays whole
  expect_matches(must(compile_regex_output("^(yes|no)$")), {"yes", "no"}, {"yesno"});
  expect_matches(must(compile_regex_output("a*")), {"", "a", "aaaa"}, {"b", "ab"});
  expect_matches(must(compile_regex_output("[é-ü]+\\n")), {"éü\n"}, {"e\n", "é"});
  // The first refused byte: the output cannot leave the language even for a moment.
  EXPECT_EQ(match_at(must(compile_regex_output("ab+c")), "abbx"), 3);
  EXPECT_EQ(match_at(must(compile_regex_output("ab+c")), "abb"), 3);  // a prefix, not whole
}

TEST(TextConstraint, RegexErrorsNameTheConstruct) {
  EXPECT_NE(compile_regex_output("a(?=b)").message().find("offset"), std::string::npos);
  EXPECT_NE(compile_regex_output("a(").message().find("offset"), std::string::npos);
  EXPECT_NE(compile_regex_output("[^\\s\\S]").message().find("matches no text"), std::string::npos);
  EXPECT_NE(compile_regex_output("a$b").message().find("matches no text"), std::string::npos);
}

TEST(TextConstraint, ChoiceIsExactlyOneOfTheStrings) {
  const Grammar g = must(compile_choice_output({"red", "green", "greenish", "ünï", "a|b", "."}));
  expect_matches(g, {"red", "green", "greenish", "ünï", "a|b", "."}, {"", "re", "redd", "a", "b", "x", "gre"});
  expect_matches(must(compile_choice_output({"", "x"})), {"", "x"}, {"xx"});
  EXPECT_NE(compile_choice_output({}).message().find("empty"), std::string::npos);
  EXPECT_NE(compile_choice_output({"ok", "\xff"}).message().find("choice[1]"), std::string::npos);
  EXPECT_NE(compile_choice_output(std::vector<std::string>(kMaxChoices + 1, "a")).message().find("limit"),
            std::string::npos);
  EXPECT_NE(compile_choice_output({std::string(kMaxChoiceBytes + 1, 'a')}).message().find("limit"),
            std::string::npos);
}

TEST(Gbnf, RulesClassesQuantifiersAndComments) {
  const Grammar g = must(compile_gbnf_output(R"(# a greeting
root ::= greeting " " name ("!" | ".")?   # trailing comment
name ::= [A-Z] [a-z]{1,5}
greeting ::= "hello" | "hi"
)"));
  expect_matches(g, {"hello Bob", "hi Al!", "hi Alice."}, {"hello bob", "hi A", "hey Bob", "hi Bob!!", "hi Abcdefg"});
  const Grammar list = must(compile_gbnf_output(
      "root ::= item (\",\" item)*\nitem ::= [^,\\n]+ | \"\\\"\" [a-z]* \"\\\"\"\n"));
  expect_matches(list, {"a", "a,b", "x y,\"q\"", "\"\""}, {"", "a,", ",a", "a\nb"});
  const Grammar counts = must(compile_gbnf_output("root ::= \"a\"{2} \"b\"{1,} \"c\"{,2} \"d\"{1,3} . [\\x41-\\u0043]"));
  expect_matches(counts, {"aabdéA", "aabbbccdddxC"}, {"abdxA", "aabcccdxA", "aabddddxA", "aabdxD"});
  const Grammar multi = must(compile_gbnf_output("root ::= (\n  \"a\"\n  | \"b\" )+ \"\\n\"\n"));
  expect_matches(multi, {"ab\n", "bbb\n"}, {"\n", "abc\n"});
  const Grammar after_bar = must(compile_gbnf_output("root ::= \"x\" |\n  \"y\"\n"));
  expect_matches(after_bar, {"x", "y"}, {"xy"});
  const Grammar empty_alt = must(compile_gbnf_output("root ::= \"\" | \"z\"\n"));
  expect_matches(empty_alt, {"", "z"}, {"zz"});
}

TEST(Gbnf, ErrorsNameTheLineTheColumnAndTheRule) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= \"a", "line 1 column 10: the literal is never closed"},
      {"root ::= [a-", "line 1 column 10: the character class is never closed"},
      {"root ::= a\n", "line 1 column 10: rule 'a' is not defined"},
      {"start ::= \"a\"\n", "no rule named 'root'"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "line 2 column 1: rule 'root' is defined twice (first at line 1 column 1)"},
      {"root ::= x\nx ::= \"a\" x | \"b\"\n", "rule 'x' is recursive (x -> x)"},
      {"root ::= x\nx ::= y\ny ::= \"(\" x \")\"\n", "rule 'x' is recursive (x -> y -> x)"},
      {"root ::= root \"a\" | \"b\"\n", "rule 'root' is recursive"},
      {"root ::= \"a\" \"b\"\n  \"c\"\n", "line 2 column 3: expected a rule name"},
      {"root = \"a\"\n", "line 1 column 6: expected ::= after 'root'"},
      {"root ::= *\n", "line 1 column 10: a quantifier with no item before it"},
      {"root ::= \"a\"{3,2}\n", "line 1 column 13: the count's maximum is below its minimum"},
      {"root ::= \"a\"{1001}\n", "count above the limit 1000"},
      {"root ::= \"\\q\"\n", "line 1 column 11: unknown escape"},
      {"root ::= \"\\uD800\"\n", "not a Unicode scalar value"},
      {"root ::= [z-a]\n", "line 1 column 11: the range's end comes before its start"},
      {"root ::= []\n", "an empty character class matches nothing"},
      {"root ::= (\"a\"\n", "'(' is never closed"},
      {"root ::= <[42]>\n", "token references"},
      {"root ::= \"a\" b ::= \"c\"\n", "rule 'b' must begin on its own line"},
      {"root ::= \"a\" )\n", "line 1 column 14: expected the end of the line"},
      {"root ::= \"\xff\"\n", "not valid UTF-8"},
  };
  for (const auto& [text, want] : cases) {
    const Result<Grammar> g = compile_gbnf_output(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.message().find(want), std::string::npos) << text << "\n  got: " << g.message() << "\n want: " << want;
  }
}

// Many distinct code points: the construction table (states x classes) would take 120 MB for
// this choice; the cell limit refuses it instead.
TEST(TextConstraint, AutomatonTablesAreBounded) {
  std::string cjk;
  for (uint32_t cp = 0x4E00; cjk.size() + 3 <= kMaxChoiceBytes; cp += 2) {  // non-adjacent: 2 classes each
    cjk += static_cast<char>(0xE0 | cp >> 12);
    cjk += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    cjk += static_cast<char>(0x80 | (cp & 0x3F));
  }
  EXPECT_NE(compile_choice_output({cjk}).message().find("table cells"), std::string::npos);
  // ("一"|"丄"|...)* over a grammar of the largest size: a 2-state automaton, 2,700 classes.
  std::string alternatives = "root ::= (";
  for (uint32_t cp = 0x4E00; alternatives.size() + 12 < kMaxGbnfBytes; cp += 2) {
    alternatives += '"';
    alternatives += static_cast<char>(0xE0 | cp >> 12);
    alternatives += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    alternatives += static_cast<char>(0x80 | (cp & 0x3F));
    alternatives += "\"|";
  }
  alternatives += "\"a\")*\n";
  EXPECT_TRUE(compile_gbnf_output(alternatives).ok());
}

TEST(Gbnf, LimitsAreChecked) {
  EXPECT_NE(compile_gbnf_output(std::string(kMaxGbnfBytes + 1, ' ')).message().find("limit"), std::string::npos);
  std::string deep = "root ::= ";
  for (int i = 0; i <= kMaxGbnfNesting; ++i) deep += "(";
  EXPECT_NE(compile_gbnf_output(deep).message().find("parentheses"), std::string::npos);
  std::string chain = "root ::= r0\n";
  for (int i = 0; i <= kMaxGbnfRuleDepth; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  chain += "r" + std::to_string(kMaxGbnfRuleDepth + 1) + " ::= \"a\"\n";
  EXPECT_NE(compile_gbnf_output(chain).message().find("deep from root"), std::string::npos);
  // Rules used twice at every level: 2^40 copies if expanded; the automaton limit stops it.
  std::string doubling = "root ::= d0\n";
  for (int i = 0; i < 40; ++i) doubling += "d" + std::to_string(i) + " ::= d" + std::to_string(i + 1) + " d" +
                                           std::to_string(i + 1) + "\n";
  doubling += "d40 ::= [a-z]\n";
  EXPECT_NE(compile_gbnf_output(doubling).message().find("limit"), std::string::npos);
}

// Random walks over allowed bytes: every prefix reached has an accepted completion (the walk
// never gets stuck before an accepting state), and accepting states end whole texts.
TEST(TextConstraint, RandomWalksNeverDeadEnd) {
  const std::vector<Grammar> grammars = {
      must(compile_regex_output("(ab|a)*c?[x-z]{0,3}")), must(compile_choice_output({"alpha", "alps", "b"})),
      must(compile_gbnf_output("root ::= ([0-9]+ (\".\" [0-9]{1,2})?) (\" \" \"é\"?)*\n"))};
  std::mt19937 rng(7);
  for (const Grammar& g : grammars) {
    JsonMatcher m(g);
    for (int walk = 0; walk < 50; ++walk) {
      auto st = std::make_unique<MatchState>(), next = std::make_unique<MatchState>();
      m.start(*st);
      for (int step = 0; step < 40; ++step) {
        std::vector<uint8_t> allowed;
        for (int c = 0; c < 256; ++c) {
          m.advance(*st, static_cast<uint8_t>(c), *next);
          if (next->n > 0) allowed.push_back(static_cast<uint8_t>(c));
        }
        if (allowed.empty()) {
          EXPECT_TRUE(m.accepting(*st)) << "dead end";
          break;
        }
        if (m.accepting(*st) && rng() % 4 == 0) break;
        m.advance(*st, allowed[rng() % allowed.size()], *next);
        std::swap(st, next);
      }
    }
  }
}

// Syntax built in code (GBNF rules, choice lists, key automata) meets the automaton's class
// limit by name, before any table is made: 16,400 disjoint one-code-point sets are 16,401 classes
// (the code points in none of them are one class).
TEST(TextConstraint, ClassLimitIsNamed) {
  RegexSyntax syntax;
  RegexNode alt;
  alt.kind = RegexNodeKind::kAlt;
  for (uint32_t k = 0; k < 16400; ++k) {
    syntax.sets.push_back({{0x100 + 2 * k, 0x100 + 2 * k}});
    RegexNode leaf;
    leaf.kind = RegexNodeKind::kSet;
    leaf.set = static_cast<int32_t>(k);
    syntax.nodes.push_back(leaf);
    alt.kids.push_back(static_cast<int32_t>(k));
  }
  syntax.nodes.push_back(alt);
  syntax.root = static_cast<int32_t>(syntax.nodes.size()) - 1;
  Result<Regex> re = compile_regex_syntax(std::move(syntax), "built");
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.message().find("16401 distinct code point classes, above the limit 16384"), std::string::npos)
      << re.message();
}

}  // namespace text_constraint_test
}  // namespace dsv4::grammar
