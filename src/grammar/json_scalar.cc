#include "grammar/json_scalar.h"

#include <algorithm>
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

namespace {

// Whether code point cp steps state to a state with an accepting continuation inside the length
// bounds, n code points being used with cp; sets next.
bool pattern_take(const StringPattern& p, int32_t state, uint32_t cp, int64_t n, int32_t& next) {
  next = p.re->step(state, cp);
  if (next < 0) return false;
  if (p.min_length <= 0 && p.max_length < 0) return true;  // a live state has a continuation
  return p.re->accepting_length_in(next, p.min_length - n, p.max_length < 0 ? -1 : p.max_length - n);
}

// Whether some code point in [lo, hi] is taken (pattern_take) from state.
bool pattern_viable(const StringPattern& p, int32_t state, uint32_t lo, uint32_t hi, int64_t n) {
  if (p.min_length <= 0 && p.max_length < 0) return p.re->steps_within(state, lo, hi);
  for (uint32_t cp = lo; cp <= hi; cp = p.re->run_end(cp) + 1) {
    int32_t next = 0;
    if (pattern_take(p, state, cp, n, next)) return true;
    if (p.re->run_end(cp) >= hi) break;
  }
  return false;
}

// The code points a UTF-8 sequence may still decode to: the bits so far, then the next byte's
// range (utf8_lead's bounds exclude overlong forms, surrogates and beyond U+10FFFF), then any.
bool utf8_viable(const Frame& f, const StringPattern& p) {
  const int rest = 6 * (f.more - 1);
  const uint32_t lo = static_cast<uint32_t>(f.bits << 6 | (f.lo & 0x3F)) << rest;
  const uint32_t hi = (static_cast<uint32_t>(f.bits << 6 | (f.hi & 0x3F)) << rest) | ((1u << rest) - 1);
  return pattern_viable(p, f.j, lo, hi, f.i);
}

bool pattern_code_point(Frame& f, uint32_t cp, const StringPattern& p) {
  int32_t next = 0;
  if (!pattern_take(p, f.j, cp, f.i, next)) return false;
  f.j = next;
  return true;
}

int hex_value(uint8_t c) { return scalar_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10; }

// A short escape's code point; -1 for none.
int32_t short_escape(uint8_t c) {
  switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return 0x08;
    case 'f': return 0x0C;
    case 'n': return 0x0A;
    case 'r': return 0x0D;
    case 't': return 0x09;
    default: return -1;
  }
}

// The escape after a '\\' (the code point counted at the '\\').
bool pattern_escape_byte(Frame& f, uint8_t c, const StringPattern& p) {
  if (f.phase == kSEsc) {
    if (c == 'u') {
      f.phase = kSHex;
      f.more = 4;
      f.bits = 0;
      return pattern_viable(p, f.j, 0, 0x1F, f.i);
    }
    const int32_t cp = short_escape(c);
    f.phase = kSBody;
    return cp >= 0 && pattern_code_point(f, static_cast<uint32_t>(cp), p);
  }
  // kSHex: \u00XX with XX < 0x20
  const int index = 4 - f.more;
  if (!scalar_hex(c) || (index < 2 && c != '0') || (index == 2 && c != '0' && c != '1')) return false;
  f.bits = f.bits << 4 | static_cast<uint64_t>(hex_value(c));
  if (--f.more == 0) {
    f.phase = kSBody;
    return pattern_code_point(f, static_cast<uint32_t>(f.bits), p);
  }
  if (index < 2) return true;  // still [0, 0x1F], taken at the '\\'
  return pattern_viable(p, f.j, static_cast<uint32_t>(f.bits << 4), static_cast<uint32_t>(f.bits << 4 | 0xF), f.i);
}

}  // namespace

bool pattern_string_may_close(const Frame& f, const StringPattern& p) {
  return f.phase == kSBody && p.re->accepting(f.j);
}

namespace {

// A UTF-8 continuation byte (phase kSUtf8), or a byte ≥ 0x80 beginning a sequence (counted).
bool pattern_utf8_byte(Frame& f, uint8_t c, const StringPattern& p) {
  if (f.phase == kSUtf8) {
    if (!utf8_continuation(f, c)) return false;
    f.bits = f.bits << 6 | (c & 0x3F);
    if (f.more > 0) return utf8_viable(f, p);
    f.phase = kSBody;
    return pattern_code_point(f, static_cast<uint32_t>(f.bits), p);
  }
  if (!utf8_lead(f, c)) return false;
  f.phase = kSUtf8;
  f.bits = c & (0x3F >> f.more);
  return utf8_viable(f, p);
}

}  // namespace

bool pattern_string_byte(Frame& f, uint8_t c, const StringPattern& p) {
  if (f.phase == kSEsc || f.phase == kSHex) return pattern_escape_byte(f, c, p);
  if (f.phase == kSUtf8) return pattern_utf8_byte(f, c, p);
  if (c < 0x20 || c == '"' || (p.max_length >= 0 && f.i >= p.max_length)) return false;  // '"' ends, not text
  ++f.i;
  if (c == '\\') {
    f.phase = kSEsc;
    return pattern_viable(p, f.j, 0, 0x1F, f.i) || pattern_viable(p, f.j, '"', '"', f.i) ||
           pattern_viable(p, f.j, '/', '/', f.i) || pattern_viable(p, f.j, '\\', '\\', f.i);
  }
  if (c < 0x80) return pattern_code_point(f, c, p);
  return pattern_utf8_byte(f, c, p);
}

bool pattern_raw_byte(Frame& f, uint8_t c, const StringPattern& p) {
  if (f.phase == kSUtf8) return pattern_utf8_byte(f, c, p);
  if (p.max_length >= 0 && f.i >= p.max_length) return false;
  ++f.i;
  if (c < 0x80) return pattern_code_point(f, c, p);
  return pattern_utf8_byte(f, c, p);
}

namespace {

constexpr int64_t kPow10[] = {1,           10,           100,           1000,           10000,          100000,
                              1000000,     10000000,     100000000,     1000000000,     10000000000,    100000000000,
                              1000000000000, 10000000000000, 100000000000000, 1000000000000000};
static_assert(kMaxDigits == 15, "kPow10 reaches 10^kMaxDigits");

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Whether some N in [lo, hi] (magnitudes; negated when negative) is in r.
bool range_meets(bool negative, const NumberRange& r, int64_t lo, int64_t hi) {
  int64_t a = lo, b = hi;
  if (negative) a = -hi, b = -lo;
  a = std::max(a, r.min);
  b = std::min(b, r.max);
  if (a > b) return false;
  return -floor_div(-a, r.step) * r.step <= b;  // the first multiple at or above a
}

// Whether some completion of the number read so far is in r.
bool ranged_viable(const Frame& f, const NumberRange& r) {
  const int32_t frac = r.fraction_digits, int_max = kMaxDigits - frac;
  const int64_t all = kPow10[kMaxDigits] - 1;
  const auto p = static_cast<int64_t>(f.bits);
  switch (f.phase) {
    case kNStart: return range_meets(false, r, 0, all) || range_meets(true, r, 0, all);
    case kNMinus: return range_meets(f.esc != 0, r, 0, all);
    case kNZero: return range_meets(f.esc != 0, r, 0, kPow10[frac] - 1);
    case kNInt:
      for (int32_t k = 0; k <= int_max - f.j; ++k)
        if (range_meets(f.esc != 0, r, p * kPow10[k + frac], (p + 1) * kPow10[k + frac] - 1)) return true;
      return false;
    case kNDot: return range_meets(f.esc != 0, r, p * kPow10[frac], (p + 1) * kPow10[frac] - 1);
    case kNFrac: return range_meets(f.esc != 0, r, p * kPow10[frac - f.i], (p + 1) * kPow10[frac - f.i] - 1);
    default: return false;
  }
}

}  // namespace

bool ranged_number_complete(const Frame& f, const NumberRange& r) {
  int64_t m = 0;
  if (f.phase == kNInt || f.phase == kNZero) m = static_cast<int64_t>(f.bits) * kPow10[r.fraction_digits];
  else if (f.phase == kNFrac) m = static_cast<int64_t>(f.bits) * kPow10[r.fraction_digits - f.i];
  else return false;
  return range_meets(f.esc != 0, r, m, m);
}

bool ranged_number_byte(Frame& f, uint8_t c, const NumberRange& r) {
  const bool digit = scalar_digit(c);
  const int32_t d = c - '0';
  switch (f.phase) {
    case kNStart:
      if (c == '-') {
        f.phase = kNMinus;
        f.esc = 1;
        break;
      }
      [[fallthrough]];
    case kNMinus:
      if (!digit) return false;
      f.phase = d == 0 ? kNZero : kNInt;
      f.bits = static_cast<uint64_t>(d);
      f.j = 1;
      break;
    case kNInt:
      if (digit) {
        if (f.j >= kMaxDigits - r.fraction_digits) return false;
        f.bits = f.bits * 10 + static_cast<uint64_t>(d);
        ++f.j;
        break;
      }
      [[fallthrough]];
    case kNZero:
      if (c != '.' || r.fraction_digits == 0) return false;
      f.phase = kNDot;
      f.i = 0;
      break;
    case kNDot:
    case kNFrac:
      if (!digit || f.i >= r.fraction_digits) return false;
      f.bits = f.bits * 10 + static_cast<uint64_t>(d);
      ++f.i;
      f.phase = kNFrac;
      break;
    default: return false;
  }
  return ranged_viable(f, r);
}

}  // namespace dsv4::grammar
