// Regex: a JSON Schema `pattern` (ECMA-262 with the u flag, as ajv runs it) as a deterministic
// automaton over Unicode code points, stepped one decoded code point at a time by table lookups
// (no allocation), so that a matcher state can carry it as a small integer.
//
// Semantics: a string matches when the pattern matches somewhere in it (search, as
// RegExp.prototype.test): the pattern R is compiled as [\s\S]*(R)[\s\S]*, and ^ / $ (no m flag)
// hold only at the string's start / end, wherever they appear.
//
// Construction (regex.cc):
//  1. parse (regex_parse.h) to a tree; lookbehind, backreferences and the rest are refused; a
//     pattern with lookaheads at the string's start is a union of products (regex_lookahead.h);
//  2. Thompson NFA: edges carry a set of code points; ^ and $ are edges that only the first
//     closure (position 0) and the acceptance test (end of input) may take; \b and \B are edges
//     on the \w-ness of the code point before (kept in the DFA state) and of the one after
//     (resolved when stepping, or at the end: non-word);
//  3. code point classes: the Unicode range cut at every set's bounds, and the pieces with the
//     same membership in every set merged into one class (a class is what the DFA reads);
//  4. subset construction over classes (at most kMaxRegexBuildStates states);
//  5. states that cannot reach acceptance are dropped (step() gives -1: dead), then Hopcroft
//     minimisation (at most kMaxRegexStates states remain);
//  6. the lengths of the accepting continuations from each state (eventually periodic, computed
//     exactly; see accepting_length_at_least()).
// combine_regex() builds the product of two automata over their common class refinement (and,
// or, and-not), then steps 5 and 6.
// Lookup of a code point's class: a table for ASCII, binary search over the intervals above.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/regex_parse.h"

namespace dsv4::grammar {

namespace regex_automaton {
class RegexBuilder;
// UTF-8 to code points; false on invalid UTF-8 (surrogates and overlong forms included).
bool decode_utf8(std::string_view text, std::u32string& out);
}

constexpr int32_t kMaxRegexStates = 4096;                  // DFA states after minimisation
constexpr int32_t kMaxRegexBuildStates = 32768;            // DFA states during subset construction
constexpr int32_t kMaxRegexNfaStates = 1 << 17;            // NFA states after repetitions are expanded
constexpr int64_t kMaxRegexBuildWork = 1 << 25;            // NFA states visited or hashed by subset construction
constexpr int64_t kMaxRegexLengthBits = int64_t{1} << 24;  // states x (threshold + period)
constexpr int64_t kMaxRegexTableCells = int64_t{1} << 24;  // DFA states x code point classes (4 bytes each)
constexpr int32_t kMaxRegexClasses = 16384;                // code point classes

class Regex {
 public:
  // The start state; -1 when the pattern matches no string at all.
  int32_t start() const { return start_; }
  // The state after code point cp (≤ kMaxCodePoint); -1: dead, no continuation can match.
  int32_t step(int32_t state, uint32_t cp) const {
    const int32_t c = class_of(cp);
    return c < 0 ? -1 : next_[static_cast<size_t>(state) * n_classes_ + c];
  }
  bool accepting(int32_t state) const { return accepting_[state] != 0; }
  int32_t n_states() const { return n_states_; }  // <= kMaxRegexStates: a state fits in 13 bits
  int32_t n_classes() const { return n_classes_; }
  int32_t class_of(uint32_t cp) const {
    return cp < 128 ? ascii_class_[cp] : cp > kMaxCodePoint ? -1 : class_above_ascii(cp);
  }
  const std::string& pattern() const { return pattern_; }

  // Lengths (in code points) of accepting continuations. From a live state at least one exists.
  // The smallest k >= lo such that some string of exactly k code points leads from state to
  // acceptance; -1 if none.
  int64_t accepting_length_at_least(int32_t state, int64_t lo) const;
  // Whether some accepting continuation has a length in [lo, hi] (hi < 0: no upper bound). A
  // string frame with n code points so far and minLength/maxLength asks
  // accepting_length_in(state, minLength - n, maxLength - n) before allowing a code point.
  bool accepting_length_in(int32_t state, int64_t lo, int64_t hi) const {
    const int64_t k = accepting_length_at_least(state, lo < 0 ? 0 : lo);
    return k >= 0 && (hi < 0 || k <= hi);
  }
  int64_t shortest_accepting_length(int32_t state) const { return accepting_length_at_least(state, 0); }

  // Whether some code point in [lo, hi] leads from state to a live state: a UTF-8 walk may prune
  // at a sequence's first byte, given the range of code points that byte (and those after it) allow.
  bool steps_within(int32_t state, uint32_t lo, uint32_t hi) const;
  // The last code point of the run of code points around cp (≤ kMaxCodePoint) that step alike
  // from every state: a walk over a range of code points needs one step per run.
  uint32_t run_end(uint32_t cp) const {
    const auto it = std::upper_bound(interval_start_.begin(), interval_start_.end(), cp);
    return it == interval_start_.end() ? kMaxCodePoint : *it - 1;
  }

  // Whether every code point of `text` leads from state back to state (then a run of such code
  // points never changes the state: a mask fast path may skip stepping through it).
  bool loops_on(int32_t state, const CodeSet& text) const;
  // loops_on() for the code points a JSON string holds unescaped: U+0020 and above except '"',
  // '\' and the surrogates (decoded strings never hold one). Precomputed per state. `.*` is not
  // such a loop ('.' leaves out U+2028 and U+2029); `[^"]*`, `[\s\S]*` and an unanchored
  // pattern's tail after its match are.
  bool loops_on_json_text(int32_t state) const { return loops_on_json_text_[state] != 0; }

 private:
  friend class regex_automaton::RegexBuilder;
  int32_t class_above_ascii(uint32_t cp) const;
  int64_t find_length_bit(int32_t state, int64_t from, int64_t to) const;

  std::string pattern_;
  int32_t start_ = -1, n_states_ = 0, n_classes_ = 0;
  std::array<int16_t, 128> ascii_class_{};
  std::vector<uint32_t> interval_start_;  // sorted; interval i = [start[i], start[i + 1])
  std::vector<int16_t> interval_class_;
  std::vector<int32_t> next_;                // [n_states, n_classes], -1: dead
  std::vector<uint8_t> accepting_;           // [n_states]
  std::vector<uint8_t> loops_on_json_text_;  // [n_states]
  // Length sets: bit k of state s's row is set when an accepting continuation of exactly k code
  // points exists, for k < length_threshold_ + length_period_; beyond, bit k equals bit
  // k - length_period_ (the sequence of length sets over all states repeats from the threshold).
  int64_t length_threshold_ = 0, length_period_ = 1, length_words_ = 0;
  std::vector<uint64_t> length_bits_;  // [n_states, length_words_]
};

// Compiles a pattern; errors name the construct or the limit and the pattern's byte offset.
// ascii_ignore_case: ASCII letters match either case, as the i flag without u does for a
// pattern of ASCII letters (ajv-formats' patterns, formats.h); JSON Schema patterns take no flag.
Result<Regex> compile_regex(std::string_view pattern, bool ascii_ignore_case = false);

// The same for a syntax tree built elsewhere (text_constraint.h: choices, GBNF); `name` stands
// for the pattern in pattern(). Same limits and errors.
Result<Regex> compile_regex_syntax(RegexSyntax syntax, std::string name);

// The strings both match (a schema's pattern with its format, allOf's patterns), with the same
// limits; its pattern() is both joined by " & ".
Result<Regex> intersect_regex(const Regex& a, const Regex& b);

// Boolean combinations of two languages by the product automaton, same limits; named `name`.
enum class RegexOp : uint8_t { kAnd, kOr, kAndNot };
Result<Regex> combine_regex(const Regex& a, const Regex& b, RegexOp op, std::string name);

// Whole-string match (tests and tools): the string is in the pattern's language.
bool matches(const Regex& re, std::u32string_view text);
// The same for UTF-8 text; invalid UTF-8 never matches.
bool matches_utf8(const Regex& re, std::string_view text);

}  // namespace dsv4::grammar
