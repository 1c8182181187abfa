// Chat output parsing: see parse.h and text.md §3.14, §4.4.
#include "chat/parse.h"

#include <array>
#include <optional>

#include "chat/markers.h"
#include "chat/py_json.h"
#include "text/stop_prefix.h"

namespace dsv4::chat {

namespace {

constexpr std::string_view kDsml = "｜DSML｜";
constexpr std::string_view kCallsStart = "\n\n<｜DSML｜tool_calls";
constexpr std::string_view kCallsEnd = "</｜DSML｜tool_calls>";
constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke";
constexpr std::string_view kInvokeClose = "</｜DSML｜invoke";
constexpr std::string_view kParamOpen = "<｜DSML｜parameter";
constexpr std::string_view kParamClose = "/｜DSML｜parameter";

struct Found {
  int which = -1;  // index into the stops, -1 if none occurs
  size_t at = std::string_view::npos;
};

// The earliest occurrence at or after `from` of any of the stops.
template <size_t N>
Found find_first(std::string_view text, size_t from, const std::array<std::string_view, N>& stops) {
  Found found;
  for (size_t k = 0; k < N; ++k) {
    size_t at = text.find(stops[k], from);
    if (at != std::string_view::npos && at < found.at) found = {static_cast<int>(k), at};
  }
  return found;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// `^\s*name="(.*?)">\n$` (re.DOTALL; `$` may also match before a final "\n").
std::optional<std::string> invoke_name(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  if (!s.starts_with("name=\"")) return std::nullopt;
  s.remove_prefix(6);
  if (s.ends_with("\">\n\n")) return std::string(s.substr(0, s.size() - 4));
  if (s.ends_with("\">\n")) return std::string(s.substr(0, s.size() - 3));
  return std::nullopt;
}

struct Param {
  std::string key;
  bool is_string = false;
  std::string value;
};

// `^ name="(.*?)" string="(true|false)">(.*?)<$` (re.DOTALL).
std::optional<Param> parameter(std::string_view s) {
  if (!s.starts_with(" name=\"")) return std::nullopt;
  s.remove_prefix(7);
  size_t tail = s.ends_with("<") ? 1 : s.ends_with("<\n") ? 2 : 0;
  if (tail == 0) return std::nullopt;
  for (size_t q = 0; q < s.size(); ++q) {
    for (std::string_view flag : {std::string_view("true"), std::string_view("false")}) {
      std::string attr = "\" string=\"" + std::string(flag) + "\">";
      if (s.substr(q, attr.size()) == attr && q + attr.size() + tail <= s.size()) {
        size_t v = q + attr.size();
        return Param{std::string(s.substr(0, q)), flag == "true", std::string(s.substr(v, s.size() - tail - v))};
      }
    }
  }
  return std::nullopt;
}

enum class Step { kNeedMore, kCall, kEnd, kError };

// One invoke of the call block, or its end. `pos` is just after
// "\n\n<｜DSML｜tool_calls" or a "</｜DSML｜invoke"; it advances only past a
// complete invoke or the block end.
Step scan_call(std::string_view text, size_t& pos, ToolCall& call, std::string& error) {
  size_t p = pos;
  Found next = find_first<2>(text, p, {kInvokeOpen, kCallsEnd});
  if (next.which < 0) return Step::kNeedMore;
  if (text.substr(p, next.at - p) != ">\n") {
    error = "tool calls: expected \">\\n\" before the next DSML tag";
    return Step::kError;
  }
  if (next.which == 1) {
    pos = next.at + kCallsEnd.size();
    return Step::kEnd;
  }
  p = next.at + kInvokeOpen.size();
  Found tag = find_first<2>(text, p, {kParamOpen, kInvokeClose});
  if (tag.which < 0) return Step::kNeedMore;
  auto name = invoke_name(text.substr(p, tag.at - p));
  if (!name) {
    error = "tool calls: invoke tag is not `name=\"...\">` + newline";
    return Step::kError;
  }
  std::vector<Param> params;
  p = tag.at + (tag.which == 0 ? kParamOpen.size() : kInvokeClose.size());
  while (tag.which == 0) {
    size_t close = text.find(kParamClose, p);
    if (close == std::string_view::npos) return Step::kNeedMore;
    auto param = parameter(text.substr(p, close - p));
    if (!param) {
      error = "tool calls: parameter of \"" + *name + "\" is not ` name=\"...\" string=\"true|false\">VALUE<`";
      return Step::kError;
    }
    for (const Param& other : params) {
      if (other.key == param->key) {
        error = "tool calls: duplicate parameter \"" + param->key + "\" in \"" + *name + "\"";
        return Step::kError;
      }
    }
    params.push_back(std::move(*param));
    p = close + kParamClose.size();
    tag = find_first<2>(text, p, {kParamOpen, kInvokeClose});
    if (tag.which < 0) return Step::kNeedMore;
    if (text.substr(p, tag.at - p) != ">\n") {
      error = "tool calls: expected \">\\n\" after a parameter of \"" + *name + "\"";
      return Step::kError;
    }
    p = tag.at + (tag.which == 0 ? kParamOpen.size() : kInvokeClose.size());
  }
  std::string arguments = "{";
  for (size_t k = 0; k < params.size(); ++k) {
    if (k) arguments += ", ";
    arguments += py_json_string(params[k].key) + ": " + (params[k].is_string ? py_json_string(params[k].value) : params[k].value);
  }
  arguments += "}";
  call = ToolCall{std::move(*name), std::move(arguments)};
  pos = p;
  return Step::kCall;
}

}  // namespace

Result<ParsedMessage> parse_completion(std::string_view text, ThinkingMode mode) {
  ParsedMessage out;
  size_t pos = 0;
  if (mode == ThinkingMode::kThinking) {
    Found end = find_first<2>(text, 0, {kThinkClose, kCallsStart});
    if (end.which != 0) return Status::error("completion: reasoning is not closed by </think>");
    out.reasoning_content = std::string(text.substr(0, end.at));
    pos = end.at + kThinkClose.size();
  }
  Found end = find_first<2>(text, pos, {kEos, kCallsStart});
  if (end.which < 0) return Status::error("completion: missing the EOS string <｜end▁of▁sentence｜>");
  out.content = std::string(text.substr(pos, end.at - pos));
  if (end.which == 0) {
    pos = end.at + kEos.size();
  } else {
    pos = end.at + kCallsStart.size();
    while (true) {
      ToolCall call;
      std::string error;
      Step step = scan_call(text, pos, call, error);
      if (step == Step::kError) return Status::errorf("completion: {}", error);
      if (step == Step::kNeedMore) return Status::error("completion: the tool-call block is not closed");
      if (step == Step::kEnd) break;
      out.tool_calls.push_back(std::move(call));
    }
    if (!text.substr(pos).starts_with(kEos)) return Status::error("completion: EOS must follow </｜DSML｜tool_calls>");
    pos += kEos.size();
  }
  if (pos != text.size()) return Status::error("completion: text after the EOS string");
  for (std::string_view token : {kBos, kEos, kThinkOpen, kThinkClose, kDsml}) {
    if (out.content.find(token) != std::string::npos || out.reasoning_content.find(token) != std::string::npos)
      return Status::errorf("completion: unexpected {} in reasoning or content", token);
  }
  return out;
}

nlohmann::ordered_json tool_call_json(const ToolCall& call, const std::string& id) {
  nlohmann::ordered_json j;
  j["id"] = id;
  j["type"] = "function";
  j["function"]["name"] = call.name;
  j["function"]["arguments"] = call.arguments;
  return j;
}

ChatStreamParser::ChatStreamParser(bool in_reasoning)
    : state_(in_reasoning ? State::kReasoning : State::kContent) {}

ChatDelta ChatStreamParser::feed(std::string_view piece) {
  ChatDelta delta;
  if (state_ == State::kDone) return delta;
  buffer_ += piece;
  run(delta, false);
  return delta;
}

ChatDelta ChatStreamParser::finish() {
  ChatDelta delta;
  run(delta, true);
  if (state_ == State::kCalls) truncated_ = true;
  buffer_.clear();
  return delta;
}

void ChatStreamParser::run(ChatDelta& delta, bool final) {
  while (true) {
    if (state_ == State::kReasoning || state_ == State::kContent) {
      const bool reasoning = state_ == State::kReasoning;
      std::string& out = reasoning ? delta.reasoning : delta.content;
      // Reasoning also ends at the call block (lenient) and EOS.
      static constexpr std::array<std::string_view, 3> kReasoningStops = {kThinkClose, kCallsStart, kEos};
      static constexpr std::array<std::string_view, 2> kContentStops = {kCallsStart, kEos};
      Found stop = reasoning ? find_first<3>(buffer_, 0, kReasoningStops) : find_first<2>(buffer_, 0, kContentStops);
      if (stop.which < 0) {
        size_t hold = final ? 0 : reasoning ? stop_prefix_length(buffer_, kReasoningStops) : stop_prefix_length(buffer_, kContentStops);
        out.append(buffer_, 0, buffer_.size() - hold);
        buffer_.erase(0, buffer_.size() - hold);
        return;
      }
      std::string_view marker = reasoning ? kReasoningStops[stop.which] : kContentStops[stop.which];
      out.append(buffer_, 0, stop.at);
      buffer_.erase(0, stop.at + marker.size());
      state_ = marker == kThinkClose ? State::kContent : marker == kCallsStart ? State::kCalls : State::kDone;
    } else if (state_ == State::kCalls) {
      size_t pos = 0;
      ToolCall call;
      Step step = scan_call(buffer_, pos, call, error_);
      if (step == Step::kNeedMore) return;
      buffer_.erase(0, pos);
      if (step == Step::kCall) {
        delta.tool_calls.push_back(std::move(call));
      } else {
        state_ = State::kDone;  // kEnd, or kError with error_ set
      }
    } else {
      buffer_.clear();
      return;
    }
  }
}

}  // namespace dsv4::chat
