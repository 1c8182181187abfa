// JSON Schema -> Grammar: the value shapes a constrained decoder may emit (issues 29, 39;
// docs/serving.md "Structured output"). A Grammar is a graph of nodes (a $ref may point back:
// recursion is bounded by the matcher's depth, json_matcher.h). Every value the grammar allows
// validates against the schema; what cannot be guaranteed is refused.
//
// Supported: type (object, array, string, number, integer, boolean, null, and lists of them),
// properties (a property schema false: never generated), required, additionalProperties (false,
// or absent/true: the listed properties only are generated, which still validates), items
// (false: empty arrays), prefixItems (tuples), minItems/maxItems, minProperties/maxProperties
// (listed objects; open ones: max), uniqueItems (over enum values, integers, strings; or with
// maxItems <= 1; unique_items.h), enum and const (the values that satisfy their
// siblings, schema_literals.h), anyOf (a branch that matches nothing is left out), oneOf (where its
// branches are provably disjoint, grammar_analysis.h), $ref to any local JSON Pointer
// (schema_ref.h) with $defs/definitions anywhere, minLength/maxLength (integral floats too),
// pattern and format (regex.h, formats.h; both: their intersection), and minimum/maximum/
// exclusive*/multipleOf on integers and numbers (schema_number.h), patternProperties,
// propertyNames and dependentRequired (schema_keys.h: listed keys take the patterns they match;
// an object without listed keys runs a KeyAutomaton). Without `type` every type is
// allowed and each keyword constrains its own type. Keywords are read in the document's draft
// (schema_dialect.h: annotations and non-standard keywords ignored); any other standard keyword
// is an error naming it and its place (CompileOptions::strict), or relaxed and listed in
// Grammar::relaxed. allOf, a $ref beside keywords and keywords beside anyOf/oneOf are exact
// merges (schema_merge.h).
//
// What is generated: whitespace as JsonLayout says (compact by default); object properties in the schema's order
// (required ones present, optional ones may be skipped); numbers of at most kMaxDigits digits in
// the integer and fraction parts and 2 in the exponent (a finite double), or NumberRange's form
// where a bound or multipleOf is given; patterned strings escape only control characters, '"'
// and '\\'; open objects never repeat a key.
//
// Limits, checked on the way down before the work (the walk's stack depth is bounded by
// kMaxSchemaDepth, whatever the input): schema levels ($ref hops included), schema nodes,
// merges (schema_merge.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "base/status.h"
#include "grammar/key_automaton.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

struct UniqueStrings;  // unique_items.h

constexpr int kMaxWhitespace = 16;   // whitespace characters per gap
constexpr int kMaxDigits = 15;       // digits of a number's integer and fraction parts
constexpr int kMaxProperties = 1024; // properties of one object schema (required ones included)
constexpr int kMaxDependentProperties = 64;  // properties of an object with dependentRequired (bit masks)
constexpr int kMaxFiniteKeys = 64;  // keys listed where patternProperties/propertyNames allow finitely many
constexpr int kMaxLiterals = 4096;   // enum values
constexpr int kMaxUniqueValues = 64; // values of a uniqueItems array's items (a 64-bit set per array)
constexpr int kMaxUniqueStrings = 32;  // items of a uniqueItems array of strings (a hash of each kept)
constexpr int kMaxAlternatives = 64; // branches of an anyOf two merged anyOfs make; schemas of one allOf
constexpr int kMaxNodes = 4096;      // nodes of one grammar, and schemas compiled into it
constexpr int kMaxSchemaDepth = 128; // schema levels on one compile path, $ref hops included
constexpr int kMaxDepth = 32;        // frames of the matcher: nested containers + the scalar in them
constexpr int kMaxOpenMinProperties = 2;  // minProperties of an object without listed properties
// Readings the matcher follows at once (json_matcher.h): a grammar where the readings may ever
// exceed it is refused (grammar_analysis.h check_readings), so that no reading is ever dropped.
constexpr int kMaxStacks = 32;
constexpr int kMaxExpanded = 256;    // anyOf nodes and branches one value's start visits
constexpr int kMaxRelaxed = 32;      // relaxed keywords listed (Grammar::relaxed)
constexpr int kMaxSeparatorSpace = 4;  // whitespace characters after a separator's ',' or ':'

enum class Kind : uint8_t {
  kObject,   // open (any keys, any values) or listed properties
  kArray,
  kString,
  kNumber,
  kInteger,
  kLiteral,  // one of `literals` (enum, const, boolean, null), each a compact JSON text
  kAnyOf,
  // DSML tool calls (compile_tool_call; text.md §3.8):
  kSequence,    // `sequence` one after the other (the fixed text around the parameters)
  kDsmlParams,  // an invoke's parameters: `properties` with key = the opening tag, raw = string="true"
  kRawString,   // a string parameter's raw text, ended by </｜DSML｜parameter> (min/max_length)
  // Whole-output text (text_constraint.h: vLLM's regex, choice and grammar): raw UTF-8 that
  // `regex` matches whole, ended wherever it accepts.
  kText,
};

struct Property {
  std::string key;  // the JSON string body as generated (escaped, without quotes); kDsmlParams:
                    // the parameter's whole opening tag
  int32_t node = -1;
  bool required = false;
  bool generated_only = false;  // required in generation only (a oneOf branch's subset), not by the schema
};

// A number with bounds or multipleOf is generated as N / 10^fraction_digits for an integer N in
// [min, max] that step divides: an optional '-', at most kMaxDigits − fraction_digits integer
// digits, then (fraction_digits > 0) an optional '.' and 1 .. fraction_digits digits; no
// exponent. |N| <= 10^kMaxDigits − 1, so each value has at most 15 significant digits.
struct NumberRange {
  bool bounded = false;
  int32_t fraction_digits = 0;
  int64_t min = 0, max = 0, step = 1;  // scaled by 10^fraction_digits
};

struct Node {
  Kind kind = Kind::kLiteral;
  // kObject
  bool open = false;                 // any keys, each value `values` (an object without properties)
  bool closed = false;               // listed: the schema allows no key beyond `properties`
  int32_t values = -1;
  int32_t keys = -1;  // open: its keys' automaton (Grammar::key_automata; each label its value), −1: any key
  std::vector<Property> properties;  // in generation order
  // dependentRequired: needs[k], the properties that must follow once property k is present
  // (transitively; bit j: properties[j]; at most 64 properties). Empty: no dependencies.
  std::vector<uint64_t> needs;
  // Property indices by key bytes, and each property's position there (sorted_texts.h: the key
  // candidates are a range of this order).
  std::vector<int32_t> key_order;
  std::vector<uint32_t> key_rank;
  int64_t min_properties = 0, max_properties = -1;  // −1: unbounded (open objects: max only)
  // kArray: item i takes prefix[i] (prefixItems, tuples), the ones after it `items`
  std::vector<int32_t> prefix;
  int32_t items = -1;
  bool unique = false;  // uniqueItems: `items` is a kLiteral node of distinct values, each used once
  // uniqueItems: each item kept as a hash of its text (unique_items.h), at most kMaxUniqueStrings:
  // `items` is a kString (plain: without escapes; patterned: unique_table's characters), an
  // unbounded kInteger, or a kLiteral of more than kMaxUniqueValues values
  bool unique_hashed = false;
  int32_t unique_table = -1;  // patterned string items: their Grammar::unique_tables index
  int32_t unique_key = -1;    // object items: the property whose value is hashed (its index)
  int64_t min_items = 0, max_items = -1;  // −1: unbounded
  // kString
  int64_t min_length = 0, max_length = -1;  // Unicode code points; −1: unbounded
  int32_t regex = -1;  // kString: Grammar::regexes index (pattern, format, both); −1: none
  bool regex_exact = true;  // the regex is the pattern's language (false: a format's, a subset of it)
  // kNumber / kInteger
  NumberRange range;
  // kLiteral: sorted by bytes, without repeats (sorted_texts.h)
  std::vector<std::string> literals;
  // kAnyOf
  std::vector<int32_t> alternatives;
  // kSequence
  std::vector<int32_t> sequence;
};

// Where whitespace may stand in a generated value (issue 39 item 5). Compact by default: exactly
// the separators, no other whitespace. Flexible: up to kMaxWhitespace whitespace characters in
// each gap between two tokens of JSON, the separators' own included.
struct JsonLayout {
  std::string item_separator = ", ";  // ',' then at most 4 whitespace characters
  std::string key_separator = ": ";   // ':' then at most 4 whitespace characters
  bool whitespace_flexible = false;
};
// A layout's separators; errors name the field ("item_separator must be ...").
Status check_layout(const JsonLayout& layout);

struct CompileOptions {
  // true: a keyword the engine cannot enforce is an error naming it. false (OpenAI's default):
  // it is relaxed (the value may break it; all else still holds) and listed in Grammar::relaxed.
  bool strict = true;
  JsonLayout layout;
};

struct Grammar {
  std::vector<Node> nodes;
  int32_t root = -1;
  JsonLayout layout;
  // CompileOptions::strict false: each keyword relaxed, "PATH: KEYWORD" (at most kMaxRelaxed,
  // first found first).
  std::vector<std::string> relaxed;
  // Per node: containers nested in its shortest instance (the matcher opens a container only
  // where it can still close within its depth bound).
  std::vector<int32_t> min_depth;
  std::vector<std::shared_ptr<const Regex>> regexes;  // patterns and formats of string nodes
  std::vector<std::shared_ptr<const KeyAutomaton>> key_automata;  // keys of open objects (Node::keys)
  std::vector<std::shared_ptr<const UniqueStrings>> unique_tables;  // patterned uniqueItems strings
};

// Errors name the keyword and its JSON pointer: "schema /properties/a: keyword 'pattern' is not
// supported".
// The schema as parsed in document order (properties are generated in that order).
Result<Grammar> compile_json_schema(const OrderedJson& schema, const CompileOptions& options = {});
// {"type": "json_object"}: any JSON object.
Grammar any_object_grammar(const JsonLayout& layout = {});

// DSML (text.md §3.8): the text after it is the block of exactly one call to one of the tools,
//   "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"NAME\">\n" PARAMS "\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
// PARAMS: the parameters in the schema's order joined by "\n" (required ones present), each
//   "<｜DSML｜parameter name=\"K\" string=\"S\">" VALUE "</｜DSML｜parameter>": a string-typed
//   parameter is raw text (S true: valid UTF-8 without the closing tag, its min/maxLength in code
//   points), any other the JSON value of its schema (S false).
// For tool_choice "required" (every tool) or a named function (one). `parameters` is the tool's
// JSON Schema (an object schema, or empty: no parameters); errors name the tool.
struct ToolSpec {
  std::string name;
  OrderedJson parameters;
};
Result<Grammar> compile_tool_call(const std::vector<ToolSpec>& tools, const JsonLayout& layout = {});
inline constexpr std::string_view kDsmlParamClose = "</｜DSML｜parameter>";

}  // namespace dsv4::grammar
