// JsonMatcher's items of a uniqueItems array kept as hashes (unique_items.h): patterned strings,
// unbounded integers and enum values beyond kMaxUniqueValues. The array's frame keeps its first
// hash's place in MatchStack::keys (Frame::j); an item's hash is pushed when it ends.
#include "grammar/json_matcher.h"
#include "grammar/json_scalar.h"
#include "grammar/unique_items.h"

namespace dsv4::grammar {
namespace {

// Whether hash is not among the hashes kept from keys[first] on.
bool hash_unused(const MatchStack& s, int32_t first, uint32_t hash) {
  for (int32_t k = first; k < s.n_keys; ++k)
    if (s.keys[k] == hash) return false;
  return true;
}

// Whether the prefix hashed as `hash` followed by up to `more` digits is some unused integer.
bool digits_unused(const MatchStack& s, int32_t first, uint32_t hash, int32_t more) {
  if (hash_unused(s, first, hash)) return true;
  for (uint8_t d = '0'; more > 0 && d <= '9'; ++d)
    if (digits_unused(s, first, unique_hash_byte(hash, d), more - 1)) return true;
  return false;
}

}  // namespace

int32_t JsonMatcher::first_item_hash(const MatchStack& s) const { return s.f[hashed_array_frame(g_, s)].j; }

bool JsonMatcher::unique_hash_unused(const MatchStack& s, uint32_t hash) const {
  return hash_unused(s, first_item_hash(s), hash);
}

// A character only where some continuation from the new state is unused: more of them than
// items in the array, or one listed in UniqueStrings whose hash is new.
void JsonMatcher::unique_pattern_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  const StringPattern p{g_.regexes[n.regex].get(), n.min_length, n.max_length};
  const auto hash = static_cast<uint32_t>(f.present);
  const int32_t array = hashed_array_frame(g_, s), first = s.f[array].j;
  if (f.phase == kSOpen) {
    if (c != '"') return;
    f.phase = kSBody;
    f.j = p.re->start();
    f.present = kUniqueHashBasis;
  } else if (c == '"') {
    if (!pattern_string_may_close(f, p) || f.i < n.min_length || !hash_unused(s, first, hash)) return;
    s.keys[s.n_keys++] = hash;  // room: the array has at most kMaxUniqueStrings items
    pop(s);
  } else {
    if (!unique_text_char(c) || !pattern_string_byte(f, c, p)) return;
    const UniqueStrings& t = *g_.unique_tables[g_.nodes[s.f[array].node].unique_table];
    const uint32_t next = unique_hash_byte(hash, c);
    const int32_t used = s.n_keys - first;
    if (t.count[static_cast<size_t>(f.j)] <= used) {  // then fewer than kMany: listed
      bool open = false;
      for (const std::string& w : t.completions[static_cast<size_t>(f.j)])
        if ((open = hash_unused(s, first, unique_hash_text(next, w)))) break;
      if (!open) return;
    }
    f.present = next;
  }
  emit(s, out);
}

// Canonical integers (never -0), hashed in Frame::bits; a digit only where the value or one of
// its longer forms (at most kMaxDigits digits) is unused.
void JsonMatcher::unique_integer_byte(MatchStack& s, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if (f.phase == kNStart) f.bits = kUniqueHashBasis;
  if (f.phase == kNMinus && c == '0') return;  // -0 equals 0: only "0" is written
  if (!number_byte(f, c, true)) return;
  f.bits = unique_hash_byte(static_cast<uint32_t>(f.bits), c);
  const bool zero = f.phase == kNZero;
  const int32_t digits = f.phase == kNMinus ? 0 : zero ? 1 : f.i;
  const int32_t first = first_item_hash(s), used = s.n_keys - first;
  if (integer_continuations(digits, zero, kMaxUniqueStrings + 1) <= used &&
      !digits_unused(s, first, static_cast<uint32_t>(f.bits), zero ? 0 : kMaxDigits - digits))
    return;
  emit(s, out);
}

// A number of a range (fraction_digits 0) in canonical text, hashed in Frame::present; a byte only
// where some value of the range the prefix may become is unused.
void JsonMatcher::unique_ranged_byte(MatchStack& s, const Node& n, uint8_t c, MatchState& out) const {
  Frame& f = s.f[s.n - 1];
  if (f.phase == kNStart) f.present = kUniqueHashBasis;
  if (f.phase == kNMinus && c == '0') return;  // -0 equals 0: only "0" is written
  if (!ranged_number_byte(f, c, n.range)) return;
  f.present = unique_hash_byte(static_cast<uint32_t>(f.present), c);
  const bool negative = f.esc != 0;
  const int32_t digits = f.phase == kNMinus ? 0 : f.j;
  const auto mag = static_cast<int64_t>(f.bits);
  const int32_t first = first_item_hash(s), used = s.n_keys - first;
  if (ranged_continuations(n.range, negative, mag, digits, used + 1, nullptr) <= used) {
    int64_t values[kMaxUniqueStrings + 1];
    const int64_t count = ranged_continuations(n.range, negative, mag, digits, kMaxUniqueStrings + 1, values);
    bool open = false;
    for (int64_t k = 0; k < count && !open; ++k) open = hash_unused(s, first, integer_hash(values[k]));
    if (!open) return;
  }
  emit(s, out);
}

bool JsonMatcher::unused_hashed_literal(const MatchStack& s, const Node& n, TextRange r) const {
  const int32_t first = first_item_hash(s), used = s.n_keys - first;
  if (static_cast<int64_t>(r.hi) - r.lo > used) return true;  // distinct values, distinct hashes
  for (uint32_t k = r.lo; k < r.hi; ++k)
    if (hash_unused(s, first, unique_hash_text(kUniqueHashBasis, n.literals[k]))) return true;
  return false;
}

void JsonMatcher::push_item_hash(MatchStack& s) const {
  const Frame& item = s.f[s.n - 1];  // about to be popped
  const Node& n = g_.nodes[item.node];
  if (n.kind == Kind::kInteger || n.kind == Kind::kNumber)
    s.keys[s.n_keys++] = static_cast<uint32_t>(n.range.bounded ? item.present : item.bits);
  else if (n.kind == Kind::kLiteral)
    s.keys[s.n_keys++] = unique_hash_text(kUniqueHashBasis, n.literals[unpack_range(item.bits).lo]);
}

}  // namespace dsv4::grammar
