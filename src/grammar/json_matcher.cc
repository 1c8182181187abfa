#include "grammar/json_matcher.h"

#include <cstring>
#include <string>

namespace dsv4::grammar {
namespace {

constexpr int32_t kKeyNode = -1;   // the key string of an open object
constexpr int32_t kRootNode = -2;  // the bottom frame
constexpr int kMaxExponentDigits = 2;  // |value| < 1e116: a finite double everywhere

enum RootPhase : uint8_t { kRBefore, kRIn, kRDone };
enum StringPhase : uint8_t { kSOpen, kSBody, kSEsc, kSHex, kSUtf8 };
enum NumberPhase : uint8_t { kNStart, kNMinus, kNZero, kNInt, kNDot, kNFrac, kNE, kNESign, kNExp };
enum ObjectPhase : uint8_t { kOOpen, kOFirst, kOKey, kOInKey, kOColon, kOValue, kOInValue, kOAfter, kONext };
enum ArrayPhase : uint8_t { kAOpen, kAFirst, kAInItem, kAAfter, kANext };
enum ParamsPhase : uint8_t { kPFirst, kPTag, kPValue, kPInValue, kPClose, kPAfter, kPNext };

bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

void copy_stack(MatchStack& dst, const MatchStack& src) {
  dst.n = src.n;
  std::memcpy(dst.f, src.f, sizeof(Frame) * static_cast<size_t>(src.n));
}

// The candidates among `bits` (texts 0 .. count−1) whose text has byte c at pos.
template <class Text>
uint64_t narrow(uint64_t bits, size_t count, int32_t pos, uint8_t c, Text text) {
  uint64_t keep = 0;
  for (size_t k = 0; k < count; ++k) {
    const std::string& t = text(k);
    if ((bits >> k & 1) && t.size() > static_cast<size_t>(pos) && static_cast<uint8_t>(t[pos]) == c)
      keep |= uint64_t{1} << k;
  }
  return keep;
}

uint64_t narrow_keys(const Node& n, uint64_t bits, int32_t pos, uint8_t c) {
  return narrow(bits, n.properties.size(), pos, c, [&](size_t k) -> const std::string& { return n.properties[k].key; });
}

// Listed properties the key after property floor f may name: f .. the first required one.
uint64_t allowed_keys(const Node& n, int32_t f) {
  uint64_t bits = 0;
  for (int32_t k = f; k < static_cast<int32_t>(n.properties.size()); ++k) {
    bits |= uint64_t{1} << k;
    if (n.properties[k].required) break;
  }
  return bits;
}

bool may_close(const Node& n, int32_t f) {
  if (n.open) return true;
  for (int32_t k = f; k < static_cast<int32_t>(n.properties.size()); ++k)
    if (n.properties[k].required) return false;
  return true;
}

// A UTF-8 lead byte ≥ 0x80: the continuation bytes it needs and the range of the next one
// (no overlong forms, no surrogates, nothing above U+10FFFF); false for a byte that leads nothing.
bool utf8_lead(Frame& f, uint8_t c) {
  uint8_t more = 0, lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) more = 1;
  else if (c == 0xE0) more = 2, lo = 0xA0;
  else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) more = 2;
  else if (c == 0xED) more = 2, hi = 0x9F;
  else if (c == 0xF0) more = 3, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) more = 3;
  else if (c == 0xF4) more = 3, hi = 0x8F;
  else return false;
  f.more = more;
  f.lo = lo;
  f.hi = hi;
  return true;
}

// One continuation byte of the sequence utf8_lead began.
bool utf8_continuation(Frame& f, uint8_t c) {
  if (c < f.lo || c > f.hi) return false;
  f.lo = 0x80;
  f.hi = 0xBF;
  --f.more;
  return true;
}

// The string body after its opening quote: one byte of text, escape or UTF-8 sequence.
bool string_byte(Frame& f, uint8_t c, int64_t max_length) {
  const bool room = max_length < 0 || f.i < max_length;
  switch (f.phase) {
    case kSEsc:
      if (c == 'u') {
        f.phase = kSHex;
        f.more = 4;
        return true;
      }
      if (std::strchr("\"\\/bfnrt", c) == nullptr || c == 0) return false;
      f.phase = kSBody;
      return true;
    case kSHex:
      if (!is_hex(c)) return false;
      if (--f.more == 0) f.phase = kSBody;
      return true;
    case kSUtf8:
      if (!utf8_continuation(f, c)) return false;
      if (f.more == 0) f.phase = kSBody;
      return true;
    default:
      break;
  }
  // kSBody (the closing quote is the caller's)
  if (c < 0x20 || !room) return false;
  if (c == '\\' || c < 0x80) {
    ++f.i;
    if (c == '\\') f.phase = kSEsc;
    return true;
  }
  if (!utf8_lead(f, c)) return false;
  ++f.i;
  f.phase = kSUtf8;
  return true;
}

// One byte of a DSML raw string's text: any byte of valid UTF-8 (code points counted).
bool raw_text_byte(Frame& f, uint8_t c, int64_t max_length) {
  if (f.more > 0) return utf8_continuation(f, c);
  if (max_length >= 0 && f.i >= max_length) return false;
  if (c < 0x80) return ++f.i, true;
  if (!utf8_lead(f, c)) return false;
  ++f.i;
  return true;
}

bool number_byte(Frame& f, uint8_t c, bool integer) {
  switch (f.phase) {
    case kNStart:
      if (c == '-') return f.phase = kNMinus, true;
      [[fallthrough]];
    case kNMinus:
      if (c == '0') return f.phase = kNZero, true;
      if (c >= '1' && c <= '9') return f.phase = kNInt, f.i = 1, true;
      return false;
    case kNInt:
      if (is_digit(c)) return f.i < kMaxDigits && (++f.i, true);
      [[fallthrough]];
    case kNZero:
      if (integer) return false;
      if (c == '.') return f.phase = kNDot, true;
      if (c == 'e' || c == 'E') return f.phase = kNE, true;
      return false;
    case kNDot:
      if (is_digit(c)) return f.phase = kNFrac, f.i = 1, true;
      return false;
    case kNFrac:
      if (is_digit(c)) return f.i < kMaxDigits && (++f.i, true);
      if (c == 'e' || c == 'E') return f.phase = kNE, true;
      return false;
    case kNE:
      if (c == '+' || c == '-') return f.phase = kNESign, true;
      [[fallthrough]];
    case kNESign:
      if (is_digit(c)) return f.phase = kNExp, f.i = 1, true;
      return false;
    case kNExp:
      if (is_digit(c)) return f.i < kMaxExponentDigits && (++f.i, true);
      return false;
  }
  return false;
}

}  // namespace

void JsonMatcher::start(MatchState& st) const {
  st.n = 1;
  st.s[0].n = 1;
  st.s[0].f[0] = Frame{};
  st.s[0].f[0].node = kRootNode;
  st.s[0].f[0].phase = kRBefore;
}

bool JsonMatcher::completable(const Frame& f) const {
  if (f.node < 0) return false;
  const Node& n = g_.nodes[f.node];
  switch (n.kind) {
    case Kind::kNumber:
    case Kind::kInteger: return f.phase == kNZero || f.phase == kNInt || f.phase == kNFrac || f.phase == kNExp;
    case Kind::kLiteral:
      for (size_t k = 0; k < n.literals.size(); ++k)
        if ((f.bits >> k & 1) && n.literals[k].size() == static_cast<size_t>(f.i)) return true;
      return false;
    case Kind::kDsmlParams: return (f.phase == kPFirst || f.phase == kPAfter) && may_close(n, f.i);
    default: return false;
  }
}

// The top frame ends; its parent takes note.
void JsonMatcher::pop(MatchStack& s) const {
  --s.n;
  Frame& p = s.f[s.n - 1];
  p.ws = 0;
  if (p.node == kRootNode) {
    p.phase = kRDone;
    return;
  }
  const Node& n = g_.nodes[p.node];
  switch (n.kind) {
    case Kind::kObject: p.phase = p.phase == kOInKey ? kOColon : kOAfter; break;
    case Kind::kArray:
      p.phase = kAAfter;
      ++p.i;
      break;
    case Kind::kSequence:  // its last item done: the sequence is too
      if (p.i == static_cast<int32_t>(n.sequence.size())) pop(s);
      break;
    case Kind::kDsmlParams:  // a raw value read its closing tag; a JSON value's follows
      p.phase = g_.nodes[n.properties[p.j].node].kind == Kind::kRawString ? kPAfter : kPClose;
      p.more = 0;
      break;
    default: break;
  }
}

void JsonMatcher::emit(const MatchStack& s, MatchState& out) const {
  for (int32_t k = 0; k < out.n; ++k)
    if (out.s[k].n == s.n && std::memcmp(out.s[k].f, s.f, sizeof(Frame) * static_cast<size_t>(s.n)) == 0) return;
  if (out.n < kMaxStacks) copy_stack(out.s[out.n++], s);
}

// The value of `node` starts with byte c on top of s: one stack per concrete branch.
void JsonMatcher::open_value(const MatchStack& s, int32_t node, uint8_t c, MatchState& out) const {
  int32_t pending[kMaxAlternatives * 4], seen[kMaxAlternatives * 4];
  int32_t n_pending = 0, n_seen = 0;
  pending[n_pending++] = node;
  MatchStack t;
  while (n_pending > 0) {
    const int32_t k = pending[--n_pending];
    bool dup = false;
    for (int32_t q = 0; q < n_seen; ++q) dup |= seen[q] == k;
    if (dup || n_seen == static_cast<int32_t>(std::size(seen))) continue;
    seen[n_seen++] = k;
    const Node& n = g_.nodes[k];
    if (n.kind == Kind::kAnyOf) {
      for (auto a = n.alternatives.rbegin(); a != n.alternatives.rend(); ++a)
        if (n_pending < static_cast<int32_t>(std::size(pending))) pending[n_pending++] = *a;
      continue;
    }
    if (s.n + g_.min_depth[k] + 1 > kMaxDepth + 1) continue;  // could not close within the bound
    copy_stack(t, s);
    Frame& f = t.f[t.n++];
    f = Frame{};
    f.node = k;
    if (n.kind == Kind::kLiteral)
      f.bits = n.literals.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << n.literals.size()) - 1;
    consume(t, c, out);
  }
}

void JsonMatcher::consume(const MatchStack& in, uint8_t c, MatchState& out) const {
  MatchStack s;
  copy_stack(s, in);
  Frame& f = s.f[s.n - 1];
  // A number or literal may end here: c then belongs to the parent.
  if (completable(f)) {
    MatchStack p;
    copy_stack(p, in);
    pop(p);
    consume(p, c, out);
  }
  const bool ws = is_ws(c) && f.ws < kMaxWhitespace;
  if (f.node == kRootNode) {
    if (f.phase != kRBefore) return;
    f.phase = kRIn;
    open_value(s, g_.root, c, out);
    return;
  }
  if (f.node == kKeyNode) {
    if (f.phase == kSBody && c == '"') {
      pop(s);
      emit(s, out);
    } else if (string_byte(f, c, -1)) {
      emit(s, out);
    }
    return;
  }
  const Node& n = g_.nodes[f.node];
  switch (n.kind) {
    case Kind::kString:
      if (f.phase == kSOpen) {
        if (c != '"') return;
        f.phase = kSBody;
      } else if (f.phase == kSBody && c == '"') {
        if (f.i < n.min_length) return;
        pop(s);
      } else if (!string_byte(f, c, n.max_length)) {
        return;
      }
      emit(s, out);
      return;
    case Kind::kNumber:
    case Kind::kInteger:
      if (number_byte(f, c, n.kind == Kind::kInteger)) emit(s, out);
      return;
    case Kind::kLiteral: {
      const uint64_t keep = narrow(f.bits, n.literals.size(), f.i, c, [&](size_t k) -> const std::string& {
        return n.literals[k];
      });
      if (keep == 0) return;
      f.bits = keep;
      ++f.i;
      emit(s, out);
      return;
    }
    case Kind::kArray:
      if (f.phase == kAOpen) {
        if (c != '[') return;
        f.phase = kAFirst;
        emit(s, out);
        return;
      }
      if (ws && f.phase != kAInItem) {
        ++f.ws;
        emit(s, out);
        return;
      }
      f.ws = 0;
      if (c == ']' && ((f.phase == kAFirst && n.min_items == 0) || (f.phase == kAAfter && f.i >= n.min_items))) {
        pop(s);
        emit(s, out);
      } else if (c == ',' && f.phase == kAAfter && (n.max_items < 0 || f.i < n.max_items)) {
        f.phase = kANext;
        emit(s, out);
      } else if ((f.phase == kAFirst && n.max_items != 0) || f.phase == kANext) {
        f.phase = kAInItem;
        open_value(s, n.items, c, out);
      }
      return;
    case Kind::kObject:
      if (f.phase == kOOpen) {
        if (c != '{') return;
        f.phase = kOFirst;
        emit(s, out);
        return;
      }
      if (f.phase == kOKey) {
        if (c == '"') {
          for (size_t k = 0; k < n.properties.size(); ++k)
            if ((f.bits >> k & 1) && n.properties[k].key.size() == static_cast<size_t>(f.j)) {
              f.i = static_cast<int32_t>(k) + 1;
              f.j = static_cast<int32_t>(k);
              f.phase = kOColon;
              emit(s, out);
              return;
            }
        }
        const uint64_t keep = narrow_keys(n, f.bits, f.j, c);
        if (keep == 0) return;
        f.bits = keep;
        ++f.j;
        emit(s, out);
        return;
      }
      if (ws && f.phase != kOInKey && f.phase != kOInValue) {
        ++f.ws;
        emit(s, out);
        return;
      }
      f.ws = 0;
      if (c == '"' && (f.phase == kOFirst || f.phase == kONext)) {
        if (n.open) {
          if (s.n + 1 > kMaxDepth + 1) return;
          f.phase = kOInKey;
          Frame& key = s.f[s.n++];
          key = Frame{};
          key.node = kKeyNode;
          key.phase = kSBody;
          emit(s, out);
        } else if (const uint64_t bits = allowed_keys(n, f.i); bits != 0) {
          f.phase = kOKey;
          f.bits = bits;
          f.j = 0;
          emit(s, out);
        }
      } else if (c == ':' && f.phase == kOColon) {
        f.phase = kOValue;
        emit(s, out);
      } else if (c == '}' && (f.phase == kOFirst || f.phase == kOAfter) && may_close(n, f.i)) {
        pop(s);
        emit(s, out);
      } else if (c == ',' && f.phase == kOAfter && (n.open || allowed_keys(n, f.i) != 0)) {
        f.phase = kONext;
        emit(s, out);
      } else if (f.phase == kOValue) {
        f.phase = kOInValue;
        open_value(s, n.open ? n.values : n.properties[f.j].node, c, out);
      }
      return;
    case Kind::kAnyOf:
      return;  // never on a stack (open_value expands it)
    case Kind::kSequence:
      if (f.i == static_cast<int32_t>(n.sequence.size())) return;
      ++f.i;
      open_value(s, n.sequence[f.i - 1], c, out);
      return;
    case Kind::kRawString: {
      if (f.j > 0) {  // inside a possible closing tag
        if (c == static_cast<uint8_t>(kDsmlParamClose[f.j])) {
          if (++f.j == static_cast<int32_t>(kDsmlParamClose.size())) {
            if (f.i < n.min_length) return;
            pop(s);
          }
          emit(s, out);
          return;
        }
        const int32_t k = f.j;  // not the tag: its bytes so far were text
        f.j = 0;
        for (int32_t t = 0; t < k; ++t)
          if (!raw_text_byte(f, static_cast<uint8_t>(kDsmlParamClose[t]), n.max_length)) return;
      }
      if (c == '<' && f.more == 0) {
        f.j = 1;
      } else if (!raw_text_byte(f, c, n.max_length)) {
        return;
      }
      emit(s, out);
      return;
    }
    case Kind::kDsmlParams:
      if ((f.phase == kPFirst || f.phase == kPNext) && c == '<') {
        const uint64_t bits = allowed_keys(n, f.i);
        if (bits == 0) return;
        f.phase = kPTag;
        f.bits = bits;
        f.j = 0;
      }
      if (f.phase == kPTag) {
        const uint64_t keep = narrow_keys(n, f.bits, f.j, c);
        if (keep == 0) return;
        f.bits = keep;
        ++f.j;
        for (size_t k = 0; k < n.properties.size(); ++k)
          if ((keep >> k & 1) && n.properties[k].key.size() == static_cast<size_t>(f.j)) {
            f.i = static_cast<int32_t>(k) + 1;
            f.j = static_cast<int32_t>(k);
            f.phase = kPValue;
          }
        emit(s, out);
      } else if (f.phase == kPValue) {
        f.phase = kPInValue;
        open_value(s, n.properties[f.j].node, c, out);
      } else if (f.phase == kPClose) {
        if (c != static_cast<uint8_t>(kDsmlParamClose[f.more])) return;
        if (static_cast<size_t>(++f.more) == kDsmlParamClose.size()) f.phase = kPAfter;
        emit(s, out);
      } else if (f.phase == kPAfter && c == '\n' && allowed_keys(n, f.i) != 0) {
        f.phase = kPNext;
        emit(s, out);
      }
      return;
  }
}

void JsonMatcher::advance(const MatchState& st, uint8_t c, MatchState& next) const {
  next.n = 0;
  for (int32_t k = 0; k < st.n; ++k) consume(st.s[k], c, next);
}

bool JsonMatcher::accepting(const MatchState& st) const {
  for (int32_t k = 0; k < st.n; ++k) {
    MatchStack s;
    copy_stack(s, st.s[k]);
    while (s.n > 1 && completable(s.f[s.n - 1])) pop(s);
    if (s.n == 1 && s.f[0].phase == kRDone) return true;
  }
  return false;
}

bool JsonMatcher::in_string_text(const MatchState& st, int64_t room) const {
  if (st.n == 0) return false;
  for (int32_t k = 0; k < st.n; ++k) {
    const Frame& f = st.s[k].f[st.s[k].n - 1];
    if (f.node == kRootNode || f.phase != kSBody) return false;
    if (f.node == kKeyNode) continue;
    const Node& n = g_.nodes[f.node];
    if (n.kind != Kind::kString || (n.max_length >= 0 && n.max_length - f.i < room)) return false;
  }
  return true;
}

bool JsonMatcher::in_raw_text(const MatchState& st, int64_t room) const {
  if (st.n == 0) return false;
  for (int32_t k = 0; k < st.n; ++k) {
    const Frame& f = st.s[k].f[st.s[k].n - 1];
    if (f.node < 0) return false;
    const Node& n = g_.nodes[f.node];
    if (n.kind != Kind::kRawString || f.j != 0 || f.more != 0 || (n.max_length >= 0 && n.max_length - f.i < room))
      return false;
  }
  return true;
}

bool JsonMatcher::raw_text(const char* bytes, int64_t n) {
  Frame f;
  for (int64_t i = 0; i < n; ++i)
    if (bytes[i] == '<' || !raw_text_byte(f, static_cast<uint8_t>(bytes[i]), -1)) return false;
  return true;
}

bool JsonMatcher::string_text(const char* bytes, int64_t n) {
  Frame f;
  f.phase = kSBody;
  for (int64_t i = 0; i < n; ++i)
    if (bytes[i] == '"' || !string_byte(f, static_cast<uint8_t>(bytes[i]), -1)) return false;
  return true;
}

bool JsonMatcher::feed(const MatchState& st, const char* text, int64_t n, MatchState& out, MatchState& tmp) const {
  const MatchState* from = &st;
  for (int64_t i = 0; i < n; ++i) {
    MatchState& to = (i % 2 == n % 2) ? tmp : out;  // the last byte lands in out
    advance(*from, static_cast<uint8_t>(text[i]), to);
    if (to.n == 0) {
      out.n = 0;
      return false;
    }
    from = &to;
  }
  if (n == 0) {
    out.n = st.n;
    for (int32_t k = 0; k < st.n; ++k) copy_stack(out.s[k], st.s[k]);
  }
  return true;
}

}  // namespace dsv4::grammar
