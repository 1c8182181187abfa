// DeepSeek-V4 chat encoding (text.md §3, the release's encoding_dsv4.py):
// OpenAI chat messages -> the prompt text, with the special-token strings
// (`<｜begin▁of▁sentence｜>`, `<｜User｜>`, `<think>`, ...) written inline, and the
// spans of the text the template wrote. Only there does the tokenizer turn those
// strings into their ids: text from the request (contents, reasoning, tool
// results, tool schemas, names, arguments) is plain text, so it cannot forge a
// turn or a tool call (§3.13's safe mode). Tool results become user turns (§3.3),
// reasoning of earlier turns is dropped in thinking mode (§3.4), tools and
// tool calls are written as DSML (§3.2, §3.8).
//
// Inputs are OrderedJson so tool schemas keep their key order
// (the prompt must reproduce it byte for byte); parse request bodies with
// OrderedJson::parse.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "base/status.h"
#include "text/split_regex.h"

namespace dsv4::chat {

enum class ThinkingMode { kChat, kThinking };

// Only kMax changes the prompt, and only in thinking mode (§3.10).
enum class ReasoningEffort { kNone, kHigh, kMax };

struct ChatOptions {
  ThinkingMode mode = ThinkingMode::kChat;
  ReasoningEffort effort = ReasoningEffort::kNone;
  bool drop_thinking = true;  // drop reasoning before the last user turn
  bool add_bos = true;        // BOS when `context` is empty
  // API-level `tools` (OpenAI format) or null: attached to the first message
  // when it is system/developer, else a system message {"content": "", tools}
  // is inserted first (§3.16's server convention).
  OrderedJson tools;
  // Earlier messages already in the KV cache (array or null): not rendered,
  // but they order tool results and decide dropping (§3.12). No BOS then.
  OrderedJson context;
};

// A rendered prompt. Tokenize it with Tokenizer::encode_spans(text, template_spans).
struct ChatPrompt {
  std::string text;
  std::vector<Span> template_spans;  // sorted, disjoint, adjacent ones merged
};

// The request fields that choose the options (§3.1, §3.10): `thinking`
// (boolean; alias `chat_template_kwargs.thinking`; absent = chat mode),
// `reasoning_effort` (null, "low", "medium", "high" render alike; "max"),
// `tools`. A wrong type or value is an error naming the field.
Result<ChatOptions> chat_options_from_request(const OrderedJson& request);

// The prompt for `messages` (a JSON array of OpenAI chat messages). Ends with
// the generation prompt `<｜Assistant｜><think>` / `<｜Assistant｜></think>` when
// the last turn is a user turn. Bad input is an error naming the message
// index and field, e.g. "messages[2].tool_calls[0].function.arguments: ...".
//
// Departures from the reference, each an explicit choice (§3.16):
// null content renders as ""; array content is the concatenation of its
// `text` parts (other part types are rejected; a tool message's array keeps
// the reference's "\n\n" join and "[Unsupported <type>]"); `arguments` given
// as an object, or a string that parses to a non-object, is rejected; `tools`
// on a user/assistant/tool message is rejected; an unknown `task` is rejected
// wherever it appears; a developer message needs non-empty content; a tool
// name (`tools[i].function.name`, `tool_calls[j].function.name`) must match
// OpenAI's ^[a-zA-Z0-9_-]{1,64}$.
Result<ChatPrompt> render_chat(const OrderedJson& messages, const ChatOptions& options);

// Whether generation after this prompt starts inside the reasoning block
// (the template ended it with `<think>`): the initial state of the output parser.
bool prompt_opens_reasoning(const ChatPrompt& prompt);

}  // namespace dsv4::chat
