// The tiny test tokenizer of text.md §5 (512 ids) for the tiny test checkpoints (make-tiny):
//   0..2      BOS, EOS, pad (added, special, normalized false; also in model.vocab)
//   3..258    the 256 byte symbols, ids as in the real vocabulary (§1.6)
//   259..499  241 merges trained on a fixed corpus (§5.2): most frequent pair,
//             ties to the smaller (id(left), id(right)); merge r creates id 259 + r
//   500..511  chat markers (added, not special, normalized true)
// Same normalizer / pre_tokenizer / post_processor / decoder blocks as the V4 file.
#pragma once

#include <string>

#include "base/status.h"

namespace dsv4 {

struct TinyTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
};

enum class MergesForm { kStrings, kArrays };  // "a b" or ["a", "b"]

Result<TinyTokenizerFiles> make_tiny_tokenizer(MergesForm form = MergesForm::kStrings);

// Writes tokenizer.json and tokenizer_config.json into dir (atomically each).
Status write_tiny_tokenizer(const std::string& dir);

constexpr int kTinyVocab = 512;
constexpr int kTinyMerges = 241;

}  // namespace dsv4
