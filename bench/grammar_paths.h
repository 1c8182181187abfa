// Structured output's per-token cost on sampled paths (issue 39 item 7): each schema's grammar is
// walked by a seeded, logit-free random choice among the allowed ids (biased to tokens holding a
// closing byte so that strings and containers end), and every step is timed by thread CPU time:
// the mask fill, its application to a logits row of the vocabulary's size, the end-of-sequence
// test and the state's advance by the chosen token (what the sampler pays per constrained row).
// Prints the median, p99 and worst per schema and overall (also over the paths after each
// schema's first quarter: the mask cache warm), the medians of the three parts and the cache's
// misses.
#pragma once

#include "base/status.h"
#include "grammar/token_mask.h"
#include "text/tokenizer.h"

namespace dsv4::bench {

// paths: walks per schema (each at most kMaxPathTokens tokens).
Status run_grammar_paths(const Tokenizer& tok, const grammar::MaskVocab& vocab, int paths);

}  // namespace dsv4::bench
