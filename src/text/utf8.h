// UTF-8 validation, lossy decoding and the streaming assembler (text.md §4.2).
// Lossy rule: each maximal invalid subsequence ("maximal subpart") becomes one
// U+FFFD, as Rust's String::from_utf8_lossy and the WHATWG decoder do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsv4 {

// Length of the valid UTF-8 prefix of `s` (== s.size() when all of it is valid).
size_t utf8_valid_prefix(std::string_view s);

// `s` with every maximal invalid subsequence replaced by U+FFFD (EF BF BD).
std::string utf8_lossy(std::string_view s);

// Appends the UTF-8 encoding of code point cp (cp <= 0x10FFFF, not a surrogate).
void utf8_append(std::string& out, uint32_t cp);

// Decodes the valid character at s[i], advancing i. Precondition: s is valid at i.
uint32_t utf8_next(std::string_view s, size_t& i);

// Streaming assembler: push() returns only complete characters (and U+FFFD for
// invalid bytes); an incomplete but valid tail (at most 3 bytes) waits for the
// next push. concat(push(...)) + finish() == utf8_lossy(concat(bytes)).
class Utf8Assembler {
 public:
  // Appends the text that became complete to `out`.
  void push(std::string_view bytes, std::string& out);
  // Appends U+FFFD if a partial character is pending; resets.
  void finish(std::string& out);
  bool has_pending() const { return n_pending_ > 0; }

 private:
  char pending_[4] = {};
  int n_pending_ = 0;
};

}  // namespace dsv4
