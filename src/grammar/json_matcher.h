// JsonMatcher: the bytes a Grammar (json_schema.h) allows, one at a time. A pushdown automaton:
// each stack holds a frame per open value (container, string, number, literal); an anyOf opens
// one stack per branch and the stacks that cannot take a byte die, so the matcher follows every
// reading of the bytes so far (at most kMaxStacks; identical stacks merge).
//
// The state is plain data of fixed size (no allocation): copy it to roll back (a rejected draft)
// or to explore (token_mask.h walks the vocabulary with one state per trie depth).
//
// Dead ends are impossible by construction: a value, a listed key or an open object's key is
// begun only where the value can still open and close within kMaxDepth frames (min_depth).
// Open objects never repeat a key (I-JSON): each stack keeps a 32-bit hash of every key of the
// open objects on it (at most kMaxOpenKeys; beyond, the object may only close), a key whose
// hash is among its object's is refused at its closing quote (a collision only refuses more),
// and such keys are generated without escapes (their bytes are then the key). Under a
// KeyAutomaton (patternProperties/propertyNames) a key byte is taken only into a state with
// infinitely many keys on, so the keys present never leave a dead end; the label at the closing
// quote picks the value's node. Listed objects with dependentRequired (Node::needs, at most 64
// properties) keep the properties present in Frame::present. The items of a uniqueItems array
// of strings, unbounded integers or many enum values are kept the same way as open keys: hashed
// (unique_items.h; strings without escapes), one refused where its hash is among the array's.
#pragma once

#include <cstdint>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/sorted_texts.h"

namespace dsv4::grammar {

constexpr int kMaxOpenKeys = 64;  // keys of the open objects on one stack
// Key slots reserved for open objects with minProperties (at most kMaxOpenMinProperties): a key
// they still need always has room (JsonMatcher::open_key_room).
constexpr int kMaxReservedKeys = kMaxOpenMinProperties * kMaxDepth;
constexpr int32_t kPatternKeyNode = -3;  // Frame::node of a key under its object's KeyAutomaton
constexpr uint32_t kKeyHashBasis = 2166136261u, kKeyHashPrime = 16777619u;  // 32-bit FNV-1a of a key's bytes

struct Frame {
  int32_t node = -1;   // the grammar node; −1: an object key of an open object
  int32_t i = 0;       // string: code points; number: digits of the part; literal: position;
                       // object: next property floor (open: its first key in MatchStack::keys);
                       // array: items done
  int32_t j = 0;       // object: position in the key being matched
  uint8_t phase = 0;
  uint8_t ws = 0;      // whitespace run in this gap
  uint8_t more = 0;    // string: \u hex digits or UTF-8 continuation bytes still to come
  uint8_t lo = 0, hi = 0;  // string: the next UTF-8 continuation byte's range
  uint8_t esc = 0;     // string: a surrogate pair's state (json_scalar.cc)
  uint16_t n_props = 0;  // object: the properties present so far (listed, or an open object's keys)
  uint64_t bits = 0;   // object: key candidates; literal: candidates (sorted_texts.h's range);
                       // open key: its hash; pattern key: hash, UTF-8 payload; uniqueItems array:
                       // its used values; hashed string or integer item: its hash
  uint64_t present = 0;  // listed object with dependentRequired (Node::needs): properties present;
                         // hashed patterned string item: its hash
};

struct MatchStack {
  int32_t n = 0;
  int32_t n_keys = 0;
  Frame f[kMaxDepth + 1];  // f[0]: the root's frame (before the value, in it, done)
  // Hashes of the open objects' keys, outermost object first, then those of the open uniqueItems
  // arrays kept as hashes (Node::unique_hashed, unique_items.h): two at most, an array of objects
  // (opened with at most kMaxOpenKeys + kMaxReservedKeys below it; its items add keys only below
  // that bound, or into their reserved slots) and one of scalars in such an item.
  uint32_t keys[kMaxOpenKeys + kMaxReservedKeys + 2 * kMaxUniqueStrings];
};

// A byte c other than the closing quote of a pattern key (Frame::node kPatternKeyNode) in f, under
// its object's automaton k with the labels whose values fit (json_matcher_keys.cc); false: refused.
bool pattern_key_text_byte(const KeyAutomaton& k, uint64_t labels, Frame& f, uint8_t c);

// dst = src (the live frames and keys only).
void copy_stack(MatchStack& dst, const MatchStack& src);

struct MatchState {
  int32_t n = 0;  // live stacks; 0: dead (no byte was ever possible after the last one)
  MatchStack s[kMaxStacks];
};

class JsonMatcher {
 public:
  explicit JsonMatcher(const Grammar& g);
  const Grammar& grammar() const { return g_; }

  // The state before the value's first byte.
  void start(MatchState& st) const;
  // next = st after byte c (next.n == 0: c is not allowed). &next != &st.
  void advance(const MatchState& st, uint8_t c, MatchState& next) const;
  // Whether the bytes so far are one whole value (the end of the sequence may come).
  bool accepting(const MatchState& st) const;
  // Whether every reading of st is inside a string's text (no escape or UTF-8 sequence open)
  // with room for at least `room` more code points: then a token without '"' is allowed exactly
  // when string_text() accepts it (token_mask.h's fast path). A patterned string counts only
  // where its regex state loops on all JSON text (patterned given; *patterned set): then a
  // token without '"' and '\\' is allowed exactly when key_text() accepts it.
  bool in_string_text(const MatchState& st, int64_t room, bool* patterned = nullptr) const;
  // Whether bytes without '"' are string text from a fresh point in a string.
  static bool string_text(const char* bytes, int64_t n);
  // The same for the keys of open objects (no escapes): every reading inside such a key's text
  // (under a KeyAutomaton: in a state that loops on all key text); then a token without '"' is
  // allowed exactly when key_text() accepts it.
  bool in_key_text(const MatchState& st) const;
  static bool key_text(const char* bytes, int64_t n);
  // The same for DSML raw strings: every reading in raw text (no closing tag or UTF-8 sequence
  // begun) with room for `room` code points; then a token without '<' is allowed exactly when
  // raw_text() accepts it.
  bool in_raw_text(const MatchState& st, int64_t room) const;
  static bool raw_text(const char* bytes, int64_t n);
  // out = st after text (tmp: scratch); false when a byte is not allowed (out is then dead).
  bool feed(const MatchState& st, const char* text, int64_t n, MatchState& out, MatchState& tmp) const;

 private:
  void consume(const MatchStack& in, uint8_t c, MatchState& out) const;
  // One byte c on top of s (a copy the function may change) by the top frame's kind.
  void key_byte(MatchStack& s, uint8_t c, MatchState& out) const;
  void string_value_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  // Whether the value on top of s joins a uniqueItems array's hashes (unique_items.h).
  bool hashed_item(const MatchStack& s) const;
  void pattern_value_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  // Hashed items beyond plain strings (json_matcher_unique.cc, unique_items.h): a patterned
  // string, an integer (unbounded; a range); whether a literal in r is unused; the ended item's
  // hash kept.
  void unique_pattern_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  void unique_integer_byte(MatchStack& s, uint8_t c, MatchState& out) const;
  void unique_ranged_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  bool unused_hashed_literal(const MatchStack& s, const Node& n, TextRange r) const;
  bool unique_hash_unused(const MatchStack& s, uint32_t hash) const;
  int32_t first_item_hash(const MatchStack& s) const;  // in MatchStack::keys
  // The hash of the hashed item on top of s (an integer or literal ending) joins its array's.
  void push_item_hash(MatchStack& s) const;
  void array_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  void object_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  void listed_key_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  void object_key_start(MatchStack& s, const Node& n, MatchState& out) const;
  // An open object's key under its KeyAutomaton (json_matcher_keys.cc).
  void pattern_key_byte(MatchStack& s, uint8_t c, MatchState& out) const;
  // The labels of k whose values fit on top of n_frames frames.
  uint64_t fitting_labels(const KeyAutomaton& k, int32_t n_frames) const;
  // Whether an open object (on top of n_frames frames) may begin a key: with a KeyAutomaton, one
  // with infinitely many keys whose value fits; else its values fit.
  bool key_may_start(const Node& n, int32_t n_frames) const;
  void raw_string_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  void pattern_raw_string_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  void params_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const;
  // Whole-output text (Kind::kText; text_matcher.cc): one byte on its frame f.
  bool text_byte(Frame& f, const Node& n, uint8_t c) const;
  // Whether the grammar is whole-output text that the empty output matches.
  bool text_accepts_empty() const;
  void open_value(const MatchStack& s, int32_t node, uint8_t c, MatchState& out) const;
  // Whether a value of `node` begun on top of n_frames frames can close within the bound.
  bool fits(int32_t n_frames, int32_t node) const { return n_frames + g_.min_depth[node] <= kMaxDepth; }
  // Whether a key a listed object (or DSML params) may name next from floor f lies in r
  // (positions of Node::key_order): f .. the first required one, without the optional ones whose
  // value could not close within the bound; with minProperties/maxProperties, a key only where
  // both can still be met (n_props present); under dependentRequired, dependent_keys' (present:
  // the properties present).
  bool key_in_range(const Node& n, TextRange r, int32_t f, int32_t n_frames, int32_t n_props,
                    uint64_t present = 0) const;
  // The keys (bit: property index) under dependentRequired (json_matcher_keys.cc): key k only
  // where every property it needs is present or may follow it and can still open within the bound.
  uint64_t dependent_keys(const Node& n, int32_t f, int32_t n_frames, uint64_t present) const;
  // The properties the present ones need that are not present yet.
  static uint64_t needed_keys(const Node& n, uint64_t present);
  // Whether an open object on top of s may begin another key: its value fits, below
  // maxProperties, and a slot in MatchStack::keys: a key the object needs for minProperties
  // always has one (reserved); another only where the slots taken, those the open objects on s
  // still need and those objects deeper could need (max_open_min_ per level) stay below the
  // capacity. Each level adds at most max_open_min_ needed keys and frees its own share of the
  // reserve, so the sum never grows past its start (kMaxDepth x max_open_min_ <= capacity).
  bool open_key_room(const MatchStack& s, const Node& n) const;
  // Whether a listed object (or DSML params) whose next floor is f may close now; an open
  // object once it has minProperties keys.
  static bool may_close(const Node& n, const Frame& f);
  // Whether the top frame's value (a number, a literal, DSML params) may end here.
  bool completable(const MatchStack& s) const;
  // Whether a literal on top of s has a candidate in r not yet used by its uniqueItems array.
  bool unused_literal(const MatchStack& s, TextRange r) const;
  // Item i of an array node: prefixItems[i], else items.
  static int32_t item_at(const Node& n, int32_t i) {
    return i < static_cast<int32_t>(n.prefix.size()) ? n.prefix[i] : n.items;
  }
  // A whitespace byte in f's gap (sep: the separator this gap follows, else nullptr): whether
  // the layout (Grammar::layout) allows it; counted in f.ws.
  bool gap_space(Frame& f, uint8_t c, const std::string* sep) const;
  // Whether a token may begin in f's gap: a compact layout's separator is whole.
  bool gap_done(const Frame& f, const std::string* sep) const {
    return g_.layout.whitespace_flexible || sep == nullptr || static_cast<size_t>(f.ws) + 1 == sep->size();
  }
  void pop(MatchStack& s) const;
  void emit(const MatchStack& s, MatchState& out) const;
  const Grammar& g_;
  int32_t max_open_min_ = 0;  // the largest minProperties of an open object in g_ (0: none)
};

}  // namespace dsv4::grammar
