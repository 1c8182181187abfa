#include "grammar/grammar_relax.h"

#include <algorithm>
#include <map>

#include "grammar/grammar_analysis.h"

namespace dsv4::grammar {

bool join_object_branches(Grammar& g, int32_t at, std::vector<std::pair<int32_t, std::string>>& joined_values) {
  std::vector<int32_t> concrete, objects, others;
  if (!expand_alternatives(g, at, concrete)) return false;
  for (int32_t c : concrete) {
    const Node& n = g.nodes[c];
    if (n.kind != Kind::kObject) {
      others.push_back(c);
      continue;
    }
    if (n.open || n.min_properties > 0 || n.max_properties >= 0 || !n.needs.empty()) return false;
    objects.push_back(c);
  }
  if (objects.size() < 2) return false;
  std::vector<std::string> keys;  // in order of first appearance
  std::map<std::string, std::vector<int32_t>> values;
  std::map<std::string, size_t> n_required;
  for (int32_t o : objects)
    for (const Property& p : g.nodes[o].properties) {
      auto [it, added] = values.try_emplace(p.key);
      if (added) keys.push_back(p.key);
      if (std::find(it->second.begin(), it->second.end(), p.node) == it->second.end()) it->second.push_back(p.node);
      n_required[p.key] += p.required;
    }
  if (keys.size() > static_cast<size_t>(kMaxProperties)) return false;
  Node joined;
  joined.kind = Kind::kObject;
  for (const std::string& key : keys) {
    int32_t value = values[key][0];
    if (values[key].size() > 1) {
      Node alternatives;
      alternatives.kind = Kind::kAnyOf;
      alternatives.alternatives = values[key];
      g.nodes.push_back(std::move(alternatives));
      value = static_cast<int32_t>(g.nodes.size() - 1);
      joined_values.emplace_back(value, key);
    }
    joined.properties.push_back(Property{key, value, n_required[key] == objects.size()});
  }
  g.nodes.push_back(std::move(joined));
  others.push_back(static_cast<int32_t>(g.nodes.size() - 1));
  g.nodes[at].alternatives = std::move(others);
  return true;
}

}  // namespace dsv4::grammar
