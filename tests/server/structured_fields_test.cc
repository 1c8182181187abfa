// vLLM's structured-output fields on both routes (structured_fields.h): structured_outputs
// {json, regex, choice, grammar, json_object} and guided_json / guided_regex / guided_choice /
// guided_grammar become the request's OutputConstraint with the field it came from; two
// constraints in one request, wrong types and unsupported members are 400s naming the fields.
#include "server/structured_fields.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/tiny_tokenizer.h"
#include "text/tokenizer_dir.h"

namespace dsv4::server {
namespace structured_fields_test {  // named: the server tests build as one unity translation unit

const TextModel& text_model() {
  static const TextModel model = [] {
    Result<TinyTokenizerFiles> files = make_tiny_tokenizer();
    Result<Tokenizer> tok = Tokenizer::from_json(files->tokenizer_json, "tiny");
    Result<TokenizerConfig> cfg = parse_tokenizer_config(files->tokenizer_config_json, "tiny", *tok);
    return TextModel{std::move(*tok), *cfg};
  }();
  return model;
}

ModelCard tiny_card() {
  ModelCard c;
  c.id = "tiny";
  c.max_context = 256;
  c.text = &text_model();
  return c;
}

const std::string kChat = R"({"messages": [{"role": "user", "content": "hi"}], )";
const std::string kCompletion = R"({"prompt": "hi", )";

// The request on both routes: the same constraint comes out.
std::vector<OutputConstraint> both(const std::string& fields) {
  std::vector<OutputConstraint> out;
  for (bool chat : {true, false}) {
    const std::string body = (chat ? kChat : kCompletion) + fields + "}";
    ApiResult<ApiRequest> r = chat ? parse_chat_request(body, tiny_card(), 0) : parse_completions_request(body, tiny_card(), 0);
    EXPECT_TRUE(r.ok()) << body << " -> " << (r.ok() ? "" : r.error().message);
    if (r.ok()) out.push_back(r->gen.constraint);
  }
  return out;
}

// Refused on both routes with this param and these words in the message.
void refused(const std::string& fields, const std::string& param, const std::vector<std::string>& words) {
  for (bool chat : {true, false}) {
    const std::string body = (chat ? kChat : kCompletion) + fields + "}";
    ApiResult<ApiRequest> r = chat ? parse_chat_request(body, tiny_card(), 0) : parse_completions_request(body, tiny_card(), 0);
    ASSERT_FALSE(r.ok()) << "accepted: " << body;
    EXPECT_EQ(r.error().http_status, 400) << body;
    EXPECT_EQ(r.error().param, param) << body << " -> " << r.error().message;
    for (const std::string& w : words) EXPECT_NE(r.error().message.find(w), std::string::npos) << r.error().message;
  }
}

TEST(StructuredFields, EachKindOnBothRoutes) {
  for (const OutputConstraint& c : both(R"("structured_outputs": {"regex": "[0-9]+"})")) {
    EXPECT_EQ(c.text_kind, TextConstraint::kRegex);
    EXPECT_EQ(c.text, "[0-9]+");
    EXPECT_EQ(c.field, "structured_outputs.regex");
    EXPECT_TRUE(c.active());
  }
  for (const OutputConstraint& c : both(R"("structured_outputs": {"choice": ["yes", "no"], "regex": null})")) {
    EXPECT_EQ(c.text_kind, TextConstraint::kChoice);
    EXPECT_EQ(c.text, R"(["yes","no"])");
  }
  for (const OutputConstraint& c : both(R"("structured_outputs": {"grammar": "root ::= \"a\""})")) {
    EXPECT_EQ(c.text_kind, TextConstraint::kGbnf);
    EXPECT_EQ(c.text, "root ::= \"a\"");
    EXPECT_EQ(c.field, "structured_outputs.grammar");
  }
  for (const OutputConstraint& c : both(R"("structured_outputs": {"json": {"type": "integer"}})")) {
    EXPECT_EQ(c.json_schema, R"({"type":"integer"})");
    EXPECT_TRUE(c.strict);
    EXPECT_EQ(c.text_kind, TextConstraint::kNone);
  }
  for (const OutputConstraint& c : both(R"("structured_outputs": {"json": "{\"type\": \"string\"}"})"))
    EXPECT_EQ(c.json_schema, R"({"type": "string"})");
  for (const OutputConstraint& c : both(R"("structured_outputs": {"json_object": true})"))
    EXPECT_EQ(c.json_schema, R"({"type":"object"})");
  for (const OutputConstraint& c : both(R"("structured_outputs": {"json_object": false})")) EXPECT_FALSE(c.active());
  for (const OutputConstraint& c : both(R"("guided_regex": "a+", "guided_json": null)")) {
    EXPECT_EQ(c.text_kind, TextConstraint::kRegex);
    EXPECT_EQ(c.field, "guided_regex");
  }
  for (const OutputConstraint& c : both(R"("guided_choice": ["x"])")) EXPECT_EQ(c.field, "guided_choice");
  for (const OutputConstraint& c : both(R"("guided_grammar": "root ::= [a-z]+")")) EXPECT_EQ(c.text_kind, TextConstraint::kGbnf);
  for (const OutputConstraint& c : both(R"("guided_json": {"type": "boolean"})")) {
    EXPECT_EQ(c.json_schema, R"({"type":"boolean"})");
    EXPECT_EQ(c.field, "guided_json");
  }
}

TEST(StructuredFields, OnlyOneConstraintPerRequest) {
  refused(R"("structured_outputs": {"regex": "a", "choice": ["b"]})", "structured_outputs",
          {"structured_outputs.regex and structured_outputs.choice", "only one constraint"});
  refused(R"("structured_outputs": {"json": {}}, "guided_regex": "a")", "structured_outputs",
          {"structured_outputs.json and guided_regex"});
  refused(R"("guided_regex": "a", "guided_choice": ["b"])", "guided_regex", {"guided_regex and guided_choice"});
  const std::string with_format = kChat + R"("response_format": {"type": "json_object"}, "guided_regex": "a"})";
  ApiResult<ApiRequest> r = parse_chat_request(with_format, tiny_card(), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("response_format and guided_regex"), std::string::npos) << r.error().message;
  const std::string with_tools = kChat + R"("tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": "required", "structured_outputs": {"choice": ["a"]}})";
  r = parse_chat_request(with_tools, tiny_card(), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("tool_choice and structured_outputs.choice"), std::string::npos) << r.error().message;
}

TEST(StructuredFields, WrongShapesAreNamed) {
  refused(R"("structured_outputs": "regex")", "structured_outputs", {"expected an object"});
  refused(R"("structured_outputs": {"regex": 5})", "structured_outputs", {"structured_outputs.regex: expected a string"});
  refused(R"("structured_outputs": {"choice": "a"})", "structured_outputs", {"structured_outputs.choice: expected an array"});
  refused(R"("structured_outputs": {"choice": ["a", 2]})", "structured_outputs", {"structured_outputs.choice[1]"});
  refused(R"("structured_outputs": {"grammar": ["a"]})", "structured_outputs", {"structured_outputs.grammar"});
  refused(R"("structured_outputs": {"json": 3})", "structured_outputs", {"structured_outputs.json"});
  refused(R"("structured_outputs": {"json_object": "yes"})", "structured_outputs", {"json_object: expected a boolean"});
  refused(R"("structured_outputs": {"whitespace_pattern": " "})", "structured_outputs",
          {"structured_outputs.whitespace_pattern: not supported"});
  refused(R"("structured_outputs": {"regexp": "a"})", "structured_outputs", {"unknown member regexp"});
  refused(R"("guided_choice": [1])", "guided_choice", {"guided_choice[0]"});
  refused(R"("guided_whitespace_pattern": " ")", "guided_whitespace_pattern", {"guided_whitespace_pattern"});
  refused(R"("guided_grammar": ")" + std::string(kMaxSchemaBytes + 1, 'a') + "\"", "guided_grammar", {"limit"});
}

}  // namespace structured_fields_test
}  // namespace dsv4::server
