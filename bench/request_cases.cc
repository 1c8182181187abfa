#include "request_cases.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include <sys/resource.h>
#include <time.h>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "chat/render.h"
#include "io/json_bounded.h"
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

// Thread CPU time in microseconds (the machine is shared: wall time counts other processes).
double thread_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// Minor page faults of this thread so far: first touches of memory the allocator got fresh from
// the kernel (large blocks are mapped per allocation and unmapped when freed).
double thread_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_minflt);
}

double median_us(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The parse pool's stages run apart on one body: its JSON, the chat render (a body with
// "messages"), the tokenizer over the rendered text or the "prompt" string, and the whole
// handler (so the rest, grammar and response building, is the difference). us per stage.
struct StageTimes {
  double parse = 0, render = 0, tokenize = 0, total = 0, faults = 0;  // faults: of the whole handler
};

StageTimes time_stages_once(const Case& c, const std::string& body, const server::ModelCard& card) {
  StageTimes t;
  double t0 = thread_us();
  Result<OrderedJson> parsed = parse_json_bounded<OrderedJson>(body, kMaxJsonDepth, nullptr, card.max_json_values());
  t.parse = thread_us() - t0;
  if (parsed.ok() && parsed->is_object()) {
    const OrderedJson* messages = json_member(*parsed, "messages");
    const OrderedJson* prompt = json_member(*parsed, "prompt");
    if (messages != nullptr) {
      t0 = thread_us();
      Result<chat::ChatOptions> options = chat::chat_options_from_request(*parsed);
      Result<chat::ChatPrompt> rendered =
          options.ok() ? chat::render_chat(*messages, *options) : Result<chat::ChatPrompt>(options.status());
      t.render = thread_us() - t0;
      t0 = thread_us();
      if (rendered.ok()) (void)card.text->tokenizer.encode_spans(rendered->text, rendered->template_spans);
      t.tokenize = thread_us() - t0;
    } else if (prompt != nullptr && prompt->is_string()) {
      t0 = thread_us();
      (void)encode_prompt(*card.text, prompt->get_ref<const std::string&>(), /*allow_special=*/true);
      t.tokenize = thread_us() - t0;
    }
  }
  t0 = thread_us();
  const double f0 = thread_faults();
  (void)handle(c, body, card);
  t.total = thread_us() - t0;
  t.faults = thread_faults() - f0;
  return t;
}

}  // namespace

// us/KiB per stage at 64 KiB, 512 KiB, 2 MiB and 8 MiB, medians of `repeats` runs.
Status run_request_stages(const std::string& tokenizer_path, int repeats) {
  Result<TextModel> text = load_text(tokenizer_path);
  if (!text.ok()) return text.status().with_context("request_stages: --tokenizer");
  server::ModelCard card;
  card.id = "bench";
  card.max_context = 1 << 20;
  card.text = &*text;
  std::printf("\nrequest stages: thread CPU us/KiB, median of %d, on %s\n", repeats,
              tokenizer_path.empty() ? "the tiny vocabulary" : tokenizer_path.c_str());
  std::printf("%-12s %-20s %8s %9s %9s %9s %9s %9s %11s\n", "route", "shape", "KiB", "parse", "render", "tokenize",
              "rest", "total", "faults/KiB");
  for (const Case& c : cases()) {
    for (const size_t kib : {size_t{64}, size_t{512}, size_t{2048}, size_t{8192}}) {
      const std::string body = c.body(kib << 10);
      std::vector<double> parse, render, tokenize, total, faults;
      for (int r = 0; r < std::max(repeats, 1); ++r) {
        const StageTimes t = time_stages_once(c, body, card);
        parse.push_back(t.parse);
        render.push_back(t.render);
        tokenize.push_back(t.tokenize);
        total.push_back(t.total);
        faults.push_back(t.faults);
      }
      const double k = static_cast<double>(body.size()) / 1024;
      const double all = median_us(total), rest = all - median_us(parse) - median_us(render) - median_us(tokenize);
      std::printf("%-12s %-20s %8zu %9.2f %9.2f %9.2f %9.2f %9.2f %11.2f\n", c.route, c.name, kib,
                  median_us(parse) / k, median_us(render) / k, median_us(tokenize) / k, std::max(rest, 0.0) / k,
                  all / k, median_us(faults) / k);
    }
  }
  return Status();
}

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
