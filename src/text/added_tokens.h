// Leftmost-longest matching of added-token strings (text.md §1.4): scan left to
// right; at the first position where any token matches take the longest one,
// continue after it. A byte trie; matches start and end on character boundaries
// because tokens and text are valid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4 {

class AddedTokenMatcher {
 public:
  AddedTokenMatcher();
  void add(std::string_view content, int32_t id);
  bool empty() const { return n_tokens_ == 0; }

  struct Match {
    size_t begin, size;
    int32_t id;
  };
  // First leftmost-longest match in text[from, end), if any.
  bool find(std::string_view text, size_t from, Match& m) const;

 private:
  struct Node {
    int32_t id = -1;  // token ending here
    std::vector<std::pair<uint8_t, int32_t>> children;
  };
  int32_t child(int32_t node, uint8_t b) const;

  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
  size_t n_tokens_ = 0;
};

}  // namespace dsv4
