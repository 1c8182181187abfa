// Output of a chat generation -> OpenAI message fields (text.md §3.14, §4.4).
// Works on decoded text: the special tokens appear as their strings
// (`</think>`, `｜DSML｜`, `<｜end▁of▁sentence｜>`).
//
// Grammar after the generation prompt:
//   thinking: REASONING "</think>" CONTENT [CALLS] EOS
//   chat:     CONTENT [CALLS] EOS
//   CALLS := "\n\n<｜DSML｜tool_calls>\n" INVOKE ("\n" INVOKE)* "\n</｜DSML｜tool_calls>"
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
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
OrderedJson tool_call_json(const ToolCall& call, const std::string& id);

// One step of a tool call as it is generated (OpenAI's streamed `tool_calls` entry): the call's
// first piece opens it and has its name; `arguments` fragments follow in order, and together
// they are the call's ToolCall::arguments; the piece that ends them has `closes`.
struct ToolCallPiece {
  int index = 0;        // the call's place in the message, from 0
  bool opens = false;   // the call's first piece: `name` is set
  bool closes = false;  // the arguments are complete
  std::string name;
  std::string arguments;
};

// Whole calls from their pieces: a call joins `calls` when its closing piece arrives (a call
// cut off or malformed stays in `open`).
struct ToolCallJoiner {
  std::vector<ToolCall> calls;
  ToolCall open;
  void add(const ToolCallPiece& piece);
};

// What one feed() or finish() releases. A call's pieces released by one feed are one piece.
struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallPiece> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

// The tool-call block after "\n\n<｜DSML｜tool_calls" (text.md §3.8) read as it arrives: the one
// grammar of parse_completion() and ChatStreamParser. A call opens when its invoke tag is
// complete ("{" with the name); a key is released with its `string="..."` attribute (`"key": `,
// after ", " from the second on, and the opening quote of a string); a value as it comes,
// JSON-escaped when it is a string, less what could still be the `<` + `</｜DSML｜parameter`
// that ends it; "}" with the invoke's end. Pieces split only where the text did, so text of
// whole UTF-8 characters gives fragments of whole characters.
class CallBlockScanner {
 public:
  enum class Step { kNeedMore, kEnd, kError };
  // Reads `text` from `pos` and advances `pos` past what it decided (the caller may drop it
  // before the next call); appends pieces to `out`. kEnd: the block closed; kError: `error`
  // names what was expected.
  Step scan(std::string_view text, size_t& pos, std::vector<ToolCallPiece>& out, std::string& error);
  // An invoke is open and its end tag may come next.
  bool at_invoke_end() const { return state_ == State::kInvokeHeader || state_ == State::kParamGap; }

 private:
  enum class State { kGap, kInvokeHeader, kParamHeader, kParamValue, kParamGap };
  // The open call's piece in `out` (a new one at the start of a feed).
  ToolCallPiece& piece(std::vector<ToolCallPiece>& out);
  // One state each: a Step ends scan(), nullopt reads on in the next state.
  std::optional<Step> gap(std::string_view text, size_t& pos, std::string& error);
  std::optional<Step> invoke_header(std::string_view text, size_t& pos, std::vector<ToolCallPiece>& out,
                                    std::string& error);
  std::optional<Step> param_header(std::string_view text, size_t& pos, std::vector<ToolCallPiece>& out,
                                   std::string& error);
  std::optional<Step> param_value(std::string_view text, size_t& pos, std::vector<ToolCallPiece>& out,
                                  std::string& error);
  std::optional<Step> param_gap(std::string_view text, size_t& pos, std::vector<ToolCallPiece>& out,
                                std::string& error);

  State state_ = State::kGap;
  int n_calls_ = 0;                // calls opened so far
  std::string name_;               // of the open call (error messages)
  std::unordered_set<std::string> keys_;  // its parameters so far (duplicates: an error)
  bool string_value_ = false;      // the open parameter has string="true"
};

// parallel_tool_calls false: the stop string that ends a generation with its first call (the
// engine's text ends before it; ChatStreamParser::end_at_stop completes the block).
inline constexpr std::string_view kFirstCallStop = "</｜DSML｜invoke>";

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
  // The generation stopped at kFirstCallStop: completes the open invoke and the call block as
  // the model writes them; nothing when no invoke could end there.
  ChatDelta end_at_stop();
  // End of generation (EOS or a length/stop cut): releases held-back text.
  ChatDelta finish();

  // A tool-call block that did not close before finish().
  bool truncated() const { return truncated_; }
  // First format error inside the tool-call block ("" if none); the pieces
  // before it were released (a call may be left open), the rest of the output is dropped.
  const std::string& error() const { return error_; }
  // The EOS string or the end of the call block was seen.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kReasoning, kContent, kCalls, kDone };
  void run(ChatDelta& delta, bool final);

  State state_;
  std::string buffer_;  // text not yet released (or the undecided rest of the call block)
  CallBlockScanner calls_;
  bool truncated_ = false;
  std::string error_;
};

}  // namespace dsv4::chat
