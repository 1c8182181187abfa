#include "grammar/regex.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "base/check.h"
#include "grammar/regex_lookahead.h"

namespace dsv4::grammar {

// Named, not anonymous: the grammar sources build as one unity translation unit.
namespace regex_automaton {

// --- Thompson NFA ---------------------------------------------------------------------------

// kPrevWord / kPrevNonWord: epsilon edges taken when the code point before is (is not) in \w
// (none before: not); kPeekWord / kPeekNonWord: epsilon edges taken when the code point after
// is (is not) in \w (none after: not), resolved when the DFA steps or tests acceptance.
enum class EdgeKind : uint8_t { kEpsilon, kSet, kLineStart, kLineEnd, kPrevWord, kPrevNonWord, kPeekWord, kPeekNonWord };

bool is_peek(EdgeKind kind) { return kind == EdgeKind::kPeekWord || kind == EdgeKind::kPeekNonWord; }

// A state has one edge of its kind to `out` (kEpsilon: up to two, out and out2).
struct NfaState {
  EdgeKind kind = EdgeKind::kEpsilon;
  int32_t set = -1;
  int32_t out = -1, out2 = -1;
};

struct Nfa {
  std::vector<NfaState> states;
  int32_t start = -1, final = -1;
};

struct Fragment {
  int32_t start = -1, end = -1;  // end: a kEpsilon state whose out is still free
};

class NfaBuilder {
 public:
  explicit NfaBuilder(const RegexSyntax& syntax) : syntax_(syntax) {}
  // The NFA of [\s\S]*(root)[\s\S]* (any_set: the set of every code point).
  Result<Nfa> build(int32_t any_set);

 private:
  Fragment node(int32_t id);
  Fragment repeat(const RegexNode& n);
  Fragment alternation(const RegexNode& n);
  Fragment boundary(bool word_boundary);
  int32_t add(EdgeKind kind, int32_t set = -1);
  Fragment single(EdgeKind kind, int32_t set = -1);

  const RegexSyntax& syntax_;
  Nfa nfa_;
  bool overflow_ = false;
};

int32_t NfaBuilder::add(EdgeKind kind, int32_t set) {
  if (nfa_.states.size() >= static_cast<size_t>(kMaxRegexNfaStates)) {
    overflow_ = true;
    return 0;
  }
  nfa_.states.push_back({kind, set, -1, -1});
  return static_cast<int32_t>(nfa_.states.size()) - 1;
}

Fragment NfaBuilder::single(EdgeKind kind, int32_t set) {
  const int32_t s = add(kind, set), e = add(EdgeKind::kEpsilon);
  if (!overflow_) nfa_.states[s].out = e;
  return {s, e};
}

Fragment NfaBuilder::alternation(const RegexNode& n) {
  const int32_t head = add(EdgeKind::kEpsilon), end = add(EdgeKind::kEpsilon);
  int32_t cur = head;
  for (size_t i = 0; i < n.kids.size() && !overflow_; ++i) {
    const Fragment f = node(n.kids[i]);
    if (overflow_) break;
    nfa_.states[f.end].out = end;
    nfa_.states[cur].out = f.start;
    if (i + 1 < n.kids.size()) {
      const int32_t split = add(EdgeKind::kEpsilon);
      if (overflow_) break;
      nfa_.states[cur].out2 = split;
      cur = split;
    }
  }
  return {head, end};
}

// \b: (before \w, after not) or (before not, after \w); \B: (both \w) or (neither).
Fragment NfaBuilder::boundary(bool word_boundary) {
  const int32_t head = add(EdgeKind::kEpsilon), end = add(EdgeKind::kEpsilon);
  const int32_t after_word = add(EdgeKind::kPrevWord), after_other = add(EdgeKind::kPrevNonWord);
  const int32_t peek_other = add(EdgeKind::kPeekNonWord), peek_word = add(EdgeKind::kPeekWord);
  if (overflow_) return {head, end};
  auto& st = nfa_.states;
  st[head].out = after_word;
  st[head].out2 = after_other;
  st[after_word].out = word_boundary ? peek_other : peek_word;
  st[after_other].out = word_boundary ? peek_word : peek_other;
  st[peek_other].out = end;
  st[peek_word].out = end;
  return {head, end};
}

// min copies in a row, then either a loop over one more copy (max < 0) or max - min optional
// copies, each able to skip to the end.
Fragment NfaBuilder::repeat(const RegexNode& n) {
  const int32_t start = add(EdgeKind::kEpsilon);
  int32_t cur = start;
  for (int32_t i = 0; i < n.min && !overflow_; ++i) {
    const Fragment f = node(n.kids[0]);
    if (overflow_) break;
    nfa_.states[cur].out = f.start;
    cur = f.end;
  }
  const int32_t end = add(EdgeKind::kEpsilon);
  if (n.max < 0 && !overflow_) {
    const int32_t loop = add(EdgeKind::kEpsilon);
    const Fragment f = node(n.kids[0]);
    if (overflow_) return {start, end};
    nfa_.states[cur].out = loop;
    nfa_.states[loop].out = f.start;
    nfa_.states[loop].out2 = end;
    nfa_.states[f.end].out = loop;
    return {start, end};
  }
  for (int32_t i = n.min; i < n.max && !overflow_; ++i) {
    const Fragment f = node(n.kids[0]);
    if (overflow_) break;
    nfa_.states[cur].out = f.start;
    nfa_.states[cur].out2 = end;
    cur = f.end;
  }
  if (!overflow_) nfa_.states[cur].out = end;
  return {start, end};
}

Fragment NfaBuilder::node(int32_t id) {
  const RegexNode& n = syntax_.nodes[id];
  switch (n.kind) {
    case RegexNodeKind::kEmpty: {
      const int32_t s = add(EdgeKind::kEpsilon);
      return {s, s};
    }
    case RegexNodeKind::kSet: return single(EdgeKind::kSet, n.set);
    case RegexNodeKind::kLineStart: return single(EdgeKind::kLineStart);
    case RegexNodeKind::kLineEnd: return single(EdgeKind::kLineEnd);
    case RegexNodeKind::kWordBoundary: return boundary(true);
    case RegexNodeKind::kNotWordBoundary: return boundary(false);
    case RegexNodeKind::kLookahead: DSV4_CHECK(false, "lookahead reaches the NFA"); return {};
    case RegexNodeKind::kAlt: return alternation(n);
    case RegexNodeKind::kRepeat: return repeat(n);
    case RegexNodeKind::kConcat: {
      Fragment whole = node(n.kids[0]);
      for (size_t i = 1; i < n.kids.size() && !overflow_; ++i) {
        const Fragment f = node(n.kids[i]);
        if (overflow_) break;
        nfa_.states[whole.end].out = f.start;
        whole.end = f.end;
      }
      return whole;
    }
  }
  return {};
}

Result<Nfa> NfaBuilder::build(int32_t any_set) {
  const int32_t pre = add(EdgeKind::kEpsilon), any_pre = add(EdgeKind::kSet, any_set);
  const Fragment body = node(syntax_.root);
  const int32_t post = add(EdgeKind::kEpsilon), any_post = add(EdgeKind::kSet, any_set);
  const int32_t final = add(EdgeKind::kEpsilon);
  if (overflow_) {
    return Status::errorf("pattern: expands to more than {} automaton states (the limit; repetition counts multiply)",
                          kMaxRegexNfaStates);
  }
  auto& st = nfa_.states;
  st[pre].out = any_pre;
  st[pre].out2 = body.start;
  st[any_pre].out = pre;
  st[body.end].out = post;
  st[post].out = any_post;
  st[post].out2 = final;
  st[any_post].out = post;
  nfa_.start = pre;
  nfa_.final = final;
  return std::move(nfa_);
}

// --- Code point classes -----------------------------------------------------------------------

struct Partition {
  std::vector<uint32_t> interval_start;  // merged intervals, sorted
  std::vector<int32_t> interval_class;
  int32_t n_classes = 0;
  std::vector<std::vector<int32_t>> set_classes;  // per set: the classes it contains
};

Partition partition_classes(const std::vector<CodeSet>& sets) {
  std::vector<uint32_t> cuts = {0, kMaxCodePoint + 1};
  for (const CodeSet& s : sets) {
    for (const CodeRange& r : s) {
      cuts.push_back(r.lo);
      cuts.push_back(r.hi + 1);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const size_t n_pieces = cuts.size() - 1;
  std::vector<std::vector<int32_t>> members(n_pieces);
  auto piece_of = [&](uint32_t cp) {
    return static_cast<size_t>(std::lower_bound(cuts.begin(), cuts.end(), cp) - cuts.begin());
  };
  for (size_t s = 0; s < sets.size(); ++s) {
    for (const CodeRange& r : sets[s]) {
      for (size_t i = piece_of(r.lo); i < piece_of(r.hi + 1); ++i) members[i].push_back(static_cast<int32_t>(s));
    }
  }
  Partition p;
  std::map<std::vector<int32_t>, int32_t> class_ids;
  p.set_classes.resize(sets.size());
  for (size_t i = 0; i < n_pieces; ++i) {
    auto [it, fresh] = class_ids.try_emplace(members[i], p.n_classes);
    if (fresh) ++p.n_classes;
    for (int32_t s : members[i]) p.set_classes[s].push_back(it->second);
    if (p.interval_class.empty() || p.interval_class.back() != it->second) {
      p.interval_start.push_back(cuts[i]);
      p.interval_class.push_back(it->second);
    }
  }
  for (auto& classes : p.set_classes) {
    std::sort(classes.begin(), classes.end());
    classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  }
  return p;
}

// --- Subset construction ----------------------------------------------------------------------

struct Dfa {
  int32_t n_classes = 0, start = 0;
  std::vector<int32_t> next;  // [states, n_classes]
  std::vector<uint8_t> accepting;
  int32_t n_states() const { return static_cast<int32_t>(accepting.size()); }
};

struct KeyHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// A DFA state's key: its NFA states, sorted, then kAfterWord when the code point read last is in
// \w (only patterns with \b or \B tell; their classes never straddle \w).
constexpr int32_t kAfterWord = -2;

class SubsetBuilder {
 public:
  // word_class[c]: class c lies in \w; empty when the pattern has no word boundary.
  SubsetBuilder(const Nfa& nfa, const Partition& classes, std::vector<uint8_t> word_class)
      : nfa_(nfa), classes_(classes), word_class_(std::move(word_class)), mark_(nfa.states.size(), 0) {}
  Result<Dfa> build();

 private:
  std::vector<int32_t> closure(std::vector<int32_t> seeds, bool at_start, bool after_word_char);
  bool reaches_final(const std::vector<int32_t>& key, bool at_start);
  void add_peek_targets(const std::vector<int32_t>& key, bool at_start, std::vector<std::vector<int32_t>>& targets);
  Status add_transitions(int32_t state, const std::vector<int32_t>& key);
  int32_t state_of(std::vector<int32_t> key);
  static bool after_word(const std::vector<int32_t>& key) { return !key.empty() && key.back() == kAfterWord; }
  bool takes(const NfaState& st, bool after_word_char, bool at_start) const {
    return st.kind == EdgeKind::kEpsilon || (st.kind == EdgeKind::kLineStart && at_start) ||
           (st.kind == EdgeKind::kPrevWord && after_word_char) || (st.kind == EdgeKind::kPrevNonWord && !after_word_char);
  }

  const Nfa& nfa_;
  const Partition& classes_;
  std::vector<uint8_t> word_class_;
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
  Dfa dfa_;
  std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> ids_;
  std::vector<std::vector<int32_t>> keys_;
  int64_t work_ = 0;  // NFA states visited by closures or hashed as keys
};

// The states reachable from seeds by epsilon edges (^ edges at position 0, \b's edges on the code
// point before), keeping the ones that matter to what follows: set edges, $ edges, peeks at the
// code point after and the final state. Sorted.
std::vector<int32_t> SubsetBuilder::closure(std::vector<int32_t> seeds, bool at_start, bool after_word_char) {
  ++generation_;
  std::vector<int32_t> out;
  std::vector<int32_t>& stack = seeds;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    if (s < 0 || mark_[s] == generation_) continue;
    mark_[s] = generation_;
    ++work_;
    const NfaState& st = nfa_.states[s];
    if (st.kind == EdgeKind::kSet || st.kind == EdgeKind::kLineEnd || is_peek(st.kind) || s == nfa_.final)
      out.push_back(s);
    if (takes(st, after_word_char, at_start)) {
      stack.push_back(st.out);
      if (st.kind == EdgeKind::kEpsilon) stack.push_back(st.out2);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether the input may end here: the final state is reachable without reading, $ edges and
// peeks at a non-word code point allowed.
bool SubsetBuilder::reaches_final(const std::vector<int32_t>& key, bool at_start) {
  const bool after_word_char = after_word(key);
  ++generation_;
  std::vector<int32_t> stack = key;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    if (s < 0 || mark_[s] == generation_) continue;
    mark_[s] = generation_;
    ++work_;
    if (s == nfa_.final) return true;
    const NfaState& st = nfa_.states[s];
    if (!takes(st, after_word_char, at_start) && st.kind != EdgeKind::kLineEnd && st.kind != EdgeKind::kPeekNonWord)
      continue;
    stack.push_back(st.out);
    if (st.kind == EdgeKind::kEpsilon) stack.push_back(st.out2);
  }
  return false;
}

int32_t SubsetBuilder::state_of(std::vector<int32_t> key) {
  work_ += static_cast<int64_t>(key.size());
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  if (dfa_.n_states() >= kMaxRegexBuildStates) return -2;
  if (work_ > kMaxRegexBuildWork) return -3;
  if ((dfa_.n_states() + int64_t{1}) * dfa_.n_classes > kMaxRegexTableCells) return -4;
  const int32_t id = dfa_.n_states();
  dfa_.accepting.push_back(reaches_final(key, false) ? 1 : 0);
  dfa_.next.resize(dfa_.next.size() + dfa_.n_classes, -1);
  ids_.emplace(key, id);
  keys_.push_back(std::move(key));
  return id;
}

// Per class c: the set edges reached through the key's peeks that hold when c comes next (a
// peek's closure may hold further peeks: a worklist).
void SubsetBuilder::add_peek_targets(const std::vector<int32_t>& key, bool at_start,
                                     std::vector<std::vector<int32_t>>& targets) {
  const bool after_word_char = after_word(key);
  for (int32_t c = 0; c < dfa_.n_classes; ++c) {
    const bool word = word_class_[c] != 0;
    std::vector<int32_t> work, seen;
    for (int32_t s : key)
      if (s >= 0 && is_peek(nfa_.states[s].kind)) work.push_back(s);
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
      seen.push_back(s);
      ++work_;
      if ((nfa_.states[s].kind == EdgeKind::kPeekWord) != word) continue;
      for (int32_t t : closure({nfa_.states[s].out}, at_start, after_word_char)) {
        const NfaState& st = nfa_.states[t];
        if (is_peek(st.kind)) work.push_back(t);
        if (st.kind != EdgeKind::kSet) continue;
        const std::vector<int32_t>& in = classes_.set_classes[st.set];
        if (std::binary_search(in.begin(), in.end(), c)) targets[c].push_back(st.out);
      }
    }
  }
}

Status SubsetBuilder::add_transitions(int32_t state, const std::vector<int32_t>& key) {
  std::vector<std::vector<int32_t>> targets(dfa_.n_classes);
  bool has_peek = false;
  for (int32_t s : key) {
    if (s < 0) continue;
    const NfaState& st = nfa_.states[s];
    has_peek = has_peek || is_peek(st.kind);
    if (st.kind != EdgeKind::kSet) continue;
    for (int32_t c : classes_.set_classes[st.set]) targets[c].push_back(st.out);
    work_ += static_cast<int64_t>(classes_.set_classes[st.set].size());
  }
  if (has_peek) add_peek_targets(key, state == 0, targets);
  std::map<std::vector<int32_t>, int32_t> seen;  // same targets (and \w-ness), same state
  for (int32_t c = 0; c < dfa_.n_classes; ++c) {
    if (targets[c].empty()) continue;
    const bool word = !word_class_.empty() && word_class_[c] != 0;
    if (word) targets[c].push_back(kAfterWord);
    auto [it, fresh] = seen.try_emplace(targets[c], -1);
    if (fresh) {
      if (word) targets[c].pop_back();
      std::vector<int32_t> next = closure(targets[c], false, word);
      if (word) next.push_back(kAfterWord);
      it->second = state_of(std::move(next));
    }
    if (it->second == -2) {
      return Status::errorf("pattern: needs more than {} automaton states during construction (the limit)",
                            kMaxRegexBuildStates);
    }
    if (it->second == -3) {
      return Status::errorf("pattern: automaton construction above its work limit ({} steps)", kMaxRegexBuildWork);
    }
    if (it->second == -4) {
      return Status::errorf("pattern: the automaton needs more than {} table cells ({} code point classes per "
                            "state; the limit)", kMaxRegexTableCells, dfa_.n_classes);
    }
    dfa_.next[static_cast<size_t>(state) * dfa_.n_classes + c] = it->second;
  }
  return Status();
}

Result<Dfa> SubsetBuilder::build() {
  dfa_.n_classes = classes_.n_classes;
  // The start state is never shared with a later one: only there may ^ hold.
  std::vector<int32_t> start_key = closure({nfa_.start}, true, false);
  dfa_.accepting.push_back(reaches_final(start_key, true) ? 1 : 0);
  dfa_.next.resize(dfa_.n_classes, -1);
  keys_.push_back(std::move(start_key));
  for (int32_t s = 0; s < dfa_.n_states(); ++s) {
    const std::vector<int32_t> key = keys_[s];
    DSV4_RETURN_IF_ERROR(add_transitions(s, key));
  }
  return std::move(dfa_);
}

// --- Dead states and minimisation --------------------------------------------------------------

// Transitions into states that cannot reach acceptance become -1.
std::vector<uint8_t> prune_dead(Dfa& dfa) {
  const int32_t n = dfa.n_states(), c = dfa.n_classes;
  std::vector<std::vector<int32_t>> preds(n);
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t k = 0; k < c; ++k) {
      const int32_t t = dfa.next[static_cast<size_t>(s) * c + k];
      if (t >= 0) preds[t].push_back(s);
    }
  }
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> stack;
  for (int32_t s = 0; s < n; ++s) {
    if (dfa.accepting[s]) {
      live[s] = 1;
      stack.push_back(s);
    }
  }
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t p : preds[s]) {
      if (!live[p]) {
        live[p] = 1;
        stack.push_back(p);
      }
    }
  }
  for (int32_t& t : dfa.next) {
    if (t >= 0 && !live[t]) t = -1;
  }
  return live;
}

// A partition of 0..n-1 that splits blocks by marked members: members of block b are
// elems[first[b] .. end[b]), its marked ones elems[first[b] .. mid[b]).
class RefinablePartition {
 public:
  explicit RefinablePartition(int32_t n) : elems_(n), loc_(n), block_(n, 0), first_{0}, end_{n}, mid_{0} {
    for (int32_t s = 0; s < n; ++s) elems_[s] = loc_[s] = s;
  }
  int32_t block_of(int32_t s) const { return block_[s]; }
  int32_t n_blocks() const { return static_cast<int32_t>(first_.size()); }
  std::vector<int32_t> members(int32_t b) const { return {elems_.begin() + first_[b], elems_.begin() + end_[b]}; }

  void mark(int32_t s) {
    const int32_t b = block_[s], pos = loc_[s];
    if (pos < mid_[b]) return;  // already marked
    if (mid_[b] == first_[b]) touched_.push_back(b);
    const int32_t other = elems_[mid_[b]];
    std::swap(elems_[pos], elems_[mid_[b]]);
    loc_[other] = pos;
    loc_[s] = mid_[b]++;
  }
  // Splits every touched block with marked and unmarked members; the smaller part becomes a
  // new block, passed to on_new. Marks are cleared.
  template <class OnNew>
  void split_marked(OnNew on_new) {
    for (int32_t b : touched_) {
      const int32_t mid = mid_[b];
      mid_[b] = first_[b];
      if (mid == end_[b]) continue;  // all marked: no split
      const auto nb = static_cast<int32_t>(first_.size());
      const bool marked_smaller = mid - first_[b] <= end_[b] - mid;
      first_.push_back(marked_smaller ? first_[b] : mid);
      end_.push_back(marked_smaller ? mid : end_[b]);
      mid_.push_back(first_.back());
      (marked_smaller ? first_[b] : end_[b]) = mid;
      mid_[b] = first_[b];
      for (int32_t i = first_[nb]; i < end_[nb]; ++i) block_[elems_[i]] = nb;
      on_new(nb);
    }
    touched_.clear();
  }

 private:
  std::vector<int32_t> elems_, loc_, block_, first_, end_, mid_, touched_;
};

// Hopcroft's refinement, O(n k log n): the states plus a sink standing for every missing
// transition, split first by acceptance, then by the predecessors of each splitter block per
// class. Returns each live state's block (-1 for dead states, which fall in the sink's block)
// and the number of blocks.
std::pair<std::vector<int32_t>, int32_t> minimal_blocks(const Dfa& dfa, const std::vector<uint8_t>& live) {
  const int32_t n = dfa.n_states(), k = dfa.n_classes, sink = n;
  // Inverse transitions, by target: (class, source).
  std::vector<int32_t> offset(static_cast<size_t>(n) + 2, 0);
  auto target = [&](int32_t s, int32_t c) {
    const int32_t t = s == sink ? -1 : dfa.next[static_cast<size_t>(s) * k + c];
    return t < 0 ? sink : t;
  };
  for (int32_t s = 0; s <= n; ++s)
    for (int32_t c = 0; c < k; ++c) ++offset[target(s, c) + 1];
  for (int32_t t = 0; t <= n; ++t) offset[t + 1] += offset[t];
  std::vector<std::pair<int32_t, int32_t>> inverse(offset.back());
  std::vector<int32_t> fill(offset.begin(), offset.end() - 1);
  for (int32_t s = 0; s <= n; ++s)
    for (int32_t c = 0; c < k; ++c) inverse[fill[target(s, c)]++] = {c, s};

  RefinablePartition partition(n + 1);
  std::vector<int32_t> work = {0};
  for (int32_t s = 0; s < n; ++s) {
    if (dfa.accepting[s]) partition.mark(s);
  }
  partition.split_marked([&](int32_t nb) { work.push_back(nb); });
  std::vector<std::pair<int32_t, int32_t>> pre;
  while (!work.empty()) {
    const int32_t splitter = work.back();
    work.pop_back();
    pre.clear();
    for (int32_t t : partition.members(splitter))
      pre.insert(pre.end(), inverse.begin() + offset[t], inverse.begin() + offset[t + 1]);
    std::sort(pre.begin(), pre.end());
    for (size_t i = 0; i < pre.size();) {
      size_t j = i;
      for (; j < pre.size() && pre[j].first == pre[i].first; ++j) partition.mark(pre[j].second);
      partition.split_marked([&](int32_t nb) { work.push_back(nb); });
      i = j;
    }
  }
  // Renumber the blocks of live states from 0.
  std::vector<int32_t> number(partition.n_blocks(), -1), block(n, -1);
  int32_t n_blocks = 0;
  for (int32_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    int32_t& id = number[partition.block_of(s)];
    if (id < 0) id = n_blocks++;
    block[s] = id;
  }
  return {block, n_blocks};
}

// The minimal DFA, states numbered in breadth-first order from the start (start = 0).
Dfa minimise(Dfa dfa) {
  const std::vector<uint8_t> live = prune_dead(dfa);
  Dfa out;
  out.n_classes = dfa.n_classes;
  if (!live[dfa.start]) return out;
  const auto [block, n_blocks] = minimal_blocks(dfa, live);
  std::vector<int32_t> representative(n_blocks, -1), order(n_blocks, -1);
  for (int32_t s = dfa.n_states() - 1; s >= 0; --s) {
    if (block[s] >= 0) representative[block[s]] = s;
  }
  std::vector<int32_t> queue = {block[dfa.start]};
  order[block[dfa.start]] = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const int32_t rep = representative[queue[i]];
    for (int32_t k = 0; k < dfa.n_classes; ++k) {
      const int32_t t = dfa.next[static_cast<size_t>(rep) * dfa.n_classes + k];
      if (t >= 0 && order[block[t]] < 0) {
        order[block[t]] = static_cast<int32_t>(queue.size());
        queue.push_back(block[t]);
      }
    }
  }
  out.accepting.resize(queue.size());
  out.next.assign(queue.size() * dfa.n_classes, -1);
  for (size_t i = 0; i < queue.size(); ++i) {
    const int32_t rep = representative[queue[i]];
    out.accepting[i] = dfa.accepting[rep];
    for (int32_t k = 0; k < dfa.n_classes; ++k) {
      const int32_t t = dfa.next[static_cast<size_t>(rep) * dfa.n_classes + k];
      out.next[i * dfa.n_classes + k] = t < 0 ? -1 : order[block[t]];
    }
  }
  return out;
}

// --- Lengths ------------------------------------------------------------------------------------

struct LengthTable {
  int64_t threshold = 0, period = 1, words = 0;
  std::vector<uint64_t> bits;  // [states, words]
};

uint64_t hash_words(const uint64_t* words, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ words[i]) * 1099511628211ull;
  return h;
}

// rows[k * row_words ..]: bit s of row k; to per-state rows of k_end bits.
LengthTable transpose_rows(const std::vector<uint64_t>& rows, size_t row_words, int32_t n, int64_t k_end) {
  LengthTable table;
  table.words = (k_end + 63) / 64;
  table.bits.assign(static_cast<size_t>(n * table.words), 0);
  for (int64_t k = 0; k < k_end; ++k) {
    for (int32_t s = 0; s < n; ++s) {
      if ((rows[static_cast<size_t>(k) * row_words + s / 64] >> (s % 64)) & 1) {
        table.bits[static_cast<size_t>(s * table.words + k / 64)] |= uint64_t{1} << (k % 64);
      }
    }
  }
  return table;
}

std::vector<std::vector<int32_t>> successors(const Dfa& dfa) {
  std::vector<std::vector<int32_t>> succ(dfa.n_states());
  for (int32_t s = 0; s < dfa.n_states(); ++s) {
    for (int32_t k = 0; k < dfa.n_classes; ++k) {
      const int32_t t = dfa.next[static_cast<size_t>(s) * dfa.n_classes + k];
      if (t >= 0) succ[s].push_back(t);
    }
    std::sort(succ[s].begin(), succ[s].end());
    succ[s].erase(std::unique(succ[s].begin(), succ[s].end()), succ[s].end());
  }
  return succ;
}

// Row k (bit s: an accepting continuation of exactly k code points from s) follows from row
// k - 1 alone (bit s = any successor's bit), so the rows repeat once one does: the first row
// equal to an earlier one, row threshold, ends the table at threshold + period.
Result<LengthTable> length_table(const Dfa& dfa) {
  const int32_t n = dfa.n_states();
  const size_t row_words = (static_cast<size_t>(n) + 63) / 64;
  const std::vector<std::vector<int32_t>> succ = successors(dfa);
  std::vector<uint64_t> rows(row_words, 0);
  for (int32_t s = 0; s < n; ++s) {
    if (dfa.accepting[s]) rows[s / 64] |= uint64_t{1} << (s % 64);
  }
  std::unordered_multimap<uint64_t, int64_t> seen = {{hash_words(rows.data(), row_words), 0}};
  for (int64_t k = 1;; ++k) {
    if ((k + 1) * static_cast<int64_t>(n) > kMaxRegexLengthBits) {
      return Status::errorf(
          "pattern: the lengths of its matches repeat with a period above the limit ({} bits of "
          "length table)",
          kMaxRegexLengthBits);
    }
    rows.resize(static_cast<size_t>(k + 1) * row_words, 0);
    const uint64_t* prev = &rows[static_cast<size_t>(k - 1) * row_words];
    uint64_t* cur = &rows[static_cast<size_t>(k) * row_words];
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t t : succ[s]) {
        if ((prev[t / 64] >> (t % 64)) & 1) {
          cur[s / 64] |= uint64_t{1} << (s % 64);
          break;
        }
      }
    }
    const uint64_t h = hash_words(cur, row_words);
    auto [lo, hi] = seen.equal_range(h);
    for (auto it = lo; it != hi; ++it) {
      if (std::equal(cur, cur + row_words, &rows[static_cast<size_t>(it->second) * row_words])) {
        LengthTable table = transpose_rows(rows, row_words, n, k);
        table.threshold = it->second;
        table.period = k - it->second;
        return table;
      }
    }
    seen.emplace(h, k);
  }
}

// The set with each ASCII letter's other case added.
CodeSet fold_ascii_case(const CodeSet& set) {
  CodeSet out = set;
  for (const CodeRange& r : set) {
    for (uint32_t base : {uint32_t{'a'}, uint32_t{'A'}}) {
      const uint32_t lo = std::max(r.lo, base), hi = std::min(r.hi, base + 25);
      if (lo <= hi) out.push_back({lo ^ 0x20, hi ^ 0x20});
    }
  }
  return normalize(std::move(out));
}

// --- UTF-8 ---------------------------------------------------------------------------------------

bool decode_utf8(std::string_view text, std::u32string& out) {
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    const int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(text[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMinOf[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinOf[n] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out.push_back(cp);
    i += static_cast<size_t>(n);
  }
  return true;
}

// --- Regex ---------------------------------------------------------------------------------------

class RegexBuilder {
 public:
  // Minimisation, the state limit, lookup tables and the length table.
  static Result<Regex> finish(std::string pattern, const Partition& classes, Dfa dfa) {
    const Dfa minimal = minimise(std::move(dfa));
    if (minimal.n_states() > kMaxRegexStates) {
      return Status::errorf("pattern: needs {} automaton states, above the limit {}", minimal.n_states(),
                            kMaxRegexStates);
    }
    Regex re;
    re.pattern_ = std::move(pattern);
    tables(re, classes, minimal);
    if (re.n_states_ > 0) {
      Result<LengthTable> lengths = length_table(minimal);
      if (!lengths) return lengths.status();
      re.length_threshold_ = lengths->threshold;
      re.length_period_ = lengths->period;
      re.length_words_ = lengths->words;
      re.length_bits_ = std::move(lengths->bits);
    }
    return re;
  }

  // The product automaton over the common refinement of both class partitions, accepting where
  // op says; named `name`.
  static Result<Regex> combine(const Regex& a, const Regex& b, RegexOp op, std::string name) {
    Partition classes;
    std::vector<std::pair<int32_t, int32_t>> class_pairs;
    std::map<std::pair<int32_t, int32_t>, int32_t> class_ids;
    std::vector<uint32_t> starts = a.interval_start_;
    starts.insert(starts.end(), b.interval_start_.begin(), b.interval_start_.end());
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    for (uint32_t x : starts) {
      const std::pair<int32_t, int32_t> pair = {a.class_of(x), b.class_of(x)};
      auto [it, fresh] = class_ids.try_emplace(pair, static_cast<int32_t>(class_pairs.size()));
      if (fresh) class_pairs.push_back(pair);
      if (classes.interval_class.empty() || classes.interval_class.back() != it->second) {
        classes.interval_start.push_back(x);
        classes.interval_class.push_back(it->second);
      }
    }
    classes.n_classes = static_cast<int32_t>(class_pairs.size());
    Result<Dfa> dfa = product(a, b, op, class_pairs);
    if (!dfa) return dfa.status();
    return finish(std::move(name), classes, std::move(*dfa));
  }

 private:
  // -1 stands for a dead state of either side: no string from it is accepted.
  static bool accepts(RegexOp op, bool in_a, bool in_b) {
    switch (op) {
      case RegexOp::kAnd: return in_a && in_b;
      case RegexOp::kOr: return in_a || in_b;
      case RegexOp::kAndNot: return in_a && !in_b;
    }
    return false;
  }
  // Whether a pair can still accept something (else it is not explored).
  static bool may_live(RegexOp op, int32_t sa, int32_t sb) {
    return op == RegexOp::kOr ? sa >= 0 || sb >= 0 : op == RegexOp::kAnd ? sa >= 0 && sb >= 0 : sa >= 0;
  }
  static Result<Dfa> product(const Regex& a, const Regex& b, RegexOp op,
                             const std::vector<std::pair<int32_t, int32_t>>& class_pairs) {
    Dfa dfa;
    dfa.n_classes = static_cast<int32_t>(class_pairs.size());
    std::map<std::pair<int32_t, int32_t>, int32_t> ids;
    std::vector<std::pair<int32_t, int32_t>> states;
    auto state_of = [&](int32_t sa, int32_t sb) {
      auto [it, fresh] = ids.try_emplace({sa, sb}, static_cast<int32_t>(states.size()));
      if (fresh) {
        states.emplace_back(sa, sb);
        dfa.accepting.push_back(accepts(op, sa >= 0 && a.accepting(sa), sb >= 0 && b.accepting(sb)) ? 1 : 0);
        dfa.next.resize(dfa.next.size() + class_pairs.size(), -1);
      }
      return it->second;
    };
    state_of(a.start_, b.start_);  // a dead pair when nothing can be accepted: pruned by finish()
    for (size_t i = 0; i < states.size(); ++i) {
      const auto [sa, sb] = states[i];
      if (!may_live(op, sa, sb)) continue;
      for (int32_t k = 0; k < dfa.n_classes; ++k) {
        const int32_t ta = sa < 0 ? -1 : a.next_[static_cast<size_t>(sa) * a.n_classes_ + class_pairs[k].first];
        const int32_t tb = sb < 0 ? -1 : b.next_[static_cast<size_t>(sb) * b.n_classes_ + class_pairs[k].second];
        if (!may_live(op, ta, tb)) continue;
        if (states.size() >= static_cast<size_t>(kMaxRegexBuildStates) && !ids.count({ta, tb})) {
          return Status::errorf(
              "pattern: the {} needs more than {} automaton states during construction (the limit)",
              op == RegexOp::kAnd ? "intersection" : op == RegexOp::kOr ? "union" : "difference",
              kMaxRegexBuildStates);
        }
        dfa.next[i * class_pairs.size() + k] = state_of(ta, tb);
      }
    }
    return dfa;
  }

  static void tables(Regex& re, const Partition& classes, const Dfa& dfa) {
    DSV4_CHECK(classes.n_classes < 32768);
    re.n_classes_ = classes.n_classes;
    re.n_states_ = dfa.n_states();
    re.start_ = re.n_states_ > 0 ? 0 : -1;
    re.next_ = dfa.next;
    re.accepting_ = dfa.accepting;
    re.interval_start_ = classes.interval_start;
    re.interval_class_.assign(classes.interval_class.begin(), classes.interval_class.end());
    for (uint32_t cp = 0; cp < 128; ++cp) re.ascii_class_[cp] = static_cast<int16_t>(re.class_above_ascii(cp));
    const CodeSet json_text = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, kMaxCodePoint}};
    re.loops_on_json_text_.resize(re.n_states_);
    for (int32_t s = 0; s < re.n_states_; ++s) re.loops_on_json_text_[s] = re.loops_on(s, json_text) ? 1 : 0;
  }
};

}  // namespace regex_automaton

Result<Regex> compile_regex(std::string_view pattern, bool ascii_ignore_case) {
  Result<RegexSyntax> syntax = parse_regex(pattern);
  if (!syntax) return syntax.status();
  if (ascii_ignore_case) {
    for (CodeSet& set : syntax->sets) set = regex_automaton::fold_ascii_case(set);
  }
  return compile_regex_syntax(std::move(*syntax), std::string(pattern));
}

Result<Regex> compile_regex_syntax(RegexSyntax syntax, std::string name) {
  Result<std::vector<int32_t>> lookaheads = find_lookaheads(syntax);
  if (!lookaheads) return lookaheads.status();
  if (!lookaheads->empty()) return compile_with_lookaheads(syntax, *lookaheads, name);
  const auto any_set = static_cast<int32_t>(syntax.sets.size());
  syntax.sets.push_back({{0, kMaxCodePoint}});
  const bool has_boundary = std::any_of(syntax.nodes.begin(), syntax.nodes.end(), [](const RegexNode& n) {
    return n.kind == RegexNodeKind::kWordBoundary || n.kind == RegexNodeKind::kNotWordBoundary;
  });
  const auto word_set_id = static_cast<int32_t>(syntax.sets.size());
  if (has_boundary) syntax.sets.push_back(word_code_set());
  Result<regex_automaton::Nfa> nfa = regex_automaton::NfaBuilder(syntax).build(any_set);
  if (!nfa) return nfa.status();
  const regex_automaton::Partition classes = regex_automaton::partition_classes(syntax.sets);
  if (classes.n_classes > kMaxRegexClasses)
    return Status::errorf("pattern: {} distinct code point classes, above the limit {}", classes.n_classes,
                          kMaxRegexClasses);
  std::vector<uint8_t> word_class;
  if (has_boundary) {
    word_class.assign(classes.n_classes, 0);
    for (int32_t c : classes.set_classes[word_set_id]) word_class[c] = 1;
  }
  Result<regex_automaton::Dfa> dfa = regex_automaton::SubsetBuilder(*nfa, classes, std::move(word_class)).build();
  if (!dfa) return dfa.status();
  return regex_automaton::RegexBuilder::finish(std::move(name), classes, std::move(*dfa));
}

Result<Regex> intersect_regex(const Regex& a, const Regex& b) {
  return combine_regex(a, b, RegexOp::kAnd, a.pattern() + " & " + b.pattern());
}

Result<Regex> combine_regex(const Regex& a, const Regex& b, RegexOp op, std::string name) {
  return regex_automaton::RegexBuilder::combine(a, b, op, std::move(name));
}

int32_t Regex::class_above_ascii(uint32_t cp) const {
  const auto it = std::upper_bound(interval_start_.begin(), interval_start_.end(), cp);
  return interval_class_[static_cast<size_t>(it - interval_start_.begin()) - 1];
}

bool Regex::loops_on(int32_t state, const CodeSet& text) const {
  for (const CodeRange& r : text) {
    auto i = static_cast<size_t>(std::upper_bound(interval_start_.begin(), interval_start_.end(), r.lo) -
                                 interval_start_.begin()) -
             1;
    for (; i < interval_start_.size() && interval_start_[i] <= r.hi; ++i) {
      if (next_[static_cast<size_t>(state) * n_classes_ + interval_class_[i]] != state) return false;
    }
  }
  return true;
}

bool Regex::steps_within(int32_t state, uint32_t lo, uint32_t hi) const {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return false;
  auto i = static_cast<size_t>(std::upper_bound(interval_start_.begin(), interval_start_.end(), lo) -
                               interval_start_.begin()) -
           1;
  for (; i < interval_start_.size() && interval_start_[i] <= hi; ++i) {
    if (next_[static_cast<size_t>(state) * n_classes_ + interval_class_[i]] >= 0) return true;
  }
  return false;
}

// The first set bit of state's length row in [from, to), or -1.
int64_t Regex::find_length_bit(int32_t state, int64_t from, int64_t to) const {
  const uint64_t* row = &length_bits_[static_cast<size_t>(state) * length_words_];
  for (int64_t k = from; k < to;) {
    const uint64_t word = row[k / 64] >> (k % 64);
    if (word != 0) {
      const int64_t hit = k + __builtin_ctzll(word);
      return hit < to ? hit : -1;
    }
    k = (k / 64 + 1) * 64;
  }
  return -1;
}

int64_t Regex::accepting_length_at_least(int32_t state, int64_t lo) const {
  const int64_t a = length_threshold_, p = length_period_;
  if (lo < a) {
    const int64_t hit = find_length_bit(state, lo, a);
    if (hit >= 0) return hit;
    lo = a;
  }
  // From the threshold on, bit k is bit a + (k - a) mod p: scan one period starting at lo.
  const int64_t j0 = a + (lo - a) % p;
  int64_t hit = find_length_bit(state, j0, a + p);
  if (hit >= 0) return lo + (hit - j0);
  hit = find_length_bit(state, a, j0);
  if (hit >= 0) return lo + (a + p - j0) + (hit - a);
  return -1;
}

bool matches(const Regex& re, std::u32string_view text) {
  int32_t s = re.start();
  for (char32_t cp : text) {
    if (s < 0) return false;
    s = re.step(s, static_cast<uint32_t>(cp));
  }
  return s >= 0 && re.accepting(s);
}

bool matches_utf8(const Regex& re, std::string_view text) {
  std::u32string decoded;
  return regex_automaton::decode_utf8(text, decoded) && matches(re, decoded);
}

}  // namespace dsv4::grammar
