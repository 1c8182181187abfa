#include "grammar/unique_items.h"

#include <algorithm>
#include <charconv>
#include <deque>

#include <nlohmann/json.hpp>

namespace dsv4::grammar {
namespace {

struct Edge {
  uint8_t c;
  int32_t to;
};

// The edges of each state over the alphabet, to states that can still accept over it.
std::vector<std::vector<Edge>> live_edges(const Regex& re, std::vector<uint8_t>& live) {
  const int32_t n = re.n_states();
  std::vector<std::vector<Edge>> out(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> preds(static_cast<size_t>(n));
  for (int32_t q = 0; q < n; ++q)
    for (uint32_t c = 0x20; c <= 0x7E; ++c)
      if (const int32_t to = re.step(q, c); unique_text_char(c) && to >= 0) {
        out[static_cast<size_t>(q)].push_back(Edge{static_cast<uint8_t>(c), to});
        preds[static_cast<size_t>(to)].push_back(q);
      }
  live.assign(static_cast<size_t>(n), 0);
  std::deque<int32_t> pending;
  for (int32_t q = 0; q < n; ++q)
    if (re.accepting(q)) live[static_cast<size_t>(q)] = 1, pending.push_back(q);
  for (; !pending.empty(); pending.pop_front())
    for (int32_t p : preds[static_cast<size_t>(pending.front())])
      if (!live[static_cast<size_t>(p)]) live[static_cast<size_t>(p)] = 1, pending.push_back(p);
  for (auto& edges : out)
    edges.erase(std::remove_if(edges.begin(), edges.end(), [&](const Edge& e) { return !live[static_cast<size_t>(e.to)]; }),
                edges.end());
  return out;
}

// The live states with finitely many continuations, each after every state it steps to
// (peeling states whose edges all lead to peeled ones); the others reach a cycle.
std::vector<int32_t> finite_order(const std::vector<std::vector<Edge>>& edges, const std::vector<uint8_t>& live) {
  const size_t n = edges.size();
  std::vector<std::vector<int32_t>> preds(n);
  std::vector<int64_t> left(n, 0);
  for (size_t q = 0; q < n; ++q)
    for (const Edge& e : edges[q]) preds[static_cast<size_t>(e.to)].push_back(static_cast<int32_t>(q)), ++left[q];
  std::vector<int32_t> order;
  for (size_t q = 0; q < n; ++q)
    if (live[q] && left[q] == 0) order.push_back(static_cast<int32_t>(q));
  for (size_t k = 0; k < order.size(); ++k)
    for (int32_t p : preds[static_cast<size_t>(order[k])])
      if (--left[static_cast<size_t>(p)] == 0) order.push_back(p);
  return order;
}

}  // namespace

int32_t hashed_array_frame(const Grammar& g, const MatchStack& s) {
  const int32_t top = s.n - 1;
  if (top < 1 || s.f[top - 1].node < 0) return -1;
  const Frame& parent = s.f[top - 1];
  const Node& p = g.nodes[static_cast<size_t>(parent.node)];
  if (p.kind == Kind::kArray) return p.unique_hashed && p.unique_key < 0 ? top - 1 : -1;
  if (p.kind != Kind::kObject || top < 2 || s.f[top - 2].node < 0) return -1;
  const Node& a = g.nodes[static_cast<size_t>(s.f[top - 2].node)];
  const bool key = a.kind == Kind::kArray && a.unique_hashed && a.unique_key == parent.j && a.items == parent.node;
  return key ? top - 2 : -1;
}

uint32_t unique_hash_text(uint32_t h, const std::string& text) {
  for (char c : text) h = unique_hash_byte(h, static_cast<uint8_t>(c));
  return h;
}

bool may_hold_hashed_array(const Grammar& g, int32_t node) {
  std::vector<uint8_t> seen(g.nodes.size(), 0);
  std::vector<int32_t> pending{node};
  while (!pending.empty()) {
    const int32_t k = pending.back();
    pending.pop_back();
    if (seen[static_cast<size_t>(k)]) continue;
    seen[static_cast<size_t>(k)] = 1;
    const Node& n = g.nodes[static_cast<size_t>(k)];
    if ((n.kind == Kind::kArray && n.unique_key >= 0) || (n.kind == Kind::kAnyOf && n.alternatives.empty())) return true;
    pending.insert(pending.end(), n.alternatives.begin(), n.alternatives.end());
    pending.insert(pending.end(), n.prefix.begin(), n.prefix.end());
    for (const Property& p : n.properties) pending.push_back(p.node);
    for (int32_t v : {n.items, n.values})
      if (v >= 0) pending.push_back(v);
    if (n.kind == Kind::kObject && n.keys >= 0)
      for (int32_t v : g.key_automata[static_cast<size_t>(n.keys)]->label_value) {
        if (v < 0) return true;  // not filled yet
        pending.push_back(v);
      }
  }
  return false;
}

bool distinct_hashes(const std::vector<std::string>& texts) {
  std::vector<uint32_t> hashes;
  for (const std::string& t : texts) hashes.push_back(unique_hash_text(kUniqueHashBasis, t));
  std::sort(hashes.begin(), hashes.end());
  return std::adjacent_find(hashes.begin(), hashes.end()) == hashes.end();
}

std::vector<std::string> literal_alternatives(const Grammar& g, int32_t node) {
  const Node& a = g.nodes[static_cast<size_t>(node)];
  if (a.kind != Kind::kAnyOf || a.alternatives.empty()) return {};
  std::vector<std::string> texts;
  for (int32_t alt : a.alternatives) {
    for (int hop = 0; hop < kMaxSchemaDepth; ++hop) {  // through $ref hops (anyOf of one branch)
      const Node& h = g.nodes[static_cast<size_t>(alt)];
      if (h.kind != Kind::kAnyOf || h.alternatives.size() != 1) break;
      alt = h.alternatives[0];
    }
    const Node& b = g.nodes[static_cast<size_t>(alt)];
    if (b.kind != Kind::kLiteral) return {};
    texts.insert(texts.end(), b.literals.begin(), b.literals.end());
  }
  return texts;
}

int32_t subsuming_string(const Grammar& g, int32_t node) {
  const Node& a = g.nodes[static_cast<size_t>(node)];
  if (a.kind != Kind::kAnyOf || a.alternatives.empty()) return -1;
  std::vector<int32_t> branches;
  for (int32_t alt : a.alternatives) {
    for (int hop = 0; hop < kMaxSchemaDepth; ++hop) {  // through $ref hops (anyOf of one branch)
      const Node& h = g.nodes[static_cast<size_t>(alt)];
      if (h.kind != Kind::kAnyOf || h.alternatives.size() != 1) break;
      alt = h.alternatives[0];
    }
    branches.push_back(alt);
  }
  int32_t plain = -1;  // the widest plain string branch: the least minLength
  for (int32_t b : branches) {
    const Node& n = g.nodes[static_cast<size_t>(b)];
    if (n.kind == Kind::kString && n.regex < 0 && n.max_length < 0 &&
        (plain < 0 || n.min_length < g.nodes[static_cast<size_t>(plain)].min_length))
      plain = b;
  }
  if (plain < 0) return -1;
  const int64_t min_length = g.nodes[static_cast<size_t>(plain)].min_length;
  for (int32_t b : branches) {
    const Node& n = g.nodes[static_cast<size_t>(b)];
    if (n.kind == Kind::kString && n.min_length >= min_length) continue;  // its strings are plain's
    if (n.kind != Kind::kLiteral) return -1;
    for (const std::string& t : n.literals) {
      const nlohmann::json v = nlohmann::json::parse(t);
      if (!v.is_string()) return -1;
      const std::string& bytes = v.get_ref<const std::string&>();
      const auto code_points = std::count_if(bytes.begin(), bytes.end(), [](char c) { return (c & 0xC0) != 0x80; });
      if (code_points < min_length) return -1;
    }
  }
  return plain;
}

UniqueStrings unique_strings(const Regex& re) {
  UniqueStrings t;
  const size_t n = static_cast<size_t>(re.n_states());
  std::vector<uint8_t> live;
  const std::vector<std::vector<Edge>> edges = live_edges(re, live);
  const std::vector<int32_t> order = finite_order(edges, live);
  std::vector<uint8_t> finite(n, 0);
  for (int32_t q : order) finite[static_cast<size_t>(q)] = 1;
  t.count.assign(n, 0);
  t.completions.assign(n, {});
  std::vector<int64_t> longest(n, -1);
  for (size_t q = 0; q < n; ++q)
    if (live[q] && !finite[q]) t.count[q] = UniqueStrings::kMany;
  for (int32_t s : order) {  // successors first
    const auto q = static_cast<size_t>(s);
    int64_t count = re.accepting(s) ? 1 : 0;
    longest[q] = re.accepting(s) ? 0 : -1;
    for (const Edge& e : edges[q]) {
      count = std::min<int64_t>(count + t.count[static_cast<size_t>(e.to)], UniqueStrings::kMany);
      longest[q] = std::max(longest[q], longest[static_cast<size_t>(e.to)] + 1);
    }
    t.count[q] = static_cast<int32_t>(count);
    if (count == UniqueStrings::kMany) continue;
    if (re.accepting(s)) t.completions[q].push_back("");
    for (const Edge& e : edges[q])
      for (const std::string& w : t.completions[static_cast<size_t>(e.to)])
        t.completions[q].push_back(static_cast<char>(e.c) + w);
  }
  const int32_t start = re.start();
  if (start < 0 || !live[static_cast<size_t>(start)]) return t;
  t.longest = finite[static_cast<size_t>(start)] ? longest[static_cast<size_t>(start)] : -1;
  std::vector<int64_t> dist(n, -1);  // breadth first from the start to the nearest accepting state
  std::deque<int32_t> pending{start};
  dist[static_cast<size_t>(start)] = 0;
  for (; !pending.empty(); pending.pop_front()) {
    const int32_t q = pending.front();
    if (re.accepting(q)) {
      t.shortest = dist[static_cast<size_t>(q)];
      break;
    }
    for (const Edge& e : edges[static_cast<size_t>(q)])
      if (dist[static_cast<size_t>(e.to)] < 0)
        dist[static_cast<size_t>(e.to)] = dist[static_cast<size_t>(q)] + 1, pending.push_back(e.to);
  }
  return t;
}

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

}  // namespace

int64_t ranged_continuations(const NumberRange& r, bool negative, int64_t mag, int32_t digits, int64_t limit,
                             int64_t* out) {
  int64_t n = 0;
  auto add = [&](int64_t lo_mag, int64_t hi_mag) {  // the values of magnitudes [lo_mag, hi_mag]
    const int64_t lo = std::max(negative ? -hi_mag : lo_mag, r.min), hi = std::min(negative ? -lo_mag : hi_mag, r.max);
    if (lo > hi) return;
    const int64_t first = ceil_div(lo, r.step), last = floor_div(hi, r.step);  // multiples of step
    if (first > last) return;
    if (out == nullptr) {
      n = std::min(limit, n + (last - first + 1));
      return;
    }
    for (int64_t k = first; k <= last && n < limit; ++k) out[n++] = k * r.step;
  };
  int64_t top = 1;  // 10^kMaxDigits
  for (int d = 0; d < kMaxDigits; ++d) top *= 10;
  if (digits == 0) {
    add(1, top - 1);
  } else if (mag == 0) {
    if (!negative) add(0, 0);
  } else {
    add(mag, mag);
    for (int64_t p = 10, d = digits + 1; d <= kMaxDigits && n < limit; p *= 10, ++d) add(mag * p, mag * p + p - 1);
  }
  return n;
}

uint32_t integer_hash(int64_t value) {
  char text[24];
  const std::to_chars_result end = std::to_chars(text, text + sizeof(text), value);
  uint32_t h = kUniqueHashBasis;
  for (const char* c = text; c < end.ptr; ++c) h = unique_hash_byte(h, static_cast<uint8_t>(*c));
  return h;
}

int64_t integer_continuations(int32_t digits, bool zero, int64_t limit) {
  if (zero) return 1;
  if (digits == 0) return limit;  // "-": any of 9 x 10^14 ... values
  int64_t total = 0, power = 1;
  for (int32_t more = 0; more <= kMaxDigits - digits && total < limit; ++more, power *= 10)
    total = std::min(limit, total + power);
  return total;
}

}  // namespace dsv4::grammar
