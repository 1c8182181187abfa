// libFuzzer target: the chat renderer on arbitrary JSON messages, and the
// output parsers on arbitrary text. Invariants: no crash; a rendered prompt's
// template spans are valid for encode_spans and its ids decode to its text (tiny
// tokenizer); a well-formed completion streamed in two pieces gives the one-shot parse.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "chat/parse.h"
#include "chat/render.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"

using namespace dsv4::chat;

namespace {
const dsv4::Tokenizer& tiny() {
  static const dsv4::Tokenizer tok = [] {
    auto files = dsv4::make_tiny_tokenizer();
    if (!files.ok()) std::abort();
    auto t = dsv4::Tokenizer::from_json(files->tokenizer_json, "tiny tokenizer.json");
    if (!t.ok()) std::abort();
    return std::move(*t);
  }();
  return tok;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const uint8_t control = data[0];

  auto messages = dsv4::OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!messages.is_discarded()) {
    ChatOptions options;
    options.mode = (control & 1) ? ThinkingMode::kThinking : ThinkingMode::kChat;
    options.drop_thinking = control & 2;
    options.effort = (control & 4) ? ReasoningEffort::kMax : ReasoningEffort::kNone;
    if (control & 8) options.tools = messages;
    if (auto prompt = render_chat(messages, options); prompt.ok()) {
      const std::vector<int32_t> ids = tiny().encode_spans(prompt->text, prompt->template_spans);
      if (tiny().decode(ids).value() != prompt->text) std::abort();
    }
    (void)chat_options_from_request(messages);
  }

  const ThinkingMode mode = (control & 1) ? ThinkingMode::kThinking : ThinkingMode::kChat;
  auto parsed = parse_completion(text, mode);
  ChatStreamParser stream(mode == ThinkingMode::kThinking);
  const size_t cut = text.empty() ? 0 : (control * 131u) % (text.size() + 1);
  std::string reasoning, content;
  ToolCallJoiner calls;
  for (const ChatDelta& d : {stream.feed(text.substr(0, cut)), stream.feed(text.substr(cut)), stream.finish()}) {
    reasoning += d.reasoning;
    content += d.content;
    for (const ToolCallPiece& piece : d.calls) calls.add(piece);
  }
  if (parsed.ok() && (reasoning != parsed->reasoning_content || content != parsed->content ||
                      calls.calls.size() != parsed->tool_calls.size())) {
    std::abort();
  }
  for (size_t k = 0; parsed.ok() && k < calls.calls.size(); ++k) {
    if (calls.calls[k].name != parsed->tool_calls[k].name || calls.calls[k].arguments != parsed->tool_calls[k].arguments)
      std::abort();
  }
  return 0;
}
