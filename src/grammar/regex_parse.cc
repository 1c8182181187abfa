#include "grammar/regex_parse.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace dsv4::grammar {

CodeSet normalize(CodeSet set) {
  std::sort(set.begin(), set.end());
  CodeSet out;
  for (const CodeRange& r : set) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CodeSet complement(const CodeSet& set) {
  CodeSet out;
  uint32_t next = 0;
  for (const CodeRange& r : set) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

// Named, not anonymous: the grammar sources build as one unity translation unit.
namespace regex_syntax {

// The class escapes, ECMA-262 22.2.2.9 with the u flag and no i flag (\w and \d are ASCII).
const CodeSet& digit_set() {
  static const CodeSet s = {{'0', '9'}};
  return s;
}
const CodeSet& word_set() {
  static const CodeSet s = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return s;
}
// WhiteSpace and LineTerminator: tab, LF, VT, FF, CR, space, NBSP, the Zs characters,
// U+2028/2029 and the BOM.
const CodeSet& space_set() {
  static const CodeSet s = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                            {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  return s;
}
// '.': every code point but the line terminators LF, CR, U+2028 and U+2029.
const CodeSet& dot_set() {
  static const CodeSet s = complement({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}});
  return s;
}

bool is_syntax_char(uint32_t c) {
  return c < 128 && std::string_view("^$\\.*+?()[]{}|").find(static_cast<char>(c)) != std::string_view::npos;
}

int hex_value(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

// A code point of the pattern and the byte offset where it starts.
struct PatternChar {
  uint32_t cp = 0;
  int32_t offset = 0;
};

Result<std::vector<PatternChar>> decode_pattern(std::string_view p) {
  std::vector<PatternChar> out;
  for (size_t i = 0; i < p.size();) {
    const auto b0 = static_cast<uint8_t>(p[i]);
    const int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > p.size()) return Status::errorf("pattern: invalid UTF-8 at byte {}", i);
    uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(p[i + k]);
      if ((b & 0xC0) != 0x80) return Status::errorf("pattern: invalid UTF-8 at byte {}", i);
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMinOf[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinOf[n] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Status::errorf("pattern: invalid UTF-8 at byte {}", i);
    }
    out.push_back({cp, static_cast<int32_t>(i)});
    i += static_cast<size_t>(n);
  }
  return out;
}

// Recursive descent over the decoded pattern: disjunction > alternative > term > atom. Each
// parse_* returns a node index, or -1 with error_ set.
class Parser {
 public:
  Parser(std::vector<PatternChar> chars, int32_t n_bytes) : chars_(std::move(chars)), n_bytes_(n_bytes) {}
  Result<RegexSyntax> run();

 private:
  int32_t parse_disjunction(int depth);
  int32_t parse_alternative(int depth);
  int32_t parse_term(int depth);
  int32_t parse_group(int depth);
  int32_t parse_atom_escape();
  int32_t parse_class();
  bool parse_class_atom(CodeSet& set, std::optional<uint32_t>& single);
  std::optional<uint32_t> parse_char_escape(bool in_class);
  std::optional<uint32_t> parse_unicode_escape();
  bool parse_hex(int digits, uint32_t& value);
  int32_t parse_quantifier(int32_t atom);
  bool parse_count(int32_t& value);
  const CodeSet* class_escape(uint32_t c, CodeSet& storage) const;

  bool at_end() const { return pos_ >= chars_.size(); }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < chars_.size() ? chars_[pos_ + ahead].cp : ~0u; }
  int32_t offset() const { return at_end() ? n_bytes_ : chars_[pos_].offset; }
  int32_t fail(const std::string& what, int32_t at);
  int32_t add(RegexNode node);
  int32_t add_set(const CodeSet& set);

  std::vector<PatternChar> chars_;
  int32_t n_bytes_ = 0;
  size_t pos_ = 0;
  RegexSyntax syntax_;
  std::map<CodeSet, int32_t> set_ids_;
  std::set<std::string> group_names_;
  std::optional<Status> error_;
};

int32_t Parser::fail(const std::string& what, int32_t at) {
  if (!error_) error_ = Status::errorf("pattern: {} at offset {}", what, at);
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

Result<RegexSyntax> Parser::run() {
  const int32_t root = parse_disjunction(0);
  if (root >= 0 && !at_end()) {
    // Only a ')' with no '(' stops a disjunction before the end.
    fail("unmatched ')'", offset());
  }
  if (error_) return *error_;
  syntax_.root = root;
  return std::move(syntax_);
}

int32_t Parser::parse_disjunction(int depth) {
  RegexNode alt;
  alt.kind = RegexNodeKind::kAlt;
  for (;;) {
    const int32_t branch = parse_alternative(depth);
    if (branch < 0) return -1;
    alt.kids.push_back(branch);
    if (peek() != '|') break;
    ++pos_;
  }
  return alt.kids.size() == 1 ? alt.kids[0] : add(std::move(alt));
}

int32_t Parser::parse_alternative(int depth) {
  RegexNode cat;
  cat.kind = RegexNodeKind::kConcat;
  while (!at_end() && peek() != '|' && peek() != ')') {
    const int32_t term = parse_term(depth);
    if (term < 0) return -1;
    cat.kids.push_back(term);
  }
  if (cat.kids.empty()) return add(RegexNode{});
  return cat.kids.size() == 1 ? cat.kids[0] : add(std::move(cat));
}

int32_t Parser::parse_term(int depth) {
  const uint32_t c = peek();
  const int32_t at = offset();
  int32_t atom = -1;
  switch (c) {
    case '^':
    case '$': {
      ++pos_;
      RegexNode node;
      node.kind = c == '^' ? RegexNodeKind::kLineStart : RegexNodeKind::kLineEnd;
      const int32_t id = add(std::move(node));
      const uint32_t q = peek();
      if (q == '*' || q == '+' || q == '?' || q == '{') return fail("quantifier after an assertion", offset());
      return id;
    }
    case '(': atom = parse_group(depth); break;
    case '[': atom = parse_class(); break;
    case '\\': atom = parse_atom_escape(); break;
    case '.':
      ++pos_;
      atom = add_set(dot_set());
      break;
    case '*':
    case '+':
    case '?': return fail("nothing to repeat before quantifier", at);
    case '{': return fail("lone quantifier bracket '{'", at);
    case '}': return fail("lone quantifier bracket '}'", at);
    case ']': return fail("lone ']'", at);
    default:
      ++pos_;
      atom = add_set({{c, c}});
      break;
  }
  if (atom < 0) return -1;
  const RegexNodeKind kind = syntax_.nodes[atom].kind;
  if (kind == RegexNodeKind::kLookahead || kind == RegexNodeKind::kWordBoundary ||
      kind == RegexNodeKind::kNotWordBoundary) {  // not quantifiable with the u flag
    const uint32_t q = peek();
    if (q == '*' || q == '+' || q == '?' || q == '{') return fail("quantifier after an assertion", offset());
    return atom;
  }
  return parse_quantifier(atom);
}

int32_t Parser::parse_group(int depth) {
  const int32_t at = offset();
  if (depth + 1 > kMaxRegexNesting) return fail(fmt::format("groups nested deeper than {}", kMaxRegexNesting), at);
  ++pos_;  // '('
  if (peek() == '?') {
    const uint32_t k = peek(1), k2 = peek(2);
    if (k == ':') {
      pos_ += 2;
    } else if (k == '=' || k == '!') {
      pos_ += 2;
      const int32_t inner = parse_disjunction(depth + 1);
      if (inner < 0) return -1;
      if (peek() != ')') return fail("unterminated group", at);
      ++pos_;
      RegexNode node;
      node.kind = RegexNodeKind::kLookahead;
      node.negated = k == '!';
      node.offset = at;
      node.kids = {inner};
      return add(std::move(node));
    } else if (k == '<' && (k2 == '=' || k2 == '!')) {
      return fail(k2 == '=' ? "lookbehind (?<=" : "negative lookbehind (?<!", at);
    } else if (k == '<') {  // named group: the name is irrelevant to the language
      pos_ += 2;
      auto name_char = [](uint32_t c, bool first) {
        return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (!first && c >= '0' && c <= '9');
      };
      std::string name;
      for (; !at_end() && peek() != '>'; ++pos_) {
        if (!name_char(peek(), name.empty()))
          return fail("group name other than ASCII letters, digits, '_' and '$'", offset());
        name += static_cast<char>(peek());
      }
      if (at_end() || name.empty()) return fail("unterminated or empty group name", at);
      if (!group_names_.insert(name).second) return fail("duplicate group name '" + name + "'", at);
      ++pos_;
    } else {
      return fail("group modifier '(?'", at);
    }
  }
  const int32_t inner = parse_disjunction(depth + 1);
  if (inner < 0) return -1;
  if (peek() != ')') return fail("unterminated group", at);
  ++pos_;
  return inner;
}

// \d \w \s and their complements; nullptr for any other escape letter.
const CodeSet* Parser::class_escape(uint32_t c, CodeSet& storage) const {
  switch (c) {
    case 'd': return &digit_set();
    case 'w': return &word_set();
    case 's': return &space_set();
    case 'D': storage = complement(digit_set()); return &storage;
    case 'W': storage = complement(word_set()); return &storage;
    case 'S': storage = complement(space_set()); return &storage;
    default: return nullptr;
  }
}

int32_t Parser::parse_atom_escape() {
  const int32_t at = offset();
  ++pos_;  // '\'
  if (at_end()) return fail("'\\' at the end of the pattern", at);
  const uint32_t c = peek();
  CodeSet storage;
  if (const CodeSet* set = class_escape(c, storage)) {
    ++pos_;
    return add_set(*set);
  }
  if (c == 'b' || c == 'B') {
    ++pos_;
    RegexNode node;
    node.kind = c == 'b' ? RegexNodeKind::kWordBoundary : RegexNodeKind::kNotWordBoundary;
    return add(std::move(node));
  }
  if (c >= '1' && c <= '9') return fail("backreference \\" + std::string(1, static_cast<char>(c)), at);
  if (c == 'k') return fail("named backreference \\k", at);
  if (c == 'p' || c == 'P') return fail(std::string("Unicode property escape \\") + static_cast<char>(c), at);
  const std::optional<uint32_t> cp = parse_char_escape(false);
  if (!cp) return error_ ? -1 : fail("invalid escape", at);
  return add_set({{*cp, *cp}});
}

bool Parser::parse_hex(int digits, uint32_t& value) {
  value = 0;
  for (int k = 0; k < digits; ++k) {
    const int h = hex_value(peek());
    if (h < 0) return false;
    value = value * 16 + static_cast<uint32_t>(h);
    ++pos_;
  }
  return true;
}

// After "\u": XXXX (a surrogate pair \uXXXX\uXXXX is one code point) or {X...}.
std::optional<uint32_t> Parser::parse_unicode_escape() {
  uint32_t v = 0;
  if (peek() == '{') {
    ++pos_;
    int n = 0;
    for (; hex_value(peek()) >= 0 && v <= kMaxCodePoint; ++n, ++pos_)
      v = v * 16 + static_cast<uint32_t>(hex_value(peek()));
    if (n == 0 || peek() != '}' || v > kMaxCodePoint) return std::nullopt;
    ++pos_;
    return v;
  }
  if (!parse_hex(4, v)) return std::nullopt;
  if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
    const size_t save = pos_;
    pos_ += 2;
    uint32_t lo = 0;
    if (parse_hex(4, lo) && lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
    pos_ = save;
  }
  return v;
}

// A CharacterEscape after '\' (pos_ at the letter); nullopt when invalid with the u flag.
std::optional<uint32_t> Parser::parse_char_escape(bool in_class) {
  const uint32_t c = peek();
  ++pos_;
  switch (c) {
    case 't': return 0x09;
    case 'n': return 0x0A;
    case 'v': return 0x0B;
    case 'f': return 0x0C;
    case 'r': return 0x0D;
    case '0':
      if (peek() >= '0' && peek() <= '9') return std::nullopt;  // octal escapes: not with u
      return 0x00;
    case 'c': {
      const uint32_t l = peek();
      if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) return std::nullopt;
      ++pos_;
      return l % 32;
    }
    case 'x': {
      uint32_t v = 0;
      if (!parse_hex(2, v)) return std::nullopt;
      return v;
    }
    case 'u': return parse_unicode_escape();
    default:
      if (is_syntax_char(c) || c == '/' || (in_class && c == '-')) return c;
      return std::nullopt;
  }
}

// One class atom: a code point (single set) or a class escape (set extended, single empty).
bool Parser::parse_class_atom(CodeSet& set, std::optional<uint32_t>& single) {
  const int32_t at = offset();
  single.reset();
  if (peek() != '\\') {
    single = peek();
    ++pos_;
    return true;
  }
  ++pos_;
  if (at_end()) return fail("'\\' at the end of the pattern", at) >= 0;
  const uint32_t c = peek();
  CodeSet storage;
  if (const CodeSet* cs = class_escape(c, storage)) {
    ++pos_;
    set.insert(set.end(), cs->begin(), cs->end());
    return true;
  }
  if (c == 'b') {
    ++pos_;
    single = 0x08;
    return true;
  }
  if (c == 'p' || c == 'P') return fail(std::string("Unicode property escape \\") + static_cast<char>(c), at) >= 0;
  if (c >= '1' && c <= '9') return fail("backreference \\" + std::string(1, static_cast<char>(c)), at) >= 0;
  single = parse_char_escape(true);
  if (!single) return fail("invalid escape", at) >= 0;
  return true;
}

int32_t Parser::parse_class() {
  const int32_t at = offset();
  ++pos_;  // '['
  const bool negated = peek() == '^';
  if (negated) ++pos_;
  CodeSet set;
  while (!at_end() && peek() != ']') {
    const int32_t from_at = offset();
    std::optional<uint32_t> from, to;
    if (!parse_class_atom(set, from)) return -1;
    if (peek() != '-' || peek(1) == ']' || peek(1) == ~0u) {
      if (from) set.push_back({*from, *from});
      continue;
    }
    ++pos_;  // '-'
    if (!parse_class_atom(set, to)) return -1;
    if (!from || !to) return fail("class escape in a range", from_at);
    if (*from > *to) return fail("range out of order in character class", from_at);
    set.push_back({*from, *to});
  }
  if (at_end()) return fail("unterminated character class", at);
  ++pos_;  // ']'
  return add_set(negated ? complement(normalize(set)) : set);
}

bool Parser::parse_count(int32_t& value) {
  if (!(peek() >= '0' && peek() <= '9')) return false;
  int64_t v = 0;
  while (peek() >= '0' && peek() <= '9') {
    v = std::min<int64_t>(v * 10 + (peek() - '0'), int64_t{1} << 40);
    ++pos_;
  }
  value = static_cast<int32_t>(std::min<int64_t>(v, INT32_MAX));
  if (v > kMaxRegexRepeat) {
    fail(fmt::format("repetition count {} above the limit {}", v, kMaxRegexRepeat), offset());
    return false;
  }
  return true;
}

int32_t Parser::parse_quantifier(int32_t atom) {
  const int32_t at = offset();
  int32_t min = 0, max = -1;
  switch (peek()) {
    case '*': ++pos_; break;
    case '+':
      ++pos_;
      min = 1;
      break;
    case '?':
      ++pos_;
      max = 1;
      break;
    case '{': {
      ++pos_;
      if (!parse_count(min)) return error_ ? -1 : fail("lone quantifier bracket '{'", at);
      max = min;
      if (peek() == ',') {
        ++pos_;
        max = -1;
        if (peek() != '}' && !parse_count(max)) return error_ ? -1 : fail("invalid quantifier", at);
      }
      if (peek() != '}') return fail("lone quantifier bracket '{'", at);
      ++pos_;
      if (max >= 0 && max < min) return fail("numbers out of order in quantifier", at);
      break;
    }
    default: return atom;
  }
  if (peek() == '?') ++pos_;  // lazy: the same language
  const uint32_t q = peek();
  if (q == '*' || q == '+' || q == '?' || q == '{') return fail("nothing to repeat before quantifier", offset());
  RegexNode node;
  node.kind = RegexNodeKind::kRepeat;
  node.min = min;
  node.max = max;
  node.kids = {atom};
  return add(std::move(node));
}

}  // namespace regex_syntax

const CodeSet& word_code_set() { return regex_syntax::word_set(); }

Result<RegexSyntax> parse_regex(std::string_view pattern) {
  if (pattern.size() > static_cast<size_t>(kMaxRegexPatternBytes)) {
    return Status::errorf("pattern: {} bytes, above the limit {}", pattern.size(), kMaxRegexPatternBytes);
  }
  Result<std::vector<regex_syntax::PatternChar>> chars = regex_syntax::decode_pattern(pattern);
  if (!chars) return chars.status();
  regex_syntax::Parser parser(std::move(*chars), static_cast<int32_t>(pattern.size()));
  return parser.run();
}

}  // namespace dsv4::grammar
