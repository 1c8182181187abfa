// JSON from outside: parsed with bounded nesting and values, in time linear in the text, then
// read field by field. nlohmann's parser and its destructor are iterative, but dump() (and comparison, copy) recurse: one value
// nested 100k deep overflows the stack as soon as an error message prints it. Readers of
// untrusted JSON (tokenizer.json, config.json, request bodies) parse through this, so every
// later use is shallow, and take their fields with the helpers below; each reader words its
// own errors (they name the field, what was expected and what was found).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace dsv4 {

// Real tokenizer / config files nest fewer than 10 levels.
constexpr int kMaxJsonDepth = 64;

namespace detail {

// nlohmann's DOM builder with the bounds counted on the way down (the exceptions end the
// parse). Not json::parse with a callback: its parser scans the parent container for a
// discarded value at every object's end, quadratic for [{}, {}, ...] or {"a": {}, "b": {}, ...}.
template <class Json>
class BoundedDomParser : public nlohmann::detail::json_sax_dom_parser<Json> {
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;

 public:
  struct TooDeep {};
  struct TooMany {};
  BoundedDomParser(Json& root, int max_depth, int64_t max_values)
      : Base(root, /*allow_exceptions=*/true), max_depth_(max_depth), max_values_(max_values) {}

  bool null() { return count() && Base::null(); }
  bool boolean(bool v) { return count() && Base::boolean(v); }
  bool number_integer(typename Json::number_integer_t v) { return count() && Base::number_integer(v); }
  bool number_unsigned(typename Json::number_unsigned_t v) { return count() && Base::number_unsigned(v); }
  bool number_float(typename Json::number_float_t v, const typename Json::string_t& s) {
    return count() && Base::number_float(v, s);
  }
  bool string(typename Json::string_t& v) { return count() && Base::string(v); }
  bool binary(typename Json::binary_t& v) { return count() && Base::binary(v); }
  bool start_object(std::size_t n) { return open() && Base::start_object(n); }
  bool start_array(std::size_t n) { return open() && Base::start_array(n); }
  bool end_object() {
    --open_;
    return Base::end_object();
  }
  bool end_array() {
    --open_;
    return Base::end_array();
  }

 private:
  bool count() {
    if (max_values_ > 0 && ++values_ > max_values_) throw TooMany{};
    return true;
  }
  bool open() {
    count();
    if (++open_ > max_depth_) throw TooDeep{};
    return true;
  }
  const int max_depth_;
  const int64_t max_values_;
  int open_ = 0;
  int64_t values_ = 0;
};

}  // namespace detail

// Errors: "not valid JSON" (the whole text must be one value) or "nests deeper
// than N levels" (N containers open at once is the limit: [[1]] nests 2 levels).
// parser_message, when given, receives the parser's own account of invalid JSON (where and why).
// max_values > 0 also bounds the values (containers and scalars) a text may hold: a body of
// small values ("[{},{},...]") costs far more memory parsed than as text. Linear in the text:
// objects of OrderedJson find keys through a hash index (base/ordered_json.h).
template <class Json = nlohmann::json>
Result<Json> parse_json_bounded(std::string_view text, int max_depth = kMaxJsonDepth,
                                std::string* parser_message = nullptr, int64_t max_values = 0) {
  using Parser = detail::BoundedDomParser<Json>;
  Json out;
  Parser parser(out, max_depth, max_values);
  try {
    Json::sax_parse(text, &parser);
    return out;
  } catch (const typename Parser::TooDeep&) {
    return Status::errorf("nests deeper than {} levels", max_depth);
  } catch (const typename Parser::TooMany&) {
    return Status::errorf("holds more than {} values", max_values);
  } catch (const typename Json::exception& e) {
    if (parser_message) *parser_message = e.what();
    return Status::error("not valid JSON");
  }
}

// ------------------------------------------------------------------------------------------
// Fields

// "prefix.key", or "key" at the top level: a field's path in error messages.
inline std::string json_path(std::string_view prefix, std::string_view key) {
  std::string path(prefix);
  if (!path.empty()) path += '.';
  path += key;
  return path;
}

// The member `key` of an object; nullptr when absent.
template <class Json>
const Json* json_member(const Json& obj, std::string_view key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// The member `key` of an object; nullptr when absent or null (an optional field left unset).
template <class Json>
const Json* json_optional(const Json& obj, std::string_view key) {
  const Json* v = json_member(obj, key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

// The kinds a field is expected to hold.
enum class JsonType { kBoolean, kInteger, kNumber, kString, kArray, kObject };

constexpr const char* json_type_name(JsonType type) {
  switch (type) {
    case JsonType::kBoolean: return "boolean";
    case JsonType::kInteger: return "integer";
    case JsonType::kNumber: return "number";
    case JsonType::kString: return "string";
    case JsonType::kArray: return "array";
    case JsonType::kObject: return "object";
  }
  return "?";
}

// Whether a value is of `type` (an integer is also a number).
template <class Json>
bool json_is(const Json& v, JsonType type) {
  switch (type) {
    case JsonType::kBoolean: return v.is_boolean();
    case JsonType::kInteger: return v.is_number_integer();
    case JsonType::kNumber: return v.is_number();
    case JsonType::kString: return v.is_string();
    case JsonType::kArray: return v.is_array();
    case JsonType::kObject: return v.is_object();
  }
  return false;
}

// What a value holds, for "expected X, got Y": "integer", "number" (not an integer), "string",
// "boolean", "null", "array" or "object".
template <class Json>
const char* json_kind(const Json& v) {
  if (v.is_number_integer()) return "integer";
  return v.type_name();
}

// The JsonType a scalar is read from.
template <class T>
constexpr JsonType json_type_of() {
  if constexpr (std::is_same_v<T, bool>) return JsonType::kBoolean;
  else if constexpr (std::is_integral_v<T>) return JsonType::kInteger;
  else if constexpr (std::is_floating_point_v<T>) return JsonType::kNumber;
  else return JsonType::kString;
}

enum class JsonRead { kOk, kWrongType, kOutOfRange };

// Reads a scalar field: bool from a boolean, a string from a string, a floating type from any
// number, an integral type from an integer within its range. `out` is left alone unless kOk.
template <class T, class Json>
JsonRead json_read(const Json& v, T& out) {
  if (!json_is(v, json_type_of<T>())) return JsonRead::kWrongType;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const bool fits = v.is_number_unsigned() ? std::in_range<T>(v.template get<uint64_t>())
                                             : std::in_range<T>(v.template get<int64_t>());
    if (!fits) return JsonRead::kOutOfRange;
    out = v.is_number_unsigned() ? static_cast<T>(v.template get<uint64_t>()) : static_cast<T>(v.template get<int64_t>());
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = v.template get_ref<const std::string&>();
  } else {
    out = v.template get<T>();
  }
  return JsonRead::kOk;
}

}  // namespace dsv4
