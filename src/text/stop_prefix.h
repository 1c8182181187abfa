// Held-back text of incremental matching: while text arrives piece by piece, its tail may be
// the beginning of a marker or stop string that the next piece completes. Used by the output
// text of a request (runtime/output_text.h: stop strings) and the chat output parser
// (chat/parse.h: reasoning, tool-call and EOS markers).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace dsv4 {

// Length of the longest suffix of `text` that is a proper prefix of one of `stops` (empty
// stops are skipped): the tail that could still begin a stop string and must be held back
// until the next piece decides it. `stops`: any range of string-like values.
template <class Stops>
size_t stop_prefix_length(std::string_view text, const Stops& stops) {
  size_t longest = 0;
  for (const auto& s : stops) {
    const std::string_view stop(s);
    if (stop.empty()) continue;
    for (size_t n = std::min(text.size(), stop.size() - 1); n > longest; --n) {
      if (text.substr(text.size() - n) == stop.substr(0, n)) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

}  // namespace dsv4
