#include "grammar/schema_dialect.h"

#include <set>

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

// The keywords of JSON Schema (draft-04 .. 2020-12) that constrain values. Any other keyword
// (annotations, core identifiers, vendor extensions, typos) constrains nothing.
const std::set<std::string> kAssertions = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "dependencies",
    "properties", "patternProperties", "additionalProperties", "propertyNames", "items", "prefixItems",
    "additionalItems", "contains", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
    "unevaluatedItems", "unevaluatedProperties", "$ref", "$dynamicRef", "$recursiveRef"};

bool kept(const std::string& key) { return kAssertions.count(key) || key == "$defs" || key == "definitions"; }

// draft-04: exclusiveMinimum/exclusiveMaximum are booleans beside minimum/maximum.
void exclusive_bounds_04(Json& r) {
  for (const auto& [flag, bound] : {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
    const auto f = r.find(flag);
    if (f == r.end() || !f->is_boolean()) continue;
    const bool on = f->get<bool>();
    r.erase(flag);
    if (on && r.contains(bound)) {
      r[flag] = r[bound];
      r.erase(bound);
    }
  }
}

// `dependencies` (up to draft-07): array values are dependentRequired, schemas dependentSchemas.
Status split_dependencies(Json& r, const std::string& path) {
  const auto d = r.find("dependencies");
  if (d == r.end()) return Status();
  if (!d->is_object()) return Status::errorf("schema {}: dependencies must be an object", path.empty() ? "/" : path);
  Json required = Json::object(), schemas = Json::object();
  for (auto it = d->begin(); it != d->end(); ++it) (it->is_array() ? required : schemas)[it.key()] = it.value();
  r.erase("dependencies");
  if (!required.empty() && !r.contains("dependentRequired")) r["dependentRequired"] = std::move(required);
  if (!schemas.empty() && !r.contains("dependentSchemas")) r["dependentSchemas"] = std::move(schemas);
  return Status();
}

}  // namespace

Result<Draft> draft_of(const Json& root) {
  if (!root.is_object()) return Draft::k2020_12;
  const auto it = root.find("$schema");
  if (it == root.end()) return Draft::k2020_12;
  if (!it->is_string()) return Status::error("schema /: $schema must be a string");
  const std::string& uri = it->get_ref<const std::string&>();
  if (uri.find("draft-04") != std::string::npos || uri.find("draft-03") != std::string::npos) return Draft::k04;
  if (uri.find("draft-06") != std::string::npos) return Draft::k06;
  if (uri.find("draft-07") != std::string::npos) return Draft::k07;
  if (uri.find("2019-09") != std::string::npos) return Draft::k2019_09;
  return Draft::k2020_12;
}

bool standard_assertion(const std::string& key) { return kAssertions.count(key) > 0; }

Result<Json> read_in_draft(const Json& s, Draft draft, const std::string& path) {
  if (!s.is_object()) return s;
  Json r = Json::object();
  const bool ref_alone = draft <= Draft::k07 && s.contains("$ref");
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (!kept(it.key())) continue;
    if (ref_alone && it.key() != "$ref" && it.key() != "$defs" && it.key() != "definitions") continue;
    r[it.key()] = it.value();
  }
  if (draft == Draft::k04) exclusive_bounds_04(r);
  if (draft <= Draft::k07) DSV4_RETURN_IF_ERROR(split_dependencies(r, path));
  if (const auto items = r.find("items"); items != r.end() && items->is_array()) {
    Json tuple = std::move(*items);
    r.erase("items");
    if (!r.contains("prefixItems")) r["prefixItems"] = std::move(tuple);
    if (const auto rest = r.find("additionalItems"); rest != r.end()) {
      Json more = std::move(*rest);
      r.erase("additionalItems");
      r["items"] = std::move(more);
    }
  }
  r.erase("additionalItems");  // without an array `items` it applies to nothing
  if (!r.contains("if")) {
    r.erase("then");
    r.erase("else");
  }
  return r;
}

}  // namespace dsv4::grammar
