// JSON from outside, parsed with bounded nesting. nlohmann's parser and its
// destructor are iterative, but dump() (and comparison, copy) recurse: one value
// nested 100k deep overflows the stack as soon as an error message prints it.
// Readers of untrusted JSON parse through this, so every later use is shallow.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace dsv4 {

// Real tokenizer / config files nest fewer than 10 levels.
constexpr int kMaxJsonDepth = 64;

// Errors: "not valid JSON" (the whole text must be one value) or "nests deeper
// than N levels" (N containers open at once is the limit: [[1]] nests 2 levels).
template <class Json = nlohmann::json>
Result<Json> parse_json_bounded(std::string_view text, int max_depth = kMaxJsonDepth) {
  struct TooDeep {};
  int open = 0;
  const typename Json::parser_callback_t limit = [&](int, typename Json::parse_event_t event, Json&) {
    using Event = typename Json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      if (++open > max_depth) throw TooDeep{};
    } else if (event == Event::object_end || event == Event::array_end) {
      --open;
    }
    return true;
  };
  try {
    return Json::parse(text, limit);
  } catch (const TooDeep&) {
    return Status::errorf("nests deeper than {} levels", max_depth);
  } catch (const typename Json::exception&) {
    return Status::error("not valid JSON");
  }
}

}  // namespace dsv4
