// dsv4 chat [--model DIR] [--system TEXT] [--thinking] [--max-tokens N] [--temperature T]
//   [--top-p P] [--top-k K] [--min-p P] [--frequency-penalty F] [--presence-penalty P]
//   [--repetition-penalty R] [--logit-bias ID=BIAS]... [--seed S] [--mtp] [--threads N] [--max-context N] [--isa I]
// An interactive terminal chat: each input line is a user turn; the history goes through the
// DeepSeek-V4 chat encoding (src/chat) and the reply streams as it is generated (reasoning,
// with --thinking, in brackets before the answer). Commands: /reset clears the history,
// /exit (or end of input) quits. Ctrl-C stops the current answer and keeps the session.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "chat/parse.h"
#include "chat/render.h"
#include "commands.h"
#include "engine_flags.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "runtime/engine.h"
#include "text/tokenizer_dir.h"

namespace dsv4::cli {
namespace {

struct ChatArgs {
  std::string model;
  std::string system;
  bool thinking = false;
  int max_tokens = 512;
  float temperature = 0.7f;
  float top_p = 0.95f;
  int32_t top_k = 0;  // 0 = off
  float min_p = 0.0f;  // 0 = off
  PenaltyFlags penalties;
  uint64_t seed = 0;
  bool mtp = false;
  int threads = 2;
  int64_t max_context = 0;  // 0: the model's max_position_embeddings, at most 8192
  std::string isa = "auto";
  double test_min_step_seconds = 0;  // hidden test hook (engine_flags.h)
};

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

// SIGINT sets the flag and interrupts a blocking read (no SA_RESTART).
void install_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

void put(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

// The model and its tokenizer (the engine keeps references into both: the struct stays put).
struct ChatModel {
  std::string dir;
  TextModel text;
  ModelConfig cfg;
  Weights weights;
};

Result<std::unique_ptr<ChatModel>> load_chat_model(const ChatArgs& a) {
  if (Status st = select_isa(a.isa); !st.ok()) return st;
  Result<std::string> dir = resolve_model_dir(a.model);
  if (!dir.ok()) return dir.status();
  Result<TextModel> text = load_tokenizer_dir(*dir);
  if (!text.ok()) return text.status().with_context("chat needs the model's tokenizer");
  Result<ModelConfig> cfg = load_config(*dir);
  if (!cfg.ok()) return cfg.status();
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(*dir);
  if (!files.ok()) return files.status();
  Result<Weights> w = load_weights(*files, *cfg, nullptr);
  if (!w.ok()) return w.status();
  return std::make_unique<ChatModel>(ChatModel{*dir, std::move(*text), std::move(*cfg), std::move(*w)});
}

// One conversation at a time: batch 1, decode rows for the MTP draft when asked.
Limits chat_limits(const ChatArgs& a, const ModelConfig& cfg) {
  Limits lim;
  lim.max_batch = lim.max_seqs = 1;
  lim.max_chunk = 64;
  lim.max_rows = 64;
  lim.max_decode_rows = a.mtp ? 2 : 1;
  lim.max_context = a.max_context > 0 ? a.max_context : std::min<int64_t>(cfg.max_position_embeddings, 8192);
  lim.n_threads = a.threads;
  return lim;
}

// Prints a reply as it streams (reasoning in brackets before the answer) and keeps its text.
struct ReplyPrinter {
  std::string reasoning, content;
  bool in_reasoning = false;

  void show(const chat::ChatDelta& d) {
    if (!d.reasoning.empty()) {
      if (!in_reasoning) put("[");
      in_reasoning = true;
      put(d.reasoning);
      reasoning += d.reasoning;
    }
    if (!d.content.empty() || !d.calls.empty()) {
      if (in_reasoning) put("]\n");
      in_reasoning = false;
      put(d.content);
      content += d.content;
    }
  }
};

// Generates one reply to `prompt` and prints it as it streams; Ctrl-C cancels it (the reply
// so far is kept). Returns the assistant message for the history.
Result<OrderedJson> reply(Engine& e, GenerationRequest g, const chat::ChatPrompt& prompt) {
  Result<int64_t> id = e.add_request(std::move(g));
  if (!id.ok()) return id.status();
  chat::ChatStreamParser parser(chat::prompt_opens_reasoning(prompt));
  ReplyPrinter out;
  bool stopped = false, finished = false;
  FinishReason reason = FinishReason::kNone;
  while (!finished) {
    if (g_interrupted.exchange(false) && !stopped) {
      e.cancel(*id);
      stopped = true;
    }
    Result<StepReport> rep = e.step();
    if (!rep.ok()) return rep.status();
    for (RequestUpdate& u : e.updates()) {
      out.show(parser.feed(u.text));
      if (u.finished) {
        out.show(parser.finish());
        finished = true;
        reason = u.reason;
        if (u.reason == FinishReason::kError) std::printf("\n(error: %s)", u.error.c_str());
      }
    }
  }
  if (out.in_reasoning) put("]");
  if (reason == FinishReason::kLength) put(" (max tokens)");
  if (reason == FinishReason::kCancelled) put(" [stopped]");
  put("\n");
  OrderedJson message = {{"role", "assistant"}, {"content", out.content}};
  if (!out.reasoning.empty()) message["reasoning_content"] = out.reasoning;
  return message;
}

enum class Input { kLine, kInterrupted, kEnd };

// Reads one input line. A read interrupted by Ctrl-C fails like the end of input: the flag
// tells them apart.
Input read_line(std::string& line) {
  put("\n> ");
  g_interrupted.store(false);
  if (std::getline(std::cin, line)) return Input::kLine;
  if (!g_interrupted.load()) return Input::kEnd;
  std::cin.clear();
  return Input::kInterrupted;
}

int run_chat(const ChatArgs& a) {
  Result<std::unique_ptr<ChatModel>> model = load_chat_model(a);
  if (!model.ok()) return fail(model.status());
  const ChatModel& m = **model;
  const Limits lim = chat_limits(a, m.cfg);
  const Result<LogitAdjustments> adjust = a.penalties.adjustments(m.cfg.vocab_size);
  if (!adjust.ok()) return fail(adjust.status());
  EngineOptions eo;
  eo.mtp = a.mtp;
  eo.min_step_seconds = a.test_min_step_seconds;
  eo.tokenizer = &m.text.tokenizer;
  Result<std::unique_ptr<Engine>> engine = Engine::create(m.cfg, m.weights, lim, eo);
  if (!engine.ok()) return fail(engine.status());

  chat::ChatOptions opts;
  opts.mode = a.thinking ? chat::ThinkingMode::kThinking : chat::ThinkingMode::kChat;
  OrderedJson history = OrderedJson::array();
  auto reset = [&] {
    history = OrderedJson::array();
    if (!a.system.empty()) history.push_back({{"role", "system"}, {"content", a.system}});
  };
  reset();
  install_sigint();
  std::printf("dsv4 chat: %s (%s mode). /reset clears the history, /exit quits, Ctrl-C stops an answer.\n",
              m.dir.c_str(), a.thinking ? "thinking" : "chat");
  uint64_t turn = 0;
  std::string line;
  for (;;) {
    const Input input = read_line(line);
    if (input == Input::kInterrupted) {
      put("\n(/exit quits)");
      continue;
    }
    if (input == Input::kEnd) put("\n");
    if (input == Input::kEnd || line == "/exit" || line == "/quit") return 0;
    if (line == "/reset") {
      reset();
      put("(history cleared)\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({{"role", "user"}, {"content", line}});
    Result<chat::ChatPrompt> prompt = chat::render_chat(history, opts);
    if (!prompt.ok()) return fail(prompt.status());
    GenerationRequest g;
    g.prompt = m.text.tokenizer.encode_spans(prompt->text, prompt->template_spans);
    const int64_t room = lim.max_context - static_cast<int64_t>(g.prompt.size()) - 1;
    if (room < 1) {
      history.erase(history.size() - 1);
      std::printf("(the conversation has %zu tokens, max_context = %lld: /reset to start over)\n", g.prompt.size(),
                  static_cast<long long>(lim.max_context));
      continue;
    }
    g.max_tokens = static_cast<int32_t>(std::min<int64_t>(a.max_tokens, room));
    g.sampling = {a.temperature, a.top_p, a.seed + turn++, a.top_k, a.min_p};
    g.adjust = *adjust;
    Result<OrderedJson> message = reply(**engine, std::move(g), *prompt);
    if (!message.ok()) return fail(message.status());
    history.push_back(*message);
  }
}

}  // namespace

Command add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub = app.add_subcommand("chat", "Interactive chat in the terminal (multi-turn, streamed)");
  sub->add_option("--model", a->model, kModelHelp);
  sub->add_option("--system", a->system, "System prompt");
  sub->add_flag("--thinking", a->thinking, "Thinking mode: the model reasons first (shown in brackets)");
  sub->add_option("--max-tokens", a->max_tokens, "Most tokens per answer")->capture_default_str();
  sub->add_option("--temperature", a->temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  sub->add_option("--top-p", a->top_p, "Nucleus sampling threshold in (0, 1]")->capture_default_str();
  sub->add_option("--top-k", a->top_k, "Keep only the K most likely ids (0 = off)")->capture_default_str();
  sub->add_option("--min-p", a->min_p, "Drop ids below P times the top probability, P in [0, 1] (0 = off)")
      ->capture_default_str();
  add_penalty_options(sub, &a->penalties);
  sub->add_option("--seed", a->seed, "Seed of answer i is seed + i")->capture_default_str();
  sub->add_flag("--mtp", a->mtp, "Speculative decode with the MTP layer's drafts");
  sub->add_option("--threads", a->threads, "Worker threads")->capture_default_str();
  sub->add_option("--max-context", a->max_context, "Positions of the conversation (0: the model's limit, at most 8192)")->capture_default_str();
  sub->add_option("--isa", a->isa, kIsaHelp)->capture_default_str();
  add_test_hooks(sub, &a->test_min_step_seconds);
  return {sub, [a]() { return run_chat(*a); }};
}

}  // namespace dsv4::cli
