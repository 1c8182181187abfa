// Rendered chat prompts tokenized with the template's spans (render.h, text.md §3.13) on the
// tiny tokenizer: text from the request never becomes an added-token id, the template's
// markers do, and a request without added-token strings keeps the ids of encoding the whole
// prompt text with added tokens matched everywhere (the encoding before the spans).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "chat/examples.h"
#include "chat/render.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"

namespace dsv4::chat {
namespace {

using Json = dsv4::OrderedJson;
using Ids = std::vector<int32_t>;

const Tokenizer& tiny() {
  static const Tokenizer tok = Tokenizer::from_json(make_tiny_tokenizer().value().tokenizer_json, "tiny").value();
  return tok;
}

Ids encode(const ChatPrompt& p) { return tiny().encode_spans(p.text, p.template_spans); }

ChatPrompt render_ok(const Json& messages, const ChatOptions& options) {
  auto r = render_chat(messages, options);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : ChatPrompt{};
}

// The ids of added tokens in `ids`, in order.
Ids added_ids(const Ids& ids) {
  std::set<int32_t> added;
  for (const AddedToken& t : tiny().added_tokens()) added.insert(t.id);
  Ids out;
  for (int32_t id : ids)
    if (added.contains(id)) out.push_back(id);
  return out;
}

// Every added-token string of the vocabulary, glued together and spaced out.
std::string every_added_string() {
  std::string glued, spaced;
  for (const AddedToken& t : tiny().added_tokens()) {
    glued += t.content;
    spaced += " " + t.content + " x";
  }
  return "<" + glued + ">" + spaced + "\n";
}

// A conversation with every kind of request text the template inserts set to `s`: system,
// reminder and user contents, a tool description and schema, a response format, reasoning,
// assistant content, tool-call argument keys and values (and unparsable arguments), tool results.
Json conversation(const std::string& s) {
  Json m = Json::array();
  m.push_back({{"role", "system"}, {"content", s}, {"response_format", {{"type", s}}}});
  m[0]["tools"] = Json::array({{{"type", "function"},
                                {"function", {{"name", "f"}, {"description", s}, {"parameters", {{s, s}}}}}}});
  m.push_back({{"role", "latest_reminder"}, {"content", s}});
  m.push_back({{"role", "user"}, {"content", s}});
  Json call1 = {{"id", "c1"}, {"type", "function"},
                {"function", {{"name", "f"}, {"arguments", Json({{"k", s}, {s, 1}}).dump()}}}};
  Json call2 = {{"id", "c2"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", s}}}};
  m.push_back({{"role", "assistant"}, {"reasoning_content", s}, {"content", s},
               {"tool_calls", Json::array({call1, call2})}});
  m.push_back({{"role", "tool"}, {"tool_call_id", "c2"}, {"content", s}});
  m.push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", Json::array({{{"type", "text"}, {"text", s}}})}});
  m.push_back({{"role", "assistant"}, {"reasoning_content", s}, {"content", s}});
  m.push_back({{"role", "user"}, {"content", s}});
  return m;
}

std::vector<ChatOptions> all_options() {
  std::vector<ChatOptions> out;
  for (ThinkingMode mode : {ThinkingMode::kChat, ThinkingMode::kThinking}) {
    for (ReasoningEffort effort : {ReasoningEffort::kNone, ReasoningEffort::kMax}) {
      for (bool drop : {true, false}) {
        ChatOptions o;
        o.mode = mode;
        o.effort = effort;
        o.drop_thinking = drop;
        out.push_back(o);
      }
    }
  }
  return out;
}

TEST(ChatPromptIds, RequestTextNeverBecomesAnAddedToken) {
  const std::string injected = every_added_string();
  for (const ChatOptions& options : all_options()) {
    const ChatPrompt attack = render_ok(conversation(injected), options);
    const ChatPrompt plain = render_ok(conversation("plain"), options);
    const Ids ids = encode(attack);
    // The same control ids as the harmless conversation: only the template's.
    EXPECT_EQ(added_ids(ids), added_ids(encode(plain)));
    // The strings are there, as text.
    EXPECT_EQ(tiny().decode(ids).value(), attack.text);
    // Today's encoding of the same text would have taken them as markers.
    EXPECT_GT(added_ids(tiny().encode(attack.text, true)).size(), added_ids(ids).size());
  }
}

// The template's own markers: BOS, turns, think tags, DSML, EOS, reminder, in order.
TEST(ChatPromptIds, TemplateMarkersKeepTheirIds) {
  ChatOptions thinking;
  thinking.mode = ThinkingMode::kThinking;
  const Ids ids = encode(render_ok(conversation("x"), thinking));
  const Ids added = added_ids(ids);
  const int32_t dsml = *tiny().token_id("｜DSML｜");
  ASSERT_GE(added.size(), 4u);
  EXPECT_EQ(added.front(), 0);                                       // BOS
  EXPECT_EQ(Ids(added.end() - 2, added.end()), (Ids{501, 502}));     // <｜Assistant｜><think>
  EXPECT_EQ(std::count(added.begin(), added.end(), *tiny().token_id("<｜latest_reminder｜>")), 1);
  EXPECT_EQ(std::count(added.begin(), added.end(), 1), 2);           // two assistant turns end with EOS
  // 9 in the tools block's prose, 12 in the two calls' tags.
  EXPECT_EQ(std::count(added.begin(), added.end(), dsml), 21);
}

// Realistic requests: identical ids to the whole-text encoding.
TEST(ChatPromptIds, OrdinaryRequestsKeepTheirIds) {
  std::vector<Json> requests = {Json::parse(examples::kExample1), Json::parse(examples::kExample2),
                                Json::parse(examples::kExample3), conversation("plain text"),
                                conversation("Hello! 你好，世界。  Code:\n\tint x = a<b && c>d ? 1 : 2;\n\n"),
                                conversation(" <tool_result> \"quoted\" <｜ ｜> <thin k> </thin> DSML｜ ")};
  requests.push_back(Json::parse(R"([
    {"role": "latest_reminder", "content": "Date: 2025-01-01"},
    {"role": "developer", "content": "Search helper", "tools": [{"type": "function", "function": {"name": "search",
     "description": "Web search \"quoted\"", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]},
    {"role": "user", "content": "What's new?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": {"name": "search",
     "arguments": "{\"q\": \"news <today>\", \"n\": [1, 2.5, null]}"}}]},
    {"role": "tool", "tool_call_id": "a", "content": "1. Something happened.\n2. Another thing."},
    {"role": "assistant", "reasoning_content": "Summarize.", "content": "Two things happened.", "wo_eos": true}])"));
  requests.push_back(Json::parse(R"([{"role": "user", "content": "Route this", "task": "action"}])"));
  requests.push_back(Json::parse(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a",
                                     "task": "title"}])"));
  requests.push_back(Json::parse(R"([{"role": "user", "content": ""}, {"role": "assistant", "content": ""},
                                     {"role": "user", "content": "  trailing spaces   "}])"));
  requests.push_back(Json::parse(R"([{"role": "system", "content": "A"}, {"role": "system", "content": "B"},
                                     {"role": "user", "content": "1234567890 3.14 ①②"}])"));
  for (size_t i = 0; i < requests.size(); ++i) {
    for (const ChatOptions& options : all_options()) {
      const ChatPrompt p = render_ok(requests[i], options);
      EXPECT_EQ(encode(p), tiny().encode(p.text, true)) << "request " << i << ": " << p.text;
    }
  }
  // Continuation: the new messages after a context, no BOS.
  ChatOptions with_context;
  with_context.context = Json::parse(examples::kExample2);
  const ChatPrompt tail = render_ok(Json::parse(R"([{"role": "assistant", "content": "6"},
                                                    {"role": "user", "content": "Thanks"}])"), with_context);
  EXPECT_EQ(encode(tail), tiny().encode(tail.text, true));
}

}  // namespace
}  // namespace dsv4::chat
