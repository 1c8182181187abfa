// Chat encoding: the worked examples of text.md §3.15 byte-exact, then one
// test per rule of §3.3-§3.12 and per quirk of §3.16.
#include "chat/render.h"

#include <gtest/gtest.h>

#include "chat/examples.h"

namespace dsv4::chat {
namespace {

using Json = dsv4::OrderedJson;

using examples::kBos;
using examples::kEos;
const std::string& kU = examples::kUser;
const std::string& kA = examples::kAssistant;
const std::string& kOpen = examples::kThinkOpen;
const std::string& kClose = examples::kThinkClose;

std::string render(const std::string& messages, ChatOptions options = {}) {
  auto r = render_chat(Json::parse(messages), options);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? r->text : std::string();
}

std::string render_error(const std::string& messages, ChatOptions options = {}) {
  auto r = render_chat(Json::parse(messages), options);
  EXPECT_FALSE(r.ok()) << "rendered: " << (r.ok() ? r->text : "");
  return r.message();
}

ChatOptions thinking() {
  ChatOptions o;
  o.mode = ThinkingMode::kThinking;
  return o;
}

std::string example(const char* json_literal) { return Json::parse(json_literal).get<std::string>(); }

using examples::kExample1;
using examples::kExample2;
using examples::kExample3;

const std::string kEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

// The tools block of example 3 around its schema lines.
std::string tools_block(const std::string& schemas) {
  const std::string p3 = example(examples::kPrompt3Json);
  const size_t head_begin = p3.find("## Tools");
  const size_t head_end = p3.find("{\"name\": \"get_weather\"");
  const size_t tail_begin = p3.find("\n\nYou MUST strictly follow");
  const size_t tail_end = p3.find(kU);
  return p3.substr(head_begin, head_end - head_begin) + schemas + p3.substr(tail_begin, tail_end - tail_begin);
}

TEST(ChatRender, Example1ChatMode) {
  EXPECT_EQ(render(kExample1), example(examples::kPrompt1Json));
}

TEST(ChatRender, Example2ThinkingDropsEarlierReasoning) {
  EXPECT_EQ(render(kExample2, thinking()), example(examples::kPrompt2Json));
}

TEST(ChatRender, Example2Variants) {
  const std::string base = example(examples::kPrompt2Json);
  ChatOptions max = thinking();
  max.effort = ReasoningEffort::kMax;
  EXPECT_EQ(render(kExample2, max), kBos + kEffortMax + base.substr(kBos.size()));
  ChatOptions high = thinking();
  high.effort = ReasoningEffort::kHigh;
  EXPECT_EQ(render(kExample2, high), base);
  ChatOptions chat_max;
  chat_max.effort = ReasoningEffort::kMax;  // no text in chat mode
  std::string chat = base.substr(0, base.size() - kOpen.size()) + kClose;
  EXPECT_EQ(render(kExample2), chat);
  EXPECT_EQ(render(kExample2, chat_max), chat);

  ChatOptions keep = thinking();
  keep.drop_thinking = false;
  std::string kept = base;
  const std::string dropped_turn = kU + "What is 2+2?" + kA + kClose + "2 + 2 = 4." + kEos;
  const std::string kept_turn = kU + "What is 2+2?" + kA + kOpen + "Simple arithmetic." + kClose + "2 + 2 = 4." + kEos;
  kept.replace(kept.find(dropped_turn), dropped_turn.size(), kept_turn);
  EXPECT_EQ(render(kExample2, keep), kept);
}

TEST(ChatRender, Example2NextRequestRendersParsedTurnWithoutReasoning) {
  Json messages = Json::parse(kExample2);
  messages.push_back({{"role", "assistant"}, {"reasoning_content", "Simple again."}, {"content", "3 + 3 = 6."}});
  messages.push_back({{"role", "user"}, {"content", "Thanks"}});
  auto r = render_chat(messages, thinking());
  ASSERT_TRUE(r.ok()) << r.message();
  const std::string base = example(examples::kPrompt2Json);
  EXPECT_EQ(r->text, base.substr(0, base.size() - kOpen.size()) + kClose + "3 + 3 = 6." + kEos + kU + "Thanks" + kA + kOpen);
}

TEST(ChatRender, Example3ToolsAndToolCall) {
  EXPECT_EQ(render(kExample3, thinking()), example(examples::kPrompt3Json));
}

TEST(ChatRender, Example3ChatModeHasNoReasoning) {
  std::string expected = example(examples::kPrompt3Json);
  const std::string thought = kA + kOpen + "Need the weather tool." + kClose;
  expected.replace(expected.find(thought), thought.size(), kA + kClose);
  expected.replace(expected.size() - kOpen.size(), kOpen.size(), kClose);
  EXPECT_EQ(render(kExample3), expected);
}

TEST(ChatRender, ToolResultsSortedByCallOrderAndJoined) {
  const char* messages = R"([
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
      {"type": "function", "function": {"id": "b", "name": "g", "arguments": "{\"x\": [1, 2.5, {\"y\":null}], \"s\": \"line1\\nline2\"}"}}]},
    {"role": "tool", "tool_call_id": "b", "content": "B"},
    {"role": "tool", "tool_call_id": "a", "content": "A"},
    {"role": "user", "content": "more"}])";
  const std::string calls =
      "\n\n<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"g\">\n"
      "<｜DSML｜parameter name=\"x\" string=\"false\">[1, 2.5, {\"y\": null}]</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"s\" string=\"true\">line1\nline2</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>";
  EXPECT_EQ(render(messages), kBos + kU + "q" + kA + kClose + calls + kEos + kU +
                                  "<tool_result>A</tool_result>\n\n<tool_result>B</tool_result>\n\nmore" + kA + kClose);
}

TEST(ChatRender, UnknownCallIdsSortFirstAndStable) {
  const char* messages = R"([
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "a", "function": {"name": "f", "arguments": "{}"}},
      {"id": "b", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "b", "content": "B"},
    {"role": "tool", "tool_call_id": "zz", "content": "Z"},
    {"role": "tool", "content": "N"}])";
  const std::string out = render(messages);
  EXPECT_NE(out.find(kU + "<tool_result>Z</tool_result>\n\n<tool_result>N</tool_result>\n\n<tool_result>B</tool_result>" + kA),
            std::string::npos) << out;
}

TEST(ChatRender, DroppingWithoutToolsRemovesToolTurnReasoning) {
  const char* messages = R"([
    {"role": "user", "content": "q"},
    {"role": "assistant", "reasoning_content": "R", "content": "", "tool_calls": [
      {"id": "a", "function": {"name": "f", "arguments": "{\"k\": 1}"}}]},
    {"role": "tool", "tool_call_id": "a", "content": "res"}])";
  const std::string calls =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"k\" string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  EXPECT_EQ(render(messages, thinking()),
            kBos + kU + "q" + kA + kClose + calls + kEos + kU + "<tool_result>res</tool_result>" + kA + kOpen);
  // Declared tools keep it (interleaved thinking).
  ChatOptions with_tools = thinking();
  with_tools.tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(render(messages, with_tools),
            kBos + "\n\n" + tools_block("{\"name\": \"f\"}") + kU + "q" + kA + kOpen + "R" + kClose + calls + kEos + kU +
                "<tool_result>res</tool_result>" + kA + kOpen);
}

// (Tool names are ASCII: OpenAI's pattern, checked below.)
TEST(ChatRender, ReminderAndDeveloperWithToolsAndCjk) {
  const char* messages = R"([
    {"role": "latest_reminder", "content": "日期：2025年"},
    {"role": "developer", "content": "搜索助手", "tools": [{"type": "function", "function": {"name": "web_search", "description": "查找\"网页\""}}],
     "response_format": {"type": "json_object"}},
    {"role": "user", "content": "你好"}])";
  const std::string dev = kU + "搜索助手\n\n" + tools_block("{\"name\": \"web_search\", \"description\": \"查找\\\"网页\\\"\"}") +
                          "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
                          "{\"type\": \"json_object\"}";
  EXPECT_EQ(render(messages, thinking()), kBos + "<｜latest_reminder｜>日期：2025年" + dev + kU + "你好" + kA + kOpen);
}

TEST(ChatRender, DeveloperBeforeLastUserVanishesWhenDropping) {
  const char* messages = R"([
    {"role": "developer", "content": "D"},
    {"role": "assistant", "reasoning_content": "r", "content": "c"},
    {"role": "user", "content": "u"}])";
  EXPECT_EQ(render(messages, thinking()), kBos + "c" + kEos + kU + "u" + kA + kOpen);
  EXPECT_EQ(render(messages), kBos + kU + "D" + kA + kClose + "c" + kEos + kU + "u" + kA + kClose);
}

TEST(ChatRender, SystemMessagesInlineAndConcatenated) {
  const char* messages = R"([
    {"role": "system", "content": "A"}, {"role": "system", "content": "B"},
    {"role": "user", "content": "u"}, {"role": "assistant", "content": "c"},
    {"role": "system", "content": "mid"}, {"role": "user", "content": "v"}])";
  EXPECT_EQ(render(messages), kBos + "AB" + kU + "u" + kA + kClose + "c" + kEos + "mid" + kU + "v" + kA + kClose);
}

TEST(ChatRender, ReminderAfterUserComesAfterTheOpener) {
  EXPECT_EQ(render(R"([{"role": "user", "content": "hi"}, {"role": "latest_reminder", "content": "r"}])"),
            kBos + kU + "hi" + kA + kClose + "<｜latest_reminder｜>r");
}

TEST(ChatRender, ConsecutiveUserMessagesMerge) {
  EXPECT_EQ(render(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])"),
            kBos + kU + "a\n\nb" + kA + kClose);
}

TEST(ChatRender, Tasks) {
  // action in chat mode after a history turn.
  const char* action = R"([{"role": "user", "content": "h"}, {"role": "assistant", "content": "c"},
                           {"role": "user", "content": "q", "task": "action"}])";
  EXPECT_EQ(render(action), kBos + kU + "h" + kA + kClose + "c" + kEos + kU + "q" + kA + kClose + "<｜action｜>");
  EXPECT_EQ(render(action, thinking()), kBos + kU + "h" + kA + kClose + "c" + kEos + kU + "q" + kA + kOpen + "<｜action｜>");
  EXPECT_EQ(render(R"([{"role": "user", "content": "q", "task": "query"}])"), kBos + kU + "q<｜query｜>");
  // The answer to a task never has a reasoning part.
  EXPECT_EQ(render(R"([{"role": "user", "content": "q", "task": "domain"}, {"role": "assistant", "reasoning_content": "x", "content": "d"}])",
                   thinking()),
            kBos + kU + "q<｜domain｜>d" + kEos);
  EXPECT_EQ(render(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "task": "title"}])"),
            kBos + kU + "q" + kA + kClose + "a" + kEos + "<｜title｜>");
  // A user message after a task turn is not merged into it; its own task is then kept.
  EXPECT_EQ(render(R"([{"role": "user", "content": "a", "task": "query"}, {"role": "user", "content": "b", "task": "authority"}])"),
            kBos + kU + "a" + kU + "b<｜authority｜>");
  // ... but a task on a message merged into a previous user turn is lost.
  EXPECT_EQ(render(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b", "task": "query"}])"),
            kBos + kU + "a\n\nb" + kA + kClose);
}

TEST(ChatRender, WithoutEosAndFinalAssistant) {
  EXPECT_EQ(render(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "partial", "wo_eos": true}])", thinking()),
            kBos + kU + "q" + kA + kOpen + kClose + "partial");
  ChatOptions no_bos;
  no_bos.add_bos = false;
  EXPECT_EQ(render(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "full"}])", no_bos),
            kU + "q" + kA + kClose + "full" + kEos);
}

TEST(ChatRender, ContextRendersOnlyNewMessages) {
  const Json all = Json::parse(kExample3);
  for (ThinkingMode mode : {ThinkingMode::kChat, ThinkingMode::kThinking}) {
    ChatOptions options;
    options.mode = mode;
    for (size_t split = 1; split < all.size(); ++split) {
      Json context(all.begin(), all.begin() + split);
      Json rest(all.begin() + split, all.end());
      ChatOptions with_context = options;
      with_context.context = context;
      auto head = render_chat(context, options);
      auto tail = render_chat(rest, with_context);
      auto whole = render_chat(all, options);
      ASSERT_TRUE(head.ok() && tail.ok() && whole.ok());
      EXPECT_EQ(head->text + tail->text, whole->text) << "split " << split;
    }
  }
}

TEST(ChatRender, ApiToolsAttachOrInsert) {
  ChatOptions options;
  options.tools = Json::parse(R"([{"type": "function", "function": {"name": "t", "parameters": {"b": 1, "a": 2.0}}}])");
  const std::string block = tools_block("{\"name\": \"t\", \"parameters\": {\"b\": 1, \"a\": 2.0}}");
  EXPECT_EQ(render(R"([{"role": "user", "content": "u"}])", options), kBos + "\n\n" + block + kU + "u" + kA + kClose);
  EXPECT_EQ(render(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "u"}])", options),
            kBos + "S\n\n" + block + kU + "u" + kA + kClose);
  EXPECT_NE(render_error(R"([{"role": "system", "content": "S", "tools": [{"function": {"name": "x"}}]}])", options)
                .find("tools: given both"),
            std::string::npos);
}

TEST(ChatRender, ArgumentsEdgeCases) {
  auto call = [](const std::string& arguments_json) {
    Json m = Json::array();
    m.push_back({{"role", "assistant"}, {"content", ""}});
    m[0]["tool_calls"] = Json::array({{{"function", {{"name", "f"}, {"arguments", Json::parse(arguments_json)}}}}});
    return m;
  };
  auto params = [&](const std::string& arguments_json) {
    auto r = render_chat(call(arguments_json), {});
    EXPECT_TRUE(r.ok()) << r.message();
    if (!r.ok()) return std::string();
    size_t begin = r->text.find("\">\n") + 3;
    size_t end = r->text.find("\n</｜DSML｜invoke>");
    return r->text.substr(begin, end - begin);
  };
  const std::string P = "<｜DSML｜parameter name=\"";
  const std::string E = "</｜DSML｜parameter>";
  // Unparsable text: one raw string parameter named "arguments".
  EXPECT_EQ(params(R"("not json")"), P + "arguments\" string=\"true\">not json" + E);
  EXPECT_EQ(params(R"("")"), P + "arguments\" string=\"true\">" + E);
  // Python json.loads semantics: big ints, floats as repr, NaN, duplicates.
  EXPECT_EQ(params(R"("{\"n\": 123456789012345678901234567890, \"f\": 1e2, \"z\": -0, \"g\": 1E-7}")"),
            P + "n\" string=\"false\">123456789012345678901234567890" + E + "\n" + P + "f\" string=\"false\">100.0" + E +
                "\n" + P + "z\" string=\"false\">0" + E + "\n" + P + "g\" string=\"false\">1e-07" + E);
  EXPECT_EQ(params(R"("{\"a\": NaN, \"b\": true, \"a\": -Infinity, \"c\": null}")"),
            P + "a\" string=\"false\">-Infinity" + E + "\n" + P + "b\" string=\"false\">true" + E + "\n" + P +
                "c\" string=\"false\">null" + E);
  EXPECT_EQ(params(R"("{\"s\": \"\\u00e9\\t\\ud83d\\ude00\", \"o\": {\"k\": \"\\\"\"}}")"),
            P + "s\" string=\"true\">é\t😀" + E + "\n" + P + "o\" string=\"false\">{\"k\": \"\\\"\"}" + E);
  // Rejected: an object instead of a string, and text that parses to a non-object.
  EXPECT_NE(render_chat(call(R"({"a": 1})"), {}).message().find("messages[0].tool_calls[0].function.arguments"), std::string::npos);
  EXPECT_NE(render_chat(call(R"("[1, 2]")"), {}).message().find("must encode a JSON object"), std::string::npos);
}

TEST(ChatRender, ContentForms) {
  EXPECT_EQ(render(R"([{"role": "system", "content": null}, {"role": "user", "content": null}, {"role": "assistant"}])"),
            kBos + kU + kA + kClose + kEos);
  EXPECT_EQ(render(R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])"),
            kBos + kU + "ab" + kA + kClose);
  EXPECT_EQ(render(R"([{"role": "tool", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]}])"),
            kBos + kU + "<tool_result>a\n\n[Unsupported image_url]</tool_result>" + kA + kClose);
  EXPECT_EQ(render(R"([{"role": "tool", "content": null}])"), kBos + kU + "<tool_result></tool_result>" + kA + kClose);
  EXPECT_NE(render_error(R"([{"role": "user", "content": [{"type": "image_url"}]}])").find("messages[0].content[0].type"),
            std::string::npos);
}

TEST(ChatRender, ErrorsNameTheField) {
  auto has = [](const std::string& message, const std::string& part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  has(render_error(R"([{"role": "user", "content": "a"}, {"role": "robot"}])"), "messages[1].role");
  has(render_error(R"([{"content": "a"}])"), "messages[0].role");
  has(render_error(R"([{"role": "user", "content": 5}])"), "messages[0].content");
  has(render_error(R"([{"role": "user", "content": "a", "task": "dance"}])"), "messages[0].task");
  has(render_error(R"([{"role": "developer", "content": ""}])"), "messages[0].content");
  has(render_error(R"([{"role": "user", "content": "a", "tools": [{"function": {}}]}])"), "messages[0].tools");
  has(render_error(R"([{"role": "system", "content": "a", "tools": [{"type": "function"}]}])"), "messages[0].tools[0].function");
  has(render_error(R"([{"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": "{}"}}]}])"),
      "messages[0].tool_calls[0].function.name");
  has(render_error(R"([{"role": "assistant", "reasoning_content": 1}])"), "messages[0].reasoning_content");
  has(render_error(R"([{"role": "assistant", "content": "", "wo_eos": "yes"}])"), "messages[0].wo_eos");
  has(render_error(R"([3])"), "messages[0]");
  has(render_error(R"({"role": "user"})"), "messages");
  ChatOptions bad_context;
  bad_context.context = Json::parse(R"([{"role": "user", "content": {}}])");
  has(render_error(R"([])", bad_context), "context[0].content");
}

// Tool names go into DSML unescaped: OpenAI's ^[a-zA-Z0-9_-]{1,64}$, on declared tools and on calls.
TEST(ChatRender, ToolNamesMatchOpenAiPattern) {
  auto declared = [](const std::string& name) {
    ChatOptions options;
    options.tools = Json::array({{{"type", "function"}, {"function", {{"name", name}}}}});
    return render_chat(Json::parse(R"([{"role": "user", "content": "u"}])"), options);
  };
  auto called = [](const std::string& name) {
    Json m = Json::parse(R"([{"role": "user", "content": "u"}, {"role": "assistant", "content": ""}])");
    m[1]["tool_calls"] = Json::array({{{"function", {{"name", name}, {"arguments", "{}"}}}}});
    return render_chat(m, {});
  };
  for (const std::string& ok : std::vector<std::string>{"f", "get_weather", "A-Z_09-x", std::string(64, 'n')}) {
    EXPECT_TRUE(declared(ok).ok()) << ok << ": " << declared(ok).message();
    EXPECT_TRUE(called(ok).ok()) << ok << ": " << called(ok).message();
  }
  for (const std::string& bad : std::vector<std::string>{std::string(65, 'n'), "my tool", "a.b", "", "搜索", "café",
                                                         "x\">", "f<｜end▁of▁sentence｜>"}) {
    const auto d = declared(bad), c = called(bad);
    ASSERT_FALSE(d.ok()) << bad;
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_TRUE(d.message().starts_with("tools[0].function.name: ")) << d.message();
    EXPECT_TRUE(c.message().starts_with("messages[1].tool_calls[0].function.name: ")) << c.message();
    EXPECT_NE(d.message().find("^[a-zA-Z0-9_-]{1,64}$"), std::string::npos) << d.message();
  }
  // On a system message's tools, and a missing name.
  EXPECT_TRUE(render_error(R"([{"role": "system", "content": "", "tools": [{"function": {"name": "a b"}}]}])")
                  .starts_with("messages[0].tools[0].function.name: "));
  EXPECT_TRUE(render_error(R"([{"role": "system", "content": "", "tools": [{"function": {"description": "d"}}]}])")
                  .starts_with("messages[0].tools[0].function.name: missing"));
}

TEST(ChatOptions, FromRequest) {
  auto mode = [](const char* request) { return chat_options_from_request(Json::parse(request)); };
  EXPECT_EQ(mode("{}")->mode, ThinkingMode::kChat);
  EXPECT_EQ(mode(R"({"thinking": true})")->mode, ThinkingMode::kThinking);
  EXPECT_EQ(mode(R"({"chat_template_kwargs": {"thinking": true}})")->mode, ThinkingMode::kThinking);
  EXPECT_EQ(mode(R"({"thinking": false, "chat_template_kwargs": {"thinking": false}})")->mode, ThinkingMode::kChat);
  EXPECT_NE(mode(R"({"thinking": true, "chat_template_kwargs": {"thinking": false}})").message().find("chat_template_kwargs.thinking"),
            std::string::npos);
  EXPECT_NE(mode(R"({"thinking": "yes"})").message().find("thinking"), std::string::npos);
  EXPECT_FALSE(mode(R"({"chat_template_kwargs": {"thinking": 1}})").ok());
  EXPECT_EQ(mode(R"({"reasoning_effort": "max"})")->effort, ReasoningEffort::kMax);
  EXPECT_EQ(mode(R"({"reasoning_effort": "low"})")->effort, ReasoningEffort::kHigh);
  EXPECT_NE(mode(R"({"reasoning_effort": "extreme"})").message().find("reasoning_effort"), std::string::npos);
  EXPECT_NE(mode(R"({"tools": {}})").message().find("tools"), std::string::npos);
  auto with_tools = mode(R"({"tools": [{"type": "function", "function": {"name": "x"}}]})");
  ASSERT_TRUE(with_tools.ok());
  EXPECT_EQ(with_tools->tools.size(), 1u);
}

TEST(ChatRender, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning(render_chat(Json::parse(kExample2), thinking()).value()));
  EXPECT_FALSE(prompt_opens_reasoning(render_chat(Json::parse(kExample1), {}).value()));
  // A `<think>` the request wrote at the end (a continued assistant turn) opens nothing.
  const auto continued = render_chat(Json::parse(R"([{"role": "user", "content": "u"},
      {"role": "assistant", "content": "a <think>", "wo_eos": true}])"), thinking());
  ASSERT_TRUE(continued.ok()) << continued.message();
  EXPECT_TRUE(continued->text.ends_with(kOpen));
  EXPECT_FALSE(prompt_opens_reasoning(*continued));
}

}  // namespace
}  // namespace dsv4::chat
