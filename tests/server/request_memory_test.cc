// Memory and size per request (docs/serving.md "Limits"): each text field has a cap, refused
// with a 400 naming the field and the limit; a request with n choices is parsed once and its one
// ApiRequest is shared by every choice's response builder, so what it holds stays within its
// admission charge (admission.h). Measured with mallinfo2 (bytes allocated and in use; process
// RSS is noisy under glibc's arenas), not timed.
#include <malloc.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "server/admission.h"
#include "server/choices.h"
#include "server/protocol.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer_dir.h"

namespace dsv4::server {
namespace {
namespace request_memory {  // apart from the other tests of the unity build

using Json = nlohmann::json;

const TextModel& text_model() {
  static const TextModel model = [] {
    Result<TinyTokenizerFiles> files = make_tiny_tokenizer();
    Result<Tokenizer> tok = Tokenizer::from_json(files->tokenizer_json, "tiny");
    Result<TokenizerConfig> cfg = parse_tokenizer_config(files->tokenizer_config_json, "tiny", *tok);
    return TextModel{std::move(*tok), *cfg};
  }();
  return model;
}

ModelCard big_card() {
  ModelCard c;
  c.id = "tiny";
  c.max_context = 1 << 22;
  c.max_tokens_limit = 16;
  c.text = &text_model();
  return c;
}

Json chat(std::string content) {
  return Json{{"messages", Json::array({Json{{"role", "user"}, {"content", std::move(content)}}})}, {"max_tokens", 4}};
}

void expect_too_large(const Json& body, const std::string& param, const std::string& limit) {
  const ModelCard m = big_card();
  ApiResult<ApiRequest> r = parse_chat_request(body.dump(), m, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().param, param) << r.error().message;
  EXPECT_EQ(r.error().code, "field_too_large") << r.error().message;
  EXPECT_NE(r.error().message.find(limit), std::string::npos) << r.error().message;
}

// Four stop strings of 2 MB were accepted, and each choice copied them (RSS 24x the body).
TEST(RequestCaps, EachTextFieldHasACap) {
  Json stops = chat("hi");
  stops["stop"] = Json::array({std::string(kMaxStopBytes, 'a'), std::string(kMaxStopBytes + 1, 'b')});
  expect_too_large(stops, "stop", std::to_string(kMaxStopBytes));
  stops["stop"] = Json::array({std::string(kMaxStopBytes, 'a')});
  EXPECT_TRUE(parse_chat_request(stops.dump(), big_card(), 0).ok());

  Json tools = chat("hi");
  tools["tools"] = Json::array();
  for (size_t i = 0; i <= kMaxTools; ++i)
    tools["tools"].push_back(Json{{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  expect_too_large(tools, "tools", std::to_string(kMaxTools));
  tools["tools"] = Json::array({Json{{"type", "function"},
                                     {"function", {{"name", "f"}, {"description", std::string(kMaxToolsBytes, 'd')}}}}});
  expect_too_large(tools, "tools", std::to_string(kMaxToolsBytes));

  Json call = chat("hi");
  const std::string arguments = "{\"a\": \"" + std::string(kMaxArgumentsBytes, 'x') + "\"}";
  call["messages"].push_back(Json{{"role", "assistant"},
                                  {"tool_calls", Json::array({Json{{"type", "function"},
                                                                   {"function", {{"name", "f"}, {"arguments", arguments}}}}})}});
  call["messages"].push_back(Json{{"role", "tool"}, {"content", "r"}});
  expect_too_large(call, "messages", std::to_string(kMaxArgumentsBytes));

  Json schema = chat("hi");
  schema["response_format"] = Json{{"type", "json_schema"},
                                   {"json_schema", {{"name", "s"}, {"schema", {{"description", std::string(kMaxSchemaBytes, 'd')}}}}}};
  expect_too_large(schema, "response_format", std::to_string(kMaxSchemaBytes));
}

// Bytes allocated and in use: the arenas' and the chunks malloc maps on their own (large ones).
size_t bytes_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// n = 8 choices of a request with the largest stop strings, a 1 MiB schema and a long prompt:
// the builders share one ApiRequest. Before, each of the n + 2 builders copied it.
TEST(RequestMemory, ChoicesShareOneRequestWithinTheCharge) {
  Json body = chat(std::string(1 << 19, 'w'));
  body["n"] = 8;
  body["stop"] = Json::array();
  for (int i = 0; i < 4; ++i) body["stop"].push_back(std::string(kMaxStopBytes, static_cast<char>('a' + i)));
  body["response_format"] = Json{{"type", "json_schema"},
                                 {"json_schema", {{"name", "s"}, {"schema", {{"description", std::string((1 << 20) - 64, 'd')}}}}}};
  const std::string text = body.dump();
  const ModelCard m = big_card();
  ModelCard card = m;
  card.max_n = 8;

  const size_t before_parse = bytes_in_use();
  ApiResult<ApiRequest> parsed = parse_chat_request(text, card, 0);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const int64_t footprint = request_footprint(*parsed);
  const GenerationRequest& g = parsed->gen;
  int64_t one_copy = static_cast<int64_t>(g.prompt.capacity() * 4 + parsed->prompt_text.capacity() +
                                          g.constraint.json_schema.capacity());
  for (const std::string& stop : g.stop_strings) one_copy += static_cast<int64_t>(stop.capacity());
  int64_t engine_copy = static_cast<int64_t>(g.prompt.size() * 4 + g.constraint.json_schema.size());
  for (const std::string& stop : g.stop_strings) engine_copy += static_cast<int64_t>(stop.size());
  const auto schema = static_cast<int64_t>(g.constraint.json_schema.size());
  auto shared = std::make_shared<const ApiRequest>(std::move(*parsed));
  ChoicesBuilder builder(shared, card, "chatcmpl-m", 1, 0);
  const auto held = static_cast<int64_t>(bytes_in_use() - before_parse);
  ASSERT_EQ(builder.n_generated(), 8);
  std::printf("body %zu bytes: held %lld, one copy %lld, footprint %lld\n", text.size(), static_cast<long long>(held),
              static_cast<long long>(one_copy), static_cast<long long>(footprint));
  // One copy of the request's contents and the builders' own state (n + 2 copies before).
  EXPECT_LE(held, one_copy + (256 << 10)) << "one copy " << one_copy;
  EXPECT_LE(held, footprint) << "footprint " << footprint;
  // The builders' copy, the engine's (the prompt ids as used: one array for all n choices, each
  // copied them before) and the compiled grammar (linear in the schema text: one more copy).
  EXPECT_GE(footprint, one_copy + engine_copy + schema);
}

TEST(RequestMemory, AdmissionBudgetRefusesBeyondItsLimit) {
  AdmissionBudget budget(10 << 20);
  AdmissionBudget::Ticket a = budget.take(AdmissionBudget::charge_for(1 << 20));  // 4 MiB
  AdmissionBudget::Ticket b = budget.take(AdmissionBudget::charge_for(1 << 20));
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(budget.take(AdmissionBudget::charge_for(1 << 20)));
  EXPECT_EQ(budget.held(), 8 << 20);
  a.reset();
  EXPECT_EQ(budget.held(), 4 << 20);
  EXPECT_TRUE(budget.take(AdmissionBudget::charge_for(1 << 20)));
  EXPECT_EQ(AdmissionBudget::charge_for(1), kMinRequestCharge);
  EXPECT_GE(default_pending_bytes(), int64_t{256} << 20);
  EXPECT_LE(default_pending_bytes(), int64_t{8} << 30);
}

}  // namespace request_memory
}  // namespace
}  // namespace dsv4::server
