#include "grammar/schema_merge.h"

#include <algorithm>
#include <set>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/schema_literals.h"
#include "grammar/schema_ref.h"

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

const std::set<std::string> kLowerBounds = {"minLength", "minItems", "minimum", "exclusiveMinimum", "minProperties"};
const std::set<std::string> kUpperBounds = {"maxLength", "maxItems", "maximum", "exclusiveMaximum", "maxProperties"};
// Keywords a conjunction leaves as they are (annotations; $defs are reached by absolute $refs).
const std::set<std::string> kPassive = {"$schema", "$id",      "$comment",   "title",    "description", "default",
                                        "examples", "deprecated", "readOnly", "writeOnly", "$defs",    "definitions"};

std::vector<std::string> type_list(const Json& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array())
    for (const Json& x : t)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

// The types both lists allow (integer is within number).
Json type_intersection(const Json& a, const Json& b) {
  const std::vector<std::string> ta = type_list(a), tb = type_list(b);
  auto allows = [](const std::vector<std::string>& ts, const std::string& t) {
    return std::find(ts.begin(), ts.end(), t) != ts.end() ||
           (t == "integer" && std::find(ts.begin(), ts.end(), "number") != ts.end());
  };
  Json out = Json::array();
  for (const std::string& t : ta)
    if (allows(tb, t)) out.push_back(t);
  for (const std::string& t : tb)
    if (t == "integer" && allows(ta, t) && std::find(out.begin(), out.end(), Json(t)) == out.end()) out.push_back(t);
  return out;
}

constexpr size_t kMaxTypes = 7;  // JSON Schema's types

// A pattern that matches (searching, as JSON Schema does) exactly where both a and b match: a
// lookahead at the start tests a, the rest b.
std::string conjunction_pattern(const std::string& a, const std::string& b) {
  return "^(?=[\\s\\S]*?(?:" + a + "))[\\s\\S]*?(?:" + b + ")";
}

// a and b, merged when compiled (lazily: only what is generated is merged).
Json both(const Json& a, const Json& b) {
  if (a == Json(false) || b == Json(false)) return false;
  if (a == Json(true)) return b;
  if (b == Json(true)) return a;
  return Json{{"allOf", Json::array({a, b})}};
}

}  // namespace

Status SchemaMerger::charge(const Json& v, const std::string& path) {
  std::vector<const Json*> pending = {&v};
  while (!pending.empty()) {
    const Json* x = pending.back();
    pending.pop_back();
    if (++copied_ > kMaxMergeValues)
      return Status::errorf("schema {}: merging (allOf, $ref beside keywords) copies more than {} JSON values",
                            path.empty() ? "/" : path, kMaxMergeValues);
    if (x->is_structured())
      for (const Json& c : *x) pending.push_back(&c);
  }
  return Status();
}

Result<Json> SchemaMerger::merge(const Json& a, const Json& b, const std::string& path) {
  return merge_at(a, b, path, 0);
}

Result<Json> SchemaMerger::flatten(const Json& s, const std::string& path) { return expand(s, path, 0); }

// s with the allOf and $ref at its top merged in.
Result<Json> SchemaMerger::expand(const Json& s, const std::string& path, int depth) {
  if (!s.is_object() || (!s.contains("allOf") && !s.contains("$ref"))) return s;
  DSV4_RETURN_IF_ERROR(charge(s, path));
  Json r = s;
  if (const auto all = r.find("allOf"); all != r.end()) {
    if (!all->is_array() || all->empty()) return Status::errorf("schema {}: allOf must be a non-empty array", path);
    if (all->size() > static_cast<size_t>(kMaxAlternatives))
      return Status::errorf("schema {}: allOf has {} schemas, at most {}", path, all->size(), kMaxAlternatives);
    const Json list = std::move(*all);
    r.erase("allOf");
    for (size_t i = 0; i < list.size(); ++i) {
      Result<Json> m = merge_at(r, list[i], path + "/allOf/" + std::to_string(i), depth + 1);
      if (!m.ok()) return m.status();
      r = std::move(*m);
    }
  }
  if (r.is_object() && r.contains("$ref")) {
    if (!r["$ref"].is_string()) return Status::errorf("schema {}: $ref must be a string", path);
    Result<const Json*> target = resolve_local_ref(root_, r["$ref"].get<std::string>());
    if (!target.ok()) return Status::errorf("schema {}: {}", path, target.message());
    r.erase("$ref");
    return merge_at(r, **target, path, depth + 1);
  }
  return r;
}

Result<Json> SchemaMerger::merge_at(const Json& a, const Json& b, const std::string& path, int depth) {
  if (depth > kMaxMergeDepth)
    return Status::errorf("schema {}: merges (allOf, $ref beside keywords) nest more than {} levels", path,
                          kMaxMergeDepth);
  if (++merges_ > kMaxNodes) return Status::errorf("schema {}: more than {} schema merges", path, kMaxNodes);
  if (a.is_boolean() || b.is_boolean()) {
    const Json& other = a.is_boolean() ? b : a;
    const bool flag = a.is_boolean() ? a.get<bool>() : b.get<bool>();
    if (!flag) return Json(false);
    DSV4_RETURN_IF_ERROR(charge(other, path));
    return other;
  }
  if (!a.is_object() || !b.is_object())
    return Status::errorf("schema {}: a schema must be an object or a boolean", path.empty() ? "/" : path);
  Result<Json> ra = reader_ ? reader_(a, path) : Result<Json>(a);
  if (!ra.ok()) return ra.status();
  Result<Json> rb = reader_ ? reader_(b, path) : Result<Json>(b);
  if (!rb.ok()) return rb.status();
  Result<Json> ea = expand(*ra, path, depth + 1);
  if (!ea.ok()) return ea.status();
  Result<Json> eb = expand(*rb, path, depth + 1);
  if (!eb.ok()) return eb.status();
  if (ea->is_boolean() || eb->is_boolean()) return merge_at(*ea, *eb, path, depth + 1);
  Json r = std::move(*ea);
  DSV4_RETURN_IF_ERROR(charge(r, path));
  const bool a_patterns = r.contains("patternProperties");
  for (auto it = eb->begin(); it != eb->end(); ++it) {
    const std::string& k = it.key();
    if (kPassive.count(k) || k == "properties" || k == "additionalProperties") continue;
    DSV4_RETURN_IF_ERROR(merge_keyword(r, k, it.value(), path));
  }
  if (r.contains("properties") || r.contains("additionalProperties") || eb->contains("properties") ||
      eb->contains("additionalProperties")) {
    Json ra = r;  // A as it was (the loop above may have copied B's patternProperties in)
    if (!a_patterns) ra.erase("patternProperties");
    DSV4_RETURN_IF_ERROR(merge_properties(r, ra, *eb, path));
  }
  return r;
}

Status SchemaMerger::merge_keyword(Json& r, const std::string& k, const Json& vb, const std::string& path) {
  auto fail = [&](const std::string& what) { return Status::errorf("schema {}: {}", path.empty() ? "/" : path, what); };
  DSV4_RETURN_IF_ERROR(charge(vb, path));
  const auto it = r.find(k);
  if (it == r.end()) {
    r[k] = vb;
    return Status();
  }
  Json& va = *it;
  if (kLowerBounds.count(k) || kUpperBounds.count(k)) {
    if (!va.is_number() || !vb.is_number()) return fail(fmt::format("{} must be a number", k));
    const double x = va.get<double>(), y = vb.get<double>();
    const bool take_b = kLowerBounds.count(k) ? y > x : y < x;
    if (take_b) va = vb;
  } else if (k == "type") {
    if (va.size() > kMaxTypes || vb.size() > kMaxTypes)
      return fail(fmt::format("type lists more than {} types", kMaxTypes));
    Json t = type_intersection(va, vb);
    if (t.empty())
      return fail(fmt::format("unsatisfiable: the merged schemas share no type ({} and {})",
                              va.dump(-1, ' ', false, Json::error_handler_t::replace),
                              vb.dump(-1, ' ', false, Json::error_handler_t::replace)));
    va = std::move(t);
  } else if (k == "required") {
    if (!va.is_array() || !vb.is_array()) return fail("required must be an array of strings");
    if (va.size() + vb.size() > 2 * static_cast<size_t>(kMaxProperties))
      return fail(fmt::format("required lists more than {} names", 2 * kMaxProperties));
    for (const Json& name : vb)
      if (std::find(va.begin(), va.end(), name) == va.end()) va.push_back(name);
  } else if (k == "enum") {
    if (!va.is_array() || !vb.is_array()) return fail("enum must be a non-empty array");
    if (va.size() * vb.size() > static_cast<size_t>(kMaxMergedEnumPairs))  // each pair compared once
      return fail(fmt::format("merging two enums of {} and {} values compares more than {} pairs", va.size(),
                              vb.size(), kMaxMergedEnumPairs));
    Json common = Json::array();
    for (const Json& x : va)
      if (std::any_of(vb.begin(), vb.end(), [&](const Json& y) { return same_json_value(x, y); })) common.push_back(x);
    if (common.empty()) return fail("unsatisfiable: the merged enums share no value");
    va = std::move(common);
  } else if (k == "const") {
    if (!same_json_value(va, vb)) return fail("unsatisfiable: the merged schemas have different const values");
  } else if (k == "pattern") {  // both: one pattern, exact (regex_lookahead.h)
    if (!va.is_string() || !vb.is_string()) return fail("pattern must be a string");
    for (const Json* p : {static_cast<const Json*>(&va), &vb}) {  // each whole on its own, so that joining keeps both intact
      Result<RegexSyntax> syntax = parse_regex(p->get<std::string>());
      if (!syntax) return fail(syntax.message());
    }
    va = conjunction_pattern(va.get<std::string>(), vb.get<std::string>());
  } else if (k == "uniqueItems") {
    if (!va.is_boolean() || !vb.is_boolean()) return fail("uniqueItems must be a boolean");
    va = va.get<bool>() || vb.get<bool>();
  } else if (k == "items") {
    if (va.is_array() || vb.is_array()) return fail("keyword 'items' as an array (tuples) in a merge is not supported");
    va = both(va, vb);
  } else if (k == "patternProperties") {  // per pattern: both schemas
    if (!va.is_object() || !vb.is_object()) return fail("patternProperties must be an object");
    for (auto p = vb.begin(); p != vb.end(); ++p) va[p.key()] = va.contains(p.key()) ? both(va[p.key()], *p) : *p;
  } else if (k == "anyOf") {  // (a1 | a2) & (b1 | b2) = a1&b1 | a1&b2 | ...
    if (!va.is_array() || !vb.is_array()) return fail("anyOf must be a non-empty array");
    if (va.size() * vb.size() > static_cast<size_t>(kMaxAlternatives))
      return fail(
          fmt::format("merging two anyOf gives {} branches, at most {}", va.size() * vb.size(), kMaxAlternatives));
    Json product = Json::array();
    for (const Json& x : va)
      for (const Json& y : vb) product.push_back(both(x, y));
    va = std::move(product);
  } else if (k == "oneOf") {  // one a_i, and one b_j: exactly one a_i & (oneOf b), as oneOf b holds or not
    if (!va.is_array() || !vb.is_array()) return fail("oneOf must be a non-empty array");
    if (va.size() * vb.size() > static_cast<size_t>(kMaxAlternatives))
      return fail(
          fmt::format("merging two oneOf gives {} branches, at most {}", va.size() * vb.size(), kMaxAlternatives));
    Json nested = Json::array();
    for (const Json& x : va) nested.push_back(Json{{"allOf", Json::array({x, Json{{"oneOf", vb}}})}});
    va = std::move(nested);
  } else if (!same_json_value(va, vb)) {
    return fail(
        fmt::format("keyword '{}' in both schemas of a merge (allOf, $ref beside keywords) is not supported", k));
  }
  return Status();
}

// Per key: (A's property, else A's additionalProperties) and (B's, else B's); the
// additionalProperties of both.
Status SchemaMerger::merge_properties(Json& r, const Json& a, const Json& b, const std::string& path) {
  const Json none = Json::object();
  const Json& pa = a.contains("properties") ? a["properties"] : none;
  const Json& pb = b.contains("properties") ? b["properties"] : none;
  if (!pa.is_object() || !pb.is_object())
    return Status::errorf("schema {}: properties must be an object", path.empty() ? "/" : path);
  const auto xa = a.find("additionalProperties"), xb = b.find("additionalProperties");
  // patternProperties (merged into r, applied to every key when compiled): a key one side's
  // patterns match takes no additionalProperties from that side. A pattern of x that y lacks,
  // beside y's additionalProperties: a key it matches that y does not list takes y's
  // additionalProperties too, folded into the merged pattern's schema; where y lists a key it
  // matches (or the pattern cannot be compiled) that is not exact: refused (relaxed). With y's
  // additionalProperties false, only keys y lists may be present: the pattern's schema goes into
  // the listed keys it matches, and the pattern leaves the merge (`inlined`).
  std::vector<std::string> inlined;
  auto fold = [&](const Json& x, const Json& y, const Json& py, const Json* y_extra) {
    const auto px = x.find("patternProperties");
    if (px == x.end() || !px->is_object() || y_extra == nullptr || *y_extra == Json(true)) return true;
    const auto ys = y.find("patternProperties");
    for (auto it = px->begin(); it != px->end(); ++it) {
      if (ys != y.end() && ys->is_object() && ys->contains(it.key())) continue;
      Result<Regex> re = compile_regex(it.key());
      if (!re.ok()) return false;
      if (*y_extra == Json(false)) {
        inlined.push_back(it.key());
        continue;
      }
      for (auto k = py.begin(); k != py.end(); ++k)
        if (matches_utf8(*re, k.key())) return false;
      Json& merged = r["patternProperties"][it.key()];
      merged = both(merged, *y_extra);
    }
    return true;
  };
  bool exempt = true;  // whether a side's patterns exempt keys from its additionalProperties
  if (!fold(a, b, pb, xb == b.end() ? nullptr : &*xb) || !fold(b, a, pa, xa == a.end() ? nullptr : &*xa)) {
    if (!relax_)
      return Status::errorf("schema {}: keyword 'patternProperties' in one schema of a merge beside "
                            "additionalProperties in the other is not supported (a key the other lists matches a "
                            "pattern)", path.empty() ? "/" : path);
    DSV4_RETURN_IF_ERROR(relax_(path, "patternProperties"));
    r.erase("patternProperties");
    exempt = false;
  }
  Json props = Json::object();
  auto side = [&](const Json& s, const Json& p, const std::string& key, const Json* extra) -> const Json* {
    if (const auto it = p.find(key); it != p.end()) return &*it;
    if (const auto pp = s.find("patternProperties"); exempt && pp != s.end() && pp->is_object())
      for (auto it = pp->begin(); it != pp->end(); ++it) {
        // A pattern the engine cannot take is refused (or relaxed) where the merged object compiles.
        Result<Regex> re = compile_regex(it.key());
        if (re.ok() && matches_utf8(*re, key)) return nullptr;  // the pattern's schema applies when compiled
      }
    return extra;  // nullptr: anything
  };
  std::vector<std::string> keys;
  for (auto it = pa.begin(); it != pa.end(); ++it) keys.push_back(it.key());
  for (auto it = pb.begin(); it != pb.end(); ++it)
    if (!pa.contains(it.key())) keys.push_back(it.key());
  for (const std::string& key : keys) {
    const Json* sa = side(a, pa, key, xa == a.end() ? nullptr : &*xa);
    const Json* sb = side(b, pb, key, xb == b.end() ? nullptr : &*xb);
    props[key] = sa && sb ? both(*sa, *sb) : sa ? *sa : sb ? *sb : Json(true);
  }
  for (const std::string& pattern : inlined) {
    if (!r.contains("patternProperties") || !r["patternProperties"].contains(pattern)) continue;
    Result<Regex> re = compile_regex(pattern);  // compiled in fold() before
    for (const std::string& key : keys)
      if (re.ok() && matches_utf8(*re, key)) props[key] = both(props[key], r["patternProperties"][pattern]);
    r["patternProperties"].erase(pattern);
  }
  if (r.contains("patternProperties") && r["patternProperties"].empty()) r.erase("patternProperties");
  if (!keys.empty()) r["properties"] = std::move(props);
  if (xa != a.end() && xb != b.end()) r["additionalProperties"] = both(*xa, *xb);
  else if (xb != b.end()) r["additionalProperties"] = *xb;
  return Status();
}

}  // namespace dsv4::grammar
