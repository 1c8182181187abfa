#include "grammar/token_mask.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "grammar/json_scalar.h"

namespace dsv4::grammar {

static_assert(kMaxStacks <= 64, "walk_ends keeps the live readings in 64-bit masks");

VocabTrie::VocabTrie(int32_t n_vocab, const std::function<std::string_view(int32_t)>& bytes,
                     const std::function<bool(int32_t)>& skip)
    : n_vocab_(n_vocab) {
  // Sort the ids by their bytes; each trie level is then a run of equal prefixes.
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_vocab; ++id)
    if (!skip(id) && !bytes(id).empty()) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes(a) < bytes(b); });
  for (int32_t id : ids) max_length_ = std::max<int32_t>(max_length_, static_cast<int32_t>(bytes(id).size()));
  // Breadth-first over (range of sorted ids, depth): the children of a node are contiguous.
  struct Pending {
    int32_t node;
    size_t begin, end;  // ids sharing the node's prefix
    size_t depth;
  };
  nodes_.push_back(Node{});
  std::vector<Pending> level = {{0, 0, ids.size(), 0}}, next;
  while (!level.empty()) {
    next.clear();
    for (const Pending& p : level) {
      size_t i = p.begin;
      Node& parent = nodes_[p.node];
      parent.first_token = static_cast<int32_t>(token_ids_.size());
      while (i < p.end && bytes(ids[i]).size() == p.depth) token_ids_.push_back(ids[i++]);
      nodes_[p.node].n_tokens = static_cast<int32_t>(token_ids_.size()) - nodes_[p.node].first_token;
      nodes_[p.node].first_child = static_cast<int32_t>(nodes_.size());
      while (i < p.end) {
        const uint8_t b = static_cast<uint8_t>(bytes(ids[i])[p.depth]);
        size_t j = i;
        while (j < p.end && static_cast<uint8_t>(bytes(ids[j])[p.depth]) == b) ++j;
        Node child;
        child.byte = b;
        nodes_.push_back(child);
        next.push_back({static_cast<int32_t>(nodes_.size() - 1), i, j, p.depth + 1});
        i = j;
      }
      nodes_[p.node].n_children = static_cast<int32_t>(nodes_.size()) - nodes_[p.node].first_child;
    }
    level.swap(next);
  }
}

MaskVocab::MaskVocab(int32_t n_vocab, const std::function<std::string_view(int32_t)>& bytes,
                     const std::function<bool(int32_t)>& skip)
    : all(n_vocab, bytes, skip),
      quoted(n_vocab, bytes, [&](int32_t id) { return skip(id) || bytes(id).find('"') == std::string_view::npos; }),
      angled(n_vocab, bytes, [&](int32_t id) { return skip(id) || bytes(id).find('<') == std::string_view::npos; }),
      string_text(static_cast<size_t>((n_vocab + 63) / 64), 0),
      key_text(string_text.size(), 0),
      raw_text(string_text.size(), 0) {
  for (int32_t id = 0; id < n_vocab; ++id) {
    const std::string_view b = bytes(id);
    if (skip(id) || b.empty()) continue;
    if (JsonMatcher::string_text(b.data(), static_cast<int64_t>(b.size())))
      string_text[id >> 6] |= uint64_t{1} << (id & 63);
    if (JsonMatcher::key_text(b.data(), static_cast<int64_t>(b.size()))) key_text[id >> 6] |= uint64_t{1} << (id & 63);
    if (JsonMatcher::raw_text(b.data(), static_cast<int64_t>(b.size()))) raw_text[id >> 6] |= uint64_t{1} << (id & 63);
  }
  token_at.assign(static_cast<size_t>(n_vocab) + 1, 0);
  bytes_end.assign(static_cast<size_t>(all.max_length()) + 1, 0);
  for (int32_t id = 0; id < n_vocab; ++id) {
    const std::string_view b = skip(id) ? std::string_view() : bytes(id);
    token_bytes.insert(token_bytes.end(), b.begin(), b.end());
    token_at[static_cast<size_t>(id) + 1] = static_cast<int64_t>(token_bytes.size());
    ++bytes_end[std::min(b.size(), bytes_end.size() - 1)];
  }
  for (size_t k = 1; k < bytes_end.size(); ++k) bytes_end[k] += bytes_end[k - 1];
  by_bytes.resize(static_cast<size_t>(n_vocab));
  std::vector<int64_t> next(bytes_end.size(), 0);  // counting sort by length
  for (size_t k = 1; k < next.size(); ++k) next[k] = bytes_end[k - 1];
  for (int32_t id = 0; id < n_vocab; ++id)
    by_bytes[static_cast<size_t>(next[static_cast<size_t>(token_at[id + 1] - token_at[id])]++)] = id;
  string_by_length = TextByLength(string_text, all.max_length(), [&](int32_t id) {
    Frame f;
    f.phase = kSBody;
    for (char c : bytes(id)) string_byte(f, static_cast<uint8_t>(c), -1);
    return f.i;
  });
  raw_by_length = TextByLength(raw_text, all.max_length(), [&](int32_t id) {
    Frame f;
    for (char c : bytes(id)) raw_text_byte(f, static_cast<uint8_t>(c), -1);
    return f.i;
  });
}

// A counting sort of the ids in `set` by code_points(id) (at most max_length).
TextByLength::TextByLength(const std::vector<uint64_t>& set, int32_t max_length,
                           const std::function<int32_t(int32_t)>& code_points)
    : text(set), end(static_cast<size_t>(max_length) + 1, 0) {
  std::vector<int32_t> count(set.size() * 64, -1);
  for (size_t id = 0; id < count.size(); ++id)
    if (set[id >> 6] >> (id & 63) & 1) ++end[static_cast<size_t>(count[id] = code_points(static_cast<int32_t>(id)))];
  for (size_t k = 1; k < end.size(); ++k) end[k] += end[k - 1];
  ids.resize(static_cast<size_t>(end.back()));
  std::vector<int64_t> next(end.size(), 0);
  for (size_t k = 1; k < next.size(); ++k) next[k] = end[k - 1];
  for (size_t id = 0; id < count.size(); ++id)
    if (count[id] >= 0) ids[static_cast<size_t>(next[static_cast<size_t>(count[id])]++)] = static_cast<int32_t>(id);
}

void TextByLength::fill_up_to(int64_t room, uint64_t* allowed) const {
  const auto up_to = static_cast<size_t>(end[static_cast<size_t>(std::min<int64_t>(room, static_cast<int64_t>(end.size()) - 1))]);
  if (up_to < ids.size() - up_to) {  // set the short ones, or clear the long ones: whichever is fewer
    std::memset(allowed, 0, sizeof(uint64_t) * text.size());
    for (size_t k = 0; k < up_to; ++k) allowed[ids[k] >> 6] |= uint64_t{1} << (ids[k] & 63);
  } else {
    std::memcpy(allowed, text.data(), sizeof(uint64_t) * text.size());
    for (size_t k = up_to; k < ids.size(); ++k) allowed[ids[k] >> 6] &= ~(uint64_t{1} << (ids[k] & 63));
  }
}

TokenMasker::TokenMasker(const MaskVocab& vocab, int64_t cache_bytes)
    : vocab_(vocab), cache_((vocab.all.n_vocab() + 63) / 64, cache_bytes) {
  states_.resize(static_cast<size_t>(vocab.all.max_length()) + 1);
  frames_.resize(static_cast<size_t>(vocab.all.max_length()) + 1);
  body_frames_.resize((static_cast<size_t>(vocab.all.max_length()) + 1) * kMaxStacks);
  alive_.resize(static_cast<size_t>(vocab.all.max_length()) + 1);
  number_base_.resize(static_cast<size_t>(vocab.all.max_length()) + 1);
  walk_.resize(static_cast<size_t>(vocab.all.max_length()) + 1);
}

int64_t TokenMasker::fill(const JsonMatcher& m, const MatchState& st, uint64_t* allowed) {
  const size_t words = static_cast<size_t>((vocab_.all.n_vocab() + 63) / 64);
  visited_ = 0;
  const Grammar& g = m.grammar();
  bool bodies = st.n > 0;
  for (int32_t k = 0; k < st.n && bodies; ++k)
    bodies = string_body_of(g, st.s[k], vocab_.all.max_length(), &bodies_[k], &keys_[k]) &&
             bodies_[k].end_byte == bodies_[0].end_byte && bodies_[k].ends_by_byte == bodies_[0].ends_by_byte;
  const std::vector<uint64_t>* text = nullptr;
  if (!bodies) {
  } else if (m.in_string_text(st, vocab_.all.max_length())) {
    text = &vocab_.string_text;
  } else if (m.in_key_text(st)) {
    text = &vocab_.key_text;
  } else if (m.in_raw_text(st, vocab_.all.max_length())) {
    text = &vocab_.raw_text;
  } else if (cache_.capacity() == 0) {
    bodies = false;
  }
  if (!bodies) {
    std::memset(allowed, 0, sizeof(uint64_t) * words);
    return walk(m, st, allowed);
  }
  if (text) std::memcpy(allowed, text->data(), sizeof(uint64_t) * words);
  else fill_body_text(g, st, allowed);
  if (bodies_[0].ends_by_byte) walk_ends(bodies_[0].end_byte == '"' ? vocab_.quoted : vocab_.angled, m, st, allowed);
  int64_t count = 0;
  for (size_t w = 0; w < words; ++w) count += __builtin_popcountll(allowed[w]);
  return count;
}

void TokenMasker::fill_body_text(const Grammar& g, const MatchState& st, uint64_t* allowed) {
  const size_t words = static_cast<size_t>((vocab_.all.n_vocab() + 63) / 64);
  std::memset(allowed, 0, sizeof(uint64_t) * words);
  // Each reading keeps to its own body on these tokens: the mask is the union of theirs.
  for (int32_t k = 0; k < st.n; ++k) {
    const StringBody& body = bodies_[k];
    const StringMaskKey& key = keys_[k];
    const uint64_t* bits = cache_.find(key);
    if (!bits) {
      std::shared_ptr<const void> pin;  // what the key names by address
      if (body.regex >= 0) pin = g.regexes[body.regex];
      if (body.key_automaton >= 0) pin = g.key_automata[body.key_automaton];
      const bool near = (body.kind == BodyKind::kPattern || body.kind == BodyKind::kRawPattern) && key.min_gap == 0 &&
                        key.room >= 0 && cache_.capacity() >= 2;
      if (near) {
        bits = fill_near_bound(body, key, body_frame(st.s[k]), pin);
        for (size_t w = 0; w < words; ++w) allowed[w] |= bits[w];
        continue;
      }
      uint64_t* fresh = cache_.insert(key, std::move(pin));
      if (body.kind == BodyKind::kPlain && key.phase == kSBody && key.esc == 0 && key.room >= 0) {
        vocab_.string_by_length.fill_up_to(key.room, fresh);
      } else if (body.kind == BodyKind::kRaw && key.more == 0 && key.room >= 0) {
        vocab_.raw_by_length.fill_up_to(key.room, fresh);
      } else {
        std::memset(fresh, 0, sizeof(uint64_t) * words);
        walk_body(body, body_frame(st.s[k]), fresh);
      }
      bits = fresh;
    }
    for (size_t w = 0; w < words; ++w) allowed[w] |= bits[w];
  }
}

// Along a path without the end byte only the top frames change (body_byte, one per reading);
// at the path's first end byte the readings still alive become a matcher state again.
void TokenMasker::walk_ends(const VocabTrie& trie, const JsonMatcher& m, const MatchState& st, uint64_t* allowed) {
  const std::vector<VocabTrie::Node>& nodes = trie.nodes();
  const std::vector<int32_t>& ids = trie.token_ids();
  const uint8_t end_byte = bodies_[0].end_byte;
  for (int32_t k = 0; k < st.n; ++k) body_frames_[k] = st.s[k].f[st.s[k].n - 1];
  alive_[0] = st.n >= 64 ? ~uint64_t{0} : (uint64_t{1} << st.n) - 1;  // kMaxStacks <= 64
  int32_t depth = 0, matcher_depth = -1;  // states_[d] holds the path's state for d >= matcher_depth >= 1
  walk_[0] = {0, 0};
  while (depth >= 0) {
    Walk& w = walk_[depth];
    const VocabTrie::Node& node = nodes[w.node];
    if (w.next_child == node.n_children) {
      if (depth == matcher_depth) matcher_depth = -1;
      --depth;
      continue;
    }
    const int32_t child = node.first_child + w.next_child++;
    const VocabTrie::Node& c = nodes[child];
    ++visited_;
    if (matcher_depth < 0 && c.byte != end_byte) {  // still inside every body
      uint64_t alive = 0;
      for (uint64_t live = alive_[depth]; live != 0; live &= live - 1) {
        const int k = __builtin_ctzll(live);
        Frame& f = body_frames_[(depth + 1) * kMaxStacks + k];
        f = body_frames_[depth * kMaxStacks + k];
        if (body_byte(bodies_[k], f, c.byte)) alive |= uint64_t{1} << k;
      }
      if (alive == 0) continue;
      alive_[depth + 1] = alive;
    } else {
      const MatchState* from = &states_[depth];
      if (matcher_depth < 0) {  // the first end byte: the live readings with their top frames
        MatchState& scratch = states_[depth];
        scratch.n = 0;
        for (uint64_t live = alive_[depth]; live != 0; live &= live - 1) {
          const int k = __builtin_ctzll(live);
          MatchStack& s = scratch.s[scratch.n++];
          copy_stack(s, st.s[k]);
          s.f[s.n - 1] = body_frames_[depth * kMaxStacks + k];
        }
      }
      m.advance(*from, c.byte, states_[depth + 1]);
      if (states_[depth + 1].n == 0) continue;
      if (matcher_depth < 0) matcher_depth = depth + 1;
    }
    for (int32_t t = 0; t < c.n_tokens; ++t) {
      const int32_t id = ids[c.first_token + t];
      allowed[id >> 6] |= uint64_t{1} << (id & 63);
    }
    walk_[++depth] = {child, 0};
  }
}

void TokenMasker::walk_body(const StringBody& body, const Frame& top, uint64_t* allowed) {
  const std::vector<VocabTrie::Node>& nodes = vocab_.all.nodes();
  const std::vector<int32_t>& ids = vocab_.all.token_ids();
  frames_[0] = top;
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
    ++visited_;
    const VocabTrie::Node& c = nodes[child];
    if (body.ends_by_byte && c.byte == body.end_byte) continue;  // those tokens are the end byte's trie's
    frames_[depth + 1] = frames_[depth];
    if (!body_byte(body, frames_[depth + 1], c.byte)) continue;
    for (int32_t t = 0; t < c.n_tokens; ++t) {
      const int32_t id = ids[c.first_token + t];
      allowed[id >> 6] |= uint64_t{1} << (id & 63);
    }
    walk_[++depth] = {child, 0};
  }
}

void apply_token_mask(const uint64_t* allowed, int64_t n_ids, float* row, int64_t n_row) {
  const int64_t covered = std::min(n_ids, n_row);
  for (int64_t base = 0; base < covered; base += 64) {
    const int64_t n = std::min<int64_t>(64, covered - base);
    const uint64_t valid = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    uint64_t refused = ~allowed[base >> 6] & valid;
    if (refused == valid) {
      std::fill(row + base, row + base + n, -INFINITY);
      continue;
    }
    const uint64_t keep = ~refused & valid;
    if (n == 64 && __builtin_popcountll(refused) > 8 + 2 * __builtin_popcountll(keep)) {
      // A sparse word (digits, a format's few bytes): the whole word as one vector fill, the
      // allowed logits saved around it, not one scalar store per refused id.
      float saved[64];
      for (uint64_t k = keep; k != 0; k &= k - 1) saved[__builtin_ctzll(k)] = row[base + __builtin_ctzll(k)];
      std::fill(row + base, row + base + 64, -INFINITY);
      for (uint64_t k = keep; k != 0; k &= k - 1) row[base + __builtin_ctzll(k)] = saved[__builtin_ctzll(k)];
      continue;
    }
    for (; refused != 0; refused &= refused - 1) row[base + __builtin_ctzll(refused)] = -INFINITY;
  }
  if (n_row > covered) std::fill(row + covered, row + n_row, -INFINITY);
}

}  // namespace dsv4::grammar
