#include "grammar/json_matcher.h"

#include <cstring>
#include <string>

#include "base/check.h"
#include "grammar/json_scalar.h"
#include "grammar/sorted_texts.h"
#include "grammar/unique_items.h"

namespace dsv4::grammar {
namespace {

constexpr int32_t kKeyNode = -1;   // the key string of an open object
constexpr int32_t kRootNode = -2;  // the bottom frame

enum RootPhase : uint8_t { kRBefore, kRIn, kRDone };
enum ObjectPhase : uint8_t { kOOpen, kOFirst, kOKey, kOInKey, kOColon, kOValue, kOInValue, kOAfter, kONext };
enum ArrayPhase : uint8_t { kAOpen, kAFirst, kAInItem, kAAfter, kANext };
enum ParamsPhase : uint8_t { kPFirst, kPTag, kPValue, kPInValue, kPClose, kPAfter, kPNext };

bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// A listed object's (or DSML params') key at position k of Node::key_order.
const std::string& key_at(const Node& n, uint32_t k) { return n.properties[n.key_order[k]].key; }

TextRange all_keys(const Node& n) { return TextRange{0, static_cast<uint32_t>(n.properties.size())}; }

}  // namespace

void copy_stack(MatchStack& dst, const MatchStack& src) {
  dst.n = src.n;
  dst.n_keys = src.n_keys;
  std::memcpy(dst.f, src.f, sizeof(Frame) * static_cast<size_t>(src.n));
  std::memcpy(dst.keys, src.keys, sizeof(uint32_t) * static_cast<size_t>(src.n_keys));
}

JsonMatcher::JsonMatcher(const Grammar& g) : g_(g) {
  for (const Node& n : g.nodes)
    if (n.kind == Kind::kObject && n.open) max_open_min_ = std::max(max_open_min_, static_cast<int32_t>(n.min_properties));
}

void JsonMatcher::start(MatchState& st) const {
  st.n = 1;
  st.s[0].n = 1;
  st.s[0].n_keys = 0;
  st.s[0].f[0] = Frame{};
  st.s[0].f[0].node = kRootNode;
  st.s[0].f[0].phase = kRBefore;
}

bool JsonMatcher::may_close(const Node& n, const Frame& f) {
  if (n.open) return f.n_props >= n.min_properties;
  for (int32_t k = f.i; k < static_cast<int32_t>(n.properties.size()); ++k)
    if (n.properties[k].required) return false;
  return f.n_props >= n.min_properties && (n.needs.empty() || needed_keys(n, f.present) == 0);
}

bool JsonMatcher::key_in_range(const Node& n, TextRange r, int32_t f, int32_t n_frames, int32_t n_props,
                               uint64_t present) const {
  if (!n.needs.empty()) {  // no min/maxProperties then, and at most 64 properties
    for (uint64_t bits = dependent_keys(n, f, n_frames, present); bits != 0; bits &= bits - 1) {
      const uint32_t rank = n.key_rank[static_cast<size_t>(__builtin_ctzll(bits))];
      if (rank >= r.lo && rank < r.hi) return true;
    }
    return false;
  }
  const bool counted = n.min_properties > 0 || n.max_properties >= 0;
  const int32_t size = static_cast<int32_t>(n.properties.size());
  int32_t required_after = 0, available_after = 0;  // of the keys after k (counted only when bounded)
  if (counted)
    for (int32_t k = f; k < size; ++k) {
      required_after += n.properties[k].required;
      available_after += n.properties[k].required || fits(n_frames, n.properties[k].node);
    }
  for (int32_t k = f; k < size; ++k) {
    const Property& p = n.properties[k];
    const bool available = p.required || fits(n_frames, p.node);
    required_after -= p.required;
    available_after -= available;
    const bool room = n.max_properties < 0 || n_props + 1 + required_after <= n.max_properties;
    const bool enough = n_props + 1 + available_after >= n.min_properties;
    const uint32_t rank = n.key_rank[static_cast<size_t>(k)];
    if (available && (!counted || (room && enough)) && rank >= r.lo && rank < r.hi) return true;
    if (p.required) break;
  }
  return false;
}

bool JsonMatcher::open_key_room(const MatchStack& s, const Node& n) const {
  const int32_t present = s.f[s.n - 1].n_props;  // the object is on top
  if (!key_may_start(n, s.n) || (n.max_properties >= 0 && present >= n.max_properties)) return false;
  if (present < n.min_properties) return true;  // needed: its slot is reserved
  if (max_open_min_ == 0) return s.n_keys < kMaxOpenKeys;
  int32_t reserved = (kMaxDepth + 1 - s.n) * max_open_min_;
  for (int32_t k = 1; k < s.n; ++k) {
    const Frame& f = s.f[k];
    if (f.node < 0) continue;
    const Node& o = g_.nodes[f.node];
    if (o.kind == Kind::kObject && o.open && f.n_props < o.min_properties)
      reserved += static_cast<int32_t>(o.min_properties) - f.n_props;
  }
  return s.n_keys + reserved < kMaxOpenKeys + kMaxReservedKeys;
}

bool JsonMatcher::gap_space(Frame& f, uint8_t c, const std::string* sep) const {
  if (g_.layout.whitespace_flexible) {
    if (f.ws >= kMaxWhitespace) return false;
  } else if (sep == nullptr || static_cast<size_t>(f.ws) + 1 >= sep->size() ||
             static_cast<uint8_t>((*sep)[f.ws + 1]) != c) {
    return false;
  }
  ++f.ws;
  return true;
}

bool JsonMatcher::unused_literal(const MatchStack& s, TextRange r) const {
  if (hashed_item(s)) return unused_hashed_literal(s, g_.nodes[s.f[s.n - 1].node], r);
  const Frame& parent = s.f[s.n - 2];
  if (parent.node < 0 || g_.nodes[parent.node].kind != Kind::kArray || !g_.nodes[parent.node].unique) return true;
  return (range_mask(r) & ~parent.bits) != 0;
}

bool JsonMatcher::completable(const MatchStack& s) const {
  const Frame& f = s.f[s.n - 1];
  if (f.node < 0) return false;
  const Node& n = g_.nodes[f.node];
  switch (n.kind) {
    case Kind::kNumber:
    case Kind::kInteger:
      if (hashed_item(s))  // its hash is new to the array (json_matcher_unique.cc)
        return n.range.bounded
                   ? ranged_number_complete(f, n.range) && unique_hash_unused(s, static_cast<uint32_t>(f.present))
                   : number_complete(f) && unique_hash_unused(s, static_cast<uint32_t>(f.bits));
      return n.range.bounded ? ranged_number_complete(f, n.range) : number_complete(f);
    case Kind::kLiteral: {  // the text read so far is one of them (the first of the range), unused
      const TextRange r = unpack_range(f.bits);
      return !r.empty() && n.literals[r.lo].size() == static_cast<size_t>(f.i) &&
             unused_literal(s, TextRange{r.lo, r.lo + 1});
    }
    case Kind::kDsmlParams: return (f.phase == kPFirst || f.phase == kPAfter) && may_close(n, f);
    case Kind::kText: return f.phase == kSBody && g_.regexes[n.regex]->accepting(f.j);
    default: return false;
  }
}

// The top frame ends; its parent takes note.
void JsonMatcher::pop(MatchStack& s) const {
  if (hashed_item(s)) push_item_hash(s);  // integers and literals (strings keep theirs at the quote)
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
      if (n.unique)  // the literal just read (its range's first) is used (bits: the array's used ones)
        p.bits |= uint64_t{1} << unpack_range(s.f[s.n].bits).lo;
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
  for (int32_t k = 0; k < out.n; ++k) {
    const MatchStack& o = out.s[k];
    if (o.n == s.n && o.n_keys == s.n_keys &&
        std::memcmp(o.f, s.f, sizeof(Frame) * static_cast<size_t>(s.n)) == 0 &&
        std::memcmp(o.keys, s.keys, sizeof(uint32_t) * static_cast<size_t>(s.n_keys)) == 0)
      return;
  }
  DSV4_CHECK(out.n < kMaxStacks, "more readings than check_readings bounds");
  copy_stack(out.s[out.n++], s);
}

// The value of `node` starts with byte c on top of s: one stack per concrete branch.
void JsonMatcher::open_value(const MatchStack& s, int32_t node, uint8_t c, MatchState& out) const {
  // Enough: check_readings refused a grammar whose expansion visits more (the same walk as
  // grammar_analysis.h's expand_alternatives).
  int32_t pending[kMaxExpanded], seen[kMaxExpanded];
  int32_t n_pending = 0, n_seen = 0;
  pending[n_pending++] = node;
  seen[n_seen++] = node;
  MatchStack t;
  while (n_pending > 0) {
    const int32_t k = pending[--n_pending];
    const Node& n = g_.nodes[k];
    if (n.kind == Kind::kAnyOf) {
      for (auto a = n.alternatives.rbegin(); a != n.alternatives.rend(); ++a) {
        bool dup = false;
        for (int32_t q = 0; q < n_seen; ++q) dup |= seen[q] == *a;
        if (dup || n_seen == kMaxExpanded) continue;
        seen[n_seen++] = *a;
        pending[n_pending++] = *a;
      }
      continue;
    }
    if (!fits(s.n, k)) continue;  // could not close within the bound
    copy_stack(t, s);
    Frame& f = t.f[t.n++];
    f = Frame{};
    f.node = k;
    if (n.kind == Kind::kLiteral) f.bits = pack_range(TextRange{0, static_cast<uint32_t>(n.literals.size())});
    consume(t, c, out);
  }
}

void JsonMatcher::consume(const MatchStack& in, uint8_t c, MatchState& out) const {
  MatchStack s;
  copy_stack(s, in);
  Frame& f = s.f[s.n - 1];
  // A number or literal may end here: c then belongs to the parent.
  if (completable(s)) {
    MatchStack p;
    copy_stack(p, in);
    pop(p);
    consume(p, c, out);
  }
  if (f.node == kRootNode) {
    if (f.phase != kRBefore) return;
    f.phase = kRIn;
    open_value(s, g_.root, c, out);
    return;
  }
  if (f.node == kKeyNode) return key_byte(s, c, out);
  if (f.node == kPatternKeyNode) return pattern_key_byte(s, c, out);
  const Node& n = g_.nodes[f.node];
  switch (n.kind) {
    case Kind::kString: return string_value_byte(s, n, c, out);
    case Kind::kNumber:
    case Kind::kInteger:
      if (hashed_item(s))
        return n.range.bounded ? unique_ranged_byte(s, n, c, out) : unique_integer_byte(s, c, out);
      if (n.range.bounded ? ranged_number_byte(f, c, n.range) : number_byte(f, c, n.kind == Kind::kInteger))
        emit(s, out);
      return;
    case Kind::kLiteral: {  // uniqueItems: a value not yet in the array must remain
      const TextRange keep = narrow_range(unpack_range(f.bits), f.i, c, [&](uint32_t k) -> const std::string& {
        return n.literals[k];
      });
      if (keep.empty() || !unused_literal(s, keep)) return;
      f.bits = pack_range(keep);
      ++f.i;
      emit(s, out);
      return;
    }
    case Kind::kArray: return array_byte(s, n, c, out);
    case Kind::kObject: return object_byte(s, n, c, out);
    case Kind::kAnyOf: return;  // never on a stack (open_value expands it)
    case Kind::kSequence:
      if (f.i == static_cast<int32_t>(n.sequence.size())) return;
      ++f.i;
      open_value(s, n.sequence[f.i - 1], c, out);
      return;
    case Kind::kRawString: return raw_string_byte(s, n, c, out);
    case Kind::kDsmlParams: return params_byte(s, n, c, out);
    case Kind::kText:
      if (text_byte(f, n, c)) emit(s, out);
      return;
  }
}

// An open object's key: no escapes (its bytes are the key), hashed; a key its object already
// has is refused at the closing quote.
void JsonMatcher::key_byte(MatchStack& s, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if (c == '"' && string_may_close(f)) {
    const uint32_t hash = static_cast<uint32_t>(f.bits);
    for (int32_t k = s.f[s.n - 2].i; k < s.n_keys; ++k)
      if (s.keys[k] == hash) return;
    s.keys[s.n_keys++] = hash;  // room: checked where the key began
    pop(s);
    ++s.f[s.n - 1].n_props;
    emit(s, out);
    return;
  }
  if (c == '\\' || !string_byte(f, c, -1)) return;
  f.bits = (static_cast<uint32_t>(f.bits) ^ c) * kKeyHashPrime;
  emit(s, out);
}

bool JsonMatcher::hashed_item(const MatchStack& s) const { return hashed_array_frame(g_, s) >= 0; }

// A hashed item (hashed_item) takes no escape, and closes only where its hash is new to the
// array (whose first hash is at the array frame's j; unique_items.h).
void JsonMatcher::string_value_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if (n.regex >= 0) return hashed_item(s) ? unique_pattern_byte(s, n, c, out) : pattern_value_byte(s, n, c, out);
  const bool hashed = hashed_item(s);
  if (f.phase == kSOpen) {
    if (c != '"') return;
    f.phase = kSBody;
    if (hashed) f.bits = kKeyHashBasis;
  } else if (c == '"' && string_may_close(f)) {
    if (f.i < n.min_length) return;
    if (hashed) {
      const auto hash = static_cast<uint32_t>(f.bits);
      if (!unique_hash_unused(s, hash)) return;
      s.keys[s.n_keys++] = hash;  // room: the array has at most kMaxUniqueStrings items
    }
    pop(s);
  } else if ((hashed && c == '\\') || !string_byte(f, c, n.max_length)) {
    return;
  } else if (hashed) {
    f.bits = (static_cast<uint32_t>(f.bits) ^ c) * kKeyHashPrime;
  }
  emit(s, out);
}

void JsonMatcher::pattern_value_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  const StringPattern p{g_.regexes[n.regex].get(), n.min_length, n.max_length};
  if (f.phase == kSOpen) {
    if (c != '"') return;
    f.phase = kSBody;
    f.j = p.re->start();
  } else if (c == '"' && pattern_string_may_close(f, p)) {
    if (f.i < n.min_length) return;
    pop(s);
  } else if (!pattern_string_byte(f, c, p)) {
    return;
  }
  emit(s, out);
}

void JsonMatcher::array_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if (f.phase == kAOpen) {
    if (c != '[') return;
    f.phase = kAFirst;
    f.j = s.n_keys;  // unique_hashed: its items' hashes from here
    emit(s, out);
    return;
  }
  const std::string* sep = f.phase == kANext ? &g_.layout.item_separator : nullptr;
  if (is_ws(c) && f.phase != kAInItem) {
    if (gap_space(f, c, sep)) emit(s, out);
    return;
  }
  if (!gap_done(f, sep)) return;
  f.ws = 0;
  if (c == ']' && ((f.phase == kAFirst && n.min_items == 0) || (f.phase == kAAfter && f.i >= n.min_items))) {
    s.n_keys = f.j;  // its items' hashes leave with it
    pop(s);
    emit(s, out);
  } else if (c == ',' && f.phase == kAAfter && (n.max_items < 0 || f.i < n.max_items) && fits(s.n, item_at(n, f.i))) {
    f.phase = kANext;
    emit(s, out);
  } else if ((f.phase == kAFirst && n.max_items != 0) || f.phase == kANext) {
    f.phase = kAInItem;
    open_value(s, item_at(n, f.i), c, out);
  }
}

// A listed key's bytes (kOKey): narrowed among the candidates, ended by its quote.
void JsonMatcher::listed_key_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  const TextRange r = unpack_range(f.bits);
  if (c == '"' && !r.empty() && key_at(n, r.lo).size() == static_cast<size_t>(f.j) &&
      key_in_range(n, TextRange{r.lo, r.lo + 1}, f.i, s.n, f.n_props, f.present)) {
    const int32_t k = n.key_order[r.lo];
    f.i = k + 1;
    f.j = k;
    f.phase = kOColon;
    ++f.n_props;
    if (!n.needs.empty()) f.present |= uint64_t{1} << k;  // needs: at most 64 properties
    emit(s, out);
    return;
  }
  const TextRange keep = narrow_range(r, f.j, c, [&](uint32_t k) -> const std::string& { return key_at(n, k); });
  if (keep.empty() || !key_in_range(n, keep, f.i, s.n, f.n_props, f.present)) return;
  f.bits = pack_range(keep);
  ++f.j;
  emit(s, out);
}

// A key's opening quote (kOFirst / kONext).
void JsonMatcher::object_key_start(MatchStack& s, const Node& n, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if (n.open) {
    if (!open_key_room(s, n)) return;
    f.phase = kOInKey;
    Frame& key = s.f[s.n++];
    key = Frame{};
    key.node = n.keys >= 0 ? kPatternKeyNode : kKeyNode;
    key.phase = kSBody;
    key.bits = kKeyHashBasis;
    if (n.keys >= 0) key.j = g_.key_automata[n.keys]->start;
    emit(s, out);
  } else if (key_in_range(n, all_keys(n), f.i, s.n, f.n_props, f.present)) {
    f.phase = kOKey;
    f.bits = pack_range(all_keys(n));
    f.j = 0;
    emit(s, out);
  }
}

void JsonMatcher::object_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if (f.phase == kOOpen) {
    if (c != '{') return;
    f.phase = kOFirst;
    f.i = n.open ? s.n_keys : 0;
    emit(s, out);
    return;
  }
  if (f.phase == kOKey) return listed_key_byte(s, n, c, out);
  const std::string* sep = f.phase == kONext    ? &g_.layout.item_separator
                           : f.phase == kOValue ? &g_.layout.key_separator
                                                : nullptr;
  if (is_ws(c) && f.phase != kOInKey && f.phase != kOInValue) {
    if (gap_space(f, c, sep)) emit(s, out);
    return;
  }
  if (!gap_done(f, sep)) return;
  f.ws = 0;
  if (c == '"' && (f.phase == kOFirst || f.phase == kONext)) {
    object_key_start(s, n, out);
  } else if (c == ':' && f.phase == kOColon) {
    f.phase = kOValue;
    emit(s, out);
  } else if (c == '}' && (f.phase == kOFirst || f.phase == kOAfter) && may_close(n, f)) {
    if (n.open) s.n_keys = f.i;  // its keys leave with it
    pop(s);
    emit(s, out);
  } else if (c == ',' && f.phase == kOAfter &&
             (n.open ? open_key_room(s, n) : key_in_range(n, all_keys(n), f.i, s.n, f.n_props, f.present))) {
    f.phase = kONext;
    emit(s, out);
  } else if (f.phase == kOValue) {
    f.phase = kOInValue;
    int32_t value = n.open ? n.values : n.properties[f.j].node;
    if (n.keys >= 0) value = g_.key_automata[n.keys]->label_value[f.j];  // the key's label (pattern_key_byte)
    open_value(s, value, c, out);
  }
}

// A patterned raw string: Frame::esc is the position in a possible closing tag, j the regex
// state. A tag byte is taken where the tag may end the text here, or where the tag's bytes so
// far could still be text (so that a tag abandoned later leaves a live state).
void JsonMatcher::pattern_raw_string_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  const StringPattern p{g_.regexes[n.regex].get(), n.min_length, n.max_length};
  if (f.phase == kSOpen) {
    f.phase = kSBody;
    f.j = p.re->start();
  }
  const auto tag_size = static_cast<int32_t>(kDsmlParamClose.size());
  auto as_text = [&](Frame& t, int32_t n_tag, int c_or_none) {
    for (int32_t k = 0; k < n_tag; ++k)
      if (!pattern_raw_byte(t, static_cast<uint8_t>(kDsmlParamClose[k]), p)) return false;
    return c_or_none < 0 || pattern_raw_byte(t, static_cast<uint8_t>(c_or_none), p);
  };
  const bool may_end = f.phase == kSBody && f.i >= n.min_length && p.re->accepting(f.j);
  if (f.esc > 0 && c == static_cast<uint8_t>(kDsmlParamClose[f.esc])) {
    Frame t = f;
    if (!may_end && !as_text(t, f.esc, c)) return;
    if (++f.esc == tag_size) {
      if (!may_end) return;
      pop(s);
    }
    emit(s, out);
    return;
  }
  if (f.esc > 0) {  // not the tag: its bytes so far were text
    const int32_t k = f.esc;
    f.esc = 0;
    if (!as_text(f, k, -1)) return;
  }
  if (c == '<' && f.phase == kSBody) {
    Frame t = f;
    if (!may_end && !as_text(t, 0, '<')) return;
    f.esc = 1;
  } else if (!pattern_raw_byte(f, c, p)) {
    return;
  }
  emit(s, out);
}

void JsonMatcher::raw_string_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if (n.regex >= 0) return pattern_raw_string_byte(s, n, c, out);
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
}

void JsonMatcher::params_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if ((f.phase == kPFirst || f.phase == kPNext) && c == '<') {
    if (!key_in_range(n, all_keys(n), f.i, s.n, 0)) return;
    f.phase = kPTag;
    f.bits = pack_range(all_keys(n));
    f.j = 0;
  }
  if (f.phase == kPTag) {  // a tag ends with its last byte: no tag is a prefix of another
    const TextRange keep =
        narrow_range(unpack_range(f.bits), f.j, c, [&](uint32_t k) -> const std::string& { return key_at(n, k); });
    if (keep.empty() || !key_in_range(n, keep, f.i, s.n, 0)) return;
    f.bits = pack_range(keep);
    ++f.j;
    if (key_at(n, keep.lo).size() == static_cast<size_t>(f.j)) {
      const int32_t k = n.key_order[keep.lo];
      f.i = k + 1;
      f.j = k;
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
  } else if (f.phase == kPAfter && c == '\n' && key_in_range(n, all_keys(n), f.i, s.n, 0)) {
    f.phase = kPNext;
    emit(s, out);
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
    while (s.n > 1 && completable(s)) pop(s);
    if (s.n == 1 && s.f[0].phase == kRDone) return true;
    if (s.n == 1 && s.f[0].phase == kRBefore && text_accepts_empty()) return true;
  }
  return false;
}

bool JsonMatcher::in_string_text(const MatchState& st, int64_t room, bool* patterned) const {
  if (st.n == 0) return false;
  if (patterned) *patterned = false;
  for (int32_t k = 0; k < st.n; ++k) {
    const Frame& f = st.s[k].f[st.s[k].n - 1];
    if (f.node == kRootNode || !string_may_close(f)) return false;
    if (f.node < 0 || hashed_item(st.s[k])) return false;  // open keys, hashed items: no escapes, hashed
    const Node& n = g_.nodes[f.node];
    if (n.kind != Kind::kString) return false;
    int64_t left = n.max_length - f.i;
    if (n.regex >= 0) {  // text must leave the state as it is, and its shortest match must fit
      const Regex& re = *g_.regexes[n.regex];
      if (!patterned || f.phase != kSBody || !re.loops_on_json_text(f.j)) return false;
      *patterned = true;
      left -= re.shortest_accepting_length(f.j);
    }
    if (n.max_length >= 0 && left < room) return false;
  }
  return true;
}

bool JsonMatcher::in_key_text(const MatchState& st) const {
  if (st.n == 0) return false;
  for (int32_t k = 0; k < st.n; ++k) {
    const MatchStack& s = st.s[k];
    const Frame& f = s.f[s.n - 1];
    if (f.node == kPatternKeyNode) {  // where the key automaton's state loops on all key text
      if (f.more != 0 || !g_.key_automata[g_.nodes[s.f[s.n - 2].node].keys]->loops[f.j]) return false;
    } else if (f.node != kKeyNode || !string_may_close(f)) {
      return false;
    }
  }
  return true;
}

bool JsonMatcher::key_text(const char* bytes, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (bytes[i] == '\\') return false;
  return string_text(bytes, n);
}

bool JsonMatcher::in_raw_text(const MatchState& st, int64_t room) const {
  if (st.n == 0) return false;
  for (int32_t k = 0; k < st.n; ++k) {
    const Frame& f = st.s[k].f[st.s[k].n - 1];
    if (f.node < 0) return false;
    const Node& n = g_.nodes[f.node];
    if (n.kind != Kind::kRawString || n.regex >= 0 || f.j != 0 || f.more != 0 ||
        (n.max_length >= 0 && n.max_length - f.i < room))
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
