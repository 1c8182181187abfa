#include "grammar/string_body.h"

#include <algorithm>

#include "grammar/unique_items.h"

namespace dsv4::grammar {
namespace {

constexpr int32_t kOpenKeyNode = -1;         // Frame::node of an open object's key (json_matcher.h)
constexpr int32_t kRootFrameNode = -2;       // Frame::node of the bottom frame (json_matcher.cc)

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

// The escape and UTF-8 state of f, only the fields its phase reads (so equal states share a key).
void set_escape_state(const Frame& f, bool pattern, StringMaskKey* key) {
  key->phase = f.phase;
  key->esc = f.esc;
  if (f.phase == kSHex || f.phase == kSUtf8) key->more = f.more;
  if (f.phase == kSUtf8) key->lo = f.lo, key->hi = f.hi;
  if (pattern && (f.phase == kSHex || f.phase == kSUtf8)) key->bits = f.bits;
}

// Code points left under max_length, −1 where no token can reach the bound (as unbounded).
int64_t room_class(int64_t max_length, int64_t used, int64_t far) {
  if (max_length < 0 || max_length - used >= far) return -1;
  return max_length - used;
}

// A pattern's length classes: minLength's gap is exact; maxLength is far once a token's code
// points plus the longest shortest-accepting continuation (< the automaton's states) fit.
void set_pattern_lengths(const Frame& f, const StringPattern& p, int32_t max_token_length, StringMaskKey* key) {
  key->regex = p.re;
  key->bounded = p.min_length > 0 || p.max_length >= 0;
  key->min_gap = std::max<int64_t>(0, p.min_length - f.i);
  const int64_t far = key->min_gap == 0 ? int64_t{max_token_length} + p.re->n_states() : INT64_MAX;
  key->room = room_class(p.max_length, f.i, far);
}

// Whether the string on top of s joins a uniqueItems array's hashes (as JsonMatcher::hashed_item):
// its bytes then go into a hash, without escapes.
bool hashed_item(const Grammar& g, const MatchStack& s) { return hashed_array_frame(g, s) >= 0; }

}  // namespace

uint64_t StringMaskKey::hash() const {
  uint64_t h = reinterpret_cast<uintptr_t>(regex);
  h = mix(h, reinterpret_cast<uintptr_t>(keys));
  for (uint64_t v : {static_cast<uint64_t>(min_gap), static_cast<uint64_t>(room), bits, static_cast<uint64_t>(state), labels})
    h = mix(h, v);
  const uint64_t small = uint64_t{kind} | uint64_t{phase} << 8 | uint64_t{esc} << 16 | uint64_t{more} << 24 |
                         uint64_t{lo} << 32 | uint64_t{hi} << 40 | uint64_t{bounded} << 48;
  return mix(h, small);
}

bool string_body_of(const Grammar& g, const MatchStack& s, int32_t max_token_length, StringBody* body,
                    StringMaskKey* key) {
  const Frame& f = s.f[s.n - 1];
  *body = StringBody{};
  *key = StringMaskKey{};
  if (f.node == kRootFrameNode) {  // before a whole-output text's first byte: its start state
    const Node& root = g.nodes[static_cast<size_t>(g.root)];
    if (s.n != 1 || f.phase != 0 || root.kind != Kind::kText) return false;  // 0: kRBefore
    body->kind = BodyKind::kText;
    body->ends_by_byte = false;
    body->regex = root.regex;
    body->pattern = StringPattern{g.regexes[root.regex].get(), 0, -1};
    key->phase = kSBody;
    key->regex = body->pattern.re;
    key->state = body->pattern.re->start();
  } else if (f.node == kOpenKeyNode) {  // unbounded, no escapes
    body->kind = BodyKind::kKey;
    set_escape_state(f, false, key);
  } else if (f.node == kPatternKeyNode) {  // the automaton state and UTF-8 payload, not the hash
    body->kind = BodyKind::kPatternKey;
    body->key_automaton = g.nodes[s.f[s.n - 2].node].keys;
    const KeyAutomaton& k = *g.key_automata[body->key_automaton];
    body->keys = key->keys = &k;
    for (size_t label = 0; label < k.label_value.size(); ++label)  // JsonMatcher::fitting_labels
      if (s.n - 1 + g.min_depth[k.label_value[label]] <= kMaxDepth) body->labels |= uint64_t{1} << label;
    key->labels = body->labels;
    key->state = f.j;
    key->more = f.more;
    if (f.more > 0) key->lo = f.lo, key->hi = f.hi, key->bits = f.bits >> 32;
  } else if (f.node < 0) {
    return false;
  } else if (const Node& n = g.nodes[f.node]; n.kind == Kind::kString) {
    if (f.phase == kSOpen) return false;  // before the opening quote
    if (n.regex >= 0 && hashed_item(g, s)) return false;  // its characters hang on the array's items
    set_escape_state(f, n.regex >= 0, key);
    if (n.regex >= 0) {
      body->kind = BodyKind::kPattern;
      body->pattern = StringPattern{g.regexes[n.regex].get(), n.min_length, n.max_length};
      set_pattern_lengths(f, body->pattern, max_token_length, key);
      key->state = f.j;
    } else {
      body->kind = hashed_item(g, s) ? BodyKind::kHashed : BodyKind::kPlain;
      key->room = room_class(n.max_length, f.i, max_token_length);
    }
    body->regex = n.regex;
    body->max_length = n.max_length;
  } else if (n.kind == Kind::kRawString) {
    body->end_byte = '<';
    body->regex = n.regex;
    body->max_length = n.max_length;
    if (n.regex >= 0) {
      if (f.esc != 0) return false;  // inside a possible closing tag
      body->kind = BodyKind::kRawPattern;
      body->pattern = StringPattern{g.regexes[n.regex].get(), n.min_length, n.max_length};
      set_escape_state(f, true, key);
      set_pattern_lengths(f, body->pattern, max_token_length, key);
      if (f.phase != kSOpen) key->state = f.j;
    } else {
      if (f.j != 0) return false;  // inside a possible closing tag
      body->kind = BodyKind::kRaw;
      key->more = f.more;
      if (f.more > 0) key->lo = f.lo, key->hi = f.hi;
      key->room = room_class(n.max_length, f.i, max_token_length);
    }
  } else if (n.kind == Kind::kText) {  // the automaton state and UTF-8 payload (as kRawPattern)
    body->kind = BodyKind::kText;
    body->ends_by_byte = false;
    body->regex = n.regex;
    body->pattern = StringPattern{g.regexes[n.regex].get(), 0, -1};
    set_escape_state(f, true, key);
    key->phase = kSBody;  // kSOpen is the start state's body, as text_byte takes it
    key->regex = body->pattern.re;
    key->state = f.phase == kSOpen ? body->pattern.re->start() : f.j;
  } else {
    return false;
  }
  key->kind = static_cast<uint8_t>(body->kind);
  return true;
}

Frame body_frame(const MatchStack& s) {
  const Frame& top = s.f[s.n - 1];
  if (top.node != kRootFrameNode) return top;
  Frame text;  // the frame JsonMatcher::open_value pushes for the text
  text.phase = kSOpen;
  return text;
}

// The byte functions JsonMatcher's key_byte, string_value_byte, pattern_value_byte,
// raw_string_byte, pattern_raw_string_byte and text_byte apply to a byte other than the end byte.
bool body_byte(const StringBody& body, Frame& f, uint8_t c) {
  switch (body.kind) {
    case BodyKind::kKey:  // the key's hash goes on (its closing quote checks it)
      if (c == '\\' || !string_byte(f, c, -1)) return false;
      f.bits = (static_cast<uint32_t>(f.bits) ^ c) * kKeyHashPrime;
      return true;
    case BodyKind::kPlain: return string_byte(f, c, body.max_length);
    case BodyKind::kPatternKey: return pattern_key_text_byte(*body.keys, body.labels, f, c);
    case BodyKind::kHashed:  // as JsonMatcher::string_value_byte for a hashed item
      if (c == '\\' || !string_byte(f, c, body.max_length)) return false;
      f.bits = (static_cast<uint32_t>(f.bits) ^ c) * kKeyHashPrime;
      return true;
    case BodyKind::kPattern: return pattern_string_byte(f, c, body.pattern);
    case BodyKind::kRaw: return raw_text_byte(f, c, body.max_length);
    case BodyKind::kRawPattern:
    case BodyKind::kText:
      if (f.phase == kSOpen) {
        f.phase = kSBody;
        f.j = body.pattern.re->start();
      }
      return pattern_raw_byte(f, c, body.pattern);
  }
  return false;
}

}  // namespace dsv4::grammar
