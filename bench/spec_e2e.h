// Speculative decoding end to end (`--cases spec-e2e`) on the built-in models: greedy decode of
// the prompts (text through the model's tokenizer) x `tokens` tokens each (stop_at_eos off, so
// every request makes them all), at each B, for plain decoding and MTP (plain_dir,
// models/kjv-9m) and DSpark at each γ (dspark_dir, models/kjv-9m-dspark: the same main model
// byte for byte). One run = a fresh Engine (max_batch = B) decoding every prompt, timed from
// its first step to idle (the prompts' prefill included). After one warm-up pass, `repeats`
// passes; each pass runs every (B, variant) once, so machine noise hits them alike.
// Per (variant, B) one CaseResult "spec-e2e" (phase "spec", shape the variant, S = rows per
// request at most): the median tokens/s and step time, and as extra fields the steps, tokens
// per step, drafts, accepted, rounds, drafts accepted per round, speed_up (over plain at the
// same B, ratio of the medians), acceptance_at (k = 1 .. γ: the share of rounds that accepted
// at least k drafts) and rounds_by_accepted (rounds that accepted 0 .. γ drafts). No bytes.
// Every run's tokens must equal plain decoding's (lossless): otherwise an error naming the
// variant, B, the prompt and the first differing token.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "report.h"

namespace dsv4::bench {

struct SpecE2eSets {
  std::vector<int> batches = {1, 4};
  std::vector<int> gammas = {1, 3, 5, 7};  // DSpark drafts per round
  int tokens = 64;                         // generated per prompt
  int repeats = 5;
  int threads = 1;
};

Result<std::vector<CaseResult>> run_spec_e2e(const std::string& plain_dir, const std::string& dspark_dir,
                                             const std::vector<std::string>& prompts, const SpecE2eSets& sets);

// A table of the spec-e2e cases.
void print_spec_e2e(const std::vector<CaseResult>& cases, const SpecE2eSets& sets);

}  // namespace dsv4::bench
