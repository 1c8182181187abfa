// Lookahead (?=X) and (?!X) where the position is surely the string's start (after ^, with only
// assertions between: what schemas write, '^(?!@@)[a-z]+$'). There the lookahead tests a
// property of the whole string, s in search(^X), so with lookaheads L_1..L_k at the start:
//   L(R) = union over subsets V of {1..k} of  L(R_V) ∩ (∩_{i in V} H_i)
// where R_V is R with each L_i in V replaced by the empty string and the others by nothing, and
// H_i = search(^X_i) for (?=, its complement for (?!. R_V grows with V, so the union is exact.
// Each term is a product automaton (regex.h combine_regex), same limits.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

constexpr int32_t kMaxRegexLookaheads = 4;  // 2^k products per pattern

// The lookahead nodes reachable from syntax.root (not inside another lookahead); an error names
// the first one not at the string's start.
Result<std::vector<int32_t>> find_lookaheads(const RegexSyntax& syntax);

// The automaton of a pattern whose lookaheads (found above, non-empty) stand at the start.
Result<Regex> compile_with_lookaheads(const RegexSyntax& syntax, const std::vector<int32_t>& lookaheads,
                                      const std::string& name);

}  // namespace dsv4::grammar
