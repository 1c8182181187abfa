// llama.cpp's GBNF grammar text -> the regex syntax tree of the language of its `root` rule
// (text_constraint.h anchors and compiles it). The dialect (docs/serving.md "Grammars"):
//
//   # comment to the end of the line
//   root   ::= greeting " " name ("!" | ".")?
//   name   ::= [A-Z] [a-z]{1,15}
//   greeting ::= "hello" | "hi"
//
// - A rule is `name ::= alternatives`; names are [A-Za-z0-9_-]+; `root` is the start; rules may
//   come in any order; a rule defined twice or a name never defined is an error.
// - A rule ends at the end of its line, except inside parentheses and after a `|`.
// - Items: "literal", [class] ([^...] negated, ranges a-z), `.` (any code point), a rule name,
//   ( group ); each may take * + ? {m} {m,} {m,n} {,n} (counts at most kMaxRegexRepeat).
// - Escapes in literals and classes: \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH.
// - Rules are inlined into one automaton, so the language must be regular: a rule that reaches
//   itself (recursion, left or right) is refused, naming the cycle. Token references (<[id]>)
//   are refused by name.
//
// Errors name the line and column ("line 3 column 7: ...") and, where one is involved, the rule.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"
#include "grammar/regex_parse.h"

namespace dsv4::grammar {

constexpr size_t kMaxGbnfBytes = 16384;  // grammar text (compile time grows with it: classes x states)
constexpr int kMaxGbnfRules = 1024;      // rules defined
constexpr int kMaxGbnfNesting = 64;      // parentheses open at once
constexpr int kMaxGbnfRuleDepth = 64;    // rules referring one into the next, from root
constexpr int kMaxGbnfDepth = 512;       // syntax tree levels with the rules inlined

Result<RegexSyntax> parse_gbnf(std::string_view text);

}  // namespace dsv4::grammar
