// ECMA-262 pattern syntax (as with the u flag, no other flag) parsed to a syntax tree, for the
// regular subset regex.h compiles: literals, escapes, classes, '.', quantifiers, alternation,
// groups, ^ and $, lookahead (?= (?! and word boundaries \b \B (regex.h says where a lookahead
// may stand). Everything else (lookbehind, backreferences, \p{..}, modifiers, what the u flag
// makes a syntax error) is refused with the construct and its byte offset.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace dsv4::grammar {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int32_t kMaxRegexRepeat = 1000;        // largest count in {n}, {n,}, {n,m}
constexpr int32_t kMaxRegexNesting = 64;         // groups open at once
constexpr int32_t kMaxRegexPatternBytes = 8192;  // longest pattern

// Inclusive code point range.
struct CodeRange {
  uint32_t lo = 0, hi = 0;
  bool operator==(const CodeRange&) const = default;
  auto operator<=>(const CodeRange&) const = default;
};
// Sorted, disjoint and non-adjacent ranges (normalize() makes it so).
using CodeSet = std::vector<CodeRange>;
CodeSet normalize(CodeSet set);
CodeSet complement(const CodeSet& set);  // within [0, kMaxCodePoint]
// \w with the u flag and no i flag: [0-9A-Za-z_] (what \b tests).
const CodeSet& word_code_set();

enum class RegexNodeKind : uint8_t {
  kEmpty,      // matches the empty string
  kSet,        // one code point of sets[set]
  kConcat,     // kids in order
  kAlt,        // one of kids
  kRepeat,     // kids[0] min..max times (max -1: unbounded)
  kLineStart,  // ^: only at the string's start (no m flag)
  kLineEnd,    // $: only at its end
  kLookahead,  // (?=kids[0]) or, negated, (?!kids[0]): matches the empty string where it holds
  kWordBoundary,     // \b: the code points before and after differ in \w-ness (the ends count as non-word)
  kNotWordBoundary,  // \B: they agree
};

struct RegexNode {
  RegexNodeKind kind = RegexNodeKind::kEmpty;
  int32_t set = -1;
  int32_t min = 0, max = 0;
  bool negated = false;  // kLookahead: (?!
  int32_t offset = -1;   // kLookahead: byte offset in the pattern, for errors
  std::vector<int32_t> kids;
};

struct RegexSyntax {
  std::vector<RegexNode> nodes;
  std::vector<CodeSet> sets;  // distinct sets, referred to by RegexNode::set
  int32_t root = -1;
};

Result<RegexSyntax> parse_regex(std::string_view pattern);

}  // namespace dsv4::grammar
