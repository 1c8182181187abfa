// Masks of patterned string bodies near their maxLength (key.room >= 0, minLength met): each
// room has its own key, so without this every code point of such a string missed the cache and
// walked the trie. A token allowed there is allowed far from the bound too (the bound only
// refuses more: a code point is taken where an accepting continuation fits the room left), so
// the mask is the far one less some tokens; a token of L bytes adds at most L code points, and
// after each the automaton's shortest accepting continuation is below its n_states, so one with
// L + n_states - 1 <= room passes every length check and keeps its bit unchecked. The others
// in the far mask are stepped through body_byte from the real frame. Exact, and the far mask is
// one walk per automaton state, shared by every room.
#include <cstring>

#include "grammar/token_mask.h"

namespace dsv4::grammar {

const uint64_t* TokenMasker::fill_near_bound(const StringBody& body, const StringMaskKey& key, const Frame& top,
                                             const std::shared_ptr<const void>& pin) {
  const size_t words = static_cast<size_t>((vocab_.all.n_vocab() + 63) / 64);
  StringMaskKey far_key = key;
  far_key.room = -1;
  const uint64_t* far = cache_.find(far_key);
  if (!far) {  // far from the bound: as without it (min_gap is 0)
    uint64_t* walked = cache_.insert(far_key, pin);
    std::memset(walked, 0, sizeof(uint64_t) * words);
    StringBody unbounded = body;
    unbounded.pattern.min_length = 0;
    unbounded.pattern.max_length = -1;
    walk_body(unbounded, top, walked);
    far = walked;
  }
  uint64_t* fresh = cache_.insert(key, pin);  // the least recent goes: never far, the newest
  std::memcpy(fresh, far, sizeof(uint64_t) * words);
  const int64_t sure = key.room - (body.pattern.re->n_states() - 1);  // tokens of at most these bytes pass
  const auto first = sure < 0 ? size_t{0}
                              : static_cast<size_t>(vocab_.bytes_end[static_cast<size_t>(
                                    std::min<int64_t>(sure, static_cast<int64_t>(vocab_.bytes_end.size()) - 1))]);
  for (size_t k = first; k < vocab_.by_bytes.size(); ++k) {
    const int32_t id = vocab_.by_bytes[k];
    if (!(fresh[id >> 6] >> (id & 63) & 1)) continue;
    Frame f = top;
    bool taken = true;
    for (int64_t b = vocab_.token_at[id]; b < vocab_.token_at[id + 1] && taken; ++b)
      taken = body_byte(body, f, static_cast<uint8_t>(vocab_.token_bytes[static_cast<size_t>(b)]));
    if (!taken) fresh[id >> 6] &= ~(uint64_t{1} << (id & 63));
  }
  return fresh;
}

}  // namespace dsv4::grammar
