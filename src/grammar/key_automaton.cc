#include "grammar/key_automaton.h"

#include <algorithm>
#include <map>
#include <set>

namespace dsv4::grammar {
namespace {

// The cuts of key text: control characters, '"', '\\' and surrogates are never key text.
constexpr uint32_t kKeyTextCuts[] = {0x20, 0x22, 0x23, 0x5C, 0x5D, 0xD800, 0xE000};

bool key_text(uint32_t cp) { return cp >= 0x20 && cp != '"' && cp != '\\' && (cp < 0xD800 || cp > 0xDFFF); }

Status automaton_fail(const std::string& path, const std::string& what) {
  return Status::errorf("schema {}: {}", path.empty() ? "/" : path, what);
}

// The joint classes of the automata (KeyAutomaton's intervals), and a code point of each.
Result<std::vector<uint32_t>> joint_classes(const std::vector<const Regex*>& automata, KeyAutomaton& k,
                                            const std::string& path) {
  std::set<uint32_t> cuts(std::begin(kKeyTextCuts), std::end(kKeyTextCuts));
  cuts.insert(0);
  for (const Regex* re : automata)
    for (uint32_t cp = 0; cp <= kMaxCodePoint; cp = re->run_end(cp) + 1) cuts.insert(cp);
  std::map<std::vector<int32_t>, int16_t> ids;
  std::vector<uint32_t> representative;
  for (const uint32_t lo : cuts) {
    int16_t id = -1;
    if (key_text(lo)) {
      if (ids.size() >= static_cast<size_t>(kMaxKeyClasses))
        return automaton_fail(path, fmt::format("keyword 'patternProperties': the patterns cut the code points into "
                                                "more than {} classes", kMaxKeyClasses));
      std::vector<int32_t> signature;
      for (const Regex* re : automata) signature.push_back(re->class_of(lo));
      const auto [it, fresh] = ids.emplace(std::move(signature), static_cast<int16_t>(ids.size()));
      if (fresh) representative.push_back(lo);
      id = it->second;
    }
    k.interval_start.push_back(lo);
    k.interval_class.push_back(id);
  }
  k.n_classes = static_cast<int32_t>(representative.size());
  for (uint32_t cp = 0; cp < 128; ++cp) {
    const auto it = std::upper_bound(k.interval_start.begin(), k.interval_start.end(), cp);
    k.ascii_class[cp] = k.interval_class[static_cast<size_t>(it - k.interval_start.begin()) - 1];
  }
  return representative;
}

// Breadth-first over tuples of the automata's states (-1: that one is dead). The last automaton
// is propertyNames' when `filtered`; a state is dead when it is, or when no pattern is live and
// keys outside the patterns are not allowed.
Status product(const std::vector<const Regex*>& automata, bool filtered, const std::vector<uint32_t>& representative,
               const std::function<bool(uint64_t)>& allowed, KeyAutomaton& k, const std::string& path) {
  const size_t n_patterns = automata.size() - (filtered ? 1 : 0);
  const bool others = allowed(0);
  auto dead = [&](const std::vector<int32_t>& t) {
    if (filtered && t.back() < 0) return true;
    return !others && std::all_of(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n_patterns),
                                  [](int32_t s) { return s < 0; });
  };
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> states;
  std::map<uint64_t, int16_t> labels;
  auto id_of = [&](std::vector<int32_t> t) -> int32_t {
    if (dead(t)) return -1;
    const auto [it, fresh] = ids.emplace(t, static_cast<int32_t>(states.size()));
    if (fresh) states.push_back(std::move(t));
    return it->second;
  };
  std::vector<int32_t> start;
  for (const Regex* re : automata) start.push_back(re->start());
  k.start = id_of(start);
  for (size_t q = 0; q < states.size(); ++q) {
    if (states.size() > static_cast<size_t>(kMaxKeyStates) ||
        static_cast<int64_t>(states.size()) * k.n_classes > kMaxKeyWork)
      return automaton_fail(path, fmt::format("keyword 'patternProperties': the automaton of the keys has more than {} "
                                        "states ({} code point classes)", kMaxKeyStates, k.n_classes));
    const std::vector<int32_t> t = states[q];
    uint64_t mask = 0;
    for (size_t i = 0; i < n_patterns; ++i) mask |= static_cast<uint64_t>(t[i] >= 0 && automata[i]->accepting(t[i])) << i;
    int16_t label = -1;
    if ((!filtered || automata.back()->accepting(t.back())) && allowed(mask)) {
      label = labels.emplace(mask, static_cast<int16_t>(labels.size())).first->second;
      if (labels.size() > static_cast<size_t>(kMaxKeyLabels))
        return automaton_fail(path, fmt::format("keyword 'patternProperties': keys match more than {} different sets of "
                                          "patterns", kMaxKeyLabels));
      if (k.label_patterns.size() < labels.size()) k.label_patterns.push_back(mask);
    }
    k.label.push_back(label);
    for (int32_t c = 0; c < k.n_classes; ++c) {
      std::vector<int32_t> u(t.size());
      for (size_t i = 0; i < t.size(); ++i) u[i] = t[i] < 0 ? -1 : automata[i]->step(t[i], representative[c]);
      k.next.push_back(id_of(std::move(u)));
    }
  }
  k.n_states = static_cast<int32_t>(states.size());
  return Status();
}

// KeyAutomaton::infinite: per label, the states that reach it, pruned of those that have no
// successor left among them.
void infinite_keys(KeyAutomaton& k) {
  const auto n = static_cast<size_t>(k.n_states);
  std::vector<std::vector<int32_t>> preds(n);
  for (size_t q = 0; q < n; ++q)
    for (int32_t c = 0; c < k.n_classes; ++c)
      if (const int32_t t = k.next[q * k.n_classes + c]; t >= 0) preds[t].push_back(static_cast<int32_t>(q));
  k.infinite.assign(n, 0);
  for (size_t label = 0; label < k.label_patterns.size(); ++label) {
    std::vector<uint8_t> in(n, 0);
    std::vector<int32_t> pending;
    for (size_t q = 0; q < n; ++q)
      if (k.label[q] == static_cast<int16_t>(label)) in[q] = 1, pending.push_back(static_cast<int32_t>(q));
    while (!pending.empty()) {  // reaches the label
      const int32_t q = pending.back();
      pending.pop_back();
      for (int32_t p : preds[q])
        if (!in[p]) in[p] = 1, pending.push_back(p);
    }
    std::vector<int32_t> successors(n, 0);
    for (size_t q = 0; q < n; ++q) {
      if (!in[q]) continue;
      for (int32_t c = 0; c < k.n_classes; ++c)
        if (const int32_t t = k.next[q * k.n_classes + c]; t >= 0 && in[t]) ++successors[q];
      if (successors[q] == 0) pending.push_back(static_cast<int32_t>(q));
    }
    while (!pending.empty()) {  // no way on that stays: finitely many continuations
      const int32_t q = pending.back();
      pending.pop_back();
      in[q] = 0;
      for (int32_t p : preds[q])
        if (in[p] && --successors[p] == 0) pending.push_back(p);
    }
    for (size_t q = 0; q < n; ++q) k.infinite[q] |= static_cast<uint64_t>(in[q]) << label;
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Depth first from state with `key` so far, into states that reach a label only (`useful`).
void collect_keys(const KeyAutomaton& k, const std::vector<uint8_t>& useful, int32_t state, std::string& key,
                  size_t max, std::vector<std::string>& out) {
  if (k.label[state] >= 0 && out.size() < max) out.push_back(key);
  for (size_t i = 0; i < k.interval_start.size() && out.size() < max; ++i) {
    const int32_t c = k.interval_class[i];
    if (c < 0) continue;
    const int32_t t = k.next[static_cast<size_t>(state) * k.n_classes + c];
    if (t < 0 || !useful[t]) continue;
    const uint32_t end = i + 1 < k.interval_start.size() ? k.interval_start[i + 1] : kMaxCodePoint + 1;
    for (uint32_t cp = k.interval_start[i]; cp < end && out.size() < max; ++cp) {
      const size_t size = key.size();
      append_utf8(key, cp);
      collect_keys(k, useful, t, key, max, out);
      key.resize(size);
    }
  }
}

}  // namespace

std::vector<std::string> finite_keys(const KeyAutomaton& k, size_t max) {
  std::vector<std::string> out;
  if (k.start < 0) return out;
  const auto n = static_cast<size_t>(k.n_states);
  std::vector<std::vector<int32_t>> preds(n);
  for (size_t q = 0; q < n; ++q)
    for (int32_t c = 0; c < k.n_classes; ++c)
      if (const int32_t t = k.next[q * k.n_classes + c]; t >= 0) preds[t].push_back(static_cast<int32_t>(q));
  std::vector<uint8_t> useful(n, 0);  // reaches some label
  std::vector<int32_t> pending;
  for (size_t q = 0; q < n; ++q)
    if (k.label[q] >= 0) useful[q] = 1, pending.push_back(static_cast<int32_t>(q));
  while (!pending.empty()) {
    const int32_t q = pending.back();
    pending.pop_back();
    for (int32_t p : preds[q])
      if (!useful[p]) useful[p] = 1, pending.push_back(p);
  }
  std::string key;
  if (useful[k.start]) collect_keys(k, useful, k.start, key, max, out);
  return out;
}

int32_t KeyAutomaton::class_of(uint32_t cp) const {
  if (cp < 128) return ascii_class[cp];
  if (cp > kMaxCodePoint) return -1;
  const auto it = std::upper_bound(interval_start.begin(), interval_start.end(), cp);
  return interval_class[static_cast<size_t>(it - interval_start.begin()) - 1];
}

bool KeyAutomaton::steps_within(int32_t state, uint32_t lo, uint32_t hi, uint64_t labels) const {
  auto i = static_cast<size_t>(std::upper_bound(interval_start.begin(), interval_start.end(), lo) -
                               interval_start.begin()) - 1;
  for (; i < interval_start.size() && interval_start[i] <= hi; ++i) {
    const int32_t c = interval_class[i];
    if (c < 0) continue;
    const int32_t t = next[static_cast<size_t>(state) * n_classes + c];
    if (t >= 0 && (infinite[t] & labels) != 0) return true;
  }
  return false;
}

Result<KeyAutomaton> build_key_automaton(const std::vector<const Regex*>& patterns, const Regex* names,
                                         const std::function<bool(uint64_t)>& allowed, const std::string& path) {
  std::vector<const Regex*> automata = patterns;
  if (names != nullptr) automata.push_back(names);
  KeyAutomaton k;
  Result<std::vector<uint32_t>> classes = joint_classes(automata, k, path);
  if (!classes.ok()) return classes.status();
  const std::vector<uint32_t>& representative = *classes;
  DSV4_RETURN_IF_ERROR(product(automata, names != nullptr, representative, allowed, k, path));
  if (static_cast<int64_t>(k.n_states) * k.n_classes * static_cast<int64_t>(k.label_patterns.size() + 1) > kMaxKeyWork)
    return automaton_fail(path, fmt::format("keyword 'patternProperties': the key automaton's {} states x {} classes x {} "
                                      "labels exceed the work bound {}", k.n_states, k.n_classes,
                                      k.label_patterns.size(), kMaxKeyWork));
  infinite_keys(k);
  k.loops.assign(static_cast<size_t>(k.n_states), 1);
  for (size_t q = 0; q < static_cast<size_t>(k.n_states); ++q)
    for (int32_t c = 0; c < k.n_classes; ++c) k.loops[q] &= k.next[q * k.n_classes + c] == static_cast<int32_t>(q);
  k.label_value.assign(k.label_patterns.size(), -1);
  return k;
}

}  // namespace dsv4::grammar
