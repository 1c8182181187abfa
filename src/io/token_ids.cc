// Token ids given as text (io/token_ids.h).
#include "io/token_ids.h"

#include <limits>

namespace dsv4 {

Result<std::vector<int32_t>> parse_token_ids(std::string_view text) {
  if (text.empty()) return Status::error("token list is empty (expected comma-separated ids, e.g. 5,17,42)");
  std::vector<int32_t> ids;
  size_t begin = 0;
  for (int64_t index = 0;; ++index) {
    const size_t comma = text.find(',', begin);
    const std::string_view item = text.substr(begin, comma == std::string_view::npos ? std::string_view::npos
                                                                                     : comma - begin);
    if (item.empty()) return Status::errorf("token list item {} is empty", index);
    int64_t v = 0;
    for (char ch : item) {
      if (ch < '0' || ch > '9')
        return Status::errorf("token list item {} '{}' is not a non-negative decimal integer", index, item);
      v = v * 10 + (ch - '0');
      if (v > std::numeric_limits<int32_t>::max())
        return Status::errorf("token list item {} '{}' exceeds the largest token id {}", index, item,
                              std::numeric_limits<int32_t>::max());
    }
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return ids;
}

}  // namespace dsv4
