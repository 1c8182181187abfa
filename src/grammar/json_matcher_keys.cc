// JsonMatcher's object keys under patternProperties, propertyNames and dependentRequired
// (schema_keys.h): an open object's keys under its KeyAutomaton, and the listed object's
// dependencies.
#include "grammar/json_matcher.h"

namespace dsv4::grammar {
namespace {

// A UTF-8 lead byte ≥ 0x80 of a key: the continuation bytes it needs, its payload bits, the range
// of the next byte and of the code points it may begin (no overlong forms, surrogates or values
// above U+10FFFF); false for a byte that leads nothing.
bool key_lead(Frame& f, uint8_t c, uint32_t& cp, uint32_t& lo, uint32_t& hi) {
  f.lo = 0x80;
  f.hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) f.more = 1, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF) f.more = 2, cp = c & 0x0Fu;
  else if (c >= 0xF0 && c <= 0xF4) f.more = 3, cp = c & 0x07u;
  else return false;
  lo = cp << (6 * f.more);
  hi = lo | ((uint32_t{1} << (6 * f.more)) - 1);
  if (c == 0xE0) f.lo = 0xA0, lo = 0x800;
  if (c == 0xED) f.hi = 0x9F, hi = 0xD7FF;
  if (c == 0xF0) f.lo = 0x90, lo = 0x10000;
  if (c == 0xF4) f.hi = 0x8F, hi = 0x10FFFF;
  return true;
}

}  // namespace

uint64_t JsonMatcher::fitting_labels(const KeyAutomaton& k, int32_t n_frames) const {
  uint64_t labels = 0;
  for (size_t label = 0; label < k.label_value.size(); ++label)
    labels |= static_cast<uint64_t>(fits(n_frames, k.label_value[label])) << label;
  return labels;
}

bool JsonMatcher::key_may_start(const Node& n, int32_t n_frames) const {
  if (n.keys < 0) return fits(n_frames, n.values);
  const KeyAutomaton& k = *g_.key_automata[n.keys];
  return k.start >= 0 && (k.infinite[k.start] & fitting_labels(k, n_frames)) != 0;
}

// Frame::j: the automaton's state; bits: the key's hash, and from bit 32 the payload of the UTF-8
// sequence being read; more/lo/hi: its rest. A byte is taken only where some code point it may
// begin leads to a state with infinitely many keys on; the quote where the label allows the key
// (its value fits) and the object does not have it yet. At the quote the object's Frame::j takes
// the label (its value's node: KeyAutomaton::label_value).
void JsonMatcher::pattern_key_byte(MatchStack& s, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  const Frame& object = s.f[s.n - 2];
  const KeyAutomaton& k = *g_.key_automata[g_.nodes[object.node].keys];
  const uint64_t labels = fitting_labels(k, s.n - 1);
  const auto hash = static_cast<uint32_t>(f.bits);
  if (c == '"' && f.more == 0) {
    const int32_t label = k.label[f.j];
    if (label < 0 || (labels >> label & 1) == 0) return;
    for (int32_t q = object.i; q < s.n_keys; ++q)
      if (s.keys[q] == hash) return;
    s.keys[s.n_keys++] = hash;  // room: checked where the key began
    pop(s);
    s.f[s.n - 1].j = label;
    ++s.f[s.n - 1].n_props;
    emit(s, out);
    return;
  }
  if (pattern_key_text_byte(k, labels, f, c)) emit(s, out);
}

bool pattern_key_text_byte(const KeyAutomaton& k, uint64_t labels, Frame& f, uint8_t c) {
  const auto hash = static_cast<uint32_t>(f.bits);
  auto cp = static_cast<uint32_t>(f.bits >> 32), lo = uint32_t{c}, hi = uint32_t{c};
  if (f.more == 0 && c < 0x80) {
    if (c < 0x20 || c == '\\') return false;
    cp = c;
  } else if (f.more == 0) {
    if (!key_lead(f, c, cp, lo, hi)) return false;
  } else {
    if (c < f.lo || c > f.hi) return false;
    cp = cp << 6 | (c & 0x3Fu);
    --f.more;
    f.lo = 0x80;
    f.hi = 0xBF;
    lo = cp << (6 * f.more);
    hi = lo | ((uint32_t{1} << (6 * f.more)) - 1);
  }
  if (f.more > 0) {
    if (!k.steps_within(f.j, lo, hi, labels)) return false;
  } else {
    const int32_t t = k.step(f.j, cp);
    if (t < 0 || (k.infinite[t] & labels) == 0) return false;
    f.j = t;
    cp = 0;
  }
  f.bits = uint64_t{cp} << 32 | static_cast<uint32_t>((hash ^ c) * kKeyHashPrime);
  return true;
}

uint64_t JsonMatcher::needed_keys(const Node& n, uint64_t present) {
  uint64_t needed = 0;
  for (size_t k = 0; k < n.needs.size(); ++k)
    if (present >> k & 1) needed |= n.needs[k];
  return needed & ~present;
}

uint64_t JsonMatcher::dependent_keys(const Node& n, int32_t f, int32_t n_frames, uint64_t present) const {
  const auto size = static_cast<int32_t>(n.properties.size());
  uint64_t required = 0, available = 0;  // available: required, or its value fits the bound
  for (int32_t k = 0; k < size; ++k) {
    const Property& p = n.properties[k];
    required |= static_cast<uint64_t>(p.required) << k;
    available |= static_cast<uint64_t>(p.required || fits(n_frames, p.node)) << k;
  }
  const uint64_t needed = needed_keys(n, present);
  uint64_t bits = 0;
  for (int32_t k = f; k < size; ++k) {
    const uint64_t self = uint64_t{1} << k, below = self - 1;
    const uint64_t then_needed = n.needs[k] & ~present;  // what taking k asks for: after k, and able to open
    if ((available & self) && (then_needed & below) == 0 && (then_needed & ~available) == 0) bits |= self;
    if ((required | needed) & self) break;  // it cannot be skipped
  }
  return bits;
}

}  // namespace dsv4::grammar
