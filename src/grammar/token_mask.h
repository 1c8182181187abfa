// Token masks: which ids of a vocabulary may come next under a JsonMatcher state. The
// vocabulary is a byte trie built once (special tokens left out: they are never part of a
// value); a mask walks the trie depth-first with one matcher state per depth and prunes every
// subtree whose prefix the matcher refuses, so a step visits only the viable prefixes, never the
// whole vocabulary.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "grammar/json_matcher.h"

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

// A vocabulary prepared for masks: the trie of every token, the trie of the tokens holding a
// '"' and the tokens that are plain string text (JsonMatcher::string_text). Inside a string's
// text (most of a JSON value's tokens) a mask is then the plain-text set plus a walk of the
// quote trie, which alone can end the string and go on after it. The same for the keys of open
// objects (text without escapes) and for DSML's raw strings, with '<' (their closing tag's
// first byte). In a patterned string whose regex state loops on all JSON text, the set is the
// text without escapes (key_text) plus a walk of the tokens holding a '"' or a '\\'.
struct MaskVocab {
  MaskVocab(int32_t n_vocab, const std::function<std::string_view(int32_t)>& bytes,
            const std::function<bool(int32_t)>& skip);
  VocabTrie all, quoted, angled;        // angled: the tokens holding a '<' (DSML raw strings)
  VocabTrie escaped;                    // the tokens holding a '"' or a '\\' (patterned strings)
  std::vector<uint64_t> string_text;    // [ceil(V / 64)]
  std::vector<uint64_t> key_text;       // [ceil(V / 64)] string text without '\\' (open objects' keys)
  std::vector<uint64_t> raw_text;       // [ceil(V / 64)]
};

// Fills masks for one vocabulary; its buffers are sized once (no allocation per mask).
class TokenMasker {
 public:
  explicit TokenMasker(const MaskVocab& vocab);
  // allowed [ceil(V / 64)] words: bit id set when the token's bytes may follow st. Returns the
  // number of ids allowed. The caller adds the end-of-sequence id where m.accepting(st).
  int64_t fill(const JsonMatcher& m, const MatchState& st, uint64_t* allowed);
  int64_t nodes_visited() const { return visited_; }

 private:
  int64_t walk(const VocabTrie& trie, const JsonMatcher& m, const MatchState& st, uint64_t* allowed);
  const MaskVocab& vocab_;
  std::vector<MatchState> states_;  // [max token length + 1]
  struct Walk {
    int32_t node, next_child;
  };
  std::vector<Walk> walk_;
  int64_t visited_ = 0;
};

}  // namespace dsv4::grammar
