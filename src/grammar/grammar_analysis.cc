#include "grammar/grammar_analysis.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

namespace dsv4::grammar {
namespace {

constexpr int kMaxDisjointDepth = 4;       // nested discriminating properties followed
constexpr size_t kMaxConcrete = 64;        // concrete branches of one node compared

int32_t depth_of(const Node& n, const std::vector<int32_t>& d, int32_t inf) {
  int32_t v = inf;
  switch (n.kind) {
    case Kind::kString:
    case Kind::kNumber:
    case Kind::kInteger:
    case Kind::kLiteral:
    case Kind::kRawString: return 0;
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

int32_t too_many_readings(const Grammar& g, int32_t& readings) {
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (g.nodes[k].kind != Kind::kAnyOf) continue;
    std::vector<int32_t> pending = {static_cast<int32_t>(k)}, seen;
    readings = 0;
    while (!pending.empty()) {  // as JsonMatcher::open_value expands it
      const int32_t x = pending.back();
      pending.pop_back();
      if (std::find(seen.begin(), seen.end(), x) != seen.end()) continue;
      seen.push_back(x);
      const Node& n = g.nodes[x];
      if (n.kind == Kind::kAnyOf) pending.insert(pending.end(), n.alternatives.begin(), n.alternatives.end());
      else ++readings;
      if (readings > kMaxStacks || seen.size() > static_cast<size_t>(kMaxExpanded)) return static_cast<int32_t>(k);
    }
  }
  return -1;
}

namespace {

int64_t cp_count(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Whether a literal value may match a node that is not a literal.
bool literal_may_match(const nlohmann::json& v, const Node& n) {
  switch (n.kind) {
    case Kind::kString: {
      if (!v.is_string()) return false;
      const int64_t len = cp_count(v.get<std::string>());
      return len >= n.min_length && (n.max_length < 0 || len <= n.max_length);
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
  bool disjoint_concrete(int32_t a, int32_t b, int depth);
};

bool Proof::disjoint_objects(const Node& x, const Node& y, int depth) {
  if (x.open || y.open || depth >= kMaxDisjointDepth) return false;
  for (const Property& p : x.properties) {
    if (!p.required) continue;
    for (const Property& q : y.properties)
      if (q.required && q.key == p.key && disjoint(p.node, q.node, depth + 1)) return true;
  }
  return false;
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
      if (literal_may_match(v, other)) return false;
    return budget >= 0;
  }
  auto numeric = [](Kind k) { return k == Kind::kNumber || k == Kind::kInteger; };
  if (numeric(x.kind) && numeric(y.kind)) return false;
  if (x.kind != y.kind) return true;
  if (x.kind == Kind::kString)
    return (x.max_length >= 0 && x.max_length < y.min_length) || (y.max_length >= 0 && y.max_length < x.min_length);
  if (x.kind == Kind::kObject) return disjoint_objects(x, y, depth);
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
