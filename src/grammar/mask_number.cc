// TokenMasker's walk of the whole trie with the matcher, numbers apart: below a state whose lone
// reading has a JSON number on top (number_on_top), along a trie path of bytes the number's byte
// function takes (json_scalar.h's number_byte or ranged_number_byte) only the top frame changes,
// one cheap step per node; at a path's first byte it refuses, the matcher takes over from the
// whole stack (JsonMatcher::advance, exact). Exact because a byte a number takes (digits . e E
// + -) is never one its parent could take after the number ends: the parent is the root (done),
// an object or an array, whose next bytes after a value are whitespace and the separators ',' /
// '}' / ']' (JsonLayout's separators: ',' then whitespace). Otherwise a number in a digit-heavy
// vocabulary costs one matcher step (stack copies) per digit token: about 1,500 for DeepSeek's.
// The same for a DSML raw string without a pattern (raw_on_top), whose bytes the matcher never
// lets its parent take (a raw string is never completable): its frame alone steps until a byte
// it refuses or the last byte of its closing tag. Inside a possible closing tag (after a '<')
// its mask is no string body, and its walk is the whole trie: 274,000 matcher steps before.
#include "grammar/json_scalar.h"
#include "grammar/token_mask.h"
#include "grammar/unique_items.h"

namespace dsv4::grammar {
namespace mask_number {  // named: the grammar sources build as one unity translation unit

constexpr int32_t kBottomNode = -2;  // Frame::node of the bottom frame (json_matcher.cc)

bool number_step(const Node& n, Frame& f, uint8_t c) {
  return n.range.bounded ? ranged_number_byte(f, c, n.range) : number_byte(f, c, n.kind == Kind::kInteger);
}

// JsonMatcher::raw_string_byte for a DSML raw string without a pattern, on its frame alone:
// false where it refuses c or where c completes the closing tag (the matcher then pops the
// string: the walk hands that byte to it).
bool raw_step(const Node& n, Frame& f, uint8_t c) {
  if (f.j > 0) {  // inside a possible closing tag
    if (c == static_cast<uint8_t>(kDsmlParamClose[static_cast<size_t>(f.j)]))
      return ++f.j != static_cast<int32_t>(kDsmlParamClose.size());
    const int32_t k = f.j;  // not the tag: its bytes so far were text
    f.j = 0;
    for (int32_t t = 0; t < k; ++t)
      if (!raw_text_byte(f, static_cast<uint8_t>(kDsmlParamClose[static_cast<size_t>(t)]), n.max_length)) return false;
  }
  if (c == '<' && f.more == 0) {
    f.j = 1;
    return true;
  }
  return raw_text_byte(f, c, n.max_length);
}

bool frame_step(const Node& n, Frame& f, uint8_t c) {
  return n.kind == Kind::kRawString ? raw_step(n, f, c) : number_step(n, f, c);
}

}  // namespace mask_number

bool TokenMasker::number_on_top(const Grammar& g, const MatchState& st) {
  if (st.n != 1 || st.s[0].n < 2) return false;
  const MatchStack& s = st.s[0];
  const int32_t top = s.f[s.n - 1].node, parent = s.f[s.n - 2].node;
  if (top < 0 || (g.nodes[top].kind != Kind::kNumber && g.nodes[top].kind != Kind::kInteger)) return false;
  if (hashed_array_frame(g, s) >= 0) return false;  // a uniqueItems item: its hash goes on per byte
  if (parent == mask_number::kBottomNode) return true;
  return parent >= 0 && (g.nodes[parent].kind == Kind::kObject || g.nodes[parent].kind == Kind::kArray);
}

bool TokenMasker::raw_on_top(const Grammar& g, const MatchState& st) {
  if (st.n != 1) return false;
  const int32_t top = st.s[0].f[st.s[0].n - 1].node;
  return top >= 0 && g.nodes[top].kind == Kind::kRawString && g.nodes[top].regex < 0;
}

// Depth d of the walk is in the matcher (number_base_[d] < 0: states_[d] is the path's state) or
// in a number begun at depth b = number_base_[d] (frames_[d] its frame; states_[b] the state
// whose top it replaces). A number's exit builds that state once per depth, into states_[d].
int64_t TokenMasker::walk(const JsonMatcher& m, const MatchState& st, uint64_t* allowed) {
  const std::vector<VocabTrie::Node>& nodes = vocab_.all.nodes();
  const std::vector<int32_t>& ids = vocab_.all.token_ids();
  const Grammar& g = m.grammar();
  states_[0].n = st.n;
  for (int32_t k = 0; k < st.n; ++k) copy_stack(states_[0].s[k], st.s[k]);
  auto enter = [&](int32_t d) {  // states_[d] just computed: a number on top walks apart
    number_base_[d] = number_on_top(g, states_[d]) || raw_on_top(g, states_[d]) ? d : -1;
    if (number_base_[d] >= 0) frames_[d] = states_[d].s[0].f[states_[d].s[0].n - 1];
  };
  enter(0);
  int64_t count = 0;
  int32_t depth = 0, exit_depth = -1;  // states_[exit_depth]: a number's state at that depth
  walk_[0] = {0, 0};
  while (depth >= 0) {
    Walk& w = walk_[depth];
    const VocabTrie::Node& node = nodes[w.node];
    if (w.next_child == node.n_children) {
      if (depth == exit_depth) exit_depth = -1;
      --depth;
      continue;
    }
    const int32_t child = node.first_child + w.next_child++;
    const VocabTrie::Node& c = nodes[child];
    ++visited_;
    const int32_t base = number_base_[depth];
    if (base >= 0) {
      frames_[depth + 1] = frames_[depth];
      const MatchStack& s = states_[base].s[0];
      if (mask_number::frame_step(g.nodes[s.f[s.n - 1].node], frames_[depth + 1], c.byte)) {
        number_base_[depth + 1] = base;
      } else {  // the number or raw string ends here, or nothing follows
        if (depth != base && exit_depth != depth) {
          MatchState& from = states_[depth];
          from.n = 1;
          copy_stack(from.s[0], s);
          from.s[0].f[from.s[0].n - 1] = frames_[depth];
          exit_depth = depth;
        }
        m.advance(states_[depth], c.byte, states_[depth + 1]);
        if (states_[depth + 1].n == 0) continue;
        enter(depth + 1);
      }
    } else {
      m.advance(states_[depth], c.byte, states_[depth + 1]);
      if (states_[depth + 1].n == 0) continue;
      enter(depth + 1);
    }
    for (int32_t t = 0; t < c.n_tokens; ++t) {
      const int32_t id = ids[c.first_token + t];
      allowed[id >> 6] |= uint64_t{1} << (id & 63);
    }
    count += c.n_tokens;
    walk_[++depth] = {child, 0};
  }
  return count;
}

}  // namespace dsv4::grammar
