// libFuzzer target: the whole request path of the server on arbitrary bodies: body -> JSON
// parse -> chat render -> tokenize (apps/server/protocol.h) -> schema or tool-call grammar
// compile (grammar/json_schema.h, text_constraint.h, as Engine::prepare does) -> the response builder on what it
// accepts. Byte 0 picks the route (bit 0: chat; bit 2: /tokenize instead) and how the fake
// output is cut; the rest is the request body. Invariants: no crash; an error names an HTTP
// status in 4xx; every response and stream event is valid JSON. Run with a large -max_len and
// -timeout / -rss_limit_mb (docs/development.md), so that a quadratic or a blow-up is a finding.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "grammar/json_schema.h"
#include "grammar/text_constraint.h"
#include "io/json_bounded.h"
#include "server/protocol.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer_dir.h"

using namespace dsv4;

namespace {

const TextModel& tiny_text() {
  static const TextModel model = [] {
    Result<TinyTokenizerFiles> files = make_tiny_tokenizer();
    if (!files.ok()) std::abort();
    Result<Tokenizer> tok = Tokenizer::from_json(files->tokenizer_json, "tiny");
    if (!tok.ok()) std::abort();
    Result<TokenizerConfig> cfg = parse_tokenizer_config(files->tokenizer_config_json, "tiny", *tok);
    if (!cfg.ok()) std::abort();
    return TextModel{std::move(*tok), *cfg};
  }();
  return model;
}

void check_events(const std::string& sse) {
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    if (end == std::string::npos || sse.compare(pos, 6, "data: ") != 0) std::abort();
    const std::string_view ev(sse.data() + pos + 6, end - pos - 6);
    if (ev != "[DONE]" && !nlohmann::json::accept(ev)) std::abort();
    pos = end + 2;
  }
}

// The constraint's grammar, as the engine compiles it: errors are fine, crashes are not.
void compile_constraint(const OutputConstraint& c) {
  if (!c.json_schema.empty()) {
    Result<OrderedJson> schema = parse_json_bounded<OrderedJson>(c.json_schema);
    if (!schema.ok() && c.field.empty()) std::abort();  // response_format: written from parsed JSON
    if (schema.ok()) (void)grammar::compile_json_schema(*schema);  // structured_outputs.json: text as sent
  }
  if (c.text_kind == TextConstraint::kRegex) (void)grammar::compile_regex_output(c.text);
  if (c.text_kind == TextConstraint::kGbnf) (void)grammar::compile_gbnf_output(c.text);
  if (c.text_kind == TextConstraint::kChoice) {
    Result<OrderedJson> list = parse_json_bounded<OrderedJson>(c.text);
    if (!list.ok() || !list->is_array()) std::abort();  // the server wrote it from a parsed array of strings
    std::vector<std::string> choices;
    for (const OrderedJson& s : *list) choices.push_back(s.get<std::string>());
    (void)grammar::compile_choice_output(choices);
  }
  if (!c.tool_calls.empty()) {
    Result<OrderedJson> tools = parse_json_bounded<OrderedJson>(c.tool_calls);
    if (!tools.ok() || !tools->is_array()) std::abort();
    std::vector<grammar::ToolSpec> specs;
    for (const OrderedJson& t : *tools) specs.push_back({t["name"].get<std::string>(), t["parameters"]});
    (void)grammar::compile_tool_call(specs);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  server::ModelCard model;
  model.id = "tiny";
  model.max_context = 256;
  model.text = &tiny_text();
  const bool chat = control & 1;
  if (control & 4) {
    server::ApiResult<std::string> out = server::tokenize_response(body, model);
    if (out.ok() ? !nlohmann::json::accept(*out) : out.error().http_status / 100 != 4) std::abort();
    return 0;
  }
  server::ApiResult<server::ApiRequest> req =
      chat ? server::parse_chat_request(body, model, 7) : server::parse_completions_request(body, model, 7);
  if (!req.ok()) {
    if (req.error().http_status < 400 || req.error().http_status > 499) std::abort();
    if (!nlohmann::json::accept(server::error_body(req.error()))) std::abort();
    return 0;
  }
  if (req->gen.prompt.empty() || static_cast<int64_t>(req->gen.prompt.size()) + req->gen.max_tokens > 256) std::abort();
  compile_constraint(req->gen.constraint);
  // Fake output: the body's own bytes as text, cut at a control-chosen point, as tokens 3..258.
  server::ResponseBuilder b(*req, model, "fuzz", 0);
  const size_t cut = body.empty() ? 0 : (control * 37u) % (body.size() + 1);
  for (int part = 0; part < 2; ++part) {
    RequestUpdate u;
    u.text = std::string(part == 0 ? body.substr(0, cut) : body.substr(cut));
    for (unsigned char c : u.text.substr(0, 8)) {
      u.tokens.push_back(3 + c);
      if (req->gen.logprobs >= 0) u.logprobs.push_back(TokenLogprob{3 + c, -1.0f, {{3 + c, -1.0f}}});
    }
    if (part == 0 && req->gen.prompt_logprobs)
      for (size_t i = 1; i < req->gen.prompt.size(); ++i) u.prompt_logprobs.push_back(TokenLogprob{req->gen.prompt[i], -2.0f, {}});
    u.finished = part == 1;
    u.reason = (control & 2) ? FinishReason::kStop : FinishReason::kLength;
    const std::string events = b.add(u);
    if (req->stream) check_events(events);
  }
  if (!req->stream) {
    server::ApiResult<std::string> r = b.response();
    if (!r.ok() || !nlohmann::json::accept(*r)) std::abort();
  }
  return 0;
}
