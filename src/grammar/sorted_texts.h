// Candidates among texts kept in sorted byte order (a literal node's enum/const texts, a listed
// object's keys): the texts that begin with the bytes read so far form one range [lo, hi) of
// the order, packed into Frame::bits. No cap on the number of texts, and the state stays one
// word; narrowing by a byte is two binary searches.
#pragma once

#include <cstdint>
#include <string>

namespace dsv4::grammar {

struct TextRange {
  uint32_t lo = 0, hi = 0;
  bool empty() const { return lo >= hi; }
};

inline uint64_t pack_range(TextRange r) { return uint64_t{r.hi} << 32 | r.lo; }
inline TextRange unpack_range(uint64_t bits) {
  return TextRange{static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32)};
}

// The part of r whose text has byte c at pos. text(k): the k-th text of the order. Every text in
// r has the same first pos bytes, so the shorter ones (at most one: equal to them) come first
// and the rest are ordered by their byte at pos.
template <class Text>
TextRange narrow_range(TextRange r, int32_t pos, uint8_t c, Text text) {
  auto byte_at = [&](uint32_t k) -> int {
    const std::string& t = text(k);
    return t.size() > static_cast<size_t>(pos) ? static_cast<uint8_t>(t[static_cast<size_t>(pos)]) : -1;
  };
  auto first_from = [&](int bound) {  // the first k in r with byte_at(k) >= bound
    uint32_t lo = r.lo, hi = r.hi;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (byte_at(mid) < bound) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  return TextRange{first_from(c), first_from(c + 1)};
}

// The mask of r's positions below 64 (a uniqueItems array's used values are such a mask).
inline uint64_t range_mask(TextRange r) {
  auto below = [](uint32_t k) { return k >= 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1; };
  return below(r.hi) & ~below(r.lo);
}

}  // namespace dsv4::grammar
