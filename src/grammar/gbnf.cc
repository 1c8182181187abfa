#include "grammar/gbnf.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "grammar/regex.h"

namespace dsv4::grammar {

// Named, not anonymous: the grammar sources build as one unity translation unit.
namespace gbnf_parse {

struct Rule {
  std::string name;
  size_t at = 0;       // its name's place (code point index)
  int32_t root = -1;   // its body's node
};

// A rule name in a body: a kEmpty placeholder until resolve() copies the rule's root into it.
struct Reference {
  int32_t node = -1;
  int32_t owner = -1;  // the rule whose body holds it
  std::string name;
  size_t at = 0;
};

bool name_char(uint32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// parse_* return a node index, or -1 with error_ set (the first error wins).
class Parser {
 public:
  explicit Parser(std::u32string text) : text_(std::move(text)) {}
  Result<RegexSyntax> run();

 private:
  bool parse_rule();
  int32_t parse_alternatives(int depth);
  int32_t parse_sequence(int depth);
  int32_t parse_item(int depth);
  int32_t parse_literal();
  int32_t parse_class();
  int32_t parse_reference();
  int32_t parse_quantifier(int32_t item);
  bool parse_count(int32_t& value);
  std::optional<uint32_t> parse_char(bool in_class);
  std::optional<uint32_t> parse_hex(int digits);
  std::string parse_name();
  void skip_space(bool newlines);
  bool resolve();
  bool visit(int32_t rule, std::vector<int32_t>& path);
  int32_t tree_depth(int32_t node) const;
  // "line L column C" of a code point index.
  std::string where(size_t at) const;
  int32_t fail(size_t at, const std::string& what);
  int32_t add(RegexNode node);
  int32_t add_set(const CodeSet& set);
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : ~0u; }
  bool at_end() const { return pos_ >= text_.size(); }

  std::u32string text_;
  size_t pos_ = 0;
  RegexSyntax syntax_;
  std::map<CodeSet, int32_t> set_ids_;
  std::vector<Rule> rules_;
  std::map<std::string, int32_t, std::less<>> rule_ids_;
  std::vector<Reference> refs_;
  int32_t current_ = -1;        // the rule being parsed
  std::vector<uint8_t> state_;  // per rule: 0 not seen, 1 on the path, 2 resolved
  std::vector<int32_t> depth_;  // per resolved rule: its syntax tree's levels, rules inlined
  std::vector<std::vector<int32_t>> refs_of_;     // per rule: its references (refs_ indices)
  std::map<int32_t, int32_t> placeholder_rule_;   // placeholder node -> the rule it names
  std::optional<Status> error_;
};

std::string Parser::where(size_t at) const {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at && i < text_.size(); ++i) {
    column = text_[i] == '\n' ? 1 : column + 1;
    line += text_[i] == '\n';
  }
  return fmt::format("line {} column {}", line, column);
}

int32_t Parser::fail(size_t at, const std::string& what) {
  if (!error_) error_ = Status::errorf("{}: {}", where(at), what);
  return -1;
}

int32_t Parser::add(RegexNode node) {
  syntax_.nodes.push_back(std::move(node));
  return static_cast<int32_t>(syntax_.nodes.size()) - 1;
}

int32_t Parser::add_set(const CodeSet& set) {
  CodeSet norm = normalize(set);
  auto [it, fresh] = set_ids_.try_emplace(norm, static_cast<int32_t>(syntax_.sets.size()));
  if (fresh) syntax_.sets.push_back(std::move(norm));
  RegexNode node;
  node.kind = RegexNodeKind::kSet;
  node.set = it->second;
  return add(std::move(node));
}

// Spaces, tabs and comments; line ends too where `newlines`.
void Parser::skip_space(bool newlines) {
  while (!at_end()) {
    const uint32_t c = peek();
    if (c == '#') {
      while (!at_end() && peek() != '\n') ++pos_;
    } else if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
      ++pos_;
    } else {
      return;
    }
  }
}

std::string Parser::parse_name() {
  std::string name;
  while (!at_end() && name_char(peek())) name.push_back(static_cast<char>(text_[pos_++]));
  return name;
}

// name ::= alternatives, then the end of the line (or of the text).
bool Parser::parse_rule() {
  const size_t at = pos_;
  std::string name = parse_name();
  if (name.empty()) return fail(at, "expected a rule name") >= 0;
  if (auto it = rule_ids_.find(name); it != rule_ids_.end())
    return fail(at, fmt::format("rule '{}' is defined twice (first at {})", name, where(rules_[it->second].at))) >= 0;
  if (rules_.size() >= static_cast<size_t>(kMaxGbnfRules))
    return fail(at, fmt::format("more than {} rules (the limit)", kMaxGbnfRules)) >= 0;
  skip_space(false);
  if (peek() != ':' || peek(1) != ':' || peek(2) != '=') return fail(pos_, fmt::format("expected ::= after '{}'", name)) >= 0;
  pos_ += 3;
  skip_space(true);
  current_ = static_cast<int32_t>(rules_.size());
  rule_ids_.emplace(name, current_);
  rules_.push_back({std::move(name), at, -1});
  const int32_t body = parse_alternatives(0);
  if (body < 0) return false;
  rules_[current_].root = body;
  if (peek() == '\r') ++pos_;
  if (!at_end() && peek() != '\n') return fail(pos_, "expected the end of the line") >= 0;
  return true;
}

int32_t Parser::parse_alternatives(int depth) {
  RegexNode alt;
  alt.kind = RegexNodeKind::kAlt;
  for (;;) {
    const int32_t seq = parse_sequence(depth);
    if (seq < 0) return -1;
    alt.kids.push_back(seq);
    if (peek() != '|') break;
    ++pos_;
    skip_space(true);
  }
  return alt.kids.size() == 1 ? alt.kids[0] : add(std::move(alt));
}

// Items with their quantifiers until a '|', a ')' or the end of the rule.
int32_t Parser::parse_sequence(int depth) {
  RegexNode seq;
  seq.kind = RegexNodeKind::kConcat;
  const bool nested = depth > 0;
  for (;;) {
    const uint32_t c = peek();
    const bool quantifier = c == '*' || c == '+' || c == '?' || c == '{';
    if (quantifier) {
      if (seq.kids.empty()) return fail(pos_, "a quantifier with no item before it");
      seq.kids.back() = parse_quantifier(seq.kids.back());
      if (seq.kids.back() < 0) return -1;
    } else if (c == '"' || c == '[' || c == '.' || c == '(' || c == '<' || name_char(c)) {
      const int32_t item = parse_item(depth);
      if (item < 0) return -1;
      seq.kids.push_back(item);
    } else {
      break;
    }
    skip_space(nested);
  }
  if (seq.kids.empty()) {
    RegexNode empty;
    empty.kind = RegexNodeKind::kEmpty;
    return add(std::move(empty));
  }
  return seq.kids.size() == 1 ? seq.kids[0] : add(std::move(seq));
}

int32_t Parser::parse_item(int depth) {
  const uint32_t c = peek();
  if (c == '"') return parse_literal();
  if (c == '[') return parse_class();
  if (c == '.') {
    ++pos_;
    return add_set({{0, kMaxCodePoint}});
  }
  if (c == '<') return fail(pos_, "token references (<[id]>, <name>) are not supported");
  if (c != '(') return parse_reference();
  if (depth >= kMaxGbnfNesting)
    return fail(pos_, fmt::format("more than {} parentheses open at once (the limit)", kMaxGbnfNesting));
  const size_t open = pos_++;
  skip_space(true);
  const int32_t group = parse_alternatives(depth + 1);
  if (group < 0) return -1;
  if (peek() != ')') return fail(at_end() ? open : pos_, at_end() ? "'(' is never closed" : "expected ')'");
  ++pos_;
  return group;
}

int32_t Parser::parse_literal() {
  const size_t open = pos_++;
  RegexNode seq;
  seq.kind = RegexNodeKind::kConcat;
  while (peek() != '"') {
    if (at_end() || peek() == '\n') return fail(open, "the literal is never closed");
    const std::optional<uint32_t> cp = parse_char(false);
    if (!cp) return -1;
    seq.kids.push_back(add_set({{*cp, *cp}}));
  }
  ++pos_;
  if (seq.kids.empty()) seq.kind = RegexNodeKind::kEmpty;
  return seq.kids.size() == 1 ? seq.kids[0] : add(std::move(seq));
}

// [...] or [^...]: code points and ranges lo-hi.
int32_t Parser::parse_class() {
  const size_t open = pos_++;
  const bool negated = peek() == '^';
  pos_ += negated;
  CodeSet set;
  while (peek() != ']') {
    if (at_end() || peek() == '\n') return fail(open, "the character class is never closed");
    const size_t at = pos_;
    const std::optional<uint32_t> lo = parse_char(true);
    if (!lo) return -1;
    uint32_t hi = *lo;
    if (peek() == '-' && peek(1) != ']' && peek(1) != ~0u) {
      ++pos_;
      const std::optional<uint32_t> end = parse_char(true);
      if (!end) return -1;
      if (*end < *lo) return fail(at, "the range's end comes before its start");
      hi = *end;
    }
    set.push_back({*lo, hi});
  }
  ++pos_;
  if (set.empty()) return fail(open, "an empty character class matches nothing");
  return add_set(negated ? complement(normalize(set)) : set);
}

std::optional<uint32_t> Parser::parse_hex(int digits) {
  uint32_t v = 0;
  for (int k = 0; k < digits; ++k) {
    const uint32_t c = peek();
    const int d = c >= '0' && c <= '9' ? static_cast<int>(c - '0')
                  : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? static_cast<int>((c | 0x20) - 'a' + 10)
                                                            : -1;
    if (d < 0) {
      fail(pos_, fmt::format("expected {} hexadecimal digits", digits));
      return std::nullopt;
    }
    v = v * 16 + static_cast<uint32_t>(d);
    ++pos_;
  }
  return v;
}

// One code point of a literal or class; escapes decoded.
std::optional<uint32_t> Parser::parse_char(bool in_class) {
  const size_t at = pos_;
  const uint32_t c = text_[pos_++];
  if (c != '\\') return c;
  const uint32_t e = peek();
  ++pos_;
  std::optional<uint32_t> cp;
  switch (e) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\':
    case '"':
    case '[':
    case ']': return e;
    case 'x': cp = parse_hex(2); break;
    case 'u': cp = parse_hex(4); break;
    case 'U': cp = parse_hex(8); break;
    default:
      if (in_class && e == '-') return e;
      fail(at, "unknown escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)");
      return std::nullopt;
  }
  if (cp && (*cp > kMaxCodePoint || (*cp >= 0xD800 && *cp <= 0xDFFF))) {
    fail(at, "the escape is not a Unicode scalar value");
    return std::nullopt;
  }
  return cp;
}

int32_t Parser::parse_reference() {
  const size_t at = pos_;
  std::string name = parse_name();
  if (name.empty()) return fail(at, "unexpected character");
  const size_t after = pos_;
  skip_space(false);
  if (peek() == ':' && peek(1) == ':' && peek(2) == '=')
    return fail(at, fmt::format("rule '{}' must begin on its own line", name));
  pos_ = after;
  RegexNode placeholder;
  placeholder.kind = RegexNodeKind::kEmpty;
  const int32_t node = add(std::move(placeholder));
  refs_.push_back({node, current_, std::move(name), at});
  return node;
}

bool Parser::parse_count(int32_t& value) {
  const size_t at = pos_;
  int64_t v = 0;
  while (peek() >= '0' && peek() <= '9') {
    v = std::min<int64_t>(v * 10 + (peek() - '0'), int64_t{kMaxRegexRepeat} + 1);
    ++pos_;
  }
  if (pos_ == at) return false;
  if (v > kMaxRegexRepeat) return fail(at, fmt::format("a count above the limit {}", kMaxRegexRepeat)) >= 0;
  value = static_cast<int32_t>(v);
  return true;
}

// * + ? {m} {m,} {m,n} {,n} on `item`.
int32_t Parser::parse_quantifier(int32_t item) {
  RegexNode rep;
  rep.kind = RegexNodeKind::kRepeat;
  rep.kids = {item};
  const size_t at = pos_;
  const uint32_t c = text_[pos_++];
  rep.min = c == '+' ? 1 : 0;
  rep.max = c == '?' ? 1 : -1;
  if (c == '{') {
    skip_space(false);
    const bool has_min = parse_count(rep.min);
    if (error_) return -1;
    skip_space(false);
    rep.max = rep.min;
    if (peek() == ',') {
      ++pos_;
      skip_space(false);
      rep.max = -1;
      parse_count(rep.max);
      if (error_) return -1;
      skip_space(false);
    } else if (!has_min) {
      return fail(at, "expected {m}, {m,}, {m,n} or {,n}");
    }
    if (peek() != '}') return fail(at, "expected {m}, {m,}, {m,n} or {,n}");
    ++pos_;
    if (rep.max >= 0 && rep.max < rep.min) return fail(at, "the count's maximum is below its minimum");
  }
  return add(std::move(rep));
}

Result<RegexSyntax> Parser::run() {
  skip_space(true);
  while (!at_end()) {
    if (!parse_rule()) return *error_;
    skip_space(true);
  }
  if (!resolve()) return *error_;
  return std::move(syntax_);
}

bool Parser::resolve() {
  refs_of_.assign(rules_.size(), {});
  for (size_t k = 0; k < refs_.size(); ++k) {
    const auto it = rule_ids_.find(refs_[k].name);
    if (it == rule_ids_.end()) return fail(refs_[k].at, fmt::format("rule '{}' is not defined", refs_[k].name)) >= 0;
    refs_of_[refs_[k].owner].push_back(static_cast<int32_t>(k));
    placeholder_rule_[refs_[k].node] = it->second;
  }
  const auto root = rule_ids_.find("root");
  if (root == rule_ids_.end()) {
    error_ = Status::error("no rule named 'root' (the start rule)");
    return false;
  }
  state_.assign(rules_.size(), 0);
  depth_.assign(rules_.size(), 0);
  std::vector<int32_t> path;
  if (!visit(root->second, path)) return false;
  syntax_.root = rules_[root->second].root;
  return true;
}

// Levels of a rule's syntax tree; a placeholder counts its rule's (resolved before).
int32_t Parser::tree_depth(int32_t node) const {
  if (auto it = placeholder_rule_.find(node); it != placeholder_rule_.end()) return depth_[it->second];
  int32_t d = 0;
  for (int32_t kid : syntax_.nodes[node].kids) d = std::max(d, tree_depth(kid));
  return d + 1;
}

// Resolves the rules `rule` refers to, then copies their roots into its placeholders: the
// result is a DAG (a rule used twice is shared). A rule met again on the path is recursion.
bool Parser::visit(int32_t rule, std::vector<int32_t>& path) {
  path.push_back(rule);
  if (path.size() > static_cast<size_t>(kMaxGbnfRuleDepth))
    return fail(rules_[rule].at, fmt::format("rules refer one into the next more than {} deep from root (the limit)",
                                             kMaxGbnfRuleDepth)) >= 0;
  state_[rule] = 1;
  for (int32_t k : refs_of_[rule]) {
    const int32_t target = placeholder_rule_.at(refs_[k].node);
    if (state_[target] == 1) {
      std::string cycle;
      for (auto it = std::find(path.begin(), path.end(), target); it != path.end(); ++it)
        cycle += rules_[*it].name + " -> ";
      return fail(refs_[k].at, fmt::format("rule '{}' is recursive ({}{}): recursion is not supported, the grammar "
                                           "must be regular", rules_[target].name, cycle, rules_[target].name)) >= 0;
    }
    if (state_[target] == 0 && !visit(target, path)) return false;
  }
  depth_[rule] = tree_depth(rules_[rule].root);
  if (depth_[rule] > kMaxGbnfDepth)
    return fail(rules_[rule].at, fmt::format("rule '{}' nests {} syntax levels deep with its rules inlined, above the "
                                             "limit {}", rules_[rule].name, depth_[rule], kMaxGbnfDepth)) >= 0;
  for (int32_t k : refs_of_[rule]) {
    const int32_t target = placeholder_rule_.at(refs_[k].node);
    syntax_.nodes[refs_[k].node] = syntax_.nodes[rules_[target].root];
  }
  state_[rule] = 2;
  path.pop_back();
  return true;
}

}  // namespace gbnf_parse

Result<RegexSyntax> parse_gbnf(std::string_view text) {
  if (text.size() > kMaxGbnfBytes)
    return Status::errorf("{} bytes, above the limit {}", text.size(), kMaxGbnfBytes);
  std::u32string code_points;
  if (!regex_automaton::decode_utf8(text, code_points)) return Status::error("the grammar is not valid UTF-8");
  return gbnf_parse::Parser(std::move(code_points)).run();
}

}  // namespace dsv4::grammar
