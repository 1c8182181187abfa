#include "grammar/grammar_analysis.h"

#include <algorithm>
#include <bitset>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/text_constraint.h"

namespace dsv4::grammar {
namespace {

constexpr int kMaxDisjointDepth = 4;       // nested discriminating properties followed
constexpr size_t kMaxConcrete = 64;        // concrete branches of one node compared
constexpr int64_t kRegexProofCost = 4096;  // budget one pattern comparison takes (an automaton product)

int32_t depth_of(const Node& n, const std::vector<int32_t>& d, int32_t inf) {
  int32_t v = inf;
  switch (n.kind) {
    case Kind::kString:
    case Kind::kNumber:
    case Kind::kInteger:
    case Kind::kLiteral:
    case Kind::kRawString:
    case Kind::kText: return 0;
    case Kind::kArray:  // its first min_items items, each of the tuple's or `items`
      v = 1;
      for (int64_t i = 0; i < n.min_items && i <= static_cast<int64_t>(n.prefix.size()); ++i)
        v = std::max(v, 1 + d[i < static_cast<int64_t>(n.prefix.size()) ? n.prefix[i] : n.items]);
      return v;
    case Kind::kObject:
    case Kind::kDsmlParams:
      v = n.open && n.min_properties > 0 ? 1 + d[n.values] : 1;
      for (size_t k = 0; k < n.properties.size(); ++k) {  // minProperties: any property may be needed
        const Property& p = n.properties[k];
        if (!p.required && n.min_properties == 0) continue;
        v = std::max(v, 1 + d[p.node]);
        for (size_t j = 0; k < n.needs.size() && j < n.properties.size(); ++j)  // dependentRequired
          if (n.needs[k] >> j & 1) v = std::max(v, 1 + d[n.properties[j].node]);
      }
      return v;
    case Kind::kAnyOf:
      for (int32_t a : n.alternatives) v = std::min(v, d[a]);
      return v;
    case Kind::kSequence:
      v = 1;
      for (int32_t item : n.sequence) v = std::max(v, 1 + d[item]);
      return v;
  }
  return v;
}

// The non-anyOf nodes a node stands for; false when there are too many to compare.
bool concrete(const Grammar& g, int32_t node, std::vector<int32_t>& out) {
  std::vector<int32_t> pending = {node}, seen;
  while (!pending.empty()) {
    const int32_t k = pending.back();
    pending.pop_back();
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
    seen.push_back(k);
    if (seen.size() > kMaxConcrete) return false;
    const Node& n = g.nodes[k];
    if (n.kind == Kind::kAnyOf) pending.insert(pending.end(), n.alternatives.begin(), n.alternatives.end());
    else out.push_back(k);
  }
  return true;
}

}  // namespace

namespace {

using ByteSet = std::bitset<256>;

// The bytes a value of a concrete node may begin with (all: a DSML node or a sequence).
ByteSet first_bytes(const Node& n) {
  ByteSet b;
  switch (n.kind) {
    case Kind::kString: b.set('"'); break;
    case Kind::kNumber:
    case Kind::kInteger:
      b.set('-');
      for (int c = '0'; c <= '9'; ++c) b.set(static_cast<size_t>(c));
      break;
    case Kind::kLiteral:
      for (const std::string& t : n.literals)
        if (!t.empty()) b.set(static_cast<uint8_t>(t[0]));
      break;
    case Kind::kObject: b.set('{'); break;
    case Kind::kArray: b.set('['); break;
    default: b.set(); break;
  }
  return b;
}

// The readings in one value of an open object: under a KeyAutomaton each key's label decides its
// value's node (KeyAutomaton::label_value; Node::values is unused then).
int32_t open_value_readings(const Grammar& g, const Node& n, const std::vector<int32_t>& r) {
  if (n.keys < 0) return r[n.values];
  int32_t v = 0;
  for (int32_t value : g.key_automata[n.keys]->label_value) v = std::max(v, r[value]);
  return v;
}

// The readings inside one reading of a concrete node's value: its children open one at a time.
int32_t inner_readings(const Grammar& g, const Node& n, const std::vector<int32_t>& r) {
  int32_t v = 1;
  if (n.kind == Kind::kObject && n.open) v = std::max(v, open_value_readings(g, n, r));
  for (const Property& p : n.properties) v = std::max(v, r[p.node]);
  for (int32_t x : n.prefix) v = std::max(v, r[x]);
  if (n.kind == Kind::kArray && n.items >= 0) v = std::max(v, r[n.items]);
  for (int32_t x : n.sequence) v = std::max(v, r[x]);
  return v;
}

// A listed object's first required property whose value is one constant (through $ref hops):
// where it comes before a key, the object is read at that key only if that constant was read.
struct Discriminator {
  int32_t position = -1;
  std::string key, value;
};

Discriminator discriminator(const Grammar& g, const Node& n) {
  for (size_t k = 0; k < n.properties.size(); ++k) {
    if (!n.properties[k].required) continue;
    int32_t v = n.properties[k].node;
    for (int hop = 0; hop < kMaxSchemaDepth && g.nodes[v].kind == Kind::kAnyOf && g.nodes[v].alternatives.size() == 1;
         ++hop)
      v = g.nodes[v].alternatives[0];
    if (g.nodes[v].kind == Kind::kLiteral && g.nodes[v].literals.size() == 1)
      return Discriminator{static_cast<int32_t>(k), n.properties[k].key, g.nodes[v].literals[0]};
  }
  return Discriminator{};
}

// The readings in the values of one key over an anyOf's objects: those read there only after a
// discriminator, grouped by its key and constant (one constant per key is read, so of one key's
// groups one is live), and the rest.
struct KeyReadings {
  int32_t plain = 0;
  std::map<std::string, std::map<std::string, int32_t>> by_const;
  int32_t total() const {
    int32_t sum = plain;
    for (const auto& [key, groups] : by_const) {
      int32_t most = 0;
      for (const auto& [value, readings] : groups) most = std::max(most, readings);
      sum += most;
    }
    return sum;
  }
};

// The readings of an anyOf's value, the max over its first bytes. Scalars that begin alike are one
// reading each. Objects: their readings are all at the same key (the bytes read are the same), so
// inside a value, the sum over the objects that have that key (open ones have every key) of that
// value's readings (KeyReadings), and between values one each. Arrays: at item i, the sum of item i's readings.
// Other kinds (DSML, sequences) count their readings on every byte.
int32_t alternatives_readings(const Grammar& g, const std::vector<int32_t>& concrete, const std::vector<ByteSet>& first,
                              const std::vector<int32_t>& r) {
  int32_t per_byte[256] = {};
  int32_t n_objects = 0, n_arrays = 0, open_values = 0, past_prefix = 0;
  std::map<std::string, KeyReadings> at_key;  // listed key -> readings in its values
  size_t longest_prefix = 0;
  for (int32_t c : concrete)
    if (g.nodes[c].kind == Kind::kArray) longest_prefix = std::max(longest_prefix, g.nodes[c].prefix.size());
  std::vector<int32_t> at_item(longest_prefix, 0);  // prefix position -> readings in its items
  for (int32_t c : concrete) {
    const Node& n = g.nodes[c];
    if (n.kind == Kind::kObject) {
      ++n_objects;
      if (n.open) open_values += open_value_readings(g, n, r);
      const Discriminator d = discriminator(g, n);
      for (size_t k = 0; k < n.properties.size(); ++k) {
        KeyReadings& at = at_key[n.properties[k].key];
        const int32_t readings = r[n.properties[k].node];
        if (d.position >= 0 && static_cast<int32_t>(k) > d.position) at.by_const[d.key][d.value] += readings;
        else at.plain += readings;
      }
    } else if (n.kind == Kind::kArray) {  // items is always set (any value where absent)
      ++n_arrays;
      for (size_t i = 0; i < at_item.size(); ++i) at_item[i] += r[i < n.prefix.size() ? n.prefix[i] : n.items];
      past_prefix += r[n.items];
    } else {
      const int32_t each = first[c].all() ? r[c] : 1;
      for (size_t b = 0; b < 256; ++b) per_byte[b] += first[c][b] ? each : 0;
    }
  }
  int32_t objects = std::max(n_objects, open_values), arrays = std::max(n_arrays, past_prefix);
  for (const auto& [key, at] : at_key) objects = std::max(objects, at.total() + open_values);
  for (int32_t readings : at_item) arrays = std::max(arrays, readings);
  per_byte[static_cast<uint8_t>('{')] += objects;
  per_byte[static_cast<uint8_t>('[')] += arrays;
  return *std::max_element(std::begin(per_byte), std::end(per_byte));
}

}  // namespace

bool expand_alternatives(const Grammar& g, int32_t node, std::vector<int32_t>& concrete) {
  std::vector<int32_t> pending = {node}, seen = {node};
  while (!pending.empty()) {
    const int32_t k = pending.back();
    pending.pop_back();
    const Node& n = g.nodes[k];
    if (n.kind != Kind::kAnyOf) {
      concrete.push_back(k);
      continue;
    }
    for (auto a = n.alternatives.rbegin(); a != n.alternatives.rend(); ++a) {
      if (std::find(seen.begin(), seen.end(), *a) != seen.end()) continue;
      if (seen.size() >= static_cast<size_t>(kMaxExpanded)) return false;
      seen.push_back(*a);
      pending.push_back(*a);
    }
  }
  return true;
}

Status check_readings(const Grammar& g, const std::string& what) {
  Result<std::vector<int32_t>> r = node_readings(g, what);
  if (!r.ok()) return r.status();
  const int32_t root = (*r)[g.root];
  if (root > kMaxStacks)
    return Status::errorf("{}: a value may be read {}{} ways at once (anyOf branches, type lists and the tools of a "
                          "forced call that begin alike, counted across nested values), more than the {} the matcher "
                          "follows", what, root >= kMaxCountedReadings ? "at least " : "", root, kMaxStacks);
  return Status();
}

Result<std::vector<int32_t>> node_readings(const Grammar& g, const std::string& what) {
  const auto n_nodes = static_cast<int32_t>(g.nodes.size());
  std::vector<std::vector<int32_t>> concrete(g.nodes.size());
  std::vector<ByteSet> first(g.nodes.size());
  for (int32_t k = 0; k < n_nodes; ++k) {
    if (g.nodes[k].kind != Kind::kAnyOf) {
      first[k] = first_bytes(g.nodes[k]);
    } else if (!expand_alternatives(g, k, concrete[k])) {
      return Status::errorf("{}: a value's start expands more than {} anyOf nodes and branches ($refs followed)", what,
                            kMaxExpanded);
    }
  }
  // Least fixed point from 0, capped (to name the count): monotone, so it ends.
  constexpr int32_t kCap = kMaxCountedReadings;
  std::vector<int32_t> r(g.nodes.size(), 0);
  int64_t work = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t k = 0; k < n_nodes; ++k) {
      int32_t v = 0;
      if (g.nodes[k].kind != Kind::kAnyOf) {
        v = inner_readings(g, g.nodes[k], r);
      } else {
        v = alternatives_readings(g, concrete[k], first, r);
        work += 256 * static_cast<int64_t>(concrete[k].size());
      }
      v = std::min(v, kCap);
      if (v > r[k]) {
        r[k] = v;
        changed = true;
      }
    }
    if (work > kMaxReadingsWork)
      return Status::errorf("{}: counting the readings the matcher follows takes more than {} steps", what,
                            kMaxReadingsWork);
  }
  return r;
}

namespace {

int64_t cp_count(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Whether a literal value may match a node that is not a literal (as its schema reads: a
// format's automaton is a subset of the format, so only a pattern's proves a mismatch).
bool literal_may_match(const Grammar& g, const nlohmann::json& v, const Node& n) {
  switch (n.kind) {
    case Kind::kString: {
      if (!v.is_string()) return false;
      const std::string& text = v.get_ref<const std::string&>();
      const int64_t len = cp_count(text);
      if (len < n.min_length || (n.max_length >= 0 && len > n.max_length)) return false;
      return n.regex < 0 || !n.regex_exact || matches_utf8(*g.regexes[n.regex], text);
    }
    case Kind::kNumber: return v.is_number();
    case Kind::kInteger:
      return v.is_number_integer() || v.is_number_unsigned() ||
             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    case Kind::kObject: return v.is_object();
    case Kind::kArray: return v.is_array();
    default: return true;
  }
}

// One disjointness proof: the literal values parsed once per node, and the work it may spend.
struct Proof {
  const Grammar& g;
  int64_t& budget;
  std::map<int32_t, std::vector<nlohmann::json>> values;

  const std::vector<nlohmann::json>& literals(int32_t node) {
    auto it = values.find(node);
    if (it != values.end()) return it->second;
    std::vector<nlohmann::json>& v = values[node];
    for (const std::string& t : g.nodes[node].literals) v.push_back(nlohmann::json::parse(t));
    budget -= static_cast<int64_t>(v.size());
    return v;
  }
  bool disjoint(int32_t a, int32_t b, int depth);
  bool disjoint_objects(const Node& x, const Node& y, int depth);
  bool excludes(const Node& x, const Node& y, int depth);
  bool disjoint_strings(const Node& x, const Node& y);
  bool disjoint_arrays(const Node& x, const Node& y, int depth);
  bool disjoint_concrete(int32_t a, int32_t b, int depth);
};

// The most items an array's schema allows (−1: unbounded). A uniqueItems array's maxItems may be
// the generation's bound (hashed items), not the schema's: unbounded.
int64_t schema_max_items(const Node& n) { return n.unique || n.unique_hashed ? -1 : n.max_items; }

// Whether no array has both item counts, or some position both must fill takes disjoint schemas
// (prefixItems or items; not a uniqueItems array's items, which may be a generation subset).
bool Proof::disjoint_arrays(const Node& x, const Node& y, int depth) {
  const int64_t x_max = schema_max_items(x), y_max = schema_max_items(y);
  if ((x_max >= 0 && x_max < y.min_items) || (y_max >= 0 && y_max < x.min_items)) return true;
  if (x.unique || x.unique_hashed || y.unique || y.unique_hashed || depth >= kMaxDisjointDepth) return false;
  constexpr int64_t kMaxPositions = 8;  // positions compared
  const int64_t filled = std::min(std::max(x.min_items, y.min_items), kMaxPositions);
  auto at = [](const Node& n, int64_t i) { return i < static_cast<int64_t>(n.prefix.size()) ? n.prefix[i] : n.items; };
  for (int64_t i = 0; i < filled; ++i)
    if (disjoint(at(x, i), at(y, i), depth + 1)) return true;
  return false;
}

// Whether no string matches both: lengths that cannot meet, or patterns (not formats: their
// automata are subsets) with no common string of a length both allow.
bool Proof::disjoint_strings(const Node& x, const Node& y) {
  const int64_t lo = std::max(x.min_length, y.min_length);
  const int64_t hi = x.max_length < 0   ? y.max_length
                     : y.max_length < 0 ? x.max_length
                                        : std::min(x.max_length, y.max_length);
  if (hi >= 0 && hi < lo) return true;
  if ((x.regex < 0 && y.regex < 0) || (x.regex >= 0 && !x.regex_exact) || (y.regex >= 0 && !y.regex_exact))
    return false;
  budget -= kRegexProofCost;
  if (budget < 0) return false;
  const Regex& a = *g.regexes[x.regex >= 0 ? x.regex : y.regex];
  if (x.regex < 0 || y.regex < 0) return a.start() < 0 || !a.accepting_length_in(a.start(), lo, hi);
  Result<Regex> both = intersect_regex(a, *g.regexes[y.regex]);
  if (!both.ok()) return false;  // beyond the automaton's bounds: not proven
  return both->start() < 0 || !both->accepting_length_in(both->start(), lo, hi);
}

bool schema_requires(const Property& p) { return p.required && !p.generated_only; }

// Whether gen, a listed object (it generates only its listed keys), never has a key that
// `schema` requires: then no value of gen satisfies schema.
bool lacks_required(const Node& gen, const Node& schema) {
  if (gen.open) return false;
  for (const Property& q : schema.properties) {
    if (!schema_requires(q)) continue;
    bool listed = false;
    for (const Property& p : gen.properties) listed |= p.key == q.key;
    if (!listed) return true;
  }
  return false;
}

const Property* find_property(const Node& n, const std::string& key) {
  for (const Property& p : n.properties)
    if (p.key == key) return &p;
  return nullptr;
}

// Whether no value x generates satisfies y's schema: y requires a key that x never generates
// (x is listed) or generates only with values disjoint from y's; or x always writes a key that
// y does not allow (y closed) or allows only with values disjoint from x's.
bool Proof::excludes(const Node& x, const Node& y, int depth) {
  const bool deeper = depth < kMaxDisjointDepth;
  for (const Property& q : y.properties) {
    if (!schema_requires(q)) continue;
    const Property* p = find_property(x, q.key);
    if (p == nullptr ? !x.open : deeper && disjoint(p->node, q.node, depth + 1)) return true;
  }
  for (const Property& p : x.properties) {
    if (!p.required) continue;
    const Property* q = find_property(y, p.key);
    if (q == nullptr ? y.closed : deeper && disjoint(p.node, q->node, depth + 1)) return true;
  }
  return false;
}

bool Proof::disjoint_objects(const Node& x, const Node& y, int depth) {
  budget -= static_cast<int64_t>(x.properties.size() * y.properties.size());
  if (budget < 0) return false;
  return excludes(x, y, depth) && excludes(y, x, depth);
}

bool Proof::disjoint_concrete(int32_t a, int32_t b, int depth) {
  const Node &x = g.nodes[a], &y = g.nodes[b];
  if (x.kind == Kind::kLiteral && y.kind == Kind::kLiteral) {
    const std::vector<nlohmann::json>& u = literals(a);
    const std::vector<nlohmann::json>& v = literals(b);
    budget -= static_cast<int64_t>(u.size() * v.size());
    if (budget < 0) return false;
    for (const nlohmann::json& p : u)
      for (const nlohmann::json& q : v)
        if (p == q) return false;
    return true;
  }
  if (x.kind == Kind::kLiteral || y.kind == Kind::kLiteral) {
    const int32_t lit = x.kind == Kind::kLiteral ? a : b;
    const Node& other = x.kind == Kind::kLiteral ? y : x;
    for (const nlohmann::json& v : literals(lit))
      if (literal_may_match(g, v, other)) return false;
    return budget >= 0;
  }
  auto numeric = [](Kind k) { return k == Kind::kNumber || k == Kind::kInteger; };
  if (numeric(x.kind) && numeric(y.kind)) return false;
  if (x.kind != y.kind) return true;
  if (x.kind == Kind::kString) return disjoint_strings(x, y);
  if (x.kind == Kind::kObject) return disjoint_objects(x, y, depth);
  if (x.kind == Kind::kArray) return disjoint_arrays(x, y, depth);
  return false;
}

bool Proof::disjoint(int32_t a, int32_t b, int depth) {
  std::vector<int32_t> xs, ys;
  if (!concrete(g, a, xs) || !concrete(g, b, ys)) return false;
  budget -= static_cast<int64_t>(xs.size() * ys.size());
  if (budget < 0) return false;
  for (int32_t x : xs)
    for (int32_t y : ys)
      if (!disjoint_concrete(x, y, depth)) return false;
  return true;
}

}  // namespace

namespace {

// The optional property of x (listed) named by a key y requires, where dropping it leaves x's
// minProperties reachable; −1: none.
int32_t droppable_required_of(const Node& x, const Node& y) {
  if (x.open || x.min_properties >= static_cast<int64_t>(x.properties.size())) return -1;
  for (const Property& q : y.properties) {
    if (!schema_requires(q)) continue;
    for (size_t k = 0; k < x.properties.size(); ++k)
      if (x.properties[k].key == q.key && !x.properties[k].required) return static_cast<int32_t>(k);
  }
  return -1;
}

// The optional property of x (listed) whose key y, closed, does not allow, where x's
// maxProperties leaves room to require it; −1: none. Requiring it in x's generation leaves x
// values y rejects ({"properties": {"except": ..}} beside {"properties": {"only": ..}}, both
// closed: {} matches both).
int32_t requirable_unlisted_of(const Node& x, const Node& y) {
  if (x.open || !y.closed) return -1;
  int64_t required = 0;
  for (const Property& p : x.properties) required += p.required;
  if (x.max_properties >= 0 && required >= x.max_properties) return -1;
  for (size_t k = 0; k < x.properties.size(); ++k)
    if (!x.properties[k].required && find_property(y, x.properties[k].key) == nullptr) return static_cast<int32_t>(k);
  return -1;
}

}  // namespace

bool separate_objects(Grammar& g, int32_t a, int32_t b, int64_t& budget) {
  std::vector<int32_t> xs, ys;
  if (!concrete(g, a, xs) || !concrete(g, b, ys)) return false;
  bool changed = false;
  for (int32_t x : xs)
    for (int32_t y : ys) {
      Node &nx = g.nodes[x], &ny = g.nodes[y];
      if (x == y || nx.kind != Kind::kObject || ny.kind != Kind::kObject) continue;
      budget -= static_cast<int64_t>(nx.properties.size() * ny.properties.size());
      if (budget < 0) return changed;
      for (auto [from, other] : {std::pair{&nx, &ny}, std::pair{&ny, &nx}}) {
        if (lacks_required(*from, *other)) continue;
        const int32_t k = droppable_required_of(*from, *other);
        if (k < 0) continue;
        from->properties.erase(from->properties.begin() + k);
        changed = true;
      }
      for (auto [from, other] : {std::pair{&nx, &ny}, std::pair{&ny, &nx}}) {
        Proof proof{g, budget, {}};
        if (proof.excludes(*from, *other, 0)) continue;
        const int32_t k = requirable_unlisted_of(*from, *other);
        if (k < 0) continue;
        from->properties[static_cast<size_t>(k)].required = true;
        from->properties[static_cast<size_t>(k)].generated_only = true;
        changed = true;
      }
    }
  return changed;
}

namespace {

// A oneOf branch narrow_strings can narrow: one concrete kString whose regex is exactly its
// pattern (or that has none: any string), or one kLiteral of strings only; `language` holds its
// strings (a string's lengths aside).
struct StringBranch {
  int32_t node = -1;
  std::shared_ptr<const Regex> language;
};

bool string_branch(const Grammar& g, int32_t node, StringBranch& out) {
  std::vector<int32_t> xs;
  if (!concrete(g, node, xs) || xs.size() != 1) return false;
  const Node& n = g.nodes[xs[0]];
  out.node = xs[0];
  if (n.kind == Kind::kString && n.regex >= 0 && n.regex_exact) {
    out.language = g.regexes[n.regex];
    return true;
  }
  if (n.kind == Kind::kString && n.regex < 0) {
    Result<Regex> any = compile_regex("");  // unanchored: every string
    if (!any.ok()) return false;
    out.language = std::make_shared<const Regex>(std::move(*any));
    return true;
  }
  if (n.kind != Kind::kLiteral) return false;
  std::vector<std::string> strings;
  for (const std::string& t : n.literals) {
    const nlohmann::json v = nlohmann::json::parse(t);
    if (!v.is_string()) return false;
    strings.push_back(v.get<std::string>());
  }
  Result<Grammar> choice = compile_choice_output(strings);  // the literals, whole
  if (!choice.ok()) return false;
  out.language = choice->regexes[0];
  return true;
}

// Branch i's node narrowed to `re` (its strings that no overlapping branch has): a copy of a
// string node, or a literal node of the literals re matches; −1 when nothing is left.
int32_t narrowed_node(Grammar& g, const StringBranch& b, Regex re) {
  Node copy = g.nodes[b.node];  // a copy: elsewhere the node keeps its values
  if (copy.kind == Kind::kString) {
    if (re.start() < 0 || !re.accepting_length_in(re.start(), copy.min_length, copy.max_length)) return -1;
    g.regexes.push_back(std::make_shared<const Regex>(std::move(re)));
    copy.regex = static_cast<int32_t>(g.regexes.size()) - 1;
    copy.regex_exact = false;  // a subset of its pattern now
  } else {
    std::vector<std::string> kept;  // sorted still (sorted_texts.h)
    for (const std::string& t : copy.literals)
      if (matches_utf8(re, nlohmann::json::parse(t).get<std::string>())) kept.push_back(t);
    if (kept.empty()) return -1;
    copy.literals = std::move(kept);
  }
  g.nodes.push_back(std::move(copy));
  return static_cast<int32_t>(g.nodes.size()) - 1;
}

}  // namespace

bool narrow_strings(Grammar& g, int32_t one_of, const std::vector<std::pair<size_t, size_t>>& overlapping,
                    int64_t& budget) {
  const std::vector<int32_t> branches = g.nodes[one_of].alternatives;
  std::map<size_t, std::vector<size_t>> against;  // branch -> the branches it overlaps
  std::map<size_t, StringBranch> of;
  for (const auto& [i, j] : overlapping) {
    for (size_t k : {i, j})
      if (!of.count(k) && !string_branch(g, branches[k], of[k])) return false;
    if (of[i].node == of[j].node) return false;
    against[i].push_back(j);
    against[j].push_back(i);
  }
  if (g.nodes.size() + against.size() > static_cast<size_t>(kMaxNodes)) return false;
  std::vector<std::pair<size_t, Regex>> narrowed;  // from the languages as given, then assigned
  for (const auto& [i, others] : against) {
    Result<Regex> re = *of[i].language;
    for (size_t j : others) {
      budget -= kRegexProofCost;
      if (budget < 0) return false;
      const Regex& other = *of[j].language;
      re = combine_regex(*re, other, RegexOp::kAndNot, re->pattern() + " and not " + other.pattern());
      if (!re.ok()) return false;  // beyond the automaton's bounds
    }
    narrowed.emplace_back(i, std::move(*re));
  }
  // A branch left without a value is dropped: each of its values matches another branch too.
  std::vector<int32_t> alternatives = branches;
  for (auto& [i, re] : narrowed) alternatives[i] = narrowed_node(g, of[i], std::move(re));
  alternatives.erase(std::remove(alternatives.begin(), alternatives.end(), -1), alternatives.end());
  if (alternatives.empty()) return false;
  g.nodes[one_of].alternatives = std::move(alternatives);
  return true;
}

std::vector<bool> reachable(const Grammar& g, int32_t from) {
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<int32_t> pending = {from};
  auto visit = [&](int32_t k) {
    if (k >= 0 && !seen[static_cast<size_t>(k)]) pending.push_back(k);
  };
  while (!pending.empty()) {
    const int32_t k = pending.back();
    pending.pop_back();
    if (seen[static_cast<size_t>(k)]) continue;
    seen[static_cast<size_t>(k)] = true;
    const Node& n = g.nodes[static_cast<size_t>(k)];
    visit(n.values);
    visit(n.items);
    if (n.keys >= 0)
      for (int32_t v : g.key_automata[static_cast<size_t>(n.keys)]->label_value) visit(v);
    for (const Property& p : n.properties) visit(p.node);
    for (const auto* list : {&n.prefix, &n.alternatives, &n.sequence})
      for (int32_t c : *list) visit(c);
  }
  return seen;
}

Result<std::vector<int32_t>> min_depth(const Grammar& g) {
  constexpr int32_t kInf = INT32_MAX / 2;
  std::vector<int32_t> d(g.nodes.size(), kInf);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const int32_t v = std::min(depth_of(g.nodes[i], d, kInf), kInf);
      if (v < d[i]) {
        d[i] = v;
        changed = true;
      }
    }
  }
  if (d[g.root] >= kInf) return Status::error("schema /: no finite JSON value satisfies it (a $ref cycle)");
  return d;
}

bool provably_disjoint(const Grammar& g, int32_t a, int32_t b, int64_t& budget) {
  Proof proof{g, budget, {}};
  return proof.disjoint(a, b, 0);
}

}  // namespace dsv4::grammar
