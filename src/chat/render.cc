// DeepSeek-V4 chat encoding: see render.h and text.md §3.3-§3.11.
#include "chat/render.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "chat/markers.h"
#include "chat/py_json.h"
#include "io/json_bounded.h"

namespace dsv4::chat {

namespace {

using Json = OrderedJson;

constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kReminder = "<｜latest_reminder｜>";
constexpr int kMaxJsonDepth = 500;
constexpr size_t kMaxPromptBytes = size_t{1} << 31;  // spans are 32-bit

constexpr std::string_view kEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the "
    "root cause, rigorously stress-testing your logic against all potential paths, edge cases, and "
    "adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

constexpr std::string_view kToolsHead =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
    "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
constexpr std::string_view kResponseFormat =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

const std::map<std::string, std::string, std::less<>>& task_tokens() {
  static const std::map<std::string, std::string, std::less<>> tokens = {
      {"action", "<｜action｜>"}, {"query", "<｜query｜>"}, {"authority", "<｜authority｜>"},
      {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"}};
  return tokens;
}

// The prompt under construction: template text goes into a span (added tokens may match
// there), request text does not; adjacent template pieces share one span.
void put_template(ChatPrompt& p, std::string_view s) {
  if (s.empty()) return;
  const auto begin = static_cast<uint32_t>(p.text.size());
  p.text += s;
  if (!p.template_spans.empty() && p.template_spans.back().begin + p.template_spans.back().size == begin) {
    p.template_spans.back().size += static_cast<uint32_t>(s.size());
  } else {
    p.template_spans.push_back({begin, static_cast<uint32_t>(s.size())});
  }
}

void put_request(ChatPrompt& p, std::string_view s) { p.text += s; }

void put(ChatPrompt& p, const ChatPrompt& part) {
  size_t pos = 0;
  for (const Span& s : part.template_spans) {
    put_request(p, std::string_view(part.text).substr(pos, s.begin - pos));
    put_template(p, std::string_view(part.text).substr(s.begin, s.size));
    pos = s.begin + s.size;
  }
  put_request(p, std::string_view(part.text).substr(pos));
}

// One block of a user turn (§3.3): text, or a tool result with its call id.
struct Block {
  bool tool_result = false;
  std::string text;
  std::string call_id;
};

// A message after validation, with its fixed parts already rendered.
struct Turn {
  std::string role;
  std::string content;
  std::vector<Block> blocks;     // user turns
  std::string reasoning;         // assistant
  ChatPrompt calls;              // assistant: DSML_CALLS, empty if none
  std::vector<std::string> call_ids;  // assistant: per call, "" without id
  ChatPrompt tools;              // system/developer: TOOLS(...), empty if none
  ChatPrompt response_format;    // system/developer: RESPONSE_FORMAT(...), empty if none
  std::string tool_call_id;      // tool
  std::optional<std::string> task;
  bool wo_eos = false;
};

// Python truthiness of a JSON value.
bool truthy(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return v.get<bool>();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return v.get<double>() != 0.0;
    case Json::value_t::string:
    case Json::value_t::array:
    case Json::value_t::object: return !v.empty();
    default: return false;
  }
}

Result<std::string> optional_string(const Json& m, const char* name, const std::string& where) {
  const Json* v = json_optional(m, name);
  if (!v) return std::string();
  if (!v->is_string()) return Status::errorf("{}.{}: must be a string, got {}", where, name, v->type_name());
  return v->get<std::string>();
}

// content: string, null (""), or an array of parts. Message content: text parts only,
// concatenated. A tool message (tool_parts): parts joined by "\n\n" as the reference
// does, a non-text part as "[Unsupported <type>]".
Result<std::string> read_parts(const Json& m, const std::string& where, bool tool_parts) {
  const Json* v = json_optional(m, "content");
  if (!v) return std::string();
  if (v->is_string()) return v->get<std::string>();
  if (!v->is_array())
    return Status::errorf("{}.content: must be a string, null or an array of {}parts, got {}", where,
                          tool_parts ? "" : "text ", v->type_name());
  std::string out;
  for (size_t j = 0; j < v->size(); ++j) {
    const Json& part = (*v)[j];
    std::string at = fmt::format("{}.content[{}]", where, j);
    if (!part.is_object()) return Status::errorf("{}: must be an object", at);
    const Json* type = json_member(part, "type");
    if (!type || !type->is_string()) return Status::errorf("{}.type: missing or not a string", at);
    if (tool_parts && j) out += "\n\n";
    if (*type != "text") {
      if (!tool_parts)
        return Status::errorf("{}.type: unsupported content part type \"{}\" (only \"text\")", at,
                              type->get<std::string>());
      out += "[Unsupported " + type->get<std::string>() + "]";
      continue;
    }
    auto text = optional_string(part, "text", at);
    if (!text) return text.status();
    out += *text;
  }
  return out;
}

Result<std::string> read_content(const Json& m, const std::string& where) { return read_parts(m, where, false); }
Result<std::string> read_tool_content(const Json& m, const std::string& where) { return read_parts(m, where, true); }

// function.name: a string matching OpenAI's ^[a-zA-Z0-9_-]{1,64}$ (it is written into DSML
// unescaped, so a quote or a marker in it would change the prompt's structure).
Status check_tool_name(const Json& function, const std::string& where) {
  const Json* name = json_member(function, "name");
  if (!name || !name->is_string()) return Status::errorf("{}.function.name: missing or not a string", where);
  const std::string& s = name->get_ref<const std::string&>();
  constexpr std::string_view kPattern = "^[a-zA-Z0-9_-]{1,64}$";
  if (s.empty()) return Status::errorf("{}.function.name: empty (must match {})", where, kPattern);
  if (s.size() > 64)
    return Status::errorf("{}.function.name: {} bytes long (must match {})", where, s.size(), kPattern);
  const bool ok = std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!ok) return Status::errorf("{}.function.name: {} does not match {}", where, py_json(*name), kPattern);
  return {};
}

Result<ChatPrompt> render_tools(const Json& tools, const std::string& where) {
  if (!tools.is_array()) return Status::errorf("{}: must be an array, got {}", where, tools.type_name());
  ChatPrompt out;
  put_template(out, kToolsHead);
  for (size_t j = 0; j < tools.size(); ++j) {
    const Json& tool = tools[j];
    const std::string at = fmt::format("{}[{}]", where, j);
    if (!tool.is_object()) return Status::errorf("{}: must be an object", at);
    const Json* function = json_member(tool, "function");
    if (!function || !function->is_object()) return Status::errorf("{}.function: missing or not an object", at);
    if (json_depth(*function) > kMaxJsonDepth) return Status::errorf("{}.function: nested deeper than {}", at, kMaxJsonDepth);
    DSV4_RETURN_IF_ERROR(check_tool_name(*function, at));
    if (j) put_template(out, "\n");
    put_request(out, py_json(*function));
  }
  put_template(out, kToolsTail);
  return out;
}

// DSML_CALLS (§3.8); also collects the call ids that order tool results.
Status render_calls(const Json& calls, const std::string& where, Turn& turn) {
  if (calls.is_null()) return {};
  if (!calls.is_array()) return Status::errorf("{}: must be an array, got {}", where, calls.type_name());
  if (calls.empty()) return {};
  ChatPrompt out;
  put_template(out, "\n\n<｜DSML｜tool_calls>\n");
  for (size_t j = 0; j < calls.size(); ++j) {
    const Json& call = calls[j];
    std::string at = fmt::format("{}[{}]", where, j);
    if (!call.is_object()) return Status::errorf("{}: must be an object", at);
    const Json* function = json_member(call, "function");
    if (!function || !function->is_object()) return Status::errorf("{}.function: missing or not an object", at);
    DSV4_RETURN_IF_ERROR(check_tool_name(*function, at));
    const Json* arguments = json_member(*function, "arguments");
    if (!arguments || !arguments->is_string())
      return Status::errorf("{}.function.arguments: must be a JSON string (got {})", at, arguments ? arguments->type_name() : "nothing");
    // Call id for ordering: `id`, else `function.id` (§3.3).
    std::string id;
    for (const Json* holder : {&call, function}) {
      const Json* v = json_member(*holder, "id");
      if (v && v->is_string() && !v->get<std::string>().empty()) {
        id = v->get<std::string>();
        break;
      }
    }
    turn.call_ids.push_back(id);

    const std::string& raw = arguments->get_ref<const std::string&>();
    std::vector<PyParsed::Member> members;
    if (auto parsed = py_json_reparse(raw)) {
      if (parsed->kind != PyParsed::Kind::kObject)
        return Status::errorf("{}.function.arguments: must encode a JSON object", at);
      members = std::move(parsed->members);
    } else {
      members.push_back({"arguments", raw, true});  // unparsable: one raw string parameter
    }
    if (j) put_template(out, "\n");
    put_template(out, "<｜DSML｜invoke name=\"");
    put_request(out, function->at("name").get_ref<const std::string&>());
    put_template(out, "\">\n");
    for (size_t k = 0; k < members.size(); ++k) {
      if (k) put_template(out, "\n");
      put_template(out, "<｜DSML｜parameter name=\"");
      put_request(out, members[k].key);
      put_template(out, members[k].value_is_string ? "\" string=\"true\">" : "\" string=\"false\">");
      put_request(out, members[k].value);
      put_template(out, "</｜DSML｜parameter>");
    }
    put_template(out, "\n</｜DSML｜invoke>");
  }
  put_template(out, "\n</｜DSML｜tool_calls>");
  turn.calls = std::move(out);
  return {};
}

Result<Turn> read_message(const Json& m, const std::string& where) {
  if (!m.is_object()) return Status::errorf("{}: must be an object, got {}", where, m.type_name());
  Turn turn;
  const Json* role = json_member(m, "role");
  if (!role || !role->is_string()) return Status::errorf("{}.role: missing or not a string", where);
  turn.role = role->get<std::string>();
  const std::string& r = turn.role;
  if (r != "system" && r != "user" && r != "assistant" && r != "tool" && r != "developer" && r != "latest_reminder")
    return Status::errorf("{}.role: unknown role \"{}\" (system, user, assistant, tool, developer, latest_reminder)", where, r);

  auto content = r == "tool" ? read_tool_content(m, where) : read_content(m, where);
  if (!content) return content.status();
  turn.content = std::move(*content);
  if (r == "developer" && turn.content.empty()) return Status::errorf("{}.content: a developer message needs non-empty content", where);

  if (const Json* task = json_optional(m, "task")) {
    if (!task->is_string() || !task_tokens().contains(task->get<std::string>()))
      return Status::errorf("{}.task: unknown task {} (action, query, authority, domain, title, read_url)", where, task->dump());
    turn.task = task->get<std::string>();
  }
  if (const Json* wo_eos = json_optional(m, "wo_eos")) {
    if (!wo_eos->is_boolean()) return Status::errorf("{}.wo_eos: must be a boolean", where);
    turn.wo_eos = wo_eos->get<bool>();
  }

  const Json* tools = json_member(m, "tools");
  if (tools && truthy(*tools)) {
    if (r != "system" && r != "developer")
      return Status::errorf("{}.tools: tools are rendered only on system/developer messages, not on \"{}\"", where, r);
    auto text = render_tools(*tools, where + ".tools");
    if (!text) return text.status();
    turn.tools = std::move(*text);
  }
  if (r == "system" || r == "developer") {
    if (const Json* format = json_member(m, "response_format"); format && truthy(*format)) {
      if (json_depth(*format) > kMaxJsonDepth) return Status::errorf("{}.response_format: nested deeper than {}", where, kMaxJsonDepth);
      put_template(turn.response_format, kResponseFormat);
      put_request(turn.response_format, py_json(*format));
    }
  }
  if (r == "assistant") {
    auto reasoning = optional_string(m, "reasoning_content", where);
    if (!reasoning) return reasoning.status();
    turn.reasoning = std::move(*reasoning);
    if (const Json* calls = json_member(m, "tool_calls")) DSV4_RETURN_IF_ERROR(render_calls(*calls, where + ".tool_calls", turn));
  }
  if (r == "tool") {
    auto id = optional_string(m, "tool_call_id", where);
    if (!id) return id.status();
    turn.tool_call_id = std::move(*id);
  }
  return turn;
}

Result<std::vector<Turn>> read_messages(const Json& list, const char* name) {
  std::vector<Turn> turns;
  if (list.is_null()) return turns;
  if (!list.is_array()) return Status::errorf("{}: must be an array, got {}", name, list.type_name());
  for (size_t i = 0; i < list.size(); ++i) {
    auto turn = read_message(list[i], fmt::format("{}[{}]", name, i));
    if (!turn) return turn.status();
    turns.push_back(std::move(*turn));
  }
  return turns;
}

// §3.3: tool results and consecutive user messages become one user turn.
std::vector<Turn> merge_tool_messages(std::vector<Turn> in) {
  std::vector<Turn> out;
  for (Turn& m : in) {
    bool last_is_user = !out.empty() && out.back().role == "user";
    if (m.role == "tool") {
      Block block{true, std::move(m.content), std::move(m.tool_call_id)};
      if (last_is_user) {
        out.back().blocks.push_back(std::move(block));
      } else {
        Turn user;
        user.role = "user";
        user.blocks.push_back(std::move(block));
        out.push_back(std::move(user));
      }
    } else if (m.role == "user") {
      Block block{false, m.content, ""};
      if (last_is_user && !out.back().task) {
        out.back().blocks.push_back(std::move(block));  // m's task and wo_eos are lost
      } else {
        m.blocks.push_back(std::move(block));
        out.push_back(std::move(m));
      }
    } else {
      out.push_back(std::move(m));
    }
  }
  return out;
}

// §3.3: tool results back in call order; `order` carries over from context.
void sort_tool_results(std::vector<Turn>& turns, std::map<std::string, int>& order) {
  for (Turn& m : turns) {
    if (m.role == "assistant" && !m.call_ids.empty()) {
      order.clear();
      for (size_t j = 0; j < m.call_ids.size(); ++j) {
        if (!m.call_ids[j].empty()) order[m.call_ids[j]] = static_cast<int>(j);
      }
    } else if (m.role == "user" && !order.empty()) {
      std::vector<Block> results;
      for (const Block& b : m.blocks) {
        if (b.tool_result) results.push_back(b);
      }
      if (results.size() < 2) continue;
      auto key = [&](const Block& b) {
        auto it = order.find(b.call_id);
        return it == order.end() ? 0 : it->second;
      };
      std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) { return key(a) < key(b); });
      size_t next = 0;
      for (Block& b : m.blocks) {
        if (b.tool_result) b = results[next++];
      }
    }
  }
}

int last_user_index(const std::vector<Turn>& turns) {
  for (int i = static_cast<int>(turns.size()) - 1; i >= 0; --i) {
    if (turns[i].role == "user" || turns[i].role == "developer") return i;
  }
  return -1;
}

// §3.4: reasoning before the last user turn is removed, earlier developer turns vanish.
std::vector<Turn> drop_history(const std::vector<Turn>& turns) {
  const int last = last_user_index(turns);
  std::vector<Turn> out;
  for (int i = 0; i < static_cast<int>(turns.size()); ++i) {
    const Turn& m = turns[i];
    if (m.role == "user" || m.role == "system" || m.role == "latest_reminder" || i >= last) {
      out.push_back(m);
    } else if (m.role == "assistant") {
      out.push_back(m);
      out.back().reasoning.clear();
    }
  }
  return out;
}

struct RenderState {
  const std::vector<Turn>& full;
  bool thinking;
  bool effective_drop;
  ReasoningEffort effort;
  int last_user;
};

// §3.5 + §3.6: message i and the transition after it.
void render_turn(const RenderState& s, int i, ChatPrompt& out) {
  const Turn& m = s.full[i];
  if (i == 0 && s.thinking && s.effort == ReasoningEffort::kMax) put_template(out, kEffortMax);
  auto append_extras = [&] {
    if (!m.tools.text.empty()) {
      put_template(out, "\n\n");
      put(out, m.tools);
    }
    if (!m.response_format.text.empty()) {
      put_template(out, "\n\n");
      put(out, m.response_format);
    }
  };
  if (m.role == "system") {
    put_request(out, m.content);
    append_extras();
  } else if (m.role == "developer") {
    put_template(out, kUser);
    put_request(out, m.content);
    append_extras();
  } else if (m.role == "user") {
    put_template(out, kUser);
    for (size_t b = 0; b < m.blocks.size(); ++b) {
      if (b) put_template(out, "\n\n");
      const Block& block = m.blocks[b];
      if (block.tool_result) put_template(out, "<tool_result>");
      put_request(out, block.text);
      if (block.tool_result) put_template(out, "</tool_result>");
    }
  } else if (m.role == "latest_reminder") {
    put_template(out, kReminder);
    put_request(out, m.content);
  } else {  // assistant
    bool after_task = i > 0 && s.full[i - 1].task.has_value();
    if (s.thinking && !after_task && (!s.effective_drop || i > s.last_user)) {
      put_request(out, m.reasoning);
      put_template(out, kThinkClose);
    }
    put_request(out, m.content);
    put(out, m.calls);
    if (!m.wo_eos) put_template(out, kEos);
  }

  if (i + 1 < static_cast<int>(s.full.size())) {
    const std::string& next = s.full[i + 1].role;
    if (next != "assistant" && next != "latest_reminder") return;
  }
  if (m.task) {
    if (*m.task == "action") {
      put_template(out, kAssistant);
      put_template(out, s.thinking ? kThinkOpen : kThinkClose);
    }
    put_template(out, task_tokens().find(*m.task)->second);
  } else if (m.role == "user" || m.role == "developer") {
    put_template(out, kAssistant);
    put_template(out, (s.thinking && (!s.effective_drop || i >= s.last_user)) ? kThinkOpen : kThinkClose);
  }
}

bool any_tools(const std::vector<Turn>& turns) {
  return std::any_of(turns.begin(), turns.end(), [](const Turn& t) { return !t.tools.text.empty(); });
}

}  // namespace

Result<ChatOptions> chat_options_from_request(const Json& request) {
  if (!request.is_object()) return Status::error("request: must be a JSON object");
  ChatOptions options;
  std::optional<bool> thinking;
  if (const Json* v = json_optional(request, "thinking")) {
    if (!v->is_boolean()) return Status::errorf("thinking: must be a boolean, got {}", v->dump());
    thinking = v->get<bool>();
  }
  if (const Json* kwargs = json_optional(request, "chat_template_kwargs")) {
    if (!kwargs->is_object()) return Status::error("chat_template_kwargs: must be an object");
    if (const Json* v = json_optional(*kwargs, "thinking")) {
      if (!v->is_boolean()) return Status::errorf("chat_template_kwargs.thinking: must be a boolean, got {}", v->dump());
      if (thinking && *thinking != v->get<bool>())
        return Status::error("chat_template_kwargs.thinking: disagrees with the request's \"thinking\"");
      thinking = v->get<bool>();
    }
  }
  options.mode = thinking.value_or(false) ? ThinkingMode::kThinking : ThinkingMode::kChat;
  if (const Json* v = json_optional(request, "reasoning_effort")) {
    std::string effort = v->is_string() ? v->get<std::string>() : "";
    if (effort == "low" || effort == "medium" || effort == "high") {
      options.effort = ReasoningEffort::kHigh;
    } else if (effort == "max") {
      options.effort = ReasoningEffort::kMax;
    } else {
      return Status::errorf("reasoning_effort: unsupported value {} (low, medium, high, max)", v->dump());
    }
  }
  if (const Json* v = json_optional(request, "tools")) {
    if (!v->is_array()) return Status::errorf("tools: must be an array, got {}", v->type_name());
    options.tools = *v;
  }
  return options;
}

Result<ChatPrompt> render_chat(const Json& messages, const ChatOptions& options) {
  if (!messages.is_array()) return Status::errorf("messages: must be an array, got {}", messages.type_name());
  auto context_in = read_messages(options.context, "context");
  if (!context_in) return context_in.status();
  auto messages_in = read_messages(messages, "messages");
  if (!messages_in) return messages_in.status();

  // API-level tools go on the conversation's first message (§3.16).
  if (!options.tools.is_null() && truthy(options.tools)) {
    auto tools = render_tools(options.tools, "tools");
    if (!tools) return tools.status();
    std::vector<Turn>& target = context_in->empty() ? *messages_in : *context_in;
    if (!target.empty() && (target[0].role == "system" || target[0].role == "developer")) {
      if (!target[0].tools.text.empty())
        return Status::errorf("tools: given both in the request and on {}[0]", context_in->empty() ? "messages" : "context");
      target[0].tools = std::move(*tools);
    } else {
      Turn system;
      system.role = "system";
      system.tools = std::move(*tools);
      target.insert(target.begin(), std::move(system));
    }
  }

  std::vector<Turn> context = merge_tool_messages(std::move(*context_in));
  std::vector<Turn> current = merge_tool_messages(std::move(*messages_in));
  std::map<std::string, int> order;
  sort_tool_results(context, order);
  sort_tool_results(current, order);

  std::vector<Turn> full = context;
  full.insert(full.end(), current.begin(), current.end());
  const bool thinking = options.mode == ThinkingMode::kThinking;
  const bool effective_drop = options.drop_thinking && !any_tools(full);
  int first = static_cast<int>(context.size());
  int count = static_cast<int>(current.size());
  if (thinking && effective_drop) {
    full = drop_history(full);
    count = static_cast<int>(full.size() - drop_history(context).size());
    first = static_cast<int>(full.size()) - count;
  }

  ChatPrompt prompt;
  if (options.add_bos && context.empty()) put_template(prompt, kBos);
  RenderState state{full, thinking, effective_drop, options.effort, last_user_index(full)};
  for (int i = first; i < first + count; ++i) {
    render_turn(state, i, prompt);
    if (prompt.text.size() > kMaxPromptBytes)
      return Status::errorf("messages: the prompt is longer than {} bytes", kMaxPromptBytes);
  }
  return prompt;
}

bool prompt_opens_reasoning(const ChatPrompt& prompt) {
  if (!prompt.text.ends_with(kThinkOpen) || prompt.template_spans.empty()) return false;
  const Span& last = prompt.template_spans.back();
  return last.begin + last.size == prompt.text.size() && last.size >= kThinkOpen.size();
}

}  // namespace dsv4::chat
