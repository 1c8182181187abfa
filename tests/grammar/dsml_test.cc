// DSML tool calls under a grammar (compile_tool_call, text.md §3.8): text.md's rendering of a
// call is accepted and bad ones refused at the right byte; random walks over random tools'
// parameters end in call blocks that the chat parser reads as one call whose arguments
// validate against the tool's schema (an independent validator); the mask equals a per-token
// brute force inside raw strings too.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "chat/parse.h"
#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "support/json_schema_check.h"

namespace dsv4::grammar {
namespace {

using Json = dsv4::OrderedJson;

const std::string kOpen = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"";
const std::string kClose = "\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
std::string param(const std::string& k, bool raw, const std::string& v) {
  return "<｜DSML｜parameter name=\"" + k + "\" string=\"" + (raw ? "true" : "false") + "\">" + v + "</｜DSML｜parameter>";
}

int64_t dsml_match(const Grammar& g, const std::string& text) {  // −1: whole; else the byte refused
  JsonMatcher m(g);
  auto st = std::make_unique<MatchState>(), next = std::make_unique<MatchState>();
  m.start(*st);
  for (size_t i = 0; i < text.size(); ++i) {
    m.advance(*st, static_cast<uint8_t>(text[i]), *next);
    if (next->n == 0) return static_cast<int64_t>(i);
    std::swap(st, next);
  }
  return m.accepting(*st) ? -1 : static_cast<int64_t>(text.size());
}

Grammar tools(const std::vector<std::pair<std::string, std::string>>& specs) {
  std::vector<ToolSpec> t;
  for (const auto& [name, params] : specs) t.push_back({name, params.empty() ? Json() : Json::parse(params)});
  Result<Grammar> g = compile_tool_call(t);
  EXPECT_TRUE(g.ok()) << g.message();
  return g.ok() ? std::move(*g) : Grammar{};
}

TEST(DsmlGrammar, HandCases) {
  const Grammar g = tools({{"get_weather", R"({"type": "object", "properties": {"city": {"type": "string",
      "maxLength": 16}, "days": {"type": "integer"}}, "required": ["city"]})"},
                           {"now", ""}});
  const std::string weather = kOpen + "get_weather\">\n";
  EXPECT_EQ(dsml_match(g, weather + param("city", true, "Paris") + "\n" + param("days", false, "2") + kClose), -1);
  EXPECT_EQ(dsml_match(g, weather + param("city", true, "a<b </x> \"q\"\nz") + kClose), -1);
  EXPECT_EQ(dsml_match(g, kOpen + "now\">\n" + kClose), -1);  // no parameters: an empty line
  const std::string no_city = weather + param("days", false, "2");
  EXPECT_LT(dsml_match(g, no_city), static_cast<int64_t>(no_city.size()));  // city is required first
  const std::string long_city = weather + param("city", true, "Llanfairpwllgwyngyll");
  EXPECT_LT(dsml_match(g, long_city), static_cast<int64_t>(long_city.size()));  // maxLength 16
  const std::string bad_days = weather + param("city", true, "x") + "\n" + param("days", false, "2.5");
  EXPECT_LT(dsml_match(g, bad_days), static_cast<int64_t>(bad_days.size()));
  const std::string raw_city = weather + param("city", false, "\"x\"");  // a string is string="true"
  EXPECT_LT(dsml_match(g, raw_city), static_cast<int64_t>(raw_city.size()));
  EXPECT_EQ(dsml_match(g, kOpen + "other\">\n" + kClose), static_cast<int64_t>(kOpen.size()));
  const std::string bad_utf8 = weather + param("city", true, "\xc3(") + kClose;
  EXPECT_LT(dsml_match(g, bad_utf8), static_cast<int64_t>(bad_utf8.size()));

  // A raw string with a pattern: '<' is text where the pattern takes it, the closing tag ends
  // the text only where it matches.
  const Grammar code = tools({{"f", R"({"type": "object", "properties": {"c": {"type": "string",
      "pattern": "^[0-9]{3}(<[a-z]>)?$"}}, "required": ["c"]})"}});
  const std::string f = kOpen + "f\">\n";
  EXPECT_EQ(dsml_match(code, f + param("c", true, "123") + kClose), -1);
  EXPECT_EQ(dsml_match(code, f + param("c", true, "123<b>") + kClose), -1);
  const std::string short_code = f + param("c", true, "12");
  EXPECT_EQ(dsml_match(code, short_code), static_cast<int64_t>(f.size() + param("c", true, "12").find("</")));  // "12<" is no text
  const std::string long_code = f + param("c", true, "1234");
  EXPECT_EQ(dsml_match(code, long_code), static_cast<int64_t>(f.size() + param("c", true, "123").find("</")));
  const std::string bad_tag = f + param("c", true, "123<bb");
  EXPECT_LT(dsml_match(code, bad_tag), static_cast<int64_t>(bad_tag.size()));

  std::vector<ToolSpec> bad = {{"f", Json::parse(R"({"type": "object", "properties": {"a": {"pattern": "(?=x)y"}}})")}};
  Result<Grammar> e = compile_tool_call(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("tools f parameters/properties/a"), std::string::npos) << e.message();
  EXPECT_NE(compile_tool_call({{"f", Json::parse(R"({"type": "array"})")}}).message().find("type object"),
            std::string::npos);
  EXPECT_FALSE(compile_tool_call({}).ok());
}

// Random walks over the allowed bytes of random tools: the chat parser reads the text as one
// call to one of the tools, and its arguments validate against that tool's parameters.
TEST(DsmlGrammar, RandomWalksParseToValidCalls) {
  std::mt19937 rng(11);
  int done = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ToolSpec> specs;
    for (int t = 0; t < 1 + static_cast<int>(rng() % 3); ++t) {
      Json params = test::random_schema(rng, 2);
      if (!params.contains("properties")) params = Json{{"type", "object"}, {"properties", {{"v", params}}}};
      params.erase("additionalProperties");
      specs.push_back({"tool_" + std::to_string(t), params});
    }
    Result<Grammar> g = compile_tool_call(specs);
    ASSERT_TRUE(g.ok()) << g.message();
    JsonMatcher m(*g);
    auto st = std::make_unique<MatchState>(), next = std::make_unique<MatchState>();
    m.start(*st);
    std::string text;
    for (int step = 0; step < 3000 && !m.accepting(*st); ++step) {
      std::vector<uint8_t> allowed;
      for (int c = 0; c < 256; ++c) {
        m.advance(*st, static_cast<uint8_t>(c), *next);
        if (next->n > 0) allowed.push_back(static_cast<uint8_t>(c));
      }
      ASSERT_FALSE(allowed.empty()) << "dead end after " << Json(text).dump();
      uint8_t c = allowed[rng() % allowed.size()];
      if (text.size() > 600)  // prefer bytes that close values and tags
        for (uint8_t b : allowed)
          if (b == '<' || b == '}' || b == ']' || b == '"' || b == '/') c = b;
      m.advance(*st, c, *next);
      std::swap(st, next);
      text.push_back(static_cast<char>(c));
    }
    if (!m.accepting(*st)) continue;
    ++done;
    Result<chat::ParsedMessage> parsed = chat::parse_completion(text + "<｜end▁of▁sentence｜>", chat::ThinkingMode::kChat);
    ASSERT_TRUE(parsed.ok()) << parsed.message() << "\n" << text;
    ASSERT_EQ(parsed->tool_calls.size(), 1u) << text;
    EXPECT_TRUE(parsed->content.empty()) << text;
    const chat::ToolCall& call = parsed->tool_calls[0];
    const auto tool = std::find_if(specs.begin(), specs.end(), [&](const ToolSpec& s) { return s.name == call.name; });
    ASSERT_NE(tool, specs.end()) << call.name;
    const Json args = Json::parse(call.arguments, nullptr, false);
    ASSERT_FALSE(args.is_discarded()) << call.arguments;
    EXPECT_TRUE(test::schema_valid(args, tool->parameters)) << call.arguments << " for " << tool->parameters.dump();
  }
  EXPECT_GT(done, 150);
}

// The mask equals a per-token brute force along random walks through call blocks, raw string
// parameters included (the plain-text set plus the '<' trie there).
TEST(DsmlGrammar, MaskEqualsBruteForce) {
  std::vector<std::string> vocab;
  for (int b = 1; b < 256; ++b) vocab.push_back(std::string(1, static_cast<char>(b)));
  for (const char* piece : {"\n\n<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"", "get_weather\">\n", "code\">\n",
                            "c\" string=\"true\">", "｜DSML｜",
                            "<｜DSML｜parameter name=\"", "city\" string=\"true\">", "days\" string=\"false\">",
                            "</｜DSML｜parameter>", "</", "<<", "a<b", "Paris", "é", " x", "12", "\n</｜DSML｜invoke>",
                            "\n</｜DSML｜tool_calls>", "\"q\""})
    vocab.push_back(piece);
  const Grammar g = tools({{"get_weather", R"({"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}}, "required": ["city"]})"},
                           {"code", R"({"type": "object", "properties": {"c": {"type": "string",
      "pattern": "a<b|^1", "maxLength": 9}}, "required": ["c"]})"}});
  const MaskVocab prepared(static_cast<int32_t>(vocab.size()), [&](int32_t id) { return std::string_view(vocab[id]); },
                           [](int32_t) { return false; });
  TokenMasker masker(prepared);
  JsonMatcher m(g);
  std::mt19937 rng(9);
  auto st = std::make_unique<MatchState>(), out = std::make_unique<MatchState>(), tmp = std::make_unique<MatchState>();
  std::vector<uint64_t> mask((vocab.size() + 63) / 64);
  int in_raw = 0;
  for (int walk = 0; walk < 30; ++walk) {
    m.start(*st);
    for (int step = 0; step < 60 && !m.accepting(*st); ++step) {
      const int64_t n = masker.fill(m, *st, mask.data());
      in_raw += m.in_raw_text(*st, prepared.all.max_length());
      std::vector<int32_t> want, longer;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id)
        if (m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp)) {
          want.push_back(id);
          if (vocab[id].size() > 1) longer.push_back(id);
        }
      std::vector<int32_t> got;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id)
        if (mask[id >> 6] >> (id & 63) & 1) got.push_back(id);
      ASSERT_EQ(got, want) << "walk " << walk << " step " << step;
      EXPECT_EQ(n, static_cast<int64_t>(want.size()));
      ASSERT_FALSE(want.empty());
      const std::vector<int32_t>& pick = !longer.empty() && rng() % 4 != 0 ? longer : want;
      const int32_t id = pick[rng() % pick.size()];
      ASSERT_TRUE(m.feed(*st, vocab[id].data(), static_cast<int64_t>(vocab[id].size()), *out, *tmp));
      std::swap(st, out);
    }
  }
  EXPECT_GT(in_raw, 20) << "the raw-text fast path was taken";
}

}  // namespace
}  // namespace dsv4::grammar
