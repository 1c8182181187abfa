#include "structured_fields.h"

#include <vector>

#include <fmt/format.h>

#include "io/json_bounded.h"

namespace dsv4::server {

// Named, not anonymous: the protocol sources build as one unity translation unit.
namespace structured_fields {

using Json = OrderedJson;

// One constraint the request names: its field ("structured_outputs.regex", "guided_regex") and
// its kind (the member name without the prefix: json, regex, choice, grammar, json_object).
struct Given {
  std::string field;
  std::string kind;
  const Json* value = nullptr;
};

// structured_outputs' members: the constraints, null ones skipped and json_object only when true.
std::optional<ApiError> collect_members(const Json& so, std::vector<Given>& given) {
  if (!so.is_object())
    return bad_request("structured_outputs", fmt::format("structured_outputs: expected an object, got {}", json_kind(so)));
  for (auto it = so.begin(); it != so.end(); ++it) {
    const std::string& key = it.key();
    const std::string field = "structured_outputs." + key;
    if (it->is_null()) continue;
    if (key == "json_object") {
      if (!it->is_boolean()) return bad_request("structured_outputs", field + ": expected a boolean");
      if (it->get<bool>()) given.push_back({field, key, &*it});
    } else if (key == "json" || key == "regex" || key == "choice" || key == "grammar") {
      given.push_back({field, key, &*it});
    } else if (key == "whitespace_pattern" || key == "structural_tag") {
      return bad_request("structured_outputs", field + ": not supported by this server (the JSON layout is set by "
                                                       "--json-whitespace and a schema's x-guidance)",
                         "unsupported_parameter");
    } else {
      return bad_request("structured_outputs", fmt::format("structured_outputs: unknown member {}", key),
                         "unsupported_parameter");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> set_constraint(const Given& g, OutputConstraint& out) {
  const Json& v = *g.value;
  const std::string param = g.field.substr(0, g.field.find('.'));
  out.field = g.field;
  if (g.kind == "json_object") {
    out.json_schema = R"({"type":"object"})";
  } else if (g.kind == "json") {  // a schema, or its JSON text
    if (!v.is_object() && !v.is_boolean() && !v.is_string())
      return bad_request(param, fmt::format("{}: expected a JSON schema (an object), got {}", g.field, json_kind(v)));
    out.json_schema = v.is_string() ? v.get<std::string>() : v.dump();
    if (out.json_schema.size() > kMaxSchemaBytes)
      return bad_request(param, fmt::format("{}: a schema of {} bytes exceeds the limit of {}", g.field,
                                            out.json_schema.size(), kMaxSchemaBytes), "field_too_large");
  } else if (g.kind == "choice") {
    if (!v.is_array()) return bad_request(param, fmt::format("{}: expected an array of strings, got {}", g.field, json_kind(v)));
    for (size_t i = 0; i < v.size(); ++i)
      if (!v[i].is_string())
        return bad_request(param, fmt::format("{}[{}]: expected a string, got {}", g.field, i, json_kind(v[i])));
    out.text_kind = TextConstraint::kChoice;
    out.text = v.dump();
  } else {  // regex, grammar
    if (!v.is_string()) return bad_request(param, fmt::format("{}: expected a string, got {}", g.field, json_kind(v)));
    out.text_kind = g.kind == "regex" ? TextConstraint::kRegex : TextConstraint::kGbnf;
    out.text = v.get<std::string>();
  }
  if (out.text.size() > kMaxSchemaBytes)
    return bad_request(param, fmt::format("{}: {} bytes exceed the limit of {}", g.field, out.text.size(),
                                          kMaxSchemaBytes), "field_too_large");
  return std::nullopt;
}

}  // namespace structured_fields

std::optional<ApiError> parse_structured_fields(const OrderedJson& obj, OutputConstraint& out) {
  using structured_fields::Given;
  std::vector<Given> given;
  if (const OrderedJson* so = json_optional(obj, "structured_outputs"))
    if (auto e = structured_fields::collect_members(*so, given)) return e;
  for (const char* kind : {"json", "regex", "choice", "grammar"}) {
    const std::string field = std::string("guided_") + kind;
    if (const OrderedJson* v = json_optional(obj, field)) given.push_back({field, kind, v});
  }
  if (given.empty()) return std::nullopt;
  const std::string param = given[0].field.substr(0, given[0].field.find('.'));
  if (given.size() > 1)
    return bad_request(param, fmt::format("{} and {}: only one constraint per request", given[0].field,
                                          given[1].field));
  if (out.active()) {
    const char* other = out.tool_calls.empty() ? "response_format" : "tool_choice";
    return bad_request(param, fmt::format("{} and {}: only one constraint per request", other, given[0].field));
  }
  out.strict = true;  // what the engine cannot enforce is refused by name
  return structured_fields::set_constraint(given[0], out);
}

}  // namespace dsv4::server
