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

constexpr std::string_view kNameAttr = " name=\"";
constexpr std::array<std::string_view, 2> kStringAttrs = {"\" string=\"true\">", "\" string=\"false\">"};

std::string parameter_error(const std::string& name) {
  return "tool calls: parameter of \"" + name + "\" is not ` name=\"...\" string=\"true|false\">VALUE<`";
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
    CallBlockScanner scanner;
    std::vector<ToolCallPiece> pieces;
    std::string error;
    const CallBlockScanner::Step step = scanner.scan(text, pos, pieces, error);
    if (step == CallBlockScanner::Step::kError) return Status::errorf("completion: {}", error);
    if (step == CallBlockScanner::Step::kNeedMore) return Status::error("completion: the tool-call block is not closed");
    ToolCallJoiner joiner;
    for (const ToolCallPiece& piece : pieces) joiner.add(piece);
    out.tool_calls = std::move(joiner.calls);
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

OrderedJson tool_call_json(const ToolCall& call, const std::string& id) {
  OrderedJson j;
  j["id"] = id;
  j["type"] = "function";
  j["function"]["name"] = call.name;
  j["function"]["arguments"] = call.arguments;
  return j;
}

void ToolCallJoiner::add(const ToolCallPiece& piece) {
  if (piece.opens) open = ToolCall{piece.name, {}};
  open.arguments += piece.arguments;
  if (piece.closes) calls.push_back(std::move(open));
}

ToolCallPiece& CallBlockScanner::piece(std::vector<ToolCallPiece>& out) {
  if (out.empty() || out.back().index != n_calls_ - 1) {
    out.emplace_back();
    out.back().index = n_calls_ - 1;
  }
  return out.back();
}

CallBlockScanner::Step CallBlockScanner::scan(std::string_view text, size_t& pos, std::vector<ToolCallPiece>& out,
                                              std::string& error) {
  while (true) {
    std::optional<Step> step;
    switch (state_) {
      case State::kGap: step = gap(text, pos, error); break;
      case State::kInvokeHeader: step = invoke_header(text, pos, out, error); break;
      case State::kParamHeader: step = param_header(text, pos, out, error); break;
      case State::kParamValue: step = param_value(text, pos, out, error); break;
      case State::kParamGap: step = param_gap(text, pos, out, error); break;
    }
    if (step) return *step;
  }
}

// After "<｜DSML｜tool_calls" or an invoke's end tag: ">\n" and a tag.
std::optional<CallBlockScanner::Step> CallBlockScanner::gap(std::string_view text, size_t& pos, std::string& error) {
  const Found next = find_first<2>(text, pos, {kInvokeOpen, kCallsEnd});
  if (next.which < 0) return Step::kNeedMore;
  if (text.substr(pos, next.at - pos) != ">\n") {
    error = "tool calls: expected \">\\n\" before the next DSML tag";
    return Step::kError;
  }
  if (next.which == 1) {
    pos = next.at + kCallsEnd.size();
    return Step::kEnd;
  }
  pos = next.at + kInvokeOpen.size();
  state_ = State::kInvokeHeader;
  return std::nullopt;
}

// ` name="...">\n` up to the first parameter or the end tag.
std::optional<CallBlockScanner::Step> CallBlockScanner::invoke_header(std::string_view text, size_t& pos,
                                                                      std::vector<ToolCallPiece>& out,
                                                                      std::string& error) {
  const Found tag = find_first<2>(text, pos, {kParamOpen, kInvokeClose});
  if (tag.which < 0) return Step::kNeedMore;
  std::optional<std::string> name = invoke_name(text.substr(pos, tag.at - pos));
  if (!name) {
    error = "tool calls: invoke tag is not `name=\"...\">` + newline";
    return Step::kError;
  }
  name_ = std::move(*name);
  keys_.clear();
  ++n_calls_;
  ToolCallPiece& p = piece(out);
  p.opens = true;
  p.name = name_;
  p.arguments = "{";
  pos = tag.at + (tag.which == 0 ? kParamOpen.size() : kInvokeClose.size());
  if (tag.which == 1) {
    p.arguments += "}";
    p.closes = true;
  }
  state_ = tag.which == 0 ? State::kParamHeader : State::kGap;
  return std::nullopt;
}

// ` name="KEY" string="true|false">` (the first such attribute).
std::optional<CallBlockScanner::Step> CallBlockScanner::param_header(std::string_view text, size_t& pos,
                                                                     std::vector<ToolCallPiece>& out,
                                                                     std::string& error) {
  const size_t close = text.find(kParamClose, pos);
  const Found attr = find_first<2>(text, pos + kNameAttr.size(), kStringAttrs);
  if (attr.which < 0 || close < attr.at) {
    if (close == std::string_view::npos) return Step::kNeedMore;
    error = parameter_error(name_);
    return Step::kError;
  }
  if (!text.substr(pos).starts_with(kNameAttr)) {
    error = parameter_error(name_);
    return Step::kError;
  }
  const size_t key_at = pos + kNameAttr.size();
  std::string key(text.substr(key_at, attr.at - key_at));
  if (keys_.count(key)) {
    error = "tool calls: duplicate parameter \"" + key + "\" in \"" + name_ + "\"";
    return Step::kError;
  }
  string_value_ = attr.which == 0;
  std::string& args = piece(out).arguments;
  if (!keys_.empty()) args += ", ";
  args += py_json_string(key);
  args += string_value_ ? ": \"" : ": ";
  keys_.insert(std::move(key));
  pos = attr.at + kStringAttrs[attr.which].size();
  state_ = State::kParamValue;
  return std::nullopt;
}

// VALUE + "<" (or "<\n") + "/｜DSML｜parameter".
std::optional<CallBlockScanner::Step> CallBlockScanner::param_value(std::string_view text, size_t& pos,
                                                                    std::vector<ToolCallPiece>& out,
                                                                    std::string& error) {
  const size_t close = text.find(kParamClose, pos);
  const bool closed = close != std::string_view::npos;
  std::string_view value = text.substr(pos, closed ? close - pos : std::string_view::npos);
  // Open: hold back what may still become the end; closed: the end must be there.
  if (!closed) value.remove_suffix(stop_prefix_length(value, std::array{kParamClose}));
  const size_t tail = value.ends_with("<") ? 1 : value.ends_with("<\n") ? 2 : 0;
  if (closed && tail == 0) {
    error = parameter_error(name_);
    return Step::kError;
  }
  value.remove_suffix(tail);
  if (!value.empty() || closed) {
    std::string& args = piece(out).arguments;
    if (string_value_) {
      py_json_escape_append(args, value);
    } else {
      args += value;
    }
    if (closed && string_value_) args += "\"";
  }
  if (!closed) {
    pos += value.size();
    return Step::kNeedMore;
  }
  pos = close + kParamClose.size();
  state_ = State::kParamGap;
  return std::nullopt;
}

// ">\n", then the next parameter or the invoke's end tag.
std::optional<CallBlockScanner::Step> CallBlockScanner::param_gap(std::string_view text, size_t& pos,
                                                                  std::vector<ToolCallPiece>& out,
                                                                  std::string& error) {
  const Found tag = find_first<2>(text, pos, {kParamOpen, kInvokeClose});
  if (tag.which < 0) return Step::kNeedMore;
  if (text.substr(pos, tag.at - pos) != ">\n") {
    error = "tool calls: expected \">\\n\" after a parameter of \"" + name_ + "\"";
    return Step::kError;
  }
  pos = tag.at + (tag.which == 0 ? kParamOpen.size() : kInvokeClose.size());
  if (tag.which == 1) {
    ToolCallPiece& p = piece(out);
    p.arguments += "}";
    p.closes = true;
  }
  state_ = tag.which == 0 ? State::kParamHeader : State::kGap;
  return std::nullopt;
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

ChatDelta ChatStreamParser::end_at_stop() {
  if (state_ != State::kCalls || !calls_.at_invoke_end()) return {};
  return feed(std::string(kFirstCallStop) + "\n" + std::string(kCallsEnd));
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
      const CallBlockScanner::Step step = calls_.scan(buffer_, pos, delta.calls, error_);
      buffer_.erase(0, pos);
      if (step == CallBlockScanner::Step::kNeedMore) return;
      state_ = State::kDone;  // kEnd, or kError with error_ set
    } else {
      buffer_.clear();
      return;
    }
  }
}

}  // namespace dsv4::chat
