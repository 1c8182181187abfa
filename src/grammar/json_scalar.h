// The byte automata of JSON's scalars inside a matcher Frame (json_matcher.h): string bodies
// (escapes, UTF-8, UTF-16 surrogate pairs), numbers, and DSML raw text. Each takes one byte and
// says whether it is allowed, updating the frame; no allocation.
#pragma once

#include <cstdint>

#include "grammar/json_matcher.h"

namespace dsv4::grammar {

enum StringPhase : uint8_t { kSOpen, kSBody, kSEsc, kSHex, kSUtf8 };
enum NumberPhase : uint8_t { kNStart, kNMinus, kNZero, kNInt, kNDot, kNFrac, kNE, kNESign, kNExp };

// One byte of a string body after its opening quote (the closing quote is the caller's:
// string_may_close). Code points counted in f.i against max_length (−1: unbounded); an escaped
// surrogate pair \uD8xx\uDCxx is one code point, a lone surrogate is refused.
bool string_byte(Frame& f, uint8_t c, int64_t max_length);
// Whether a '"' may end the string body here (no escape, UTF-8 sequence or pair half open).
bool string_may_close(const Frame& f);
// A string with a pattern (and/or format): its automaton and length bounds.
struct StringPattern {
  const Regex* re = nullptr;
  int64_t min_length = 0, max_length = -1;
};
// One byte of a patterned string body (Frame::j: the regex state, started at re->start();
// Frame::bits: the code point being decoded). A code point is taken only where the automaton
// stays live with an accepting continuation inside the length bounds, and a UTF-8 lead or escape
// only where some code point it may begin is taken: no dead ends. Escapes: the short ones and
// \u00XX for control characters (every other code point is written as itself).
bool pattern_string_byte(Frame& f, uint8_t c, const StringPattern& p);
// The same for a DSML raw string's text (any valid UTF-8, no escapes; Frame::phase kSUtf8 while
// a sequence is open).
bool pattern_raw_byte(Frame& f, uint8_t c, const StringPattern& p);
// Whether a '"' may end a patterned string here (min_length is the caller's).
bool pattern_string_may_close(const Frame& f, const StringPattern& p);
// One byte of a DSML raw string's text: any byte of valid UTF-8 (code points counted).
bool raw_text_byte(Frame& f, uint8_t c, int64_t max_length);
// One byte of a number (integer: no fraction or exponent); digits bounded by kMaxDigits.
bool number_byte(Frame& f, uint8_t c, bool integer);
// Whether the number read so far is whole.
bool number_complete(const Frame& f);
// One byte of a number in the form NumberRange describes (json_schema.h): taken only where some
// completion lies in the range (Frame::bits: the digits so far as one integer, j: integer
// digits, esc: negative).
bool ranged_number_byte(Frame& f, uint8_t c, const NumberRange& r);
// Whether the number read so far is whole and in the range.
bool ranged_number_complete(const Frame& f, const NumberRange& r);

}  // namespace dsv4::grammar
