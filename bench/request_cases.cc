#include "request_cases.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

#include "runtime/grammar_cache.h"
#include "server/protocol.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer_dir.h"

namespace dsv4::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

// A body of about `bytes`, built by repeating a piece inside a frame.
using Shape = std::function<std::string(size_t bytes)>;

struct Case {
  const char* route;  // "chat", "completions", "tokenize"
  const char* name;
  Shape body;
};

std::string keys(size_t bytes, const char* value) {
  std::string out = "{";
  for (size_t i = 0; out.size() < bytes; ++i) out += fmt::format("{}\"k{:07}\": {}", i ? ", " : "", i, value);
  return out + "}";
}

std::string repeat(const std::string& piece, size_t bytes, const char* sep = ", ") {
  std::string out;
  while (out.size() < bytes) out += (out.empty() ? "" : sep) + piece;
  return out;
}

const std::string kUser = R"({"role": "user", "content": "q"})";

std::vector<Case> cases() {
  return {
      {"chat", "many keys (body)", [](size_t b) { return keys(b, "0"); }},
      {"chat", "deep nesting", [](size_t b) {
         return R"({"messages": [)" + kUser + R"(], "x": [)" + repeat(std::string(63, '[') + std::string(63, ']'), b) + "]}";
       }},
      {"chat", "long string", [](size_t b) {
         return R"({"messages": [{"role": "user", "content": ")" + std::string(b, 'w') + R"("}], "max_tokens": 1})";
       }},
      {"chat", "many-key arguments", [](size_t b) {
         const Json args = keys(b, "0");
         return R"({"messages": [)" + kUser + R"(, {"role": "assistant", "tool_calls": [{"type": "function",
             "function": {"name": "f", "arguments": )" + args.dump() + R"(}}]}, {"role": "tool", "content": "r"}]})";
       }},
      {"chat", "many $defs", [](size_t b) {
         std::string defs;  // unchained: a $ref chain's depth is the compiler's own limit, not this case's
         for (size_t i = 0; defs.size() < b; ++i)
           defs += fmt::format("{}\"d{}\": {{\"type\": \"integer\", \"description\": \"d{}\"}}", i ? ", " : "", i, i);
         return R"({"messages": [)" + kUser + R"(], "response_format": {"type": "json_schema", "json_schema":
             {"name": "s", "schema": {"$defs": {)" + defs + R"(}, "$ref": "#/$defs/d0"}}}})";
       }},
      {"chat", "many tools", [](size_t b) {
         std::string tools;
         for (size_t i = 0; tools.size() < b; ++i)
           tools += fmt::format(R"({}{{"type": "function", "function": {{"name": "t{}", "parameters": {{"type": "object",
               "properties": {{"a": {{"type": "string"}}}}}}}}}})", i ? ", " : "", i);
         return R"({"messages": [)" + kUser + R"(], "tools": [)" + tools + "]}";
       }},
      {"completions", "many stop strings", [](size_t b) {
         return R"({"prompt": "hi", "stop": [)" + repeat("\"stop\"", b) + "]}";
       }},
      {"completions", "token ids", [](size_t b) { return R"({"prompt": [)" + repeat("7", b) + "]}"; }},
      {"tokenize", "long string", [](size_t b) { return R"({"prompt": ")" + std::string(b, 'w') + R"("})"; }},
      {"tokenize", "many-key messages", [](size_t b) {
         return R"({"messages": [{"role": "user", "content": "q", "x": )" + keys(b, "0") + "}]}";
       }},
  };
}

// What the parse pool does with one body; returns the HTTP status.
int handle(const Case& c, const std::string& body, const server::ModelCard& card) {
  if (std::string_view(c.route) == "tokenize") {
    server::ApiResult<std::string> r = server::tokenize_response(body, card);
    return r.ok() ? 200 : r.error().http_status;
  }
  server::ApiResult<server::ApiRequest> r = std::string_view(c.route) == "chat"
                                                ? server::parse_chat_request(body, card, 1)
                                                : server::parse_completions_request(body, card, 1);
  if (!r.ok()) return r.error().http_status;
  if (r->gen.constraint.active() && !compile_constraint(r->gen.constraint).ok()) return 400;
  return 200;
}

Result<TextModel> load_text(const std::string& tokenizer_path) {
  if (tokenizer_path.empty()) {
    Result<TinyTokenizerFiles> files = make_tiny_tokenizer();
    if (!files.ok()) return files.status();
    Result<Tokenizer> tok = Tokenizer::from_json(files->tokenizer_json, "tiny");
    if (!tok.ok()) return tok.status();
    Result<TokenizerConfig> cfg = parse_tokenizer_config(files->tokenizer_config_json, "tiny", *tok);
    if (!cfg.ok()) return cfg.status();
    return TextModel{std::move(*tok), *cfg};
  }
  Result<Tokenizer> tok = Tokenizer::load(tokenizer_path);
  if (!tok.ok()) return tok.status();
  return TextModel{std::move(*tok), TokenizerConfig{}};
}

}  // namespace

Status run_request_cases(const std::string& tokenizer_path, int repeats) {
  Result<TextModel> text = load_text(tokenizer_path);
  if (!text.ok()) return text.status().with_context("request: --tokenizer");
  server::ModelCard card;
  card.id = "bench";
  card.max_context = 1 << 20;
  card.text = &*text;
  const size_t sizes[] = {size_t{64} << 10, size_t{8} << 20};
  std::printf("\nrequest: the parse pool's work per body (parse, render, tokenize, grammar), best of %d, on %s\n",
              repeats, tokenizer_path.empty() ? "the tiny vocabulary" : tokenizer_path.c_str());
  std::printf("%-12s %-20s %8s %12s %8s %12s %8s %8s\n", "route", "shape", "status", "64 KiB us/KiB", "", "8 MiB us/KiB",
              "status", "ratio");
  for (const Case& c : cases()) {
    double per_kib[2] = {0, 0};
    int status[2] = {0, 0};
    for (int s = 0; s < 2; ++s) {
      const std::string body = c.body(sizes[s]);
      double best = 1e30;
      for (int r = 0; r < repeats; ++r) {
        const Clock::time_point t0 = Clock::now();
        status[s] = handle(c, body, card);
        best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
      per_kib[s] = best / (static_cast<double>(body.size()) / 1024);
    }
    std::printf("%-12s %-20s %8d %12.2f %8s %12.2f %8d %8.2f\n", c.route, c.name, status[0], per_kib[0], "",
                per_kib[1], status[1], per_kib[1] / per_kib[0]);
  }
  std::printf("(ratio: us/KiB at 8 MiB over 64 KiB; ~1 is linear. A 400 is a refusal after the work shown.)\n");
  return Status();
}

}  // namespace dsv4::bench
