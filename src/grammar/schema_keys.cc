#include "grammar/schema_keys.h"

#include <algorithm>
#include <set>

#include "grammar/formats.h"

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

constexpr int64_t kMaxNameLength = 1024;  // propertyNames' maxLength/minLength made an automaton

Status key_fail(const std::string& path, const std::string& what) {
  return Status::errorf("schema {}: {}", path.empty() ? "/" : path, what);
}

// A count keyword of propertyNames (a non-negative integer, integral floats too).
Result<int64_t> name_count(const Json& s, const char* key, const std::string& path, int64_t fallback) {
  const auto it = s.find(key);
  if (it == s.end()) return fallback;
  if (it->is_number()) {
    const double v = it->get<double>();
    if (v >= 0 && v <= 9007199254740992.0 && static_cast<double>(static_cast<int64_t>(v)) == v)
      return static_cast<int64_t>(v);
  }
  return key_fail(path, fmt::format("propertyNames {} must be a non-negative integer", key));
}

// a & b, either possibly null.
Result<std::shared_ptr<const Regex>> both(std::shared_ptr<const Regex> a, Result<Regex> b) {
  if (!b.ok()) return b.status();
  if (!a) return std::make_shared<const Regex>(std::move(*b));
  Result<Regex> r = intersect_regex(*a, *b);
  if (!r.ok()) return r.status();
  return std::make_shared<const Regex>(std::move(*r));
}

// propertyNames' pattern, format, minLength and maxLength as one automaton (null: none given).
Status names_automaton(const Json& names, ObjectKeyRules& r, const std::string& path) {
  const std::string at = path + "/propertyNames";
  if (const auto p = names.find("pattern"); p != names.end()) {
    if (!p->is_string()) return key_fail(at, "pattern must be a string");
    Result<std::shared_ptr<const Regex>> re = both(r.names_re, compile_regex(p->get<std::string>()));
    if (!re.ok()) return key_fail(at, fmt::format("keyword 'pattern': {}", re.message()));
    r.names_re = std::move(*re);
  }
  int64_t max_length = -1;
  if (const auto f = names.find("format"); f != names.end()) {
    if (!f->is_string()) return key_fail(at, "format must be a string");
    // Only string formats constrain a key; an unknown format is an annotation.
    if (format_use(f->get<std::string>()) == FormatUse::kString) {
      Result<const Regex*> fr = format_regex(f->get<std::string>());
      if (!fr.ok()) return key_fail(at, fmt::format("keyword 'format': {}", fr.message()));
      Result<std::shared_ptr<const Regex>> re = both(r.names_re, Result<Regex>(**fr));
      if (!re.ok()) return key_fail(at, fmt::format("keyword 'format': {}", re.message()));
      r.names_re = std::move(*re);
      max_length = format_max_length(f->get<std::string>());
    }
  }
  Result<int64_t> lo = name_count(names, "minLength", at, 0), hi = name_count(names, "maxLength", at, -1);
  if (!lo.ok()) return lo.status();
  if (!hi.ok()) return hi.status();
  if (*hi >= 0 && (max_length < 0 || *hi < max_length)) max_length = *hi;
  if (*lo > 0 || max_length >= 0) {
    if (*lo > kMaxNameLength || max_length > kMaxNameLength)
      return key_fail(at, fmt::format("keyword 'minLength'/'maxLength' above {} is not supported", kMaxNameLength));
    if (max_length >= 0 && max_length < *lo) {
      r.none = true;
      return Status();
    }
    const std::string lengths = fmt::format("^[\\s\\S]{{{},{}}}$", *lo, max_length < 0 ? "" : std::to_string(max_length));
    Result<std::shared_ptr<const Regex>> re = both(r.names_re, compile_regex(lengths));
    if (!re.ok()) return key_fail(at, fmt::format("keyword 'maxLength': {}", re.message()));
    r.names_re = std::move(*re);
  }
  if (r.names_re && r.names_re->start() < 0) r.none = true;
  return Status();
}

// propertyNames: a string schema of the keywords above (true/false too).
Status read_names(const Json& names, ObjectKeyRules& r, const std::string& path) {
  const std::string at = path + "/propertyNames";
  if (names.is_boolean()) {
    r.none = !names.get<bool>();
    return Status();
  }
  if (!names.is_object()) return key_fail(at, "a schema must be an object or a boolean");
  static const std::set<std::string> kNameKeywords = {"type", "pattern", "format", "minLength", "maxLength",
                                                      "enum", "const", "$defs", "definitions"};
  for (auto it = names.begin(); it != names.end(); ++it)
    if (!kNameKeywords.count(it.key()))
      return key_fail(at, fmt::format("keyword '{}' is not supported in propertyNames (pattern, format, minLength, "
                                      "maxLength, enum, const and type string only)", it.key()));
  if (const auto t = names.find("type"); t != names.end()) {
    const bool string = *t == Json("string") || (t->is_array() && std::find(t->begin(), t->end(), Json("string")) != t->end());
    if (!string) r.none = true;  // keys are strings: no key is valid
  }
  DSV4_RETURN_IF_ERROR(names_automaton(names, r, path));
  for (const char* k : {"enum", "const"}) {
    const auto it = names.find(k);
    if (it == names.end()) continue;
    if (std::string(k) == "enum" && !it->is_array()) return key_fail(at, "enum must be a non-empty array");
    std::vector<std::string> strings;
    for (const Json& v : std::string(k) == "enum" ? *it : Json::array({*it}))
      if (v.is_string() && (!r.names_listed || std::count(r.names.begin(), r.names.end(), v.get<std::string>())))
        strings.push_back(v.get<std::string>());
    r.names = std::move(strings);
    r.names_listed = true;
  }
  if (r.names_listed) {
    std::vector<std::string> kept;
    for (const std::string& n : r.names)
      if ((!r.names_re || matches_utf8(*r.names_re, n)) && std::find(kept.begin(), kept.end(), n) == kept.end())
        kept.push_back(n);
    r.names = std::move(kept);
    if (r.names.empty()) r.none = true;
  }
  return Status();
}

Status read_patterns(const Json& s, ObjectKeyRules& r, const std::string& path) {
  const auto pp = s.find("patternProperties");
  if (pp == s.end()) return Status();
  if (!pp->is_object()) return key_fail(path, "patternProperties must be an object");
  if (pp->size() > static_cast<size_t>(kMaxPatternProperties))
    return key_fail(path, fmt::format("patternProperties has {} patterns, at most {}", pp->size(),
                                      kMaxPatternProperties));
  for (auto it = pp->begin(); it != pp->end(); ++it) {
    Result<Regex> re = compile_regex(it.key());
    if (!re.ok()) return key_fail(path, fmt::format("patternProperties '{}': {}", it.key(), re.message()));
    r.patterns.push_back({it.key(), &it.value(), std::make_shared<const Regex>(std::move(*re))});
  }
  return Status();
}

Status read_dependent_required(const Json& s, ObjectKeyRules& r, const std::string& path) {
  const auto d = s.find("dependentRequired");
  if (d == s.end()) return Status();
  auto bad = [&] { return key_fail(path, "dependentRequired must be an object of arrays of strings"); };
  if (!d->is_object()) return bad();
  for (auto it = d->begin(); it != d->end(); ++it) {
    if (!it->is_array()) return bad();
    std::vector<std::string> needed;
    for (const Json& name : *it) {
      if (!name.is_string()) return bad();
      if (name.get<std::string>() != it.key()) needed.push_back(name.get<std::string>());
    }
    if (!needed.empty()) r.dependent_required.emplace_back(it.key(), std::move(needed));
  }
  return Status();
}

}  // namespace

bool ObjectKeyRules::name_allowed(const std::string& key) const {
  if (none) return false;
  if (names_listed && std::find(names.begin(), names.end(), key) == names.end()) return false;
  return !names_re || matches_utf8(*names_re, key);
}

uint64_t ObjectKeyRules::matching(const std::string& key) const {
  uint64_t bits = 0;
  for (size_t i = 0; i < patterns.size(); ++i)
    if (matches_utf8(*patterns[i].re, key)) bits |= uint64_t{1} << i;
  return bits;
}

Result<ObjectKeyRules> object_key_rules(const Json& s, const Json* names, const std::string& path) {
  ObjectKeyRules r;
  DSV4_RETURN_IF_ERROR(read_patterns(s, r, path));
  DSV4_RETURN_IF_ERROR(read_dependent_required(s, r, path));
  if (names != nullptr) DSV4_RETURN_IF_ERROR(read_names(*names, r, path));
  return r;
}

}  // namespace dsv4::grammar
