// JSON Schema -> Grammar: the value shapes a constrained decoder may emit (issue 29;
// docs/serving.md "Structured output"). A Grammar is a graph of nodes (a $ref may point back:
// recursion is bounded by the matcher's depth, json_matcher.h).
//
// Supported: type (object, array, string, number, integer, boolean, null, and lists of them),
// properties, required, additionalProperties (false, or absent/true: the listed properties
// only are generated, which still validates), items, minItems/maxItems, enum, const, anyOf,
// oneOf (as anyOf: alternatives of disjoint shapes validate), $defs/definitions with $ref
// ("#/$defs/NAME", "#/definitions/NAME", "#"), minLength/maxLength, and minimum/maximum on
// integers where they bound nothing generated (at or beyond ±(10^15 − 1): zod's int()). Annotations ($schema, $id,
// $comment, title, description, default, examples, deprecated, readOnly, writeOnly) are ignored;
// any other keyword is an error naming it and its place.
//
// What is generated: no whitespace inside the value other than between tokens of the JSON
// grammar, at most kMaxWhitespace characters per gap; object properties in the schema's order
// (required ones present, optional ones may be skipped); numbers of at most kMaxDigits digits in
// the integer and fraction parts and 2 in the exponent (a finite double).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace dsv4::grammar {

constexpr int kMaxWhitespace = 16;   // whitespace characters per gap
constexpr int kMaxDigits = 15;       // digits of a number's integer and fraction parts
constexpr int kMaxProperties = 64;   // properties of one object schema
constexpr int kMaxLiterals = 64;     // enum values
constexpr int kMaxAlternatives = 16; // anyOf / type-list branches of one node
constexpr int kMaxNodes = 4096;      // nodes of one grammar
constexpr int kMaxDepth = 32;        // frames of the matcher: nested containers + the scalar in them

enum class Kind : uint8_t {
  kObject,   // open (any keys, any values) or listed properties
  kArray,
  kString,
  kNumber,
  kInteger,
  kLiteral,  // one of `literals` (enum, const, boolean, null), each a compact JSON text
  kAnyOf,
};

struct Property {
  std::string key;  // the JSON string body as generated (escaped, without quotes)
  int32_t node = -1;
  bool required = false;
};

struct Node {
  Kind kind = Kind::kLiteral;
  // kObject
  bool open = false;                 // any keys, each value `values` (an object without properties)
  int32_t values = -1;
  std::vector<Property> properties;  // in generation order
  // kArray
  int32_t items = -1;
  int64_t min_items = 0, max_items = -1;  // −1: unbounded
  // kString
  int64_t min_length = 0, max_length = -1;  // Unicode code points; −1: unbounded
  // kLiteral
  std::vector<std::string> literals;
  // kAnyOf
  std::vector<int32_t> alternatives;
};

struct Grammar {
  std::vector<Node> nodes;
  int32_t root = -1;
  // Per node: containers nested in its shortest instance (the matcher opens a container only
  // where it can still close within its depth bound).
  std::vector<int32_t> min_depth;
};

// Errors name the keyword and its JSON pointer: "schema /properties/a: keyword 'pattern' is not
// supported".
// The schema as parsed in document order (properties are generated in that order).
Result<Grammar> compile_json_schema(const nlohmann::ordered_json& schema);
// {"type": "json_object"}: any JSON object.
Grammar any_object_grammar();

}  // namespace dsv4::grammar
