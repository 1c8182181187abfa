#include "grammar/json_scalar.h"

#include <cstring>

namespace dsv4::grammar {
namespace {

constexpr int kMaxExponentDigits = 2;  // |value| < 1e116: a finite double everywhere

// Frame::esc while a \u escape is read: the first hex digit was 'd' (a surrogate may follow),
// a high surrogate was read (its low half must follow at once), the low half is being read.
enum SurrogateFlags : uint8_t { kEscFirstD = 1, kEscNeedLow = 2, kEscInLow = 4 };

bool scalar_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool scalar_hex(uint8_t c) { return scalar_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool hex_8_to_b(uint8_t c) { return c == '8' || c == '9' || (c >= 'a' && c <= 'b') || (c >= 'A' && c <= 'B'); }
bool hex_c_to_f(uint8_t c) { return (c >= 'c' && c <= 'f') || (c >= 'C' && c <= 'F'); }

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

// One hex digit of a \u escape: D800-DBFF must be followed by \uDC00-DFFF, and DC00-DFFF
// never comes alone.
bool hex_digit(Frame& f, uint8_t c) {
  if (!scalar_hex(c)) return false;
  const bool d = c == 'd' || c == 'D';
  if (f.esc & kEscInLow) {
    if ((f.more == 4 && !d) || (f.more == 3 && !hex_c_to_f(c))) return false;
  } else if (f.more == 4) {
    f.esc = d ? kEscFirstD : 0;
  } else if (f.more == 3 && (f.esc & kEscFirstD)) {
    if (hex_c_to_f(c)) return false;  // a low surrogate with no high one before it
    f.esc = hex_8_to_b(c) ? kEscNeedLow : 0;
  }
  if (--f.more == 0) {
    f.phase = kSBody;
    if (f.esc & kEscInLow) f.esc = 0;
  }
  return true;
}

}  // namespace

bool string_may_close(const Frame& f) { return f.phase == kSBody && f.esc == 0; }

bool string_byte(Frame& f, uint8_t c, int64_t max_length) {
  switch (f.phase) {
    case kSEsc:
      if (c == 'u') {
        f.phase = kSHex;
        f.more = 4;
        if (f.esc & kEscNeedLow) f.esc = kEscInLow;
        return true;
      }
      if ((f.esc & kEscNeedLow) || std::strchr("\"\\/bfnrt", c) == nullptr || c == 0) return false;
      f.phase = kSBody;
      return true;
    case kSHex: return hex_digit(f, c);
    case kSUtf8:
      if (!utf8_continuation(f, c)) return false;
      if (f.more == 0) f.phase = kSBody;
      return true;
    default: break;
  }
  // kSBody
  if (f.esc & kEscNeedLow) {  // the low half of a pair: not a code point of its own
    if (c != '\\') return false;
    f.phase = kSEsc;
    return true;
  }
  if (c < 0x20 || (max_length >= 0 && f.i >= max_length)) return false;
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

bool raw_text_byte(Frame& f, uint8_t c, int64_t max_length) {
  if (f.more > 0) return utf8_continuation(f, c);
  if (max_length >= 0 && f.i >= max_length) return false;
  if (c < 0x80) return ++f.i, true;
  if (!utf8_lead(f, c)) return false;
  ++f.i;
  return true;
}

bool number_complete(const Frame& f) {
  return f.phase == kNZero || f.phase == kNInt || f.phase == kNFrac || f.phase == kNExp;
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
      if (scalar_digit(c)) return f.i < kMaxDigits && (++f.i, true);
      [[fallthrough]];
    case kNZero:
      if (integer) return false;
      if (c == '.') return f.phase = kNDot, true;
      if (c == 'e' || c == 'E') return f.phase = kNE, true;
      return false;
    case kNDot:
      if (scalar_digit(c)) return f.phase = kNFrac, f.i = 1, true;
      return false;
    case kNFrac:
      if (scalar_digit(c)) return f.i < kMaxDigits && (++f.i, true);
      if (c == 'e' || c == 'E') return f.phase = kNE, true;
      return false;
    case kNE:
      if (c == '+' || c == '-') return f.phase = kNESign, true;
      [[fallthrough]];
    case kNESign:
      if (scalar_digit(c)) return f.phase = kNExp, f.i = 1, true;
      return false;
    case kNExp:
      if (scalar_digit(c)) return f.i < kMaxExponentDigits && (++f.i, true);
      return false;
  }
  return false;
}

}  // namespace dsv4::grammar
