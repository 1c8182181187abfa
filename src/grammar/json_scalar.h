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
// One byte of a DSML raw string's text: any byte of valid UTF-8 (code points counted).
bool raw_text_byte(Frame& f, uint8_t c, int64_t max_length);
// One byte of a number (integer: no fraction or exponent); digits bounded by kMaxDigits.
bool number_byte(Frame& f, uint8_t c, bool integer);
// Whether the number read so far is whole.
bool number_complete(const Frame& f);

}  // namespace dsv4::grammar
