// Python-style JSON (text.md §3.9): the exact bytes of Python's
// json.dumps(value, ensure_ascii=False): ", " and ": " separators, keys in
// their given order, only '"', '\\' and U+0000..U+001F escaped, floats as
// Python repr. Used for tool schemas, response formats and tool arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"

namespace dsv4::chat {

// A JSON string literal: `"` + escaped s + `"`.
std::string py_json_string(std::string_view s);
// The escaped s alone, appended to out; byte by byte, so escaping the pieces of a text
// gives the escaped text.
void py_json_escape_append(std::string& out, std::string_view s);

// Python repr of a float: shortest round-trip digits, fixed notation for
// 1e-4 <= |x| < 1e16 (`100.0`), else `1e-05` / `1e+16`; `NaN`, `Infinity`.
std::string py_float_repr(double x);

// json.dumps of an already parsed value (an OrderedJson keeps key order).
std::string py_json(const OrderedJson& value);

// Nesting depth of a value (scalars 0); iterative, safe on any input.
int json_depth(const OrderedJson& value);

// Python json.loads + json.dumps of a text, as the reference re-serializes
// tool arguments: arbitrary-size integers kept digit for digit, NaN/Infinity
// accepted, duplicate keys keep the last value at the first position.
// A parsed object also yields its top-level members. nullopt when Python's
// json.loads would raise (or nesting exceeds 500 levels).
struct PyParsed {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind;
  std::string dumped;  // json.dumps of the whole value
  // kObject: top-level members; value_is_string says whether a member is a
  // string (then value is its raw text) or not (then value is its json.dumps).
  struct Member {
    std::string key;
    std::string value;
    bool value_is_string;
  };
  std::vector<Member> members;
  // Key comparisons the duplicate-key checks made: O(keys), whatever the keys (tests count them).
  uint64_t key_comparisons = 0;
};
std::optional<PyParsed> py_json_reparse(std::string_view text);

}  // namespace dsv4::chat
