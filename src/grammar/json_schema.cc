#include "grammar/json_schema.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

const std::set<std::string> kAnnotations = {"$schema", "$id",     "$comment",   "title",    "description",
                                            "default", "examples", "deprecated", "readOnly", "writeOnly"};
const std::set<std::string> kKeywords = {"type",     "properties", "required", "additionalProperties",
                                         "items",    "minItems",   "maxItems", "enum",
                                         "const",    "anyOf",      "oneOf",    "$defs",
                                         "definitions", "$ref",    "minLength", "maxLength",
                                         "minimum",  "maximum"};
// Integers are generated with at most kMaxDigits digits: a minimum/maximum at or beyond
// ±(10^kMaxDigits − 1) (zod's int(): the safe integers) constrains nothing.
constexpr double kIntegerReach = 999999999999999.0;
static_assert(kMaxDigits == 15, "kIntegerReach is 10^kMaxDigits - 1");

std::string escaped_key(const std::string& key) {
  const std::string quoted = Json(key).dump(-1, ' ', false, Json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(&root) {}

  Result<int32_t> compile(const Json& s, const std::string& path);
  // A DSML invoke's parameters from the tool's parameters schema (its $refs resolve in it).
  Result<int32_t> dsml_params(const Json& schema, const std::string& path);
  int32_t text(const std::string& bytes) { return literal({bytes}); }
  int32_t add(Node n) {
    grammar.nodes.push_back(std::move(n));
    return static_cast<int32_t>(grammar.nodes.size() - 1);
  }
  Grammar grammar;

 private:
  Status fail(const std::string& path, const std::string& what) const {
    return Status::errorf("schema {}: {}", path.empty() ? "/" : path, what);
  }
  int32_t literal(std::vector<std::string> texts) {
    Node n;
    n.kind = Kind::kLiteral;
    n.literals = std::move(texts);
    return add(std::move(n));
  }
  int32_t any();
  Result<int64_t> count(const Json& s, const char* key, const std::string& path, int64_t fallback) const;
  Result<int32_t> typed(const Json& s, const std::string& type, const std::string& path);
  Result<int32_t> ref(const std::string& target, const std::string& path);

  const Json* root_;
  std::map<std::string, int32_t> refs_;
  int32_t any_ = -1;
};

// Any JSON value: an open object or array of any values, a string, a number, true/false/null.
int32_t Compiler::any() {
  if (any_ >= 0) return any_;
  Node alt;
  alt.kind = Kind::kAnyOf;
  any_ = add(alt);
  Node object;
  object.kind = Kind::kObject;
  object.open = true;
  object.values = any_;
  Node array;
  array.kind = Kind::kArray;
  array.items = any_;
  Node string, number;
  string.kind = Kind::kString;
  number.kind = Kind::kNumber;
  const int32_t alts[] = {add(object), add(array), add(string), add(number), literal({"true", "false", "null"})};
  grammar.nodes[any_].alternatives.assign(std::begin(alts), std::end(alts));
  return any_;
}

Result<int64_t> Compiler::count(const Json& s, const char* key, const std::string& path, int64_t fallback) const {
  const auto it = s.find(key);
  if (it == s.end()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    return fail(path, fmt::format("{} must be a non-negative integer", key));
  return it->get<int64_t>();
}

Result<int32_t> Compiler::ref(const std::string& target, const std::string& path) {
  if (auto it = refs_.find(target); it != refs_.end()) return it->second;
  const Json* s = nullptr;
  if (target == "#") {
    s = root_;
  } else {
    for (const char* defs : {"#/$defs/", "#/definitions/"}) {
      const std::string prefix = defs;
      if (target.rfind(prefix, 0) != 0) continue;
      const std::string name = target.substr(prefix.size());
      const auto table = root_->find(prefix.substr(2, prefix.size() - 3));
      if (table == root_->end() || !table->is_object()) continue;
      if (const auto it = table->find(name); it != table->end()) s = &*it;
    }
  }
  if (!s) return fail(path, fmt::format("$ref '{}' does not name #, #/$defs/NAME or #/definitions/NAME of this schema",
                                        target));
  Node hop;  // an alternative of one, filled after the target: a $ref may reach itself
  hop.kind = Kind::kAnyOf;
  const int32_t id = add(hop);
  refs_[target] = id;
  Result<int32_t> t = compile(*s, target.substr(1));
  if (!t.ok()) return t.status();
  grammar.nodes[id].alternatives = {*t};
  return id;
}

Result<int32_t> Compiler::compile(const Json& s, const std::string& path) {
  if (grammar.nodes.size() > static_cast<size_t>(kMaxNodes))
    return fail(path, fmt::format("more than {} schema nodes", kMaxNodes));
  if (s.is_boolean()) {
    if (s.get<bool>()) return any();
    return fail(path, "the schema false matches nothing");
  }
  if (!s.is_object()) return fail(path, "a schema must be an object or a boolean");
  for (auto it = s.begin(); it != s.end(); ++it)
    if (!kKeywords.count(it.key()) && !kAnnotations.count(it.key()))
      return fail(path, fmt::format("keyword '{}' is not supported", it.key()));
  if (auto r = s.find("$ref"); r != s.end()) {
    if (!r->is_string()) return fail(path, "$ref must be a string");
    for (auto it = s.begin(); it != s.end(); ++it)
      if (kKeywords.count(it.key()) && it.key() != "$ref" && it.key() != "$defs" && it.key() != "definitions")
        return fail(path, fmt::format("keyword '{}' beside $ref is not supported", it.key()));
    return ref(r->get<std::string>(), path);
  }
  for (const char* key : {"enum", "const"}) {
    const auto it = s.find(key);
    if (it == s.end()) continue;
    std::vector<std::string> texts;
    const Json values = std::string(key) == "const" ? Json::array({*it}) : *it;
    if (!values.is_array() || values.empty()) return fail(path, "enum must be a non-empty array");
    if (values.size() > static_cast<size_t>(kMaxLiterals))
      return fail(path, fmt::format("enum has {} values, at most {}", values.size(), kMaxLiterals));
    for (const Json& v : values) texts.push_back(v.dump(-1, ' ', false, Json::error_handler_t::replace));
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    return literal(std::move(texts));
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    const auto it = s.find(key);
    if (it == s.end()) continue;
    if (!it->is_array() || it->empty()) return fail(path, fmt::format("{} must be a non-empty array", key));
    if (it->size() > static_cast<size_t>(kMaxAlternatives))
      return fail(path, fmt::format("{} has {} branches, at most {}", key, it->size(), kMaxAlternatives));
    if (s.contains("type") || s.contains("properties") || s.contains("items"))
      return fail(path, fmt::format("type, properties or items beside {} is not supported", key));
    Node n;
    n.kind = Kind::kAnyOf;
    for (size_t i = 0; i < it->size(); ++i) {
      Result<int32_t> alt = compile((*it)[i], fmt::format("{}/{}/{}", path, key, i));
      if (!alt.ok()) return alt.status();
      n.alternatives.push_back(*alt);
    }
    return add(std::move(n));
  }
  const auto type = s.find("type");
  if (type == s.end()) {
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
      return typed(s, "object", path);
    if (s.contains("items")) return typed(s, "array", path);
    return any();
  }
  if (type->is_string()) return typed(s, type->get<std::string>(), path);
  if (!type->is_array() || type->empty()) return fail(path, "type must be a string or a non-empty array of strings");
  Node n;
  n.kind = Kind::kAnyOf;
  for (const Json& t : *type) {
    if (!t.is_string()) return fail(path, "type must be a string or a non-empty array of strings");
    Result<int32_t> alt = typed(s, t.get<std::string>(), path);
    if (!alt.ok()) return alt.status();
    n.alternatives.push_back(*alt);
  }
  return add(std::move(n));
}

Result<int32_t> Compiler::typed(const Json& s, const std::string& type, const std::string& path) {
  Node n;
  if (type == "boolean") return literal({"false", "true"});
  if (type == "null") return literal({"null"});
  if (type == "number" || type == "integer") {
    n.kind = type == "number" ? Kind::kNumber : Kind::kInteger;
    for (const char* key : {"minimum", "maximum"}) {
      const auto it = s.find(key);
      if (it == s.end()) continue;
      const bool wide = it->is_number() && n.kind == Kind::kInteger &&
                        (std::string(key) == "minimum" ? it->get<double>() <= -kIntegerReach
                                                       : it->get<double>() >= kIntegerReach);
      if (!wide)
        return fail(path, fmt::format("keyword '{}' is not supported (only on integers, at or beyond ±{:.0f})", key,
                                      kIntegerReach));
    }
    return add(std::move(n));
  }
  if (type == "string") {
    n.kind = Kind::kString;
    Result<int64_t> lo = count(s, "minLength", path, 0), hi = count(s, "maxLength", path, -1);
    if (!lo.ok()) return lo.status();
    if (!hi.ok()) return hi.status();
    if (*hi >= 0 && *hi < *lo) return fail(path, "maxLength is below minLength");
    n.min_length = *lo;
    n.max_length = *hi;
    return add(std::move(n));
  }
  if (type == "array") {
    n.kind = Kind::kArray;
    Result<int64_t> lo = count(s, "minItems", path, 0), hi = count(s, "maxItems", path, -1);
    if (!lo.ok()) return lo.status();
    if (!hi.ok()) return hi.status();
    if (*hi >= 0 && *hi < *lo) return fail(path, "maxItems is below minItems");
    n.min_items = *lo;
    n.max_items = *hi;
    if (const auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) return fail(path + "/items", "items as an array (tuples) is not supported");
      Result<int32_t> items = compile(*it, path + "/items");
      if (!items.ok()) return items.status();
      n.items = *items;
    } else {
      n.items = any();
    }
    return add(std::move(n));
  }
  if (type != "object") return fail(path, fmt::format("type '{}' is not a JSON Schema type", type));
  n.kind = Kind::kObject;
  const Json props = s.value("properties", Json::object());
  if (!props.is_object()) return fail(path, "properties must be an object");
  if (props.size() > static_cast<size_t>(kMaxProperties))
    return fail(path, fmt::format("{} properties, at most {}", props.size(), kMaxProperties));
  std::set<std::string> required;
  if (const auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return fail(path, "required must be an array of strings");
    for (const Json& r : *it) {
      if (!r.is_string()) return fail(path, "required must be an array of strings");
      if (!props.contains(r.get<std::string>()))
        return fail(path, fmt::format("required '{}' is not among properties", r.get<std::string>()));
      required.insert(r.get<std::string>());
    }
  }
  const Json additional = s.value("additionalProperties", Json(true));
  if (!additional.is_boolean() && !additional.is_object())
    return fail(path, "additionalProperties must be a boolean or a schema");
  if (props.empty() && !(additional.is_boolean() && !additional.get<bool>())) {
    n.open = true;
    if (additional.is_object()) {
      Result<int32_t> values = compile(additional, path + "/additionalProperties");
      if (!values.ok()) return values.status();
      n.values = *values;
    } else {
      n.values = any();
    }
    return add(std::move(n));
  }
  for (auto it = props.begin(); it != props.end(); ++it) {
    Result<int32_t> value = compile(it.value(), path + "/properties/" + it.key());
    if (!value.ok()) return value.status();
    n.properties.push_back(Property{escaped_key(it.key()), *value, required.count(it.key()) > 0});
  }
  return add(std::move(n));
}

Result<int32_t> Compiler::dsml_params(const Json& schema, const std::string& path) {
  Node n;
  n.kind = Kind::kDsmlParams;
  if (schema.is_null() || (schema.is_object() && schema.empty())) return add(std::move(n));
  if (!schema.is_object()) return fail(path, "parameters must be an object schema");
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& k = it.key();
    const bool ok = kAnnotations.count(k) || k == "type" || k == "properties" || k == "required" ||
                    k == "additionalProperties" || k == "$defs" || k == "definitions";
    if (!ok) return fail(path, fmt::format("keyword '{}' is not supported in a tool's parameters", k));
  }
  if (const auto t = schema.find("type"); t != schema.end() && *t != "object")
    return fail(path, "a tool's parameters must be of type object");
  const Json props = schema.value("properties", Json::object());
  if (!props.is_object()) return fail(path, "properties must be an object");
  if (props.size() > static_cast<size_t>(kMaxProperties))
    return fail(path, fmt::format("{} properties, at most {}", props.size(), kMaxProperties));
  std::set<std::string> required;
  for (const Json& r : schema.value("required", Json::array())) {
    if (!r.is_string() || !props.contains(r.get<std::string>()))
      return fail(path, fmt::format("required {} is not among properties", r.dump()));
    required.insert(r.get<std::string>());
  }
  for (auto it = props.begin(); it != props.end(); ++it) {
    Result<int32_t> value = compile(it.value(), path + "/properties/" + it.key());
    if (!value.ok()) return value.status();
    const Node& v = grammar.nodes[*value];
    const bool raw = v.kind == Kind::kString;  // string="true": the raw text (text.md §3.8)
    int32_t node = *value;
    if (raw) {
      Node r;
      r.kind = Kind::kRawString;
      r.min_length = v.min_length;
      r.max_length = v.max_length;
      node = add(std::move(r));
    }
    const std::string tag = "<｜DSML｜parameter name=\"" + it.key() + "\" string=\"" + (raw ? "true" : "false") + "\">";
    n.properties.push_back(Property{tag, node, required.count(it.key()) > 0});
  }
  return add(std::move(n));
}

// Containers nested in the shortest instance of each node, to a fixed point (a $ref cycle with
// no way out stays infinite).
Result<std::vector<int32_t>> min_depth(const Grammar& g) {
  constexpr int32_t kInf = INT32_MAX / 2;
  std::vector<int32_t> d(g.nodes.size(), kInf);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      int32_t v = kInf;
      switch (n.kind) {
        case Kind::kString:
        case Kind::kNumber:
        case Kind::kInteger:
        case Kind::kLiteral: v = 0; break;
        case Kind::kArray: v = 1 + (n.min_items > 0 ? d[n.items] : 0); break;
        case Kind::kObject:
          v = 1;
          for (const Property& p : n.properties)
            if (p.required) v = std::max(v, 1 + d[p.node]);
          break;
        case Kind::kAnyOf:
          for (int32_t a : n.alternatives) v = std::min(v, d[a]);
          break;
        case Kind::kRawString: v = 0; break;
        case Kind::kSequence:
          v = 1;
          for (int32_t item : n.sequence) v = std::max(v, 1 + d[item]);
          break;
        case Kind::kDsmlParams:
          v = 1;
          for (const Property& p : n.properties)
            if (p.required) v = std::max(v, 1 + d[p.node]);
          break;
      }
      v = std::min(v, kInf);
      if (v < d[i]) {
        d[i] = v;
        changed = true;
      }
    }
  }
  if (d[g.root] >= kInf) return Status::error("schema /: no finite JSON value satisfies it (a $ref cycle)");
  return d;
}

}  // namespace

Result<Grammar> compile_json_schema(const OrderedJson& schema) {
  Compiler c(schema);
  Result<int32_t> root = c.compile(schema, "");
  if (!root.ok()) return root.status();
  c.grammar.root = *root;
  Result<std::vector<int32_t>> depth = min_depth(c.grammar);
  if (!depth.ok()) return depth.status();
  c.grammar.min_depth = std::move(*depth);
  if (c.grammar.min_depth[*root] >= kMaxDepth)
    return Status::errorf("schema /: its values nest {} containers deep, at most {}", c.grammar.min_depth[*root],
                          kMaxDepth - 1);
  return std::move(c.grammar);
}

Result<Grammar> compile_tool_call(const std::vector<ToolSpec>& tools) {
  if (tools.empty()) return Status::error("tool_choice: no tool to call");
  const Json none;
  Compiler c(none);
  Node root;
  root.kind = Kind::kAnyOf;
  for (const ToolSpec& t : tools) {
    Compiler tool(t.parameters);  // its $refs resolve in its own schema
    tool.grammar = std::move(c.grammar);
    Result<int32_t> params = tool.dsml_params(t.parameters, "tools " + t.name + " parameters");
    if (!params.ok()) return params.status();
    Node seq;
    seq.kind = Kind::kSequence;
    seq.sequence = {tool.text("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"" + t.name + "\">\n"), *params,
                 tool.text("\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>")};
    root.alternatives.push_back(tool.add(std::move(seq)));
    c.grammar = std::move(tool.grammar);
  }
  c.grammar.root = c.add(std::move(root));
  Result<std::vector<int32_t>> depth = min_depth(c.grammar);
  if (!depth.ok()) return depth.status();
  c.grammar.min_depth = std::move(*depth);
  if (c.grammar.min_depth[c.grammar.root] >= kMaxDepth)
    return Status::errorf("tool_choice: the parameters nest {} containers deep, at most {}",
                          c.grammar.min_depth[c.grammar.root], kMaxDepth - 1);
  return std::move(c.grammar);
}

Grammar any_object_grammar() {
  Result<Grammar> g = compile_json_schema(Json{{"type", "object"}});
  return std::move(*g);
}

}  // namespace dsv4::grammar
