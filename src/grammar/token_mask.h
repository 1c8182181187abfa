// Token masks: which ids of a vocabulary may come next under a JsonMatcher state. The
// vocabulary is a byte trie built once (special tokens left out: they are never part of a
// value); a mask walks the trie depth-first with one matcher state per depth and prunes every
// subtree whose prefix the matcher refuses, so a step visits only the viable prefixes, never the
// whole vocabulary.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/mask_cache.h"

namespace dsv4::grammar {

class VocabTrie {
 public:
  // bytes(id): the token's bytes; skip(id): never allowed (special tokens, empty tokens).
  VocabTrie(int32_t n_vocab, const std::function<std::string_view(int32_t)>& bytes,
            const std::function<bool(int32_t)>& skip);
  int32_t n_vocab() const { return n_vocab_; }
  int32_t max_length() const { return max_length_; }

  struct Node {
    int32_t first_child = 0, n_children = 0;  // children are nodes_[first_child ..), by byte
    int32_t first_token = 0, n_tokens = 0;    // ids ending here: token_ids_[first_token ..)
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }

 private:
  int32_t n_vocab_ = 0, max_length_ = 0;
  std::vector<Node> nodes_;  // nodes_[0]: the root (the empty prefix)
  std::vector<int32_t> token_ids_;
};

// The ids of a text set (MaskVocab::string_text, raw_text) by the code points each adds to a
// body, fewest first: those of at most k code points are ids[0 .. end[k]).
struct TextByLength {
  TextByLength() = default;
  TextByLength(const std::vector<uint64_t>& set, int32_t max_length, const std::function<int32_t(int32_t)>& code_points);
  // allowed = the ids of at most `room` code points ([ceil(V / 64)] words).
  void fill_up_to(int64_t room, uint64_t* allowed) const;
  std::vector<uint64_t> text;  // the set
  std::vector<int32_t> ids;
  std::vector<int64_t> end;  // [longest token + 1]
};

// A vocabulary prepared for masks: the trie of every token, the trie of the tokens holding a
// '"' and the tokens that are plain string text (JsonMatcher::string_text). Inside a string's
// text (most of a JSON value's tokens) a mask is then the plain-text set plus a walk of the
// quote trie, which alone can end the string and go on after it. The same for the keys of open
// objects (text without escapes) and for DSML's raw strings, with '<' (their closing tag's
// first byte). Other string bodies take their set from TokenMasker's cache.
struct MaskVocab {
  MaskVocab(int32_t n_vocab, const std::function<std::string_view(int32_t)>& bytes,
            const std::function<bool(int32_t)>& skip);
  VocabTrie all, quoted, angled;        // angled: the tokens holding a '<' (DSML raw strings)
  std::vector<uint64_t> string_text;    // [ceil(V / 64)]
  std::vector<uint64_t> key_text;       // [ceil(V / 64)] string text without '\\' (open objects' keys)
  std::vector<uint64_t> raw_text;       // [ceil(V / 64)]
  // The string_text / raw_text ids by code points, for bodies with fewer code points left than
  // a token may hold (no escape or UTF-8 sequence open).
  TextByLength string_by_length, raw_by_length;
  // Every token's bytes (token_bytes[token_at[id] .. token_at[id + 1])), and the ids longer than
  // L bytes: by_bytes[bytes_end[L] ..) (mask_room.cc checks only those near a maxLength).
  std::vector<char> token_bytes;
  std::vector<int64_t> token_at;   // [V + 1]
  std::vector<int32_t> by_bytes;   // ids, shortest first
  std::vector<int64_t> bytes_end;  // [longest token + 1]
};

// Fills masks for one vocabulary; its buffers are sized once (no allocation per mask; the mask
// cache allocates until it holds cache_bytes, then reuses its entries). Where every reading is
// inside a string body the fast paths above do not cover (a patterned string whose state does
// not loop on text, fewer code points left than a token may hold, an escape or UTF-8 sequence
// open), the tokens without the end byte come from the cache (string_body.h: one trie walk of
// the lone string frame per new key) and only the end byte's trie is walked per step.
// cache_bytes below one mask: no cache (those states take the whole trie walk).
class TokenMasker {
 public:
  explicit TokenMasker(const MaskVocab& vocab, int64_t cache_bytes = MaskCache::kDefaultBytes);
  // allowed [ceil(V / 64)] words: bit id set when the token's bytes may follow st. Returns the
  // number of ids allowed. The caller adds the end-of-sequence id where m.accepting(st).
  int64_t fill(const JsonMatcher& m, const MatchState& st, uint64_t* allowed);
  int64_t nodes_visited() const { return visited_; }
  const MaskCache& cache() const { return cache_; }

  // Masks ahead of the first token (mask_prepare.cc): the string-body masks of every state of g's
  // small automata (patterned strings and formats far from a length bound, DSML raw patterns,
  // whole-output regex / choice / GBNF texts), computed into the cache by walks of the trie that
  // carry up to 64 states at once. At most max_masks masks (and half the cache); stops before
  // more than budget (state, trie node) steps, the rest staying lazy. Each mask equals the one
  // fill would walk for its key. Returns the masks added.
  static constexpr int64_t kPrepareBudget = int64_t{1} << 22;  // about 50 ms on the bench host
  static constexpr int64_t kPrepareMaxMasks = 512;
  int64_t prepare(const Grammar& g, int64_t budget = kPrepareBudget, int64_t max_masks = kPrepareMaxMasks);
  int64_t prepare_steps() const { return prepare_steps_; }  // the last prepare's (state, node) steps
  // Whether st's lone reading has a JSON number on top whose parent is the root, an object or an
  // array (mask_number.cc); then walk steps the number's frame alone along its bytes.
  static bool number_on_top(const Grammar& g, const MatchState& st);
  // Whether st's lone reading has a DSML raw string without a pattern on top: walk steps its
  // frame alone until a byte it refuses or the end of its closing tag.
  static bool raw_on_top(const Grammar& g, const MatchState& st);

 private:
  // allowed = the union of the cached masks of the readings' bodies (bodies_, keys_).
  void fill_body_text(const Grammar& g, const MatchState& st, uint64_t* allowed);
  // Sets the bits of trie's tokens (each holding the end byte) allowed after st, where every
  // reading is in a string body (bodies_).
  void walk_ends(const VocabTrie& trie, const JsonMatcher& m, const MatchState& st, uint64_t* allowed);
  // Sets the bits of the tokens without body.end_byte that the body in frame `top` takes whole.
  void walk_body(const StringBody& body, const Frame& top, uint64_t* allowed);
  // A patterned body's mask near its maxLength (mask_room.cc), stored in the cache under key:
  // the far mask of its key (cached, or walked once without the bound), less the tokens that
  // body_byte refuses from top, checked only where a token's bytes plus the automaton's longest
  // shortest-accepting continuation exceed the room. pin: the key's regex. Needs room for two
  // masks in the cache.
  const uint64_t* fill_near_bound(const StringBody& body, const StringMaskKey& key, const Frame& top,
                                  const std::shared_ptr<const void>& pin);
  // Sets the bits of the whole trie's tokens allowed after st; returns how many (mask_number.cc:
  // the matcher per byte, except below a state number_on_top or raw_on_top accepts, where the
  // top frame alone steps until a byte it refuses or that ends it).
  int64_t walk(const JsonMatcher& m, const MatchState& st, uint64_t* allowed);
  const MaskVocab& vocab_;
  MaskCache cache_;
  std::vector<MatchState> states_;  // [max token length + 1]
  std::vector<Frame> frames_;       // [max token length + 1]: walk_body's frame per depth
  StringBody bodies_[kMaxStacks];   // fill's readings, when all are in string bodies
  StringMaskKey keys_[kMaxStacks];
  std::vector<Frame> body_frames_;  // [max token length + 1, kMaxStacks]: walk_ends' top frames
  std::vector<uint64_t> alive_;     // [max token length + 1]: walk_ends' live readings (bits)
  std::vector<int32_t> number_base_;  // [max token length + 1]: walk's depth where the number (or raw
                                      // string) on top began; −1: matcher
  struct Walk {
    int32_t node, next_child;
  };
  std::vector<Walk> walk_;
  int64_t visited_ = 0, prepare_steps_ = 0;
};

// The mask on a logits row: row[v] = −inf for each v < n_row whose bit in allowed is clear, and
// for v >= n_ids (ids the mask does not cover). allowed: [ceil(n_ids / 64)] words.
void apply_token_mask(const uint64_t* allowed, int64_t n_ids, float* row, int64_t n_row);

}  // namespace dsv4::grammar
