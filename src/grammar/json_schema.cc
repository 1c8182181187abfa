#include "grammar/json_schema.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "grammar/formats.h"
#include "grammar/grammar_analysis.h"
#include "grammar/grammar_relax.h"
#include "grammar/schema_dialect.h"
#include "grammar/schema_keys.h"
#include "grammar/schema_literals.h"
#include "grammar/schema_merge.h"
#include "grammar/schema_number.h"
#include "grammar/schema_ref.h"
#include "grammar/unique_items.h"

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

const std::set<std::string> kAnnotations = {"$schema", "$id",     "$comment",   "title",    "description",
                                            "default", "examples", "deprecated", "readOnly", "writeOnly"};
const std::set<std::string> kKeywords = {"type",      "properties", "required",  "additionalProperties",
                                         "items",     "minItems",   "maxItems",  "uniqueItems",
                                         "enum",      "const",      "anyOf",     "oneOf",
                                         "$defs",     "definitions", "$ref",     "minLength",
                                         "maxLength", "minimum",    "maximum",   "exclusiveMinimum",
                                         "exclusiveMaximum", "allOf",    "prefixItems",
                                         "minProperties", "maxProperties", "pattern", "format",
                                         "multipleOf", "patternProperties", "propertyNames",
                                         "dependentRequired"};
// Keywords that constrain nothing where they stand (annotations, and schemas kept for $ref).
bool inert(const std::string& key) { return kAnnotations.count(key) || key == "$defs" || key == "definitions"; }
// The keywords of s that constrain, but `key`.
Json constraints_beside(const Json& s, const std::string& key) {
  Json out = Json::object();
  for (auto it = s.begin(); it != s.end(); ++it)
    if (it.key() != key && !inert(it.key())) out[it.key()] = it.value();
  return out;
}
// The keywords that make a schema without `type` constrain one type (bug: they were dropped).
const std::set<std::string> kTypeKeywords[] = {
    {"properties", "required", "additionalProperties", "minProperties", "maxProperties", "patternProperties",
     "propertyNames", "dependentRequired"},
    {"items", "prefixItems", "minItems", "maxItems", "uniqueItems"},
    {"minLength", "maxLength", "pattern", "format"},
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
};
const char* const kTypeOfKeywords[] = {"object", "array", "string", "number"};
constexpr int kMaxJsonDepth = 4 * kMaxSchemaDepth;  // JSON levels of a schema document
constexpr int64_t kMaxReadValues = int64_t{1} << 22;  // JSON values copied by Compiler::read

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string escaped_key(const std::string& key) {
  const std::string quoted = Json(key).dump(-1, ' ', false, Json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

// A JSON Pointer token for error paths ("a/b" -> "a~1b").
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return out;
}

// Whether an error message says `word` after its "schema PATH: " prefix.
bool has_prefix_word(const std::string& message, const std::string& word) {
  const size_t colon = message.find(": ");
  return colon != std::string::npos && message.compare(colon + 2, word.size(), word) == 0;
}

// Whether a branch's compile error says the branch itself matches nothing: "schema PATH: unsatisfiable"
// at the branch's path or an allOf of it (the same value), not at a value nested in it. Such a
// branch is left out of its anyOf/oneOf.
bool branch_unsatisfiable(const Status& st, const std::string& branch_path) {
  const std::string& m = st.message();
  const std::string head = "schema " + (branch_path.empty() ? std::string("/") : branch_path);
  if (m.compare(0, head.size(), head) != 0) return false;
  size_t at = head.size();
  while (m.compare(at, 7, "/allOf/") == 0) {
    at += 7;
    if (at >= m.size() || m[at] < '0' || m[at] > '9') return false;
    while (at < m.size() && m[at] >= '0' && m[at] <= '9') ++at;
  }
  return m.compare(at, 16, ": unsatisfiable:") == 0;
}

// Counts the schema levels being compiled (the walk's native stack depth) for as long as it lives.
class DepthGuard {
 public:
  explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int& depth_;
};

class Compiler {
 public:
  Compiler(const Json& root, Draft draft, bool strict) : root_(&root), merger_(root), draft_(draft), strict_(strict) {
    if (!strict)
      merger_.set_relax([this](const std::string& path, const std::string& keyword) { return unenforced(path, keyword); });
    merger_.set_reader([this](const Json& s, const std::string& path) -> Result<Json> {
      Result<const Json*> r = read(s, path);
      if (!r.ok()) return r.status();
      return **r;
    });
  }

  // Depth and node count are checked on the way down, before the work (issue 40 row 1).
  Result<int32_t> compile(const Json& s, const std::string& path);
  // A DSML invoke's parameters from the tool's parameters schema (its $refs resolve in it).
  Result<int32_t> dsml_params(const Json& schema, const std::string& path);
  // Not strict: while a value may be read more than kMaxStacks ways at once, the anyOf/oneOf/type
  // lists read the fewest ways above the bound are relaxed (listed): first their object branches
  // are joined into one object (grammar_relax.h); read too many ways still, they become any value.
  Status relax_readings();
  // The oneOf branches recorded while compiling that `from` reaches, checked once every $ref is
  // filled (a oneOf only in a value left out is not generated; one in a $ref target compiled
  // there may be reached from elsewhere). Not strict: oneOf branches that may overlap are
  // generated as anyOf (relaxed, listed).
  Status check_one_of(int32_t from);
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
    std::sort(texts.begin(), texts.end());  // the matcher narrows ranges of the order (sorted_texts.h)
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    Node n;
    n.kind = Kind::kLiteral;
    n.literals = std::move(texts);
    return add(std::move(n));
  }
  int32_t any();
  // s's keywords as the compiler reads them (schema_dialect.h); a keyword it does not implement
  // is refused (strict) or relaxed, and a $ref it cannot resolve too.
  // Copies only where a keyword is dropped or rewritten (s itself otherwise; a copy is kept in
  // reads_ and charged against kMaxReadValues).
  Result<const Json*> read(const Json& s, const std::string& path);
  bool needs_reading(const Json& s) const;
  Status relax_ref(Json& r, const std::string& path);
  // An unenforceable keyword: an error when strict, else listed in grammar.relaxed.
  Status unenforced(const std::string& path, const std::string& keyword, const std::string& why = "");
  // A keyword read as an annotation in both modes (an unknown format, dropped by read()): listed
  // in grammar.relaxed.
  void annotation(const std::string& path, const std::string& keyword, const std::string& value);
  void list_relaxed(std::string entry);
  Result<int32_t> schema_object(const Json& s, const std::string& path);
  Result<int64_t> count(const Json& s, const char* key, const std::string& path, int64_t fallback) const;
  Result<int32_t> literals(const Json& s, const std::string& path);
  Result<int32_t> alternatives(const Json& s, const char* key, const std::string& path);
  Result<int32_t> untyped(const Json& s, const std::string& path);
  Result<int32_t> typed(const Json& s, const std::string& type, const std::string& path);
  Result<int32_t> number(const Json& s, Kind kind, const std::string& path);
  Result<int32_t> string(const Json& s, const std::string& path);
  // The regex of s's pattern and format (Grammar::regexes index, −1: neither), compiled once per
  // pair; max_length takes the format's bound.
  Result<int32_t> string_regex(const Json& s, const std::string& path, int64_t& max_length);
  Result<int32_t> array(const Json& s, const std::string& path);
  Result<int32_t> object(const Json& s, const std::string& path);
  Status property_counts(const Json& s, Node& n, const std::string& path);
  Status unique_items(Node& n, const std::string& path);
  // uniqueItems kept as hashes (unique_items.h) over items of which `available` are distinct.
  Status hashed_items(Node& n, const std::string& path, int64_t available);
  Status unique_patterned(Node& n, const std::string& path);
  Status unique_objects(Node& n, const std::string& path);
  // Objects without a required hashable property: the optional property with the most hashable
  // values (the first of those) becomes required in generation (Property::generated_only) in a
  // copy of the item node, where one more key fits (maxProperties) and it needs no other
  // (dependentRequired); an unbounded number there is written as an integer. Sets n.items,
  // n.unique_key; returns its values (0: none, unchanged).
  int64_t promote_unique_key(Node& n, std::shared_ptr<UniqueStrings>* table);
  // The distinct values a hashed item of `node` may take (at most kMaxUniqueStrings; 0: it cannot
  // be hashed); patterned strings: their table in *table.
  int64_t hashed_values(int32_t node, std::shared_ptr<UniqueStrings>* table);
  // A name an object lists: from `properties` (schema), or required/dependentRequired/propertyNames
  // (schema nullptr).
  struct Listed {
    std::string name;
    const Json* schema = nullptr;
    bool required = false;
  };
  Result<ObjectKeyRules> key_rules(const Json& s, const std::string& path);
  // propertyNames {"anyOf": [...]} whose branches ($refs followed) are each enum/const (and type
  // string): one enum of their strings (exact: a key is valid where it is one of them); else
  // `names` itself (its anyOf then refused by name).
  Result<const Json*> names_of_any_of(const Json& names, const std::string& path);
  Result<std::vector<Listed>> listed_names(const Json& s, const std::string& path, const ObjectKeyRules& rules);
  Result<const Json*> key_schema(const Json& s, const Listed& key, const ObjectKeyRules& rules,
                                 const std::string& path);
  // The value schema of a key listed with `listed` (nullptr: not in properties) that matches the
  // patterns of `matching`: all of them, else additionalProperties; nullptr: it cannot be present.
  Result<const Json*> conjunction(const Json& s, const Json* listed, uint64_t matching, const ObjectKeyRules& rules,
                                  const std::string& path);
  Result<int32_t> keyed_object(const Json& s, const ObjectKeyRules& rules, Node& n, const std::string& path);
  // The values of the labels a key may take from the start (infinitely many keys on) as one
  // anyOf: a keyed object with minProperties opens only where one of them fits (min_depth).
  int32_t key_values(const KeyAutomaton& keys);
  Result<int32_t> open_object(const Json& s, Node& n, const std::string& path);
  Result<std::vector<Property>> properties(const Json& s, const std::string& path, bool dsml,
                                           const ObjectKeyRules& rules);
  Status dependencies(const ObjectKeyRules& rules, Node& n, const std::string& path);
  // Counts the values of v against kMaxReadValues (copies the compiler makes).
  Status charge(const Json& v, const std::string& path);
  // The node behind $ref hops (anyOf nodes of one branch).
  int32_t through_hops(int32_t node) const;
  int32_t integers_as_literal(const NumberRange& r);
  Result<int32_t> ref(const std::string& target, const std::string& path);
  // A schema a merge made, compiled once per content (a recursive $ref beside keywords merges
  // to the same schema again: it then points back, as a $ref does).
  Result<int32_t> compile_merged(Json merged, const std::string& path);

  const Json* root_;
  SchemaMerger merger_;
  Draft draft_;
  bool strict_;
  std::deque<Json> merged_;
  std::deque<Json> reads_;  // the schemas read with keywords dropped or rewritten
  int64_t read_values_ = 0;  // the schemas merges made (kept: nodes are compiled from them)
  std::map<const Json*, int32_t> refs_;  // by target: each is compiled once
  std::map<std::string, std::string> local_refs_;  // $ref as written -> local_ref()
  std::map<std::string, int32_t> merged_nodes_;  // by the merged schema's text
  std::map<std::pair<std::string, std::string>, int32_t> regex_ids_;  // by (pattern, format)
  int32_t any_ = -1;
  int depth_ = 0, visits_ = 0;
  struct OneOf {
    std::string path;
    std::vector<int32_t> branches;
    int32_t node = -1;  // the kAnyOf node generating it
  };
  std::vector<OneOf> one_of_;
  std::map<int32_t, std::pair<std::string, std::string>> branch_sites_;  // anyOf node -> (path, keyword)
  std::set<int32_t> joined_;  // sites whose object branches relax_readings joined
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

// A count keyword: a non-negative integer (2.0 too: JSON Schema's integers are by value).
Result<int64_t> Compiler::count(const Json& s, const char* key, const std::string& path, int64_t fallback) const {
  const auto it = s.find(key);
  if (it == s.end()) return fallback;
  if (it->is_number_unsigned() || it->is_number_integer()) {
    if (it->get<int64_t>() >= 0) return it->get<int64_t>();
  } else if (it->is_number_float()) {
    const double v = it->get<double>();
    if (v >= 0 && v <= 9007199254740992.0 && static_cast<double>(static_cast<int64_t>(v)) == v)
      return static_cast<int64_t>(v);
  }
  return fail(path, fmt::format("{} must be a non-negative integer", key));
}

Result<int32_t> Compiler::ref(const std::string& target, const std::string& path) {
  Result<const Json*> s = resolve_local_ref(*root_, target);
  if (!s.ok()) return fail(path, s.message());
  if (auto it = refs_.find(*s); it != refs_.end()) return it->second;
  Node hop;  // an alternative of one, filled after the target: a $ref may reach itself
  hop.kind = Kind::kAnyOf;
  const int32_t id = add(hop);
  refs_[*s] = id;
  Result<int32_t> t = compile(**s, target.substr(1));
  if (!t.ok()) {
    refs_.erase(*s);  // a branch left out (branch_unsatisfiable) must not leave an empty hop behind
    if (branch_unsatisfiable(t.status(), target.substr(1)))  // at the $ref too, so that it may be left out
      return fail(path, fmt::format("unsatisfiable: $ref '{}' matches nothing ({})", target, t.message()));
    return t.status();
  }
  grammar.nodes[id].alternatives = {*t};
  return id;
}

Result<int32_t> Compiler::compile_merged(Json merged, const std::string& path) {
  std::string text = merged.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (auto it = merged_nodes_.find(text); it != merged_nodes_.end()) return it->second;
  Node hop;
  hop.kind = Kind::kAnyOf;
  const int32_t id = add(hop);
  const auto entry = merged_nodes_.emplace(std::move(text), id).first;
  merged_.push_back(std::move(merged));
  Result<int32_t> t = compile(merged_.back(), path);
  if (!t.ok()) {
    merged_nodes_.erase(entry);  // as in ref()
    return t.status();
  }
  grammar.nodes[id].alternatives = {*t};
  return id;
}

Status Compiler::unenforced(const std::string& path, const std::string& keyword, const std::string& why) {
  if (strict_) return fail(path, fmt::format("keyword '{}' is not supported{}", keyword, why));
  list_relaxed(fmt::format("{}: {}", path.empty() ? "/" : path, keyword));
  return Status();
}

void Compiler::annotation(const std::string& path, const std::string& keyword, const std::string& value) {
  list_relaxed(fmt::format("{}: {} \"{}\" (unknown: an annotation)", path.empty() ? "/" : path, keyword, value));
}

void Compiler::list_relaxed(std::string entry) {
  if (grammar.relaxed.size() < static_cast<size_t>(kMaxRelaxed) &&
      std::find(grammar.relaxed.begin(), grammar.relaxed.end(), entry) == grammar.relaxed.end())
    grammar.relaxed.push_back(std::move(entry));
}

// A $ref into another document (or an anchor) cannot be followed: relaxed to any value.
Status Compiler::relax_ref(Json& r, const std::string& path) {
  const auto it = r.find("$ref");
  if (it == r.end() || !it->is_string()) return Status();
  auto known = local_refs_.find(it->get_ref<const std::string&>());
  if (known == local_refs_.end())  // an anchor's lookup walks the document: once per ref
    known = local_refs_.emplace(it->get<std::string>(), local_ref(*root_, it->get<std::string>())).first;
  *it = known->second;
  const std::string& ref = it->get_ref<const std::string&>();
  if (ref.rfind("#/", 0) == 0 || ref == "#") return Status();  // local: resolved (or refused) where used
  DSV4_RETURN_IF_ERROR(unenforced(path, "$ref", fmt::format(" ('{}' is not local: only JSON Pointers into this schema)", ref)));
  r.erase("$ref");
  return Status();
}

bool Compiler::needs_reading(const Json& s) const {
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (!kKeywords.count(k) || (k == "items" && it->is_array())) return true;
    if (k == "$ref" && (!it->is_string() || (it->get_ref<const std::string&>().rfind("#/", 0) != 0 &&
                                             it->get_ref<const std::string&>() != "#")))
      return true;
    if (draft_ <= Draft::k07 && k == "$ref" && s.size() > 1) return true;
    if (draft_ == Draft::k04 && (k == "exclusiveMinimum" || k == "exclusiveMaximum") && it->is_boolean()) return true;
    if (k == "format" && it->is_string() && format_use(it->get_ref<const std::string&>()) == FormatUse::kUnknown)
      return true;
  }
  return false;
}

Status Compiler::charge(const Json& v, const std::string& path) {
  std::vector<const Json*> pending = {&v};
  while (!pending.empty()) {
    const Json* x = pending.back();
    pending.pop_back();
    if (++read_values_ > kMaxReadValues)
      return fail(path, fmt::format("reading the schema copies more than {} JSON values", kMaxReadValues));
    if (x->is_structured())
      for (const Json& c : *x) pending.push_back(&c);
  }
  return Status();
}

Result<const Json*> Compiler::read(const Json& s, const std::string& path) {
  if (!s.is_object() || !needs_reading(s)) return &s;
  DSV4_RETURN_IF_ERROR(charge(s, path));  // the copy's size, counted before it is made
  Result<Json> r = read_in_draft(s, draft_, path);
  if (!r.ok()) return r.status();
  DSV4_RETURN_IF_ERROR(relax_ref(*r, path));
  if (const auto f = r->find("format");  // no validator's: an annotation (merges and keys never see it)
      f != r->end() && f->is_string() && format_use(f->get_ref<const std::string&>()) == FormatUse::kUnknown) {
    annotation(path, "format", f->get<std::string>());
    r->erase(f);
  }
  for (auto it = r->begin(); it != r->end();) {
    if (kKeywords.count(it.key())) {
      ++it;
      continue;
    }
    if (it.key() != "then" && it.key() != "else") DSV4_RETURN_IF_ERROR(unenforced(path, it.key()));  // with `if`
    it = r->erase(it);
  }
  reads_.push_back(std::move(*r));
  return &reads_.back();
}

Result<int32_t> Compiler::compile(const Json& s, const std::string& path) {
  if (depth_ >= kMaxSchemaDepth)
    return fail(path, fmt::format("schemas nest more than {} levels deep ($ref hops included)", kMaxSchemaDepth));
  if (++visits_ > kMaxNodes || grammar.nodes.size() >= static_cast<size_t>(kMaxNodes))
    return fail(path, fmt::format("more than {} schema nodes", kMaxNodes));
  const DepthGuard guard(depth_);
  if (s.is_boolean()) {
    if (s.get<bool>()) return any();
    return fail(path, "unsatisfiable: the schema false matches nothing");
  }
  if (!s.is_object()) return fail(path, "a schema must be an object or a boolean");
  Result<const Json*> read_s = read(s, path);
  if (!read_s.ok()) return read_s.status();
  return schema_object(**read_s, path);
}

Result<int32_t> Compiler::schema_object(const Json& s, const std::string& path) {
  // allOf, and $ref beside other keywords (both apply, 2019-09 on): one merged schema.
  if (s.contains("allOf") || (s.contains("$ref") && !constraints_beside(s, "$ref").empty())) {
    Result<Json> merged = merger_.flatten(s, path);
    if (!merged.ok()) return merged.status();
    return compile_merged(std::move(*merged), path);
  }
  if (auto r = s.find("$ref"); r != s.end()) {
    if (!r->is_string()) return fail(path, "$ref must be a string");
    return ref(r->get<std::string>(), path);
  }
  if (s.contains("anyOf") && s.contains("oneOf")) return fail(path, "keyword 'oneOf' beside anyOf is not supported");
  for (const char* key : {"anyOf", "oneOf"})
    if (s.contains(key)) return alternatives(s, key, path);
  if (s.contains("enum") || s.contains("const")) return literals(s, path);
  const auto type = s.find("type");
  if (type == s.end()) return untyped(s, path);
  if (type->is_string()) return typed(s, type->get<std::string>(), path);
  if (!type->is_array() || type->empty()) return fail(path, "type must be a string or a non-empty array of strings");
  if (type->size() > 7) return fail(path, "type lists more than the 7 JSON types");
  Node n;
  n.kind = Kind::kAnyOf;
  for (const Json& t : *type) {
    if (!t.is_string()) return fail(path, "type must be a string or a non-empty array of strings");
    Result<int32_t> alt = typed(s, t.get<std::string>(), path);
    if (!alt.ok() && branch_unsatisfiable(alt.status(), path)) continue;  // no value of this type
    if (!alt.ok()) return alt.status();
    n.alternatives.push_back(*alt);
  }
  if (n.alternatives.empty()) return fail(path, "unsatisfiable: no value of any type in the type list");
  const int32_t id = add(std::move(n));
  branch_sites_[id] = {path, "type"};
  return id;
}

// enum and/or const: the values that satisfy every sibling keyword (schema_literals.h).
Result<int32_t> Compiler::literals(const Json& s, const std::string& path) {
  std::vector<const Json*> values;
  const auto e = s.find("enum"), c = s.find("const");
  if (e != s.end()) {
    if (!e->is_array() || e->empty()) return fail(path, "enum must be a non-empty array");
    if (e->size() > static_cast<size_t>(kMaxLiterals))
      return fail(path, fmt::format("enum has {} values, at most {}", e->size(), kMaxLiterals));
    for (const Json& v : *e) values.push_back(&v);
  }
  if (c != s.end()) {
    const bool in_enum = e == s.end() || std::any_of(values.begin(), values.end(),
                                                     [&](const Json* v) { return same_json_value(*v, *c); });
    values.clear();
    if (in_enum) values.push_back(&*c);
  }
  std::vector<std::string> texts;
  for (const Json* v : values) {
    Result<bool> ok = literal_satisfies(*v, s, path);
    if (!ok.ok()) return ok.status();
    if (*ok) texts.push_back(v->dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  if (texts.empty()) return fail(path, "unsatisfiable: no enum/const value satisfies the keywords beside it");
  return literal(std::move(texts));
}

// anyOf / oneOf; the keywords beside them are merged into each branch (schema_merge.h). oneOf
// is generated as anyOf once its (merged) branches are proven disjoint (check_one_of).
Result<int32_t> Compiler::alternatives(const Json& s, const char* key, const std::string& path) {
  const Json& list = *s.find(key);
  if (!list.is_array() || list.empty()) return fail(path, fmt::format("{} must be a non-empty array", key));
  if (list.size() >= static_cast<size_t>(kMaxExpanded))
    return fail(path, fmt::format("{} has {} branches, at most {}", key, list.size(), kMaxExpanded - 1));
  const Json beside = constraints_beside(s, key);
  Node n;
  n.kind = Kind::kAnyOf;
  OneOf one_of{path + "/" + key, {}, -1};
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string branch_path = fmt::format("{}/{}/{}", path, key, i);
    Result<int32_t> alt = 0;
    if (beside.empty()) {
      if (list[i] == Json(false)) continue;  // matches nothing: no branch
      alt = compile(list[i], branch_path);
    } else {
      Result<Json> merged = merger_.merge(beside, list[i], branch_path);
      if (!merged.ok() && branch_unsatisfiable(merged.status(), branch_path)) continue;
      if (!merged.ok()) return merged.status();
      if (*merged == Json(false)) continue;
      alt = compile_merged(std::move(*merged), branch_path);
    }
    if (!alt.ok() && branch_unsatisfiable(alt.status(), branch_path)) continue;  // its oneOfs: unreachable
    if (!alt.ok()) return alt.status();
    n.alternatives.push_back(*alt);
    one_of.branches.push_back(static_cast<int32_t>(i));
  }
  if (n.alternatives.empty()) return fail(path, fmt::format("unsatisfiable: every branch of {} matches nothing", key));
  if (std::string(key) == "oneOf") {
    one_of.branches.insert(one_of.branches.end(), n.alternatives.begin(), n.alternatives.end());
    one_of.node = static_cast<int32_t>(grammar.nodes.size());  // add() below appends n
    one_of_.push_back(std::move(one_of));
  }
  const int32_t id = add(std::move(n));
  branch_sites_[id] = {path, key};
  return id;
}

Status Compiler::relax_readings() {
  constexpr int kMaxRounds = 8;  // each a readings count over the grammar (bounded by kMaxReadingsWork)
  for (int round = 0; round < kMaxRounds; ++round) {
    Result<std::vector<int32_t>> r = node_readings(grammar, "schema /");
    if (!r.ok() || (*r)[grammar.root] <= kMaxStacks) return Status();  // finish() names a failed count
    int32_t fewest = kMaxCountedReadings + 1;  // the sites read the fewest ways above the bound, all at once
    for (const auto& [node, site] : branch_sites_)
      if ((*r)[node] > kMaxStacks) fewest = std::min(fewest, (*r)[node]);
    if (fewest > kMaxCountedReadings) return Status();
    std::vector<std::pair<int32_t, std::string>> joined_values;  // made by joins: sites of later rounds
    for (auto it = branch_sites_.begin(); it != branch_sites_.end();) {
      // Sites a join of this round made (nodes past the count) are read in the next round.
      if (static_cast<size_t>(it->first) >= r->size() || (*r)[it->first] != fewest) {
        ++it;
        continue;
      }
      DSV4_RETURN_IF_ERROR(unenforced(it->second.first, it->second.second));
      const std::string path = it->second.first;
      if (joined_.insert(it->first).second && join_object_branches(grammar, it->first, joined_values)) {
        for (const auto& [node, key] : joined_values) branch_sites_[node] = {path + "/properties/" + key, "anyOf"};
        joined_values.clear();
        ++it;  // read once more: what still reads too many ways becomes any value next
        continue;
      }
      grammar.nodes[it->first].alternatives = {any()};
      it = branch_sites_.erase(it);
    }
  }
  return Status();
}

// branches: the kept branch indices, then their nodes. Each pair is proven disjoint, else
// separated (objects: a key dropped or required; strings: patterns less each other's).
Status Compiler::check_one_of(int32_t from) {
  int64_t budget = kDisjointBudget;
  const std::vector<bool> reached = reachable(grammar, from);
  for (const OneOf& o : one_of_) {
    if (!reached[static_cast<size_t>(o.node)]) continue;
    const size_t n = o.branches.size() / 2;
    const std::vector<int32_t> nodes(o.branches.begin() + static_cast<std::ptrdiff_t>(n), o.branches.end());
    std::vector<std::pair<size_t, size_t>> overlapping;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i + 1; j < n; ++j)
        if (!provably_disjoint(grammar, nodes[i], nodes[j], budget) &&
            !(separate_objects(grammar, nodes[i], nodes[j], budget) &&
              provably_disjoint(grammar, nodes[i], nodes[j], budget)))
          overlapping.emplace_back(i, j);
    if (overlapping.empty() || narrow_strings(grammar, o.node, overlapping, budget)) continue;
    if (!strict_) {
      DSV4_RETURN_IF_ERROR(unenforced(o.path.substr(0, o.path.size() - 6), "oneOf"));
      continue;
    }
    return fail(o.path, fmt::format("branches {} and {} may match the same value (oneOf is generated only where "
                                    "its branches are provably disjoint: distinct types, const/enum values, "
                                    "patterns with no common string, a required property with distinct "
                                    "constants or one the other object never lists){}",
                                    o.branches[overlapping[0].first], o.branches[overlapping[0].second],
                                    budget < 0 ? "; the proof ran out of its budget" : ""));
  }
  return Status();
}

// No `type`: every type is allowed, and keywords constrain values of their own type only
// ({"maxLength": 1} allows any number, but strings of at most one code point; {"minLength": 3,
// "maxLength": 1} no string).
Result<int32_t> Compiler::untyped(const Json& s, const std::string& path) {
  bool constrained = false;
  for (auto it = s.begin(); it != s.end(); ++it)
    for (const auto& keys : kTypeKeywords) constrained |= keys.count(it.key()) > 0;
  if (!constrained) return any();
  Node n;
  n.kind = Kind::kAnyOf;
  for (const char* type : kTypeOfKeywords) {
    Result<int32_t> alt = typed(s, type, path);
    if (!alt.ok() && branch_unsatisfiable(alt.status(), path)) continue;  // no value of this type
    if (!alt.ok()) return alt.status();
    n.alternatives.push_back(*alt);
  }
  n.alternatives.push_back(literal({"false", "null", "true"}));
  return add(std::move(n));
}

Result<int32_t> Compiler::typed(const Json& s, const std::string& type, const std::string& path) {
  if (type == "boolean") return literal({"false", "true"});
  if (type == "null") return literal({"null"});
  if (type == "number") return number(s, Kind::kNumber, path);
  if (type == "integer") return number(s, Kind::kInteger, path);
  if (type == "string") return string(s, path);
  if (type == "array") return array(s, path);
  if (type == "object") return object(s, path);
  return fail(path, fmt::format("type '{}' is not a JSON Schema type", type));
}

// Numeric bounds; format int32 / int64 make the value an integer (int32: in 32 bits).
Result<int32_t> Compiler::number(const Json& s, Kind kind, const std::string& path) {
  Node n;
  int bits = 0;
  if (const auto f = s.find("format");
      f != s.end() && f->is_string() && format_use(f->get<std::string>()) == FormatUse::kNumber)
    bits = format_integer_bits(f->get<std::string>());
  n.kind = bits > 0 ? Kind::kInteger : kind;
  Result<NumberRange> range = number_range(s, n.kind == Kind::kInteger, path);
  if (!range.ok()) return range.status();
  n.range = *range;
  if (bits == 32) DSV4_RETURN_IF_ERROR(narrow_to_int32(n.range, path));
  return add(std::move(n));
}

Result<int32_t> Compiler::string_regex(const Json& s, const std::string& path, int64_t& max_length) {
  const auto p = s.find("pattern"), f = s.find("format");
  if (p == s.end() && f == s.end()) return -1;
  if (p != s.end() && !p->is_string()) return fail(path, "pattern must be a string");
  if (f != s.end() && !f->is_string()) return fail(path, "format must be a string");
  const std::string pattern = p == s.end() ? "" : p->get<std::string>();
  std::string format = f == s.end() ? "" : f->get<std::string>();
  if (f != s.end() && format_use(format) != FormatUse::kString) format.clear();  // constrains no string
  if (!format.empty()) {
    const int64_t bound = format_max_length(format);
    if (bound >= 0 && (max_length < 0 || bound < max_length)) max_length = bound;
  }
  if (p == s.end() && format.empty()) return -1;
  if (auto it = regex_ids_.find({pattern, format}); it != regex_ids_.end()) return it->second;
  // Not strict: a pattern outside the regex subset (lookaround, backreferences, \b) is relaxed
  // (listed in grammar.relaxed): the string is generated without it.
  std::shared_ptr<const Regex> re;
  if (!format.empty()) {
    Result<const Regex*> fr = format_regex(format);
    if (!fr.ok()) return fail(path, fmt::format("keyword 'format': {}", fr.message()));
    re = std::shared_ptr<const Regex>(*fr, [](const Regex*) {});  // kept for the process
  }
  if (p != s.end()) {
    Result<Regex> pr = compile_regex(pattern);
    if (pr.ok() && re) pr = intersect_regex(*pr, *re);
    if (pr.ok()) {
      re = std::make_shared<const Regex>(std::move(*pr));
    } else if (strict_) {
      return fail(path, fmt::format("keyword 'pattern'{}: {}", re ? " with 'format'" : "", pr.message()));
    } else {  // outside the engine's subset: the string is generated without it (relaxed, listed)
      DSV4_RETURN_IF_ERROR(unenforced(path, "pattern"));
    }
  }
  if (!re) return -1;
  grammar.regexes.push_back(std::move(re));
  const auto id = static_cast<int32_t>(grammar.regexes.size() - 1);
  regex_ids_[{pattern, format}] = id;
  return id;
}

Result<int32_t> Compiler::string(const Json& s, const std::string& path) {
  Node n;
  n.kind = Kind::kString;
  Result<int64_t> lo = count(s, "minLength", path, 0), hi = count(s, "maxLength", path, -1);
  if (!lo.ok()) return lo.status();
  if (!hi.ok()) return hi.status();
  n.min_length = *lo;
  n.max_length = *hi;
  Result<int32_t> re = string_regex(s, path, n.max_length);
  if (!re.ok()) return re.status();
  n.regex = *re;
  const auto f = s.find("format");  // a format's automaton is a subset of it (formats.h)
  n.regex_exact = f == s.end() || !f->is_string() || format_use(f->get<std::string>()) != FormatUse::kString;
  if (n.max_length >= 0 && n.max_length < n.min_length)
    return fail(path, "unsatisfiable: maxLength (or the format's bound) is below minLength");
  if (n.regex >= 0) {
    const Regex& r = *grammar.regexes[n.regex];
    if (r.start() < 0 || !r.accepting_length_in(r.start(), n.min_length, n.max_length))
      return fail(path, fmt::format("unsatisfiable: no string of {} to {} code points matches '{}'", n.min_length,
                                    n.max_length < 0 ? std::string("any") : std::to_string(n.max_length), r.pattern()));
  }
  return add(std::move(n));
}

int32_t Compiler::through_hops(int32_t node) const {
  for (int hop = 0; hop < kMaxSchemaDepth; ++hop) {
    const Node& n = grammar.nodes[node];
    if (n.kind != Kind::kAnyOf || n.alternatives.size() != 1) break;
    node = n.alternatives[0];
  }
  return node;
}

// An integer node of at most kMaxUniqueValues values as the literal node of their texts; −1
// when it has more.
int32_t Compiler::integers_as_literal(const NumberRange& r) {
  if (!r.bounded || r.fraction_digits != 0 || r.step <= 0) return -1;
  const int64_t first = r.min >= 0 ? (r.min + r.step - 1) / r.step : -((-r.min) / r.step);
  const int64_t last = r.max >= 0 ? r.max / r.step : -((-r.max + r.step - 1) / r.step);
  if (last < first || last - first >= kMaxUniqueValues) return -1;
  std::vector<std::string> texts;
  for (int64_t k = first; k <= last; ++k) texts.push_back(std::to_string(k * r.step));
  return literal(std::move(texts));
}

// Whether no two literals are equal as JSON values (1 and 1.0, objects with their members in
// another order): then equal items are the same literal.
bool distinct_values(const std::vector<std::string>& texts) {
  std::vector<nlohmann::json> values;
  for (const std::string& t : texts) values.push_back(nlohmann::json::parse(t));
  for (size_t a = 0; a < values.size(); ++a)
    for (size_t b = a + 1; b < values.size(); ++b)
      if (values[a] == values[b]) return false;
  return true;
}

// items and prefixItems (tuples: item i takes prefixItems[i], the ones after `items`); an item
// schema that matches nothing ends the array before its place, as false does.
// uniqueItems true with more than one item, without a tuple: enforced over literals of distinct
// values (a 64-bit set up to kMaxUniqueValues, hashes beyond; integers in such a range become
// literals, an anyOf of literals one literal), and kept as hashes over strings and unbounded
// integers (unique_items.h; at most kMaxUniqueStrings items). No items schema: distinct strings.
Status Compiler::unique_items(Node& n, const std::string& path) {
  if (!n.prefix.empty()) return unenforced(path, "uniqueItems", " (not with prefixItems or tuple items)");
  n.items = through_hops(n.items);
  if (n.items == any_) {
    Node text;
    text.kind = Kind::kString;
    n.items = add(std::move(text));
  } else if (std::vector<std::string> texts = literal_alternatives(grammar, n.items); !texts.empty()) {
    n.items = literal(std::move(texts));
  } else if (const int32_t plain = subsuming_string(grammar, n.items); plain >= 0) {
    n.items = plain;  // anyOf [string, enum of strings]: the strings
  }
  const Node& item = grammar.nodes[n.items];
  if (item.kind == Kind::kInteger) {
    const NumberRange range = item.range;  // integers_as_literal adds a node
    if (const int32_t lit = integers_as_literal(range); lit >= 0) n.items = lit;
    else if (!range.bounded || (range.fraction_digits == 0 && range.step > 0))
      return hashed_items(n, path, kMaxUniqueStrings);  // more than kMaxUniqueValues values
  } else if (item.kind == Kind::kNumber && item.range.bounded && item.range.fraction_digits == 0 &&
             item.range.step > 0) {
    const NumberRange range = item.range;
    if (const int32_t lit = integers_as_literal(range); lit >= 0) n.items = lit;
    else return hashed_items(n, path, kMaxUniqueStrings);
  } else if (item.kind == Kind::kString && item.regex < 0 && item.max_length < 0) {
    return hashed_items(n, path, kMaxUniqueStrings);
  } else if (item.kind == Kind::kString && item.regex >= 0) {
    return unique_patterned(n, path);
  } else if (item.kind == Kind::kObject && !item.open) {
    return unique_objects(n, path);
  }
  const Node& items = grammar.nodes[n.items];
  if (items.kind != Kind::kLiteral)
    return unenforced(path, "uniqueItems", " (only over enum/const values, booleans, null, integers, strings "
                                           "without maxLength unless a pattern bounds them, and listed objects)");
  if (!distinct_values(items.literals))
    return unenforced(path, "uniqueItems", " (over enum values of which two are equal, as 1 and 1.0)");
  const int64_t values = static_cast<int64_t>(items.literals.size());
  if (n.min_items > values)
    return fail(path, fmt::format("unsatisfiable: minItems {} with uniqueItems over {} values", n.min_items, values));
  if (values > kMaxUniqueValues) {
    if (!distinct_hashes(items.literals))
      return unenforced(path, "uniqueItems", fmt::format(" (over {} values, two of whose hashes are equal)", values));
    return hashed_items(n, path, values);
  }
  if (n.max_items < 0 || n.max_items > values) n.max_items = values;
  n.unique = true;
  return Status();
}

Status Compiler::hashed_items(Node& n, const std::string& path, int64_t available) {
  const int64_t most = std::min<int64_t>(available, kMaxUniqueStrings);
  if (n.min_items > most)
    return unenforced(path, "uniqueItems", fmt::format(" (minItems {}: at most {} distinct items are generated)",
                                                       n.min_items, most));
  if (n.max_items < 0 || n.max_items > most) n.max_items = most;
  n.unique_hashed = true;
  return Status();
}

// Patterned strings: in UniqueStrings' characters, where minLength/maxLength cut none of the
// strings the pattern matches in them (the regex state alone then decides).
Status Compiler::unique_patterned(Node& n, const std::string& path) {
  const Node& item = grammar.nodes[n.items];
  const Regex& re = *grammar.regexes[item.regex];
  auto table = std::make_shared<UniqueStrings>(unique_strings(re));
  if (table->shortest < 0)
    return unenforced(path, "uniqueItems", " (no string of printable ASCII without '\"' and '\\' matches the pattern; "
                                           "such items are generated in those characters)");
  if (item.min_length > table->shortest ||
      (item.max_length >= 0 && (table->longest < 0 || table->longest > item.max_length)))
    return unenforced(path, "uniqueItems", " (over patterned strings that minLength/maxLength cut)");
  const int64_t available = table->count[static_cast<size_t>(re.start())];
  grammar.unique_tables.push_back(std::move(table));
  n.unique_table = static_cast<int32_t>(grammar.unique_tables.size() - 1);
  return hashed_items(n, path, available);
}

int64_t Compiler::hashed_values(int32_t node, std::shared_ptr<UniqueStrings>* table) {
  const Node& v = grammar.nodes[node];
  if (v.kind == Kind::kInteger && !v.range.bounded) return kMaxUniqueStrings;
  if ((v.kind == Kind::kInteger || v.kind == Kind::kNumber) && v.range.bounded && v.range.fraction_digits == 0 &&
      v.range.step > 0) {  // at least one value (else unsatisfiable when compiled)
    const int64_t values = ranged_continuations(v.range, false, 0, 1, kMaxUniqueStrings, nullptr) +  // 0
                           ranged_continuations(v.range, false, 0, 0, kMaxUniqueStrings, nullptr) +  // above
                           ranged_continuations(v.range, true, 0, 0, kMaxUniqueStrings, nullptr);    // below
    return std::min<int64_t>(values, kMaxUniqueStrings);
  }
  if (v.kind == Kind::kString && v.regex < 0 && v.max_length < 0) return kMaxUniqueStrings;
  if (v.kind == Kind::kLiteral && distinct_values(v.literals) && distinct_hashes(v.literals))
    return std::min<int64_t>(static_cast<int64_t>(v.literals.size()), kMaxUniqueStrings);
  if (v.kind != Kind::kString || v.regex < 0) return 0;
  const Regex& re = *grammar.regexes[v.regex];
  *table = std::make_shared<UniqueStrings>(unique_strings(re));
  const UniqueStrings& t = **table;
  if (t.shortest < 0 || v.min_length > t.shortest || (v.max_length >= 0 && (t.longest < 0 || t.longest > v.max_length)))
    return 0;
  return std::min<int64_t>(t.count[static_cast<size_t>(re.start())], kMaxUniqueStrings);
}

// Listed objects holding no other hashed array of objects (so that their hashes and those of
// an array of scalars inside fit MatchStack::keys): told apart by the first required property
// whose values can be hashed, else by an optional one the items then always write
// (promote_unique_key).
Status Compiler::unique_objects(Node& n, const std::string& path) {
  const Node& item = grammar.nodes[n.items];
  int64_t available = 0;
  std::shared_ptr<UniqueStrings> table;
  for (const Property& p : item.properties)
    if (may_hold_hashed_array(grammar, p.node))
      return unenforced(path, "uniqueItems", " (over objects holding another uniqueItems array of objects)");
  for (size_t k = 0; k < item.properties.size() && n.unique_key < 0; ++k) {
    if (!item.properties[k].required) continue;
    table.reset();
    if ((available = hashed_values(through_hops(item.properties[k].node), &table)) > 0)
      n.unique_key = static_cast<int32_t>(k);
  }
  if (n.unique_key < 0) available = promote_unique_key(n, &table);
  if (n.unique_key < 0)
    return unenforced(path, "uniqueItems", " (over objects only with a property of strings, integers or enum "
                                           "values that could be written in every item)");
  if (table) {
    grammar.unique_tables.push_back(std::move(table));
    n.unique_table = static_cast<int32_t>(grammar.unique_tables.size() - 1);
  }
  return hashed_items(n, path, available);
}

int64_t Compiler::promote_unique_key(Node& n, std::shared_ptr<UniqueStrings>* table) {
  const Node& item = grammar.nodes[n.items];
  int64_t required = 0, best = 0;
  for (const Property& p : item.properties) required += p.required;
  if (item.max_properties >= 0 && required >= item.max_properties) return 0;  // no room for one more key
  int32_t key = -1;
  bool as_integer = false;
  for (size_t k = 0; k < item.properties.size(); ++k) {
    if (item.properties[k].required || (!item.needs.empty() && item.needs[k] != 0)) continue;
    std::shared_ptr<UniqueStrings> values_table;
    const Node& v = grammar.nodes[through_hops(item.properties[k].node)];
    const bool number = v.kind == Kind::kNumber && !v.range.bounded;  // written as canonical integers
    const int64_t values = number ? kMaxUniqueStrings : hashed_values(through_hops(item.properties[k].node),
                                                                      &values_table);
    if (values <= best) continue;
    best = values;
    key = static_cast<int32_t>(k);
    *table = std::move(values_table);
    as_integer = number;
  }
  if (key < 0) return 0;
  Node always = grammar.nodes[n.items];  // a copy: the item node may stand elsewhere too
  Property& p = always.properties[static_cast<size_t>(key)];
  p.required = true;
  p.generated_only = true;
  if (as_integer) {  // an unbounded number's integers: a subset whose canonical texts are distinct values
    Node integer;
    integer.kind = Kind::kInteger;
    p.node = add(std::move(integer));
  }
  n.items = add(std::move(always));
  n.unique_key = key;
  return best;
}

Result<int32_t> Compiler::array(const Json& s, const std::string& path) {
  Node n;
  n.kind = Kind::kArray;
  Result<int64_t> lo = count(s, "minItems", path, 0), hi = count(s, "maxItems", path, -1);
  if (!lo.ok()) return lo.status();
  if (!hi.ok()) return hi.status();
  n.min_items = *lo;
  n.max_items = *hi;
  const auto prefix = s.find("prefixItems");
  if (prefix != s.end() && (!prefix->is_array() || prefix->empty()))
    return fail(path, "prefixItems must be a non-empty array of schemas");
  const int64_t n_prefix = prefix == s.end() ? 0 : static_cast<int64_t>(prefix->size());
  for (int64_t i = 0; i < n_prefix && (n.max_items < 0 || i < n.max_items); ++i) {
    const Json& item = (*prefix)[static_cast<size_t>(i)];
    if (item == Json(false)) {  // no item can stand at i: the array ends before it
      n.max_items = i;
      break;
    }
    const std::string item_path = fmt::format("{}/prefixItems/{}", path, i);
    Result<int32_t> node = compile(item, item_path);
    if (!node.ok() && branch_unsatisfiable(node.status(), item_path)) {  // no value: as false
      n.max_items = i;
      break;
    }
    if (!node.ok()) return node.status();
    n.prefix.push_back(*node);
  }
  const auto items = s.find("items");
  const int64_t n_listed = static_cast<int64_t>(n.prefix.size());
  if (items != s.end() && items->is_boolean() && !items->get<bool>() && (n.max_items < 0 || n.max_items > n_listed))
    n.max_items = n_listed;  // no item past the tuple can be present
  if (n.max_items >= 0 && n.max_items < n.min_items)
    return fail(path, "unsatisfiable: maxItems (or items/prefixItems false) is below minItems");
  if (items == s.end() || (n.max_items >= 0 && n.max_items <= n_listed)) {
    n.items = any();
  } else {
    Result<int32_t> item = compile(*items, path + "/items");
    if (!item.ok() && !branch_unsatisfiable(item.status(), path + "/items")) return item.status();
    n.items = item.ok() ? *item : any();
    if (!item.ok()) {  // no value: no item past the tuple
      n.max_items = n_listed;
      if (n.min_items > n_listed)
        return fail(path, fmt::format("unsatisfiable: minItems {} but only {} items can be present ({})", n.min_items,
                                      n_listed, item.message()));
    }
  }
  if (const auto u = s.find("uniqueItems"); u != s.end()) {
    if (!u->is_boolean()) return fail(path, "uniqueItems must be a boolean");
    if (u->get<bool>() && (n.max_items < 0 || n.max_items > 1)) DSV4_RETURN_IF_ERROR(unique_items(n, path));
  }
  return add(std::move(n));
}

// The names an object lists, in this order: `properties` in document order, then required names
// not among them, then (with no `properties`) propertyNames' enum and dependentRequired's names,
// then the names dependentRequired asks of a listed one.
Result<std::vector<Compiler::Listed>> Compiler::listed_names(const Json& s, const std::string& path,
                                                             const ObjectKeyRules& rules) {
  std::vector<Listed> listed;
  const auto props = s.find("properties");
  if (props != s.end()) {
    if (!props->is_object()) return fail(path, "properties must be an object");
    if (props->size() > static_cast<size_t>(kMaxProperties))
      return fail(path, fmt::format("{} properties, at most {}", props->size(), kMaxProperties));
    for (auto it = props->begin(); it != props->end(); ++it) listed.push_back({it.key(), &it.value(), false});
  }
  auto find = [&](const std::string& name) {
    return std::find_if(listed.begin(), listed.end(), [&](const Listed& l) { return l.name == name; });
  };
  auto add_name = [&](const std::string& name) -> Status {
    if (find(name) != listed.end()) return Status();
    listed.push_back({name, nullptr, false});  // checked as it grows: the search stays short
    if (listed.size() > static_cast<size_t>(kMaxProperties))
      return fail(path, fmt::format("more than {} properties (required and dependentRequired ones included)",
                                    kMaxProperties));
    return Status();
  };
  if (const auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return fail(path, "required must be an array of strings");
    for (const Json& r : *it) {
      if (!r.is_string()) return fail(path, "required must be an array of strings");
      DSV4_RETURN_IF_ERROR(add_name(r.get<std::string>()));
      find(r.get<std::string>())->required = true;
    }
  }
  const bool unlisted = props == s.end() || props->empty();
  if (unlisted)
    for (const std::string& name : rules.names) DSV4_RETURN_IF_ERROR(add_name(name));
  for (const auto& [trigger, needed] : rules.dependent_required) {
    if (unlisted) DSV4_RETURN_IF_ERROR(add_name(trigger));
    if (find(trigger) == listed.end()) continue;  // never generated: nothing to require
    for (const std::string& name : needed) DSV4_RETURN_IF_ERROR(add_name(name));
  }
  return listed;
}

// The schema a listed key's value takes: its `properties` entry and the schema of every pattern
// (patternProperties) its name matches, else additionalProperties (else anything); nullptr when
// the key can never be present (a schema false, or propertyNames refuses the name).
Result<const Json*> Compiler::key_schema(const Json& s, const Listed& key, const ObjectKeyRules& rules,
                                         const std::string& path) {
  if (!rules.name_allowed(key.name)) return nullptr;
  return conjunction(s, key.schema, rules.matching(key.name), rules, path);
}

Result<const Json*> Compiler::conjunction(const Json& s, const Json* listed, uint64_t matching,
                                          const ObjectKeyRules& rules, const std::string& path) {
  static const Json kAnything = true;
  std::vector<const Json*> parts;
  if (listed != nullptr) parts.push_back(listed);
  for (size_t i = 0; i < rules.patterns.size(); ++i)
    if (matching >> i & 1) parts.push_back(rules.patterns[i].schema);
  if (parts.empty()) {
    const auto additional = s.find("additionalProperties");
    parts.push_back(additional == s.end() ? &kAnything : &*additional);
  }
  if (std::any_of(parts.begin(), parts.end(), [](const Json* p) { return *p == Json(false); })) return nullptr;
  if (parts.size() == 1) return parts[0];
  Json all = Json::array();
  for (const Json* p : parts) {
    DSV4_RETURN_IF_ERROR(charge(*p, path));
    all.push_back(*p);
  }
  merged_.push_back(Json{{"allOf", std::move(all)}});
  return &merged_.back();
}

// The listed properties (listed_names) with their values' nodes; a key that can never be present
// (its value schema matches nothing) is left out, and makes the object unsatisfiable when required.
Result<std::vector<Property>> Compiler::properties(const Json& s, const std::string& path, bool dsml,
                                                   const ObjectKeyRules& rules) {
  Result<std::vector<Listed>> listed = listed_names(s, path, rules);
  if (!listed.ok()) return listed.status();
  std::vector<Property> out;
  for (const Listed& l : *listed) {
    Result<const Json*> schema = key_schema(s, l, rules, path);
    if (!schema.ok()) return schema.status();
    if (*schema == nullptr) {
      if (!l.required) continue;
      return fail(path, fmt::format("unsatisfiable: required '{}' can never be present (its schema is false, "
                                    "additionalProperties is false or propertyNames refuses it)", l.name));
    }
    const std::string value_path = path + "/properties/" + pointer_token(l.name);
    Result<int32_t> value = compile(**schema, value_path);
    if (!value.ok() && branch_unsatisfiable(value.status(), value_path)) {  // no value: the key is never written
      if (!l.required) continue;
      return fail(path, fmt::format("unsatisfiable: required '{}' has no value ({})", l.name, value.message()));
    }
    if (!value.ok()) return value.status();
    int32_t node = *value;
    std::string key = escaped_key(l.name);
    if (dsml) {  // string="true": a string parameter's raw text (text.md §3.8)
      const Node& v = grammar.nodes[node];
      const bool raw = v.kind == Kind::kString;
      if (raw) {
        Node r;
        r.kind = Kind::kRawString;
        r.min_length = v.min_length;
        r.max_length = v.max_length;
        r.regex = v.regex;
        node = add(std::move(r));
      }
      key = "<｜DSML｜parameter name=\"" + l.name + "\" string=\"" + (raw ? "true" : "false") + "\">";
    }
    out.push_back(Property{std::move(key), node, l.required});
  }
  return out;
}

// dependentRequired on a listed object: Node::needs, per property the ones its presence requires
// (transitively). A property that requires one that can never be present is left out (refused
// when required).
Status Compiler::dependencies(const ObjectKeyRules& rules, Node& n, const std::string& path) {
  if (rules.dependent_required.empty()) return Status();
  if (n.properties.size() > static_cast<size_t>(kMaxDependentProperties))  // Node::needs, Frame::present: 64 bits
    return unenforced(path, "dependentRequired",
                      fmt::format(" on an object of {} properties (at most {})", n.properties.size(),
                                  kMaxDependentProperties));
  for (bool dropped = true; dropped;) {
    dropped = false;
    auto index = [&](const std::string& name) {
      const std::string key = escaped_key(name);
      for (size_t k = 0; k < n.properties.size(); ++k)
        if (n.properties[k].key == key) return static_cast<int32_t>(k);
      return -1;
    };
    std::vector<uint64_t> needs(n.properties.size(), 0);
    for (const auto& [trigger, needed] : rules.dependent_required) {
      const int32_t a = index(trigger);
      if (a < 0) continue;
      for (const std::string& name : needed) {
        const int32_t b = index(name);
        if (b >= 0) {
          needs[a] |= uint64_t{1} << b;
          continue;
        }
        if (n.properties[a].required)
          return fail(path, fmt::format("unsatisfiable: required '{}' needs '{}' (dependentRequired), which can never "
                                        "be present", trigger, name));
        n.properties.erase(n.properties.begin() + a);
        dropped = true;
        break;
      }
      if (dropped) break;
    }
    if (dropped) continue;
    for (bool grew = true; grew;) {  // transitive closure (at most 64 properties)
      grew = false;
      for (size_t k = 0; k < needs.size(); ++k)
        for (size_t j = 0; j < needs.size(); ++j)
          if ((needs[k] >> j & 1) && (needs[k] | needs[j]) != needs[k]) needs[k] |= needs[j], grew = true;
    }
    for (size_t k = 0; k < needs.size(); ++k) needs[k] &= ~(uint64_t{1} << k);
    n.needs = std::move(needs);
  }
  return Status();
}

// minProperties/maxProperties: on listed objects both (at most kMaxProperties), on open ones
// maxProperties and minProperties up to kMaxOpenMinProperties (the matcher counts their keys).
Status Compiler::property_counts(const Json& s, Node& n, const std::string& path) {
  Result<int64_t> lo = count(s, "minProperties", path, 0), hi = count(s, "maxProperties", path, -1);
  if (!lo.ok()) return lo.status();
  if (!hi.ok()) return hi.status();
  if (*hi >= 0 && *hi < *lo) return fail(path, "unsatisfiable: maxProperties is below minProperties");
  n.max_properties = *hi;
  if (n.open) {
    if (*lo > kMaxOpenMinProperties)
      return unenforced(path, "minProperties", fmt::format(" (above {} on objects without listed properties)",
                                                           kMaxOpenMinProperties));
    n.min_properties = *lo;
    return Status();
  }
  int64_t required = 0;
  for (const Property& p : n.properties) required += p.required;
  if (*hi >= 0 && required > *hi)
    return fail(path, fmt::format("unsatisfiable: {} required properties, maxProperties {}", required, *hi));
  if (*lo > static_cast<int64_t>(n.properties.size())) {
    DSV4_RETURN_IF_ERROR(unenforced(path, "minProperties", fmt::format(" (above the {} listed properties, the only ones "
                                                                       "generated)", n.properties.size())));
    return Status();
  }
  n.min_properties = *lo;
  return Status();
}

// Any keys, each value additionalProperties (else anything).
Result<int32_t> Compiler::open_object(const Json& s, Node& n, const std::string& path) {
  n.open = true;
  if (const auto additional = s.find("additionalProperties"); additional != s.end() && additional->is_object()) {
    Result<int32_t> values = compile(*additional, path + "/additionalProperties");
    if (!values.ok()) return values.status();
    n.values = *values;
  } else {
    n.values = any();
  }
  DSV4_RETURN_IF_ERROR(property_counts(s, n, path));
  return add(std::move(n));
}

// An object without listed keys whose keys patternProperties/propertyNames constrain: an open
// object over the key automaton (key_automaton.h), each label's value the conjunction of its
// patterns' schemas (none: additionalProperties). Where no key has infinitely many ways on
// (finitely many keys are allowed), the first kMaxFiniteKeys of them are listed instead.
Result<int32_t> Compiler::keyed_object(const Json& s, const ObjectKeyRules& rules, Node& n, const std::string& path) {
  const auto additional = s.find("additionalProperties");
  std::vector<const Regex*> patterns;
  for (const ObjectKeyRules::Pattern& p : rules.patterns) patterns.push_back(p.re.get());
  auto allowed = [&](uint64_t mask) {
    if (mask == 0) return additional == s.end() || *additional != Json(false);
    for (size_t i = 0; i < rules.patterns.size(); ++i)
      if ((mask >> i & 1) && *rules.patterns[i].schema == Json(false)) return false;
    return true;
  };
  std::set<uint64_t> unsatisfiable;  // sets of patterns whose schemas no value meets together
  Result<KeyAutomaton> keys = Status();
  for (bool again = true; again;) {  // until no label's value is unsatisfiable (their sets only grow)
    again = false;
    keys = build_key_automaton(patterns, rules.names_re.get(),
                               [&](uint64_t mask) { return allowed(mask) && !unsatisfiable.count(mask); }, path);
    if (!keys.ok() && !strict_ && !(additional != s.end() && *additional == Json(false))) {  // relaxed: any key
      DSV4_RETURN_IF_ERROR(unenforced(path, patterns.empty() ? "propertyNames" : "patternProperties"));
      return open_object(s, n, path);
    }
    if (!keys.ok()) return keys.status();
    n.open = keys->start >= 0 && keys->infinite[keys->start] != 0;  // else {} only
    for (size_t label = 0; n.open && label < keys->label_patterns.size(); ++label) {
      const uint64_t mask = keys->label_patterns[label];
      Result<const Json*> schema = conjunction(s, nullptr, mask, rules, path);
      if (!schema.ok()) return schema.status();
      const std::string at = mask == 0 ? path + "/additionalProperties"
                                       : path + "/patternProperties/" +
                                             pointer_token(rules.patterns[__builtin_ctzll(mask)].text);
      Result<int32_t> value = compile(**schema, at);
      if (!value.ok() && has_prefix_word(value.message(), "unsatisfiable")) {
        unsatisfiable.insert(mask);  // a key with this label can never be present
        again = true;
        continue;
      }
      if (!value.ok()) return value.status();
      keys->label_value[label] = *value;
    }
  }
  if (!n.open) {  // finitely many keys: the first kMaxFiniteKeys of them, listed
    ObjectKeyRules finite = rules;
    finite.names = finite_keys(*keys, kMaxFiniteKeys);
    finite.names_listed = true;
    Result<std::vector<Property>> listed = properties(s, path, false, finite);
    if (!listed.ok()) return listed.status();
    n.properties = std::move(*listed);
  }
  DSV4_RETURN_IF_ERROR(property_counts(s, n, path));
  if (!n.open) return add(std::move(n));
  n.values = n.min_properties > 0 ? key_values(*keys) : any();  // min_depth's; each key's label decides its value
  n.keys = static_cast<int32_t>(grammar.key_automata.size());
  grammar.key_automata.push_back(std::make_shared<const KeyAutomaton>(std::move(*keys)));
  return add(std::move(n));
}

int32_t Compiler::key_values(const KeyAutomaton& keys) {
  Node values;
  values.kind = Kind::kAnyOf;
  for (size_t label = 0; label < keys.label_value.size(); ++label)
    if ((keys.infinite[keys.start] >> label & 1) && keys.label_value[label] >= 0)
      values.alternatives.push_back(keys.label_value[label]);
  return values.alternatives.empty() ? any() : add(std::move(values));
}

// patternProperties, propertyNames and dependentRequired of s (propertyNames read in the draft,
// a $ref in it followed).
Result<ObjectKeyRules> Compiler::key_rules(const Json& s, const std::string& path) {
  const Json* names = nullptr;
  if (const auto it = s.find("propertyNames"); it != s.end()) {
    names = &*it;
    for (int hop = 0;; ++hop) {
      Result<const Json*> r = read(*names, path + "/propertyNames");
      if (!r.ok()) return r.status();
      names = *r;
      if (!names->is_object() || !names->contains("$ref") || names->size() != 1) break;
      if (hop >= kMaxSchemaDepth || !(*names)["$ref"].is_string())
        return fail(path + "/propertyNames", "$ref must be a string naming a schema (at most 128 hops)");
      Result<const Json*> target = resolve_local_ref(*root_, (*names)["$ref"].get<std::string>());
      if (!target.ok()) return fail(path + "/propertyNames", target.message());
      names = *target;
    }
    if (names->is_object() && names->contains("anyOf")) {
      Result<const Json*> flat = names_of_any_of(*names, path + "/propertyNames");
      if (!flat.ok()) return flat.status();
      names = *flat;
    }
  }
  return object_key_rules(s, names, path);
}

Result<const Json*> Compiler::names_of_any_of(const Json& names, const std::string& path) {
  const Json& list = names["anyOf"];
  const bool alone = std::all_of(names.items().begin(), names.items().end(), [](const auto& kv) {
    return kv.key() == "anyOf" || inert(kv.key()) || (kv.key() == "type" && kv.value() == Json("string"));
  });
  if (!alone || !list.is_array() || list.empty() || list.size() >= static_cast<size_t>(kMaxExpanded))
    return &names;  // refused by name where read
  Json strings = Json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const Json* branch = &list[i];
    for (int hop = 0; branch->is_object() && branch->contains("$ref") && hop < kMaxSchemaDepth; ++hop) {
      if (!(*branch)["$ref"].is_string()) return &names;
      Result<const Json*> target = resolve_local_ref(*root_, (*branch)["$ref"].get<std::string>());
      if (!target.ok()) return fail(fmt::format("{}/anyOf/{}", path, i), target.message());
      Result<const Json*> r = read(**target, fmt::format("{}/anyOf/{}", path, i));
      if (!r.ok()) return r.status();
      branch = *r;
    }
    if (!branch->is_object() || (branch->contains("enum") && branch->contains("const"))) return &names;
    for (auto it = branch->begin(); it != branch->end(); ++it) {
      const std::string& k = it.key();
      if (k == "enum" && it->is_array()) {
        for (const Json& v : *it)
          if (v.is_string()) strings.push_back(v);  // keys are strings: other values name none
      } else if (k == "const") {
        if (it->is_string()) strings.push_back(*it);
      } else if (!inert(k) && !(k == "type" && *it == Json("string"))) {
        return &names;  // refused by name where read
      }
    }
    if (!branch->contains("enum") && !branch->contains("const")) return &names;
  }
  if (strings.empty()) {
    merged_.push_back(Json(false));  // no key is allowed
    return &merged_.back();
  }
  DSV4_RETURN_IF_ERROR(charge(strings, path));
  merged_.push_back(Json{{"enum", std::move(strings)}});
  return &merged_.back();
}

Result<int32_t> Compiler::object(const Json& s, const std::string& path) {
  Node n;
  n.kind = Kind::kObject;
  const auto additional = s.find("additionalProperties");
  if (additional != s.end() && !additional->is_boolean() && !additional->is_object())
    return fail(path, "additionalProperties must be a boolean or a schema");
  Result<ObjectKeyRules> rules = key_rules(s, path);
  if (!rules.ok() && !strict_) {  // relaxed: the keys' keywords are dropped
    for (const char* k : {"patternProperties", "propertyNames", "dependentRequired"})
      if (s.contains(k)) DSV4_RETURN_IF_ERROR(unenforced(path, k));
    rules = ObjectKeyRules{};
  }
  if (!rules.ok()) return rules.status();
  const bool closed = (additional != s.end() && *additional == Json(false)) || rules->none;
  const auto props = s.find("properties");
  const bool requires_keys = s.contains("required") && !(s["required"].is_array() && s["required"].empty());
  const bool listed = (props != s.end() && !(props->is_object() && props->empty())) || requires_keys ||
                      !rules->dependent_required.empty() || rules->names_listed;
  if (!listed && !rules->none && (!closed || !rules->patterns.empty())) {
    if (rules->constrains_keys()) return keyed_object(s, *rules, n, path);
    return open_object(s, n, path);
  }
  Result<std::vector<Property>> keys = properties(s, path, false, *rules);
  if (!keys.ok()) return keys.status();
  n.properties = std::move(*keys);
  n.closed = rules->none || (additional != s.end() && *additional == Json(false) && !s.contains("patternProperties"));
  DSV4_RETURN_IF_ERROR(dependencies(*rules, n, path));
  DSV4_RETURN_IF_ERROR(property_counts(s, n, path));
  if (!n.needs.empty() && (n.min_properties > 0 || n.max_properties >= 0)) {
    DSV4_RETURN_IF_ERROR(unenforced(path, "dependentRequired", " (beside minProperties/maxProperties)"));
    n.needs.clear();
  }
  return add(std::move(n));
}

Result<int32_t> Compiler::dsml_params(const Json& raw, const std::string& path) {
  Node n;
  n.kind = Kind::kDsmlParams;
  if (raw.is_null() || (raw.is_object() && raw.empty())) return add(std::move(n));
  if (!raw.is_object()) return fail(path, "parameters must be an object schema");
  Result<const Json*> read_schema = read(raw, path);
  if (!read_schema.ok()) return read_schema.status();
  const Json& schema = **read_schema;
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& k = it.key();
    const bool ok = inert(k) || k == "type" || k == "properties" || k == "required" || k == "additionalProperties";
    if (!ok) return fail(path, fmt::format("keyword '{}' is not supported in a tool's parameters", k));
  }
  if (const auto t = schema.find("type"); t != schema.end() && *t != "object")
    return fail(path, "a tool's parameters must be of type object");
  Result<std::vector<Property>> listed = properties(schema, path, true, ObjectKeyRules{});
  if (!listed.ok()) return listed.status();
  n.properties = std::move(*listed);
  return add(std::move(n));
}

// Each listed object's keys in byte order (the matcher narrows ranges of it).
void order_keys(Grammar& g) {
  for (Node& n : g.nodes) {
    const size_t size = n.properties.size();
    n.key_order.resize(size);
    n.key_rank.resize(size);
    for (size_t k = 0; k < size; ++k) n.key_order[k] = static_cast<int32_t>(k);
    std::sort(n.key_order.begin(), n.key_order.end(),
              [&](int32_t a, int32_t b) { return n.properties[a].key < n.properties[b].key; });
    for (size_t k = 0; k < size; ++k) n.key_rank[n.key_order[k]] = static_cast<uint32_t>(k);
  }
}

// The grammar's depth facts and key orders; errors name `what` (the schema or the tools).
Status finish(Grammar& g, const std::string& what) {
  order_keys(g);
  Result<std::vector<int32_t>> depth = min_depth(g);
  if (!depth.ok()) return depth.status();
  g.min_depth = std::move(*depth);
  DSV4_RETURN_IF_ERROR(check_readings(g, what));
  if (g.min_depth[g.root] >= kMaxDepth)
    return Status::errorf("{}: its values nest {} containers deep, at most {}", what, g.min_depth[g.root],
                          kMaxDepth - 1);
  return Status();
}

}  // namespace

Status check_layout(const JsonLayout& layout) {
  for (const auto& [name, sep, mark] : {std::tuple{"item_separator", &layout.item_separator, ','},
                                        std::tuple{"key_separator", &layout.key_separator, ':'}}) {
    bool ok = !sep->empty() && (*sep)[0] == mark && sep->size() <= 1 + static_cast<size_t>(kMaxSeparatorSpace);
    for (size_t i = 1; ok && i < sep->size(); ++i) ok = is_json_space((*sep)[i]);
    if (!ok)
      return Status::errorf("{} must be '{}' followed by at most {} whitespace characters (space, tab, CR, LF)", name,
                            mark, kMaxSeparatorSpace);
  }
  return Status();
}

// Bounds the native depth of copying a subschema (Compiler::read): JSON nested deeper than
// kMaxJsonDepth is refused before the work.
Status check_json_depth(const Json& doc, const std::string& what) {
  std::vector<std::pair<const Json*, int>> pending = {{&doc, 1}};
  while (!pending.empty()) {
    const auto [x, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxJsonDepth)
      return Status::errorf("{}: the document nests more than {} JSON levels (schemas nest at most {} levels deep)", what,
                            kMaxJsonDepth, kMaxSchemaDepth);
    if (x->is_structured())
      for (const Json& c : *x) pending.emplace_back(&c, depth + 1);
  }
  return Status();
}

// The root's "x-guidance" (llguidance's keys) over the requested layout.
Result<JsonLayout> layout_of(const Json& root, JsonLayout layout) {
  const auto g = root.is_object() ? root.find("x-guidance") : root.end();
  if (!root.is_object() || g == root.end()) return layout;
  if (!g->is_object()) return Status::error("schema /x-guidance: must be an object");
  for (auto it = g->begin(); it != g->end(); ++it) {
    const std::string& k = it.key();
    if ((k == "item_separator" || k == "key_separator") && it->is_string()) {
      (k == "item_separator" ? layout.item_separator : layout.key_separator) = it->get<std::string>();
    } else if (k == "whitespace_flexible" && it->is_boolean()) {
      layout.whitespace_flexible = it->get<bool>();
    } else {
      return Status::errorf("schema /x-guidance: '{}' is not supported (item_separator and key_separator: strings, "
                            "whitespace_flexible: a boolean)", k);
    }
  }
  DSV4_RETURN_IF_ERROR(check_layout(layout).with_context("schema /x-guidance"));
  return layout;
}

Result<Grammar> compile_json_schema(const OrderedJson& schema, const CompileOptions& options) {
  DSV4_RETURN_IF_ERROR(check_layout(options.layout));
  Result<JsonLayout> layout = layout_of(schema, options.layout);
  if (!layout.ok()) return layout.status();
  DSV4_RETURN_IF_ERROR(check_json_depth(schema, "schema /"));
  Result<Draft> draft = draft_of(schema);
  if (!draft.ok()) return draft.status();
  Compiler c(schema, *draft, options.strict);
  c.grammar.layout = *layout;
  Result<int32_t> root = c.compile(schema, "");
  if (!root.ok()) return root.status();
  c.grammar.root = *root;
  DSV4_RETURN_IF_ERROR(c.check_one_of(c.grammar.root));
  if (!options.strict) DSV4_RETURN_IF_ERROR(c.relax_readings());
  DSV4_RETURN_IF_ERROR(finish(c.grammar, "schema /"));
  return std::move(c.grammar);
}

Result<Grammar> compile_tool_call(const std::vector<ToolSpec>& tools, const JsonLayout& layout) {
  if (tools.empty()) return Status::error("tool_choice: no tool to call");
  DSV4_RETURN_IF_ERROR(check_layout(layout));
  const Json none;
  Compiler c(none, Draft::k2020_12, true);
  c.grammar.layout = layout;
  Node root;
  root.kind = Kind::kAnyOf;
  for (const ToolSpec& t : tools) {
    DSV4_RETURN_IF_ERROR(check_json_depth(t.parameters, "tools " + t.name + " parameters"));
    Result<Draft> draft = draft_of(t.parameters);
    if (!draft.ok()) return draft.status().with_context("tools " + t.name + " parameters");
    Compiler tool(t.parameters, *draft, true);  // its $refs resolve in its own schema
    tool.grammar = std::move(c.grammar);
    Result<int32_t> params = tool.dsml_params(t.parameters, "tools " + t.name + " parameters");
    if (!params.ok()) return params.status();
    DSV4_RETURN_IF_ERROR(tool.check_one_of(*params));
    Node seq;
    seq.kind = Kind::kSequence;
    seq.sequence = {tool.text("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"" + t.name + "\">\n"), *params,
                    tool.text("\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>")};
    root.alternatives.push_back(tool.add(std::move(seq)));
    c.grammar = std::move(tool.grammar);
  }
  c.grammar.root = c.add(std::move(root));
  DSV4_RETURN_IF_ERROR(finish(c.grammar, "tool_choice: the parameters"));
  return std::move(c.grammar);
}

Grammar any_object_grammar(const JsonLayout& layout) {
  CompileOptions options;
  options.layout = layout;
  Result<Grammar> g = compile_json_schema(Json{{"type", "object"}}, options);
  return std::move(*g);
}

}  // namespace dsv4::grammar
