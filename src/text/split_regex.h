// One `Split` pre-tokenizer (behaviour Isolated, text.md §1.5) run by PCRE2 in
// UTF mode, JIT-compiled when the library supports it. `\s`/`\S` are rewritten
// to the Unicode White_Space class of Oniguruma (text.md §1.9).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace dsv4 {

struct Span {
  uint32_t begin, size;
};

class SplitRegex {
 public:
  // `pattern` is a regex, or a literal string when `literal` is set. Error:
  // PCRE2's compile message with its offset. `\C` (one code unit, which could
  // end a piece inside a character) is refused.
  static Result<SplitRegex> compile(const std::string& pattern, bool literal);

  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;
  ~SplitRegex();

  // Per-thread match state (one PCRE2 match-data block); create one per encode call.
  class Scratch {
   public:
    Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch();
    void* data() const { return data_; }

   private:
    void* data_;
  };

  // Appends the Isolated pieces of text[in.begin, in.begin + in.size) to `out`:
  // gaps and matches in order, no empty pieces. `text` must be valid UTF-8.
  // Empty matches are skipped (one character of progress).
  void split(std::string_view text, Span in, std::vector<Span>& out, Scratch& scratch) const;

 private:
  struct Impl;
  explicit SplitRegex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The pattern as PCRE2 receives it (the \s / \S rewrite); exposed for tests.
std::string rewrite_whitespace_classes(const std::string& pattern);

}  // namespace dsv4
