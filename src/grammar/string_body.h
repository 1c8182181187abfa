// A string body on top of a matcher stack, as a token mask sees it: the tokens without the
// body's end byte ('"' for JSON strings and open objects' keys, '<' for DSML raw strings; none
// for a whole-output text, which only the end of sequence ends) never leave the body, so whether one is allowed depends only on the top frame's string state, never
// on the frames below it. StringMaskKey names that state exactly (the regex and its state, the
// escape/UTF-8 state, the length bounds left, as classes: beyond a class's edge the answer no
// longer changes), so masks of those tokens can be cached (mask_cache.h) across steps, requests
// and readings; body_byte replays the matcher's byte function for the body on a lone Frame (an
// open key's hash included), so a trie walk can carry the top frame alone until the end byte.
#pragma once

#include <cstdint>

#include "grammar/json_matcher.h"
#include "grammar/json_scalar.h"

namespace dsv4::grammar {

// kHashed: a plain string item of a uniqueItems array of strings (no escapes, its hash kept).
// kPatternKey: an open object's key under its KeyAutomaton (patternProperties/propertyNames).
// kText: the whole output of a regex / choice / GBNF constraint (Kind::kText): no end byte.
enum class BodyKind : uint8_t { kKey, kPlain, kPattern, kRaw, kRawPattern, kHashed, kPatternKey, kText };

struct StringBody {
  BodyKind kind = BodyKind::kPlain;
  uint8_t end_byte = '"';   // the only byte that can end the body (ends_by_byte)
  bool ends_by_byte = true;  // false: kText, every byte stays in the body
  int32_t regex = -1;       // Grammar::regexes index (kPattern, kRawPattern)
  StringPattern pattern;    // regex and length bounds (kPattern, kRawPattern)
  int64_t max_length = -1;  // kPlain, kRaw
  const KeyAutomaton* keys = nullptr;  // kPatternKey: the object's automaton
  int32_t key_automaton = -1;          // kPatternKey: its Grammar::key_automata index
  uint64_t labels = 0;                 // kPatternKey: the labels whose values fit the depth
};

struct StringMaskKey {
  const Regex* regex = nullptr;  // nullptr: no pattern
  const KeyAutomaton* keys = nullptr;  // a pattern key's automaton, its state, the labels that fit
  uint64_t labels = 0;
  int64_t min_gap = 0;           // code points still needed for minLength (patterns), exact
  int64_t room = -1;             // code points left under maxLength; −1: far (as unbounded)
  uint64_t bits = 0;             // a pattern's code point being decoded (UTF-8 or \u digits)
  int32_t state = 0;             // a pattern's regex state
  uint8_t kind = 0, phase = 0, esc = 0, more = 0, lo = 0, hi = 0, bounded = 0;
  bool operator==(const StringMaskKey&) const = default;
  uint64_t hash() const;
};

// Whether the top frame of s is a string body whose tokens without body->end_byte stay in it;
// then body and key describe it (max_token_length: the longest token in bytes, which bounds
// the code points one token adds).
bool string_body_of(const Grammar& g, const MatchStack& s, int32_t max_token_length, StringBody* body,
                    StringMaskKey* key);

// The frame of the body on top of s, as body_byte takes it: the top frame, or before a
// whole-output text's first byte (the bottom frame alone) the text's own frame at its start.
Frame body_frame(const MatchStack& s);

// One byte c (never an end byte) of the body in f, as JsonMatcher takes it; false: refused.
bool body_byte(const StringBody& body, Frame& f, uint8_t c);

}  // namespace dsv4::grammar
