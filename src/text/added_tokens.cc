#include "text/added_tokens.h"

#include <cstring>

namespace dsv4 {

AddedTokenMatcher::AddedTokenMatcher() : nodes_(1) {}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t b) const {
  for (const auto& [byte, next] : nodes_[node].children)
    if (byte == b) return next;
  return -1;
}

void AddedTokenMatcher::add(std::string_view content, int32_t id) {
  if (content.empty()) return;
  int32_t node = 0;
  for (char c : content) {
    const auto b = static_cast<uint8_t>(c);
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[node].children.push_back({b, next});
      nodes_.emplace_back();
    }
    node = next;
  }
  nodes_[node].id = id;
  first_byte_[static_cast<uint8_t>(content[0])] = true;
  ++n_tokens_;
}

bool AddedTokenMatcher::find(std::string_view text, size_t from, Match& m) const {
  if (n_tokens_ == 0) return false;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t i = from; i < n; ++i) {
    if (!first_byte_[s[i]]) continue;
    int32_t node = 0, best_id = -1;
    size_t best_end = 0;
    for (size_t j = i; j < n; ++j) {
      node = child(node, s[j]);
      if (node < 0) break;
      if (nodes_[node].id >= 0) {
        best_id = nodes_[node].id;
        best_end = j + 1;
      }
    }
    if (best_id >= 0) {
      m = {i, best_end - i, best_id};
      return true;
    }
  }
  return false;
}

}  // namespace dsv4
