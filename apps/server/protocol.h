// The OpenAI HTTP protocol as pure functions (no sockets, no engine):
//   request body (JSON text) -> ApiRequest (a GenerationRequest plus how to answer) or ApiError
//   RequestUpdates of the engine -> response JSON / server-sent-event chunks (ResponseBuilder)
// Endpoints: /v1/completions (`text_completion`) and /v1/chat/completions (`chat.completion`,
// `chat.completion.chunk`; output parsed into reasoning_content / content / tool_calls by
// chat::ChatStreamParser, text.md §3.14, §4.4).
//
// Validation is strict, as OpenAI's own API is: an unknown field, a wrong type or a value out
// of range is a 400 whose error names the field (`param`). Fields the engine cannot honour
// (penalties, logit_bias, response_format, n > 1, best_of > 1, suffix, ...) are accepted only
// with their neutral value. Streamed tool calls come as OpenAI sends them: an opening entry
// with the name, then fragments of the arguments while the model writes them. One extension, as vLLM has it: "ignore_eos" (generate past EOS).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "base/status.h"
#include "chat/parse.h"
#include "chat/render.h"
#include "runtime/request.h"
#include "text/tokenizer_dir.h"

namespace dsv4::server {

// An OpenAI-style error: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string param;  // the offending field ("" -> null)
  std::string code;   // e.g. "model_not_found" ("" -> null)
  std::string type = "invalid_request_error";
};
std::string error_body(const ApiError& e);
ApiError bad_request(std::string param, std::string message, std::string code = {});
// The field an error message of the chat encoder or the engine names: the text before its first
// ':', '.' or '[' ("tools[0].function.name: ..." -> "tools"; "max_tokens: ..." -> "max_tokens").
std::string message_param(std::string_view message);

template <class T>
class ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  ApiResult(ApiError error) : v_(std::move(error)) {}   // NOLINT
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const ApiError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

// The served model as the protocol sees it.
struct ModelCard {
  std::string id;              // --served-model-name
  int64_t created = 0;         // unix seconds (the server's start)
  int64_t max_context = 0;     // positions per sequence: prompt + completion
  const TextModel* text = nullptr;  // tokenizer and tokenizer_config.json (not owned)
  float temperature = 1.0f;    // defaults for absent fields (generation_config.json)
  float top_p = 1.0f;
  int64_t max_tokens_limit = 4096;  // --max-tokens-limit: largest max_tokens (0: the context)
  int32_t max_n = 8;           // --max-n: largest n and best_of
  // The largest max_tokens the engine's empty cache holds after a prompt of n tokens (the
  // engine's max_tokens_that_fit); caps the default. Unset: no cache bound.
  std::function<int64_t(int64_t n_prompt)> max_tokens_fit;
  // Values (containers and scalars) a request body may hold: a token-id prompt of the whole
  // context plus room for the rest. Bounds the parsed size of a small body of tiny values.
  int64_t max_json_values() const { return max_context + 65536; }
};

// generation_config.json's sampling defaults: temperature and top_p when present (other fields
// ignored); a wrong type or range is an error naming the field.
struct GenerationDefaults {
  float temperature = 1.0f;
  float top_p = 1.0f;
};
Result<GenerationDefaults> parse_generation_config(std::string_view json_text, const std::string& source);

// Caps on the text fields of a request, beside --max-body-bytes (docs/serving.md "Limits"): a
// larger one is a 400 naming the field and the limit (code "field_too_large").
constexpr size_t kMaxStopBytes = 4096;          // each stop sequence (at most 4 of them)
constexpr size_t kMaxTools = 128;               // entries of tools (OpenAI's limit)
constexpr size_t kMaxToolsBytes = 1 << 20;      // tools as JSON text, their parameter schemas included
constexpr size_t kMaxArgumentsBytes = 1 << 20;  // each tool call's arguments in messages
constexpr size_t kMaxSchemaBytes = 1 << 20;     // response_format's json_schema.schema as JSON text

enum class Endpoint { kCompletions, kChat };

struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  GenerationRequest gen;        // prompt ids, sampling, limits, stops, logprobs
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  // Completions.
  bool echo = false;
  int32_t prompt_skip = 0;      // leading prompt ids the server added (BOS): not echoed
  // Chat.
  chat::ThinkingMode mode = chat::ThinkingMode::kChat;
  bool opens_reasoning = false;  // the prompt ends with <think>
  std::string prompt_text;       // the rendered chat prompt (for logs and tests)
  bool first_call_only = false;  // parallel_tool_calls false: gen.stop_strings has chat::kFirstCallStop
  // Choices: n returned of gen.n (best_of) generated; shown_logprobs: the logprobs the client
  // asked for (gen.logprobs is raised to 0 when best_of > n ranks the choices).
  int32_t n = 1;
  int32_t shown_logprobs = -1;
};

// Set by the server once the client has left: parsing stops at its next stage (the body
// parsed, the chat rendered, the prompt tokenized) with kClientGoneStatus (never sent).
using ClientGone = std::atomic<bool>;
constexpr int kClientGoneStatus = 499;

// Sampling seed for a request without "seed" (the caller draws it).
ApiResult<ApiRequest> parse_completions_request(std::string_view body, const ModelCard& model,
                                                uint64_t default_seed, const ClientGone* gone = nullptr);
ApiResult<ApiRequest> parse_chat_request(std::string_view body, const ModelCard& model, uint64_t default_seed,
                                         const ClientGone* gone = nullptr);

// vLLM's POST /tokenize and POST /detokenize (no engine: the tokenizer and the chat encoding).
//   tokenize   {"model"?, "prompt": string, "add_special_tokens"? (true: BOS as add_bos_token
//              says)} or {"model"?, "messages": [...], "add_generation_prompt"? (true only),
//              "add_special_tokens"? (ignored: the template writes BOS), the chat endpoint's
//              thinking/reasoning_effort/tools/chat_template_kwargs}; "return_token_strs"?
//              -> {"count", "max_model_len", "tokens", "token_strs" (null unless asked)}
//   detokenize {"model"?, "tokens": [ids]} -> {"prompt": text}
// Unknown fields, wrong types and ids outside the vocabulary are 400s naming the field.
ApiResult<std::string> tokenize_response(std::string_view body, const ModelCard& model,
                                         const ClientGone* gone = nullptr);
ApiResult<std::string> detokenize_response(std::string_view body, const ModelCard& model);
// tokenize_response's body for these ids, written as text (no JSON DOM); token_strs when strs
// is given, else null.
std::string tokenize_body(const std::vector<int32_t>& ids, int64_t max_model_len, const Tokenizer* strs);

// system_fingerprint of every response and chunk: "fp_dsv4_" and 12 hex digits of a hash of
// the served model id and this build (the compile time of the protocol layer): equal answers
// from equal fingerprints need the same model and the same build.
std::string system_fingerprint(const std::string& model_id);

// OpenAI's finish_reason for an engine reason, always one that typed SDKs accept: "stop" (EOS,
// a stop id or string, cancelled), "length" (max_tokens, the context limit, a timeout); chat:
// "tool_calls" when the output ended with tool calls. The engine's own reason is the choice's
// stop_reason (ResponseBuilder).
const char* api_finish_reason(FinishReason reason, bool tool_calls);

// Text of one token for logprobs: its bytes when they are valid UTF-8, else OpenAI's
// "bytes:\xNN..." form.
std::string token_text(const Tokenizer& tokenizer, int32_t id);

// Builds one request's response from the engine's updates, in either form:
//   stream:   add() returns the server-sent events to send now ("data: {...}\n\n" each; the
//             finishing update adds the final chunk, the usage chunk when asked and
//             "data: [DONE]\n\n")
//   complete: add() every update, then response() once finished()
// Every choice has finish_reason (OpenAI's) and stop_reason (vLLM's, null until the end): the
// stop string (a string) or stop id (an integer) that matched, "timeout", "cancelled", else
// null (EOS, max_tokens, the context limit). A request that ends with an engine error becomes
// an error: response() returns it (500); a stream gets an error event before [DONE].
class ResponseBuilder {
 public:
  // request: shared with the other choices' builders (never copied per choice); shown_logprobs:
  // the logprobs shown (ApiRequest::shown_logprobs; gen.logprobs may be raised for best_of).
  ResponseBuilder(std::shared_ptr<const ApiRequest> request, int32_t shown_logprobs, const ModelCard& model,
                  std::string id, int64_t created);
  // One choice: a copy of the request, its gen.logprobs shown.
  ResponseBuilder(const ApiRequest& request, const ModelCard& model, std::string id, int64_t created)
      : ResponseBuilder(std::make_shared<const ApiRequest>(request), request.gen.logprobs, model, std::move(id),
                        created) {}

  std::string add(const RequestUpdate& update);
  bool finished() const { return finished_; }
  ApiResult<std::string> response() const;
  // One choice of several (ChoicesBuilder): its chunks carry `index`; ends_stream false: its
  // stream end is the last chunk (or the error event) only, no usage chunk and no [DONE].
  void set_choice(int32_t index, bool ends_stream) {
    index_ = index;
    ends_stream_ = ends_stream;
  }
  OrderedJson usage_json() const;

 private:
  // Response envelope: {id, object, created, model}.
  OrderedJson envelope(const char* object) const;
  OrderedJson chunk_envelope() const;  // a stream chunk's
  OrderedJson chat_logprob_entry(const TokenLogprob& lp) const;
  // Appends completions logprobs of tokens (a null entry: no logprob, e.g. the first prompt token).
  void append_completion_logprobs(OrderedJson& out, const std::vector<int32_t>& ids,
                                  const std::vector<const TokenLogprob*>& lps);
  std::optional<ApiError> update_error(const RequestUpdate& u) const;
  // Token counts, finish reason and error of an update.
  void record(const RequestUpdate& u);
  // Each takes one update in either form: accumulates it (complete form, returns "") or
  // returns its server-sent events (stream form).
  std::string add_completion(const RequestUpdate& u, bool first);
  std::string add_chat(const RequestUpdate& u, bool first);
  std::string tool_call_events(const chat::ToolCallPiece& piece);
  // The finishing update stopped at chat::kFirstCallStop, which the request added.
  bool first_call_stop(const RequestUpdate& u) const;
  OrderedJson stop_reason() const;  // of the finished request
  static OrderedJson completion_choice(const std::string& text, OrderedJson logprobs,
                                                  OrderedJson finish_reason,
                                                  OrderedJson stop_reason);
  static OrderedJson chat_choice(OrderedJson delta, OrderedJson logprobs,
                                            OrderedJson finish_reason, OrderedJson stop_reason);
  std::string chunk_event(OrderedJson choice) const;
  std::string end_events(OrderedJson last_choice) const;

  std::shared_ptr<const ApiRequest> request_;  // the prompt is read for echo
  int32_t shown_logprobs_ = -1;
  const ModelCard& model_;
  std::string id_;
  int64_t created_;
  chat::ChatStreamParser parser_;
  bool started_ = false, finished_ = false;
  FinishReason reason_ = FinishReason::kNone;
  int32_t stop_id_ = -1;      // the finishing update's stop id and stop string
  std::string stop_string_;
  std::optional<ApiError> error_;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0;
  // Chat in thinking mode: completion tokens before `</think>` (reasoning_tokens), counted on
  // the tokens' bytes, which are kept until the marker shows (reasoning_starts_: where each
  // counted token starts in them).
  void count_reasoning(const std::vector<int32_t>& tokens);
  bool in_reasoning_ = false;
  int64_t reasoning_tokens_ = 0;
  std::string reasoning_bytes_;
  std::vector<size_t> reasoning_starts_;
  std::string fingerprint_;
  // Complete form: accumulated output.
  std::string text_;                   // completions: echo + output text
  chat::ParsedMessage message_;        // chat: reasoning and content
  chat::ToolCallJoiner calls_;         // chat: the tool calls
  OrderedJson logprobs_;    // completions: {tokens, ...}; chat: content[]
  int64_t text_offset_ = 0;            // completions: text_offset of the next token, in UTF-8 bytes
                                       // of the tokens before it (echoed prompt included)
  int n_tool_calls_ = 0;                // stream form: calls completed
  int32_t index_ = 0;
  bool ends_stream_ = true;
};

}  // namespace dsv4::server
