// Whole-output constraints as vLLM serves them (structured_outputs / guided_*: regex, choice,
// grammar; docs/serving.md): the output is raw text, not a JSON value, and belongs to a regular
// language. Each compiles to one Regex anchored on the whole output and a Grammar of one
// Kind::kText node, which the matcher steps by code point.
//
// Why one automaton: a DFA gives the matcher a single reading whatever the input, its dead states
// are pruned (a byte is taken only where an accepting completion exists: no dead end), and the
// depth and readings bounds of JSON grammars never come into play. GBNF rules are inlined into
// that automaton (gbnf.h); a recursive rule, the context-free part, is refused by name.
//
// Limits: the regex ones (regex.h: pattern bytes, repetition counts, automaton states, build
// work), plus kMaxChoices and kMaxChoiceBytes here and gbnf.h's.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

constexpr size_t kMaxChoices = 256;        // strings in a choice list
constexpr size_t kMaxChoiceBytes = 16384;  // their bytes together

// regex: the whole output matches `pattern` (the ECMA-262 u-flag subset of regex.h), as if it
// were written ^(?:pattern)$. Errors name the construct and its byte offset.
Result<Grammar> compile_regex_output(std::string_view pattern);
// choice: the output is exactly one of `choices` (valid UTF-8; one at least). Errors name the
// index ("choice[2] ...") or the limit.
Result<Grammar> compile_choice_output(const std::vector<std::string>& choices);
// grammar: llama.cpp GBNF text (gbnf.h). Errors name the line, the column and the rule.
Result<Grammar> compile_gbnf_output(std::string_view gbnf);

// ^(root)$: the syntax tree matches only whole texts.
void anchor_whole(RegexSyntax& syntax);
// The grammar of an automaton over the whole output; an error when it matches no text.
Result<Grammar> text_grammar(Regex re);

}  // namespace dsv4::grammar
