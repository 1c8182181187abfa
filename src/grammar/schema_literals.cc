#include "grammar/schema_literals.h"

#include <cmath>
#include <set>

#include "grammar/formats.h"
#include "grammar/regex.h"

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

const std::set<std::string> kObjectKeywords = {"properties", "required", "additionalProperties", "minProperties",
                                               "maxProperties", "patternProperties", "propertyNames",
                                               "dependentRequired", "dependencies"};
const std::set<std::string> kArrayKeywords = {"items", "minItems", "maxItems", "uniqueItems", "prefixItems",
                                              "contains", "additionalItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                               "multipleOf"};
// Keywords that say nothing about the value itself here (enum/const are the literals).
const std::set<std::string> kNoConstraint = {"enum", "const", "$defs", "definitions", "$schema", "$id", "$comment",
                                             "title", "description", "default", "examples", "deprecated",
                                             "readOnly", "writeOnly"};

bool is_integral(const Json& v) {
  return v.is_number_integer() || v.is_number_unsigned() ||
         (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

bool type_matches(const std::string& type, const Json& v) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number() && is_integral(v);
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// A count keyword's bound (a non-negative integer, integral floats too); false when malformed.
bool bound(const Json& k, double& out) {
  if (!k.is_number() || !is_integral(k) || k.get<double>() < 0) return false;
  out = k.get<double>();
  return true;
}

}  // namespace

bool same_json_value(const Json& a, const Json& b) {
  auto plain = [](const Json& v) {
    return nlohmann::json::parse(v.dump(-1, ' ', false, Json::error_handler_t::replace));
  };
  return plain(a) == plain(b);
}

bool keyword_applies(const std::string& keyword, const Json& value) {
  if (kNoConstraint.count(keyword)) return false;
  if (keyword == "format") return value.is_string() || value.is_number();  // int32 ... on numbers
  if (kObjectKeywords.count(keyword)) return value.is_object();
  if (kArrayKeywords.count(keyword)) return value.is_array();
  if (kStringKeywords.count(keyword)) return value.is_string();
  if (kNumberKeywords.count(keyword)) return value.is_number();
  return keyword.rfind("x-", 0) != 0;  // type, anyOf, $ref, ...: every value
}

Result<bool> literal_satisfies(const Json& value, const Json& schema, const std::string& path) {
  auto fail = [&](const std::string& what) { return Status::errorf("schema {}: {}", path.empty() ? "/" : path, what); };
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& k = it.key();
    const Json& arg = it.value();
    if (!keyword_applies(k, value) || (k == "uniqueItems" && arg == Json(false))) continue;
    double limit = 0;
    if (k == "type") {
      const Json types = arg.is_array() ? arg : Json::array({arg});
      bool any = false;
      for (const Json& t : types) any |= t.is_string() && type_matches(t.get<std::string>(), value);
      if (!any) return false;
    } else if (k == "minLength" || k == "maxLength" || k == "minItems" || k == "maxItems") {
      if (!bound(arg, limit)) return fail(fmt::format("{} must be a non-negative integer", k));
      const double n = value.is_string() ? static_cast<double>(code_points(value.get<std::string>()))
                                         : static_cast<double>(value.size());
      if (k.rfind("min", 0) == 0 ? n < limit : n > limit) return false;
    } else if (k == "required") {
      if (!arg.is_array()) return fail("required must be an array of strings");
      for (const Json& r : arg)
        if (!r.is_string() || !value.contains(r.get<std::string>())) return false;
    } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      if (arg.is_boolean() && k[0] == 'e') continue;  // draft-04: read with minimum/maximum
      if (!arg.is_number()) return fail(fmt::format("{} must be a number", k));
      const double v = value.get<double>(), b = arg.get<double>();
      const auto draft4 = schema.find("exclusiveM" + k.substr(1));  // exclusiveMinimum for minimum
      const bool strict = (k == "minimum" || k == "maximum") && draft4 != schema.end() && *draft4 == Json(true);
      const bool ok = k == "minimum"            ? (strict ? v > b : v >= b)
                      : k == "maximum"          ? (strict ? v < b : v <= b)
                      : k == "exclusiveMinimum" ? v > b
                                                : v < b;
      if (!ok) return false;
    } else if (k == "multipleOf") {
      if (!arg.is_number() || arg.get<double>() <= 0) return fail("multipleOf must be a number above 0");
      const double q = value.get<double>() / arg.get<double>();
      if (!std::isfinite(q) || std::floor(q) != q) return false;  // as ajv computes it
    } else if (k == "format" && value.is_number()) {
      if (!arg.is_string()) return fail("format must be a string");
      const std::string& name = arg.get_ref<const std::string&>();
      const int bits = format_use(name) == FormatUse::kNumber ? format_integer_bits(name) : 0;
      const double v = value.get<double>();
      if (bits > 0 && !is_integral(value)) return false;
      if (bits == 32 && (v < -2147483648.0 || v > 2147483647.0)) return false;
    } else if (k == "pattern" || k == "format") {
      if (!arg.is_string()) return fail(fmt::format("{} must be a string", k));
      Result<Regex> compiled = Regex();
      const Regex* re = nullptr;
      if (k == "pattern") {
        compiled = compile_regex(arg.get<std::string>());
        if (!compiled.ok()) return fail(fmt::format("keyword 'pattern': {}", compiled.message()));
        re = &*compiled;
      } else {
        if (format_use(arg.get<std::string>()) != FormatUse::kString) continue;  // constrains no string
        Result<const Regex*> f = format_regex(arg.get<std::string>());
        if (!f.ok()) return fail(fmt::format("keyword 'format': {}", f.message()));
        re = *f;
        const int64_t bound = format_max_length(arg.get<std::string>());
        if (bound >= 0 && code_points(value.get<std::string>()) > bound) return false;
      }
      if (!matches_utf8(*re, value.get<std::string>())) return false;
    } else {
      return fail(fmt::format("keyword '{}' beside enum/const is not supported", k));
    }
  }
  return true;
}

}  // namespace dsv4::grammar
