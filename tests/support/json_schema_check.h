// Test support for structured output: an independent validator of a parsed JSON value against
// the JSON Schema keywords grammar/json_schema.h supports, and random schemas of them.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "grammar/formats.h"
#include "grammar/regex.h"

namespace dsv4::test {

using Json = dsv4::OrderedJson;

// The value a local $ref names: "#" and a JSON Pointer (~1 -> '/', ~0 -> '~'; no percent escapes).
inline const Json& ref_target(const Json& root, const std::string& ref) {
  const Json* at = &root;
  std::string token;
  for (size_t i = 2; i <= ref.size() && ref.size() > 1; ++i) {
    if (i == ref.size() || ref[i] == '/') {
      at = at->is_array() ? &(*at)[std::stoul(token)] : &(*at)[token];
      token.clear();
    } else if (ref[i] == '~') {
      token += ref[++i] == '1' ? '/' : '~';
    } else {
      token += ref[i];
    }
  }
  return *at;
}

inline bool schema_valid(const Json& v, const Json& s, const Json& root);
inline bool shape_valid(const Json& v, const Json& s, const Json& root);

inline size_t code_points(const std::string& s) {
  size_t cps = 0;
  for (unsigned char c : s) cps += (c & 0xC0) != 0x80;
  return cps;
}

inline bool type_valid(const Json& v, const Json& type) {
  const Json types = type.is_array() ? type : Json::array({type});
  bool any = false;
  for (const Json& t : types) {
    const std::string ts = t;
    any |= (ts == "object" && v.is_object()) || (ts == "array" && v.is_array()) || (ts == "string" && v.is_string()) ||
           (ts == "number" && v.is_number()) || (ts == "integer" && v.is_number_integer()) ||
           (ts == "boolean" && v.is_boolean()) || (ts == "null" && v.is_null());
  }
  return any;
}

// The numeric keywords (draft-04's boolean exclusive* too); multipleOf within a relative 1e-9
// (0.0075 / 0.0001 is 74.99999999999999 in doubles).
inline bool number_valid(double x, const Json& s) {
  auto num = [&](const char* k) { return s.contains(k) && s[k].is_number(); };
  auto yes = [&](const char* k) { return s.contains(k) && s[k] == Json(true); };
  if (num("minimum") && (yes("exclusiveMinimum") ? x <= s["minimum"].get<double>() : x < s["minimum"].get<double>()))
    return false;
  if (num("maximum") && (yes("exclusiveMaximum") ? x >= s["maximum"].get<double>() : x > s["maximum"].get<double>()))
    return false;
  if (num("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
  if (num("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
  if (num("multipleOf")) {
    const double q = x / s["multipleOf"].get<double>();
    if (std::abs(q - std::round(q)) > 1e-9 * std::max(1.0, std::abs(q))) return false;
  }
  const std::string format = s.contains("format") && s["format"].is_string() ? s["format"].get<std::string>() : "";
  if ((format == "int32" || format == "int64") && std::floor(x) != x) return false;  // ajv-formats v3
  if (format == "int32" && (x < -2147483648.0 || x > 2147483647.0)) return false;
  return true;
}

// The object keywords: properties, patternProperties, additionalProperties, required,
// min/maxProperties, propertyNames, dependentRequired.
inline bool object_valid(const Json& v, const Json& s, const Json& root) {
  const Json props = s.value("properties", Json::object());
  const Json patterns = s.value("patternProperties", Json::object());
  for (const Json& r : s.value("required", Json::array()))
    if (!v.contains(r.get<std::string>())) return false;
  if (v.size() < s.value("minProperties", 0u) || v.size() > s.value("maxProperties", 1u << 30)) return false;
  const Json dependent = s.value("dependentRequired", Json::object());
  for (auto it = dependent.begin(); it != dependent.end(); ++it)
    if (v.contains(it.key()))
      for (const Json& b : it.value())
        if (!v.contains(b.get<std::string>())) return false;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (s.contains("propertyNames") && !schema_valid(Json(it.key()), s["propertyNames"], root)) return false;
    bool matched = props.contains(it.key());
    if (matched && !schema_valid(it.value(), props[it.key()], root)) return false;
    for (auto p = patterns.begin(); p != patterns.end(); ++p) {
      auto re = grammar::compile_regex(p.key());
      if (!re.ok() || !grammar::matches_utf8(*re, it.key())) continue;
      matched = true;
      if (!schema_valid(it.value(), p.value(), root)) return false;
    }
    if (!matched && s.contains("additionalProperties") && !schema_valid(it.value(), s["additionalProperties"], root))
      return false;
  }
  return true;
}

// The keywords that apply to objects, arrays and strings.
inline bool shape_valid(const Json& v, const Json& s, const Json& root) {
  if (v.is_object() && !object_valid(v, s, root)) return false;
  if (v.is_array()) {
    if (v.size() < s.value("minItems", 0u) || v.size() > s.value("maxItems", 1u << 30)) return false;
    if (s.value("uniqueItems", false))
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = i + 1; j < v.size(); ++j)
          if (v[i] == v[j]) return false;
    const Json prefix = s.value("prefixItems", Json::array());
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < prefix.size()) {
        if (!schema_valid(v[i], prefix[i], root)) return false;
      } else if (s.contains("items") && !schema_valid(v[i], s["items"], root)) {
        return false;
      }
    }
  }
  if (v.is_string()) {
    const size_t cps = code_points(v.get<std::string>());
    if (cps < s.value("minLength", 0u) || cps > s.value("maxLength", 1u << 30)) return false;
    if (s.contains("pattern")) {
      auto re = grammar::compile_regex(s["pattern"].get<std::string>());
      if (!re.ok() || !grammar::matches_utf8(*re, v.get<std::string>())) return false;
    }
    if (s.contains("format") && grammar::format_use(s["format"].get<std::string>()) == grammar::FormatUse::kString) {
      auto re = grammar::format_regex(s["format"].get<std::string>());  // others constrain no string
      if (!re.ok() || !grammar::matches_utf8(**re, v.get<std::string>())) return false;
    }
  }
  return v.is_number() ? number_valid(v.get<double>(), s) : true;
}

// An independent check of a parsed value against the supported keywords: every keyword of a
// schema applies (a $ref and its siblings too), oneOf holds for exactly one branch.
inline bool schema_valid(const Json& v, const Json& s, const Json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref") && !schema_valid(v, ref_target(root, s["$ref"]), root)) return false;
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
  for (const Json& a : s.value("allOf", Json::array()))
    if (!schema_valid(v, a, root)) return false;
  if (s.contains("anyOf")) {
    bool any = false;
    for (const Json& a : s["anyOf"]) any = any || schema_valid(v, a, root);
    if (!any) return false;
  }
  if (s.contains("oneOf")) {
    int matched = 0;
    for (const Json& a : s["oneOf"]) matched += schema_valid(v, a, root);
    if (matched != 1) return false;
  }
  if (s.contains("type") && !type_valid(v, s["type"])) return false;
  return shape_valid(v, s, root);
}

// A random schema of the supported keywords (objects, arrays, anyOf nested up to depth 3).
inline Json random_schema(std::mt19937& rng, int depth = 0) {
  const int pick = static_cast<int>(rng() % (depth > 2 ? 6 : 9));
  switch (pick) {
    case 0: {
      const uint32_t lo = rng() % 2;
      Json s = {{"type", "string"}, {"maxLength", lo + rng() % 6}, {"minLength", lo}};
      static const char* const kPatterns[] = {"^[a-c]+x?$", "b", "^(ab|é)*$", "[0-9]{2}", "^\\\\?[^a]$"};
      if (rng() % 2) s["pattern"] = kPatterns[rng() % 5], s["maxLength"] = lo + 3 + rng() % 4;  // satisfiable
      return s;
    }
    case 1: {
      static const char* const kFormats[] = {"date", "time", "uuid", "ipv4", "email", "date-time", "duration"};
      if (rng() % 3 == 0) return {{"type", "string"}, {"format", kFormats[rng() % 7]}};
      Json s = {{"type", "integer"}};
      const int lo = static_cast<int>(rng() % 200) - 100;  // [lo, lo + 8) holds a multiple of 1 .. 7
      if (rng() % 2) s["minimum"] = lo;
      if (rng() % 2) s["exclusiveMaximum"] = lo + 8 + static_cast<int>(rng() % 200);
      if (rng() % 2) s["multipleOf"] = 1 + rng() % 7;
      return s;
    }
    case 2: {
      Json s = {{"type", "number"}};
      if (rng() % 2) s["exclusiveMinimum"] = -2.5;
      if (rng() % 2) s["maximum"] = 0.125 * static_cast<double>(rng() % 100);
      if (rng() % 3 == 0) s["multipleOf"] = 0.01;
      return s;
    }
    case 3: return {{"type", Json::array({"boolean", "null"})}};
    case 4: return {{"enum", Json::array({"red", "re", 7, nullptr, Json::array({1})})}};
    case 5: return {{"const", {{"k", "v"}}}};
    case 6: {
      Json props = Json::object(), required = Json::array();
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        const std::string key = std::string("k") + std::to_string(i) + (i % 2 ? "x" : "");
        props[key] = random_schema(rng, depth + 1);
        if (rng() % 2) required.push_back(key);
      }
      return {{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
    }
    case 7: {
      const uint32_t lo = rng() % 3;
      return {{"type", "array"}, {"items", random_schema(rng, depth + 1)}, {"minItems", lo}, {"maxItems", lo + rng() % 3}};
    }
    default: return {{"anyOf", Json::array({random_schema(rng, depth + 1), random_schema(rng, depth + 1)})}};
  }
}

inline bool schema_valid(const Json& v, const Json& schema) { return schema_valid(v, schema, schema); }

}  // namespace dsv4::test
