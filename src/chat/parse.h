// Output of a chat generation -> OpenAI message fields (text.md §3.14, §4.4).
// Works on decoded text: the special tokens appear as their strings
// (`</think>`, `｜DSML｜`, `<｜end▁of▁sentence｜>`).
//
// Grammar after the generation prompt:
//   thinking: REASONING "</think>" CONTENT [CALLS] EOS
//   chat:     CONTENT [CALLS] EOS
//   CALLS := "\n\n<｜DSML｜tool_calls>\n" INVOKE ("\n" INVOKE)* "\n</｜DSML｜tool_calls>"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "chat/render.h"

namespace dsv4::chat {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text (Python-style spacing)
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

// The reference parser (parse_message_from_completion_text): `text` is the
// whole completion including the final EOS string. Malformed output is an
// error naming what was expected; nothing is repaired.
Result<ParsedMessage> parse_completion(std::string_view text, ThinkingMode mode);

// OpenAI `tool_calls` entry: {id, type: "function", function: {name, arguments}}.
nlohmann::ordered_json tool_call_json(const ToolCall& call, const std::string& id);

// What one feed() or finish() releases. Tool calls are whole (OpenAI index =
// the number of calls released before them).
struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// Incremental, lenient parser for streaming (§4.4): takes decoded text pieces
// split anywhere (also inside markers) and never releases part of a marker.
// For a well-formed completion the concatenated deltas equal
// parse_completion(); malformed or cut-off output is returned as far as it
// goes (see error(), truncated()).
class ChatStreamParser {
 public:
  // in_reasoning: the prompt ended with `<think>` (prompt_opens_reasoning).
  explicit ChatStreamParser(bool in_reasoning);

  ChatDelta feed(std::string_view piece);
  // End of generation (EOS or a length/stop cut): releases held-back text.
  ChatDelta finish();

  // A tool-call block that did not close before finish().
  bool truncated() const { return truncated_; }
  // First format error inside the tool-call block ("" if none); the calls
  // before it were released, the rest of the output is dropped.
  const std::string& error() const { return error_; }
  // The EOS string or the end of the call block was seen.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kReasoning, kContent, kCalls, kDone };
  void run(ChatDelta& delta, bool final);

  State state_;
  std::string buffer_;  // text not yet released (or the open call block)
  bool truncated_ = false;
  std::string error_;
};

}  // namespace dsv4::chat
