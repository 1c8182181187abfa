#include "grammar/regex_lookahead.h"

#include <algorithm>
#include <optional>

namespace dsv4::grammar {

// Named, not anonymous: the grammar sources build as one unity translation unit.
namespace regex_lookahead {

struct Scan {
  std::vector<int32_t> found;
  int32_t misplaced = -1;    // the first lookahead not surely at the start
  std::vector<int8_t> memo;  // [node * 2 + at_start]: −1 not seen, else the answer (GBNF trees share nodes)
};

bool scan_node(const RegexSyntax& syntax, int32_t id, bool at_start, Scan& out);

// Whether the position after node id is surely the string's start, given whether it is before.
bool scan(const RegexSyntax& syntax, int32_t id, bool at_start, Scan& out) {
  int8_t& memo = out.memo[static_cast<size_t>(id) * 2 + at_start];
  if (memo < 0) memo = scan_node(syntax, id, at_start, out) ? 1 : 0;
  return memo == 1;
}

bool scan_node(const RegexSyntax& syntax, int32_t id, bool at_start, Scan& out) {
  const RegexNode& n = syntax.nodes[id];
  switch (n.kind) {
    case RegexNodeKind::kEmpty:
    case RegexNodeKind::kLineEnd:
    case RegexNodeKind::kWordBoundary:
    case RegexNodeKind::kNotWordBoundary: return at_start;
    case RegexNodeKind::kLineStart: return true;
    case RegexNodeKind::kSet: return false;
    case RegexNodeKind::kLookahead:
      if (!at_start && out.misplaced < 0) out.misplaced = id;
      out.found.push_back(id);
      return at_start;
    case RegexNodeKind::kConcat:
      for (int32_t kid : n.kids) at_start = scan(syntax, kid, at_start, out);
      return at_start;
    case RegexNodeKind::kAlt: {
      bool all = true;
      for (int32_t kid : n.kids) all = scan(syntax, kid, at_start, out) && all;
      return all;
    }
    case RegexNodeKind::kRepeat:  // a second round starts where the first ended: not trusted
      return scan(syntax, n.kids[0], at_start && n.max >= 0 && n.max <= 1, out) && at_start;
  }
  return false;
}

// syntax with a new root: ^ then node id.
RegexSyntax anchored_at(RegexSyntax syntax, int32_t id) {
  RegexNode start, cat;
  start.kind = RegexNodeKind::kLineStart;
  syntax.nodes.push_back(start);
  cat.kind = RegexNodeKind::kConcat;
  cat.kids = {static_cast<int32_t>(syntax.nodes.size()) - 1, id};
  syntax.nodes.push_back(std::move(cat));
  syntax.root = static_cast<int32_t>(syntax.nodes.size()) - 1;
  return syntax;
}

// R_V: the lookaheads in `held` (bit i: lookaheads[i]) match the empty string, the others nothing.
RegexSyntax with_lookaheads_decided(RegexSyntax syntax, const std::vector<int32_t>& lookaheads, uint32_t held) {
  const auto nothing = static_cast<int32_t>(syntax.sets.size());
  syntax.sets.push_back({});
  for (size_t i = 0; i < lookaheads.size(); ++i) {
    RegexNode& n = syntax.nodes[lookaheads[i]];
    n.kids.clear();
    n.kind = (held >> i) & 1 ? RegexNodeKind::kEmpty : RegexNodeKind::kSet;
    n.set = (held >> i) & 1 ? -1 : nothing;
  }
  return syntax;
}

}  // namespace regex_lookahead

Result<std::vector<int32_t>> find_lookaheads(const RegexSyntax& syntax) {
  regex_lookahead::Scan out;
  const bool any = std::any_of(syntax.nodes.begin(), syntax.nodes.end(),
                               [](const RegexNode& n) { return n.kind == RegexNodeKind::kLookahead; });
  if (!any || syntax.root < 0) return std::vector<int32_t>{};
  out.memo.assign(syntax.nodes.size() * 2, -1);
  regex_lookahead::scan(syntax, syntax.root, false, out);
  if (out.misplaced >= 0) {
    const RegexNode& n = syntax.nodes[out.misplaced];
    return Status::errorf(
        "pattern: {} at offset {}: supported only at the string's start (after ^, with only assertions between)",
        n.negated ? "negative lookahead (?!" : "lookahead (?=", n.offset);
  }
  return std::move(out.found);
}

Result<Regex> compile_with_lookaheads(const RegexSyntax& syntax, const std::vector<int32_t>& lookaheads,
                                      const std::string& name) {
  if (lookaheads.size() > static_cast<size_t>(kMaxRegexLookaheads)) {
    return Status::errorf("pattern: {} lookaheads, above the limit {}", lookaheads.size(), kMaxRegexLookaheads);
  }
  std::vector<Regex> tests;  // search(^X_i)
  for (int32_t id : lookaheads) {
    Result<Regex> test =
        compile_regex_syntax(regex_lookahead::anchored_at(syntax, syntax.nodes[id].kids[0]), name);
    if (!test) return test.status();
    tests.push_back(std::move(*test));
  }
  std::optional<Regex> all;
  for (uint32_t held = 0; held < (1u << lookaheads.size()); ++held) {
    Result<Regex> term = compile_regex_syntax(regex_lookahead::with_lookaheads_decided(syntax, lookaheads, held), name);
    for (size_t i = 0; i < lookaheads.size() && term && term->start() >= 0; ++i) {
      if (!((held >> i) & 1)) continue;
      term = combine_regex(*term, tests[i], syntax.nodes[lookaheads[i]].negated ? RegexOp::kAndNot : RegexOp::kAnd,
                           name);
    }
    if (!term) return term.status();
    if (all && term->start() < 0) continue;
    if (all) term = combine_regex(*all, *term, RegexOp::kOr, name);
    if (!term) return term.status();
    all = std::move(*term);
  }
  return std::move(*all);
}

}  // namespace dsv4::grammar
