// A generation request and what the engine reports back about it, step by step.
// Ids are engine-wide and never reused; a finished request's state is released once its
// last update is delivered (the engine keeps no results).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/sampling_params.h"

namespace dsv4 {

namespace grammar {
struct Grammar;
}

constexpr int kMaxTopLogprobs = 20;  // OpenAI's limit for top_logprobs
constexpr int kMaxChoices = 128;     // GenerationRequest::n

// The seed of choice k of a request with seed s: s for k = 0 (one choice samples as before),
// else SplitMix64's k-th output from state s: z = s + k·0x9E3779B97F4A7C15, then
// z = (z ^ z >> 30)·0xBF58476D1CE4E5B9, z = (z ^ z >> 27)·0x94D049BB133111EB, z ^ z >> 31.
constexpr uint64_t choice_seed(uint64_t seed, int32_t k) {
  if (k == 0) return seed;
  uint64_t z = seed + static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Structured output (docs/serving.md "Structured output"): the generated tokens, from the first
// one or from the one after start_after, spell one JSON value the schema accepts, then EOS
// (grammar/: the mask applies after the logit adjustments, before temperature).
// A whole-output text constraint (vLLM's structured_outputs regex / choice / grammar;
// grammar/text_constraint.h).
enum class TextConstraint : uint8_t { kNone, kRegex, kChoice, kGbnf };

struct OutputConstraint {
  std::string json_schema;   // JSON Schema text ({"type": "object"}: any object); "": none
  // Or a forced tool call (tool_choice "required" or named): the DSML block of one call to one
  // of these tools, as JSON text [{"name", "parameters"}] (grammar::compile_tool_call); "": none.
  std::string tool_calls;
  // false (OpenAI's default for json_schema): keywords the engine cannot enforce are relaxed
  // (grammar::CompileOptions::strict; the server names them in X-Relaxed-Keywords).
  bool strict = true;
  // grammar::JsonLayout: the default whitespace of the value (a schema's root "x-guidance"
  // object overrides it: item_separator, key_separator, whitespace_flexible).
  bool whitespace_flexible = false;
  int32_t start_after = -1;  // a generated token id that starts the constraint (thinking mode's
                             // </think>); −1: the first generated token
  // Or the whole output as text of this kind: the regex, the choices as a JSON array of strings,
  // or the GBNF grammar.
  TextConstraint text_kind = TextConstraint::kNone;
  std::string text;
  // The request field the constraint came from, named by its errors ("structured_outputs.regex",
  // "guided_json"); "": response_format or tool_choice.
  std::string field;
  // The grammar of the text above, compiled once (Engine::prepare, off the engine thread) and
  // shared by the request's choices; the step never parses schema text.
  std::shared_ptr<const grammar::Grammar> compiled;
  bool active() const { return !json_schema.empty() || !tool_calls.empty() || text_kind != TextConstraint::kNone; }
  // The request field its errors name.
  std::string field_name() const { return !field.empty() ? field : tool_calls.empty() ? "response_format" : "tool_choice"; }
};

struct GenerationRequest {
  std::vector<int32_t> prompt;          // token ids, BOS included when the caller wants one
  SamplingParams sampling;              // temperature 0 = greedy
  LogitAdjustments adjust;              // penalties and logit_bias, before sampling
  int32_t max_tokens = 32;              // 0 only with prompt_logprobs (scoring a prompt)
  bool stop_at_eos = true;
  std::vector<int32_t> stop_ids;        // further stop token ids (finish reason "stop")
  std::vector<std::string> stop_strings;  // matched on the detokenized output across token
                                          // boundaries; the text ends before the match
  // Log-probabilities (log-softmax of the logits after penalties and logit_bias, before
  // temperature and top-p; the prompt's: of the raw logits):
  // -1 none; 0..kMaxTopLogprobs: each generated token's logprob and this many top alternatives.
  int32_t logprobs = -1;
  bool prompt_logprobs = false;         // also the prompt's tokens 1..n-1 (completions' echo)
  double timeout_seconds = 0;           // 0: none; finish reason "timeout" after this long
  // Choices (1..kMaxChoices): ids id .. id + n − 1, choice k sampling with choice_seed(seed, k);
  // the prompt is computed once (runtime/scheduler.h: forks). Prompt logprobs: choice 0's.
  int32_t n = 1;
  OutputConstraint constraint;          // structured output; inactive by default
  // The prefix cache's namespace: requests with different salts never share cached blocks
  // ("": the shared one). The server sets it from the request's cache_salt and its tenant.
  std::string cache_salt;
};

// Why a request ended. kStop: EOS, a stop id or a stop string.
enum class FinishReason { kNone, kStop, kLength, kContext, kCancelled, kTimeout, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "context", ...

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (id, logprob), most likely first
};

// What one step did to one request. Delivered in order; the last one has finished set.
struct RequestUpdate {
  int64_t id = 0;
  std::vector<int32_t> tokens;            // tokens committed this step
  std::vector<TokenLogprob> logprobs;     // per token of `tokens` when requested
  std::vector<TokenLogprob> prompt_logprobs;  // once, for positions 1..n-1, when requested
  std::string text;                       // text released this step (engine with a tokenizer):
                                          // whole UTF-8 characters, never a possible stop-string
                                          // prefix, nothing after a stop string
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  // Reason kStop: what matched, one of the request's stop ids or stop strings (neither: EOS).
  int32_t stop_id = -1;
  std::string stop_string;
  std::string error;                      // reason kError: what failed
  int64_t prompt_tokens = 0;              // usage, on the finishing update
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;              // prompt tokens the prefix cache held (not computed)
};

}  // namespace dsv4
