// The object keywords that constrain keys (issue 39 item 4): patternProperties, propertyNames
// and dependentRequired (draft-04..07 `dependencies` with arrays, schema_dialect.h), read from
// one object schema for the compiler (json_schema.cc).
//
//   patternProperties: a key's value takes the conjunction of the schemas of every pattern the
//     key matches (search semantics, regex.h) and of its `properties` entry; a key that is in
//     neither takes additionalProperties.
//   propertyNames: every key is a string valid against it: pattern, format, minLength,
//     maxLength, enum and const (strings), type "string"; other keywords are refused by name.
//   dependentRequired: once key a is present, the keys it lists are required.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "base/status.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

// Patterns of one object schema: a listed key may match all, and its value is the allOf of them
// and its own schema (at most kMaxAlternatives).
constexpr int kMaxPatternProperties = 15;

struct ObjectKeyRules {
  struct Pattern {
    std::string text;
    const OrderedJson* schema = nullptr;
    std::shared_ptr<const Regex> re;
  };
  std::vector<Pattern> patterns;  // patternProperties in document order
  // propertyNames: its pattern, format and length bounds as one automaton (null: any string);
  // `none`: no key is allowed (propertyNames false or unsatisfiable); `names`: enum/const's
  // strings when given (then only those).
  std::shared_ptr<const Regex> names_re;
  bool none = false;
  bool names_listed = false;
  std::vector<std::string> names;
  std::vector<std::pair<std::string, std::vector<std::string>>> dependent_required;

  // Whether propertyNames allows `key`.
  bool name_allowed(const std::string& key) const;
  // Bit i: patterns[i] matches `key`.
  uint64_t matching(const std::string& key) const;
  bool constrains_keys() const { return !patterns.empty() || names_re || none || names_listed; }
};

// s's patternProperties, dependentRequired and propertyNames (`names`: the propertyNames schema
// already read in its draft with a $ref resolved, nullptr when absent). Errors name the keyword
// and its path: "schema /a: patternProperties '[': ...".
Result<ObjectKeyRules> object_key_rules(const OrderedJson& s, const OrderedJson* names, const std::string& path);

}  // namespace dsv4::grammar
