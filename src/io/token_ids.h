// Token ids given as text: a comma-separated list of decimal ids ("5,17,42"), the form of
// `--prompt-ids`, `--tokens` and `--decode` (apps/cli/common.cc parse_token_list_option).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace dsv4 {

// Parses a comma-separated list of decimal token ids ("5,17,42"). Every item is
// one or more ASCII digits with a value <= INT32_MAX; an empty item, any other
// character or an overflowing value is an error naming the item and its index.
Result<std::vector<int32_t>> parse_token_ids(std::string_view text);

}  // namespace dsv4
