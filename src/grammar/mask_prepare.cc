// TokenMasker::prepare: the string-body masks (string_body.h) of every state of a grammar's small
// automata, before the first token, so that a path through them finds its masks in the cache
// instead of walking the trie at its first visit of each state. A lane is one key: the body of
// one grammar node in one automaton state at a token boundary (phase kSBody, no escape or UTF-8
// sequence open, minLength met, maxLength far: for a maxLength within a token's reach that is the
// key fill_near_bound derives each room's mask from). Lanes go through the trie up to 64 at a time,
// each with its own frame per depth and a bit in the live set, as walk_body takes one; a subtree
// is left when no lane is live in it. Keys that other states reach (escapes, open UTF-8
// sequences, lengths near a bound) stay lazy, as do the lanes beyond the budget.
#include <cstring>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grammar/json_scalar.h"
#include "grammar/token_mask.h"

namespace dsv4::grammar {
namespace mask_prepare {  // named: the grammar sources build as one unity translation unit

constexpr int kLanesPerWalk = 64;

struct Lane {
  StringBody body;
  StringMaskKey key;
  Frame frame;
  std::shared_ptr<const void> pin;  // what the key names by address
};

struct KeyHash {
  size_t operator()(const StringMaskKey& k) const { return static_cast<size_t>(k.hash()); }
};

// The lane of node `node` in automaton state `state`, where the node's body there has a key that
// no length or escape state refines; false for other nodes and states.
bool lane_of(const Grammar& g, int32_t node, int32_t state, int32_t max_token_length, MatchStack& s, Lane* lane) {
  const Node& n = g.nodes[static_cast<size_t>(node)];
  const bool text = n.kind == Kind::kText, raw = n.kind == Kind::kRawString, string = n.kind == Kind::kString;
  if (n.regex < 0 || !(text || raw || string)) return false;
  const Regex& re = *g.regexes[static_cast<size_t>(n.regex)];
  if (string && re.loops_on_json_text(state)) return false;  // JsonMatcher::in_string_text's fast path
  s.n = 1;
  Frame& f = s.f[0];
  f = Frame{};
  f.node = node;
  f.phase = kSBody;
  f.j = state;
  f.i = text ? 0 : static_cast<int32_t>(std::max<int64_t>(n.min_length, 0));  // minLength met
  if (!string_body_of(g, s, max_token_length, &lane->body, &lane->key)) return false;
  if (lane->key.min_gap > 0) return false;
  if (lane->key.room >= 0) {  // maxLength within a token's reach: the far key, walked without the bound
    lane->key.room = -1;      // (TokenMasker::fill_near_bound derives each room's mask from it)
    lane->body.pattern.min_length = 0;
    lane->body.pattern.max_length = -1;
  }
  lane->frame = f;
  lane->pin = g.regexes[static_cast<size_t>(n.regex)];
  return true;
}

// The lanes of g, each key once and none the cache holds, at most max_lanes.
// The keys of unbounded bodies come first, the far keys of bounded ones after (the budget cuts
// those first: their rooms' misses derive from them, but cost little less without them).
std::vector<Lane> lanes_of(const Grammar& g, const MaskCache& cache, int32_t max_token_length, int64_t max_lanes) {
  std::vector<Lane> lanes, far;
  std::unordered_set<StringMaskKey, KeyHash> seen;
  auto stack = std::make_unique<MatchStack>();
  for (int32_t node = 0; node < static_cast<int32_t>(g.nodes.size()); ++node) {
    const int32_t regex = g.nodes[static_cast<size_t>(node)].regex;
    if (regex < 0) continue;
    for (int32_t state = 0; state < g.regexes[static_cast<size_t>(regex)]->n_states(); ++state) {
      if (static_cast<int64_t>(lanes.size()) >= max_lanes) break;
      Lane lane;
      if (!lane_of(g, node, state, max_token_length, *stack, &lane)) continue;
      if (cache.contains(lane.key) || !seen.insert(lane.key).second) continue;
      (lane.body.pattern.max_length < 0 && g.nodes[static_cast<size_t>(node)].max_length >= 0 ? far : lanes)
          .push_back(std::move(lane));
    }
  }
  for (Lane& lane : far)
    if (static_cast<int64_t>(lanes.size()) < max_lanes) lanes.push_back(std::move(lane));
  return lanes;
}

}  // namespace mask_prepare

int64_t TokenMasker::prepare(const Grammar& g, int64_t budget, int64_t max_masks) {
  using mask_prepare::Lane;
  prepare_steps_ = 0;
  if (cache_.capacity() == 0) return 0;
  const std::vector<Lane> lanes =
      mask_prepare::lanes_of(g, cache_, vocab_.all.max_length(), std::min(max_masks, cache_.capacity() / 2));
  const std::vector<VocabTrie::Node>& nodes = vocab_.all.nodes();
  const std::vector<int32_t>& ids = vocab_.all.token_ids();
  const size_t words = static_cast<size_t>((vocab_.all.n_vocab() + 63) / 64);
  const size_t depths = static_cast<size_t>(vocab_.all.max_length()) + 1;
  constexpr int kLanes = mask_prepare::kLanesPerWalk;
  std::vector<Frame> frames(depths * kLanes);  // [depth, lane]
  std::vector<uint64_t> alive(depths), masks(kLanes * words);
  int64_t added = 0;
  for (size_t first = 0; first < lanes.size(); first += kLanes) {
    const int n_lanes = static_cast<int>(std::min<size_t>(kLanes, lanes.size() - first));
    const Lane* lane = lanes.data() + first;
    std::memset(masks.data(), 0, sizeof(uint64_t) * words * static_cast<size_t>(n_lanes));
    for (int k = 0; k < n_lanes; ++k) frames[k] = lane[k].frame;
    alive[0] = n_lanes == 64 ? ~uint64_t{0} : (uint64_t{1} << n_lanes) - 1;
    int32_t depth = 0;
    walk_[0] = {0, 0};
    while (depth >= 0) {
      Walk& w = walk_[depth];
      const VocabTrie::Node& node = nodes[w.node];
      if (w.next_child == node.n_children) {
        --depth;
        continue;
      }
      const int32_t child = node.first_child + w.next_child++;
      const VocabTrie::Node& c = nodes[child];
      uint64_t live = 0;
      for (uint64_t from = alive[depth]; from != 0; from &= from - 1) {
        const int k = __builtin_ctzll(from);
        const StringBody& body = lane[k].body;
        if (body.ends_by_byte && c.byte == body.end_byte) continue;  // the end byte's trie's (walk_body)
        Frame& f = frames[(depth + 1) * kLanes + k];
        f = frames[depth * kLanes + k];
        if (body_byte(body, f, c.byte)) live |= uint64_t{1} << k;
      }
      prepare_steps_ += __builtin_popcountll(alive[depth]);
      if (prepare_steps_ > budget) return added;  // this walk's masks are partial: none kept
      if (live == 0) continue;
      for (int32_t t = 0; t < c.n_tokens; ++t) {
        const int32_t id = ids[c.first_token + t];
        for (uint64_t l = live; l != 0; l &= l - 1)
          masks[static_cast<size_t>(__builtin_ctzll(l)) * words + static_cast<size_t>(id >> 6)] |= uint64_t{1} << (id & 63);
      }
      alive[++depth] = live;
      walk_[depth] = {child, 0};
    }
    for (int k = 0; k < n_lanes; ++k, ++added)
      std::memcpy(cache_.insert(lane[k].key, lane[k].pin), masks.data() + static_cast<size_t>(k) * words,
                  sizeof(uint64_t) * words);
  }
  return added;
}

}  // namespace dsv4::grammar
