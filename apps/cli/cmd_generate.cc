// dsv4 generate [--model DIR] [--prompt TEXT]... [--prompt-ids 5,17,42|@FILE]... [--max-tokens N]
//   [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--frequency-penalty F] [--presence-penalty P]
//   [--repetition-penalty R] [--logit-bias ID=BIAS]... [--seed S] [--stop STR]... [-n N] [--json | --json-schema FILE | --regex R | --grammar FILE] [--mtp | --spec none|mtp|dspark [--gamma G]] [--batch-size B] [--threads N] [--isa I]
//   [--max-context N] [--page-tokens P] [--cache-blocks N] [--prefix-blocks N]
//   [--tp T [--dp D] [--ep E]] [--cp-prefill N]  (under mpirun -np T·D: the ranks share each step)
//   [--verbose [--quiet-steps]]
// Decodes several prompts together with continuous batching (runtime/engine.h):
// the batch changes as requests finish. Prints each request's generated text (token ids when
// the model has no tokenizer), then tokens/s and (with --mtp / --spec) the draft acceptance rate
// (DSpark: drafts accepted per round and acceptance by draft position). --verbose: also the
// model line, each step's batch size (unless --quiet-steps) and each request's prompt and
// output token ids with its text as a JSON string (the lines scripts compare). -n N: N choices
// per prompt, the prompt computed once (choice k samples with choice_seed(seed + i, k),
// runtime/request.h).
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "model/config.h"
#include "engine_flags.h"
#include "ranks.h"
#include "runtime/engine.h"
#include "runtime/grammar_cache.h"
#include "io/file_util.h"
#include "text/tokenizer_dir.h"

namespace dsv4::cli {
namespace {

struct GenerateArgs {
  EngineFlags engine;
  std::vector<std::string> prompt_ids;
  std::vector<std::string> prompt_text;
  int max_tokens = 16;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;  // 0 = off
  float min_p = 0.0f;  // 0 = off
  PenaltyFlags penalties;
  uint64_t seed = 0;
  int32_t n = 1;  // choices per prompt
  bool json = false;             // --json: each output is one JSON object
  std::string json_schema_file;  // --json-schema: each output is one value of this schema
  bool json_best_effort = false;  // --json-best-effort: relax what cannot be enforced (strict false)
  std::string json_whitespace = "compact";  // --json-whitespace compact|flexible
  std::string regex;         // --regex: each whole output matches this pattern
  std::string grammar_file;  // --grammar: each output is in the language of this GBNF grammar
  bool verbose = false;      // step lines, token ids and JSON-quoted texts
  bool quiet_steps = false;  // with --verbose: no step lines
  std::vector<std::string> stop;
};

// Demo prompts when none is given: kDemoTexts (commands.h) through the model's tokenizer, or
// token ids when the model has no tokenizer.
const std::vector<std::vector<int32_t>> kDemoPrompts = {
    {5, 17, 42}, {100, 200, 300, 400, 11, 12}, {7}, {250, 251, 252, 253, 254, 255, 256, 257, 258, 259}};

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// The run's prompts (--prompt-ids, then --prompt through the model's tokenizer, else the
// demo prompts) and the tokenizer when the model has one: outputs are then also printed as
// text. Every rank reads them; an error on any rank fails all.
struct Prompts {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::string> shown;  // each prompt as given: its text JSON-quoted, or its ids
  std::optional<TextModel> text;
};

std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<Prompts> read_prompts(const GenerateArgs& a, const std::string& dir, RankSession& rs) {
  Prompts p;
  Status parsed;
  for (const std::string& s : a.prompt_ids) {
    Result<std::vector<int32_t>> ids = parse_token_list_option("--prompt-ids", s);
    if (!ids.ok()) {
      parsed = ids.status();
      break;
    }
    p.ids.push_back(*ids);
    p.shown.push_back("[" + join(*ids) + "]");
  }
  // Text prompts through the model's tokenizer (BOS as tokenizer_config.json says).
  if (parsed.ok()) {
    Result<TextModel> tm = load_tokenizer_dir(dir);
    if (tm.ok()) p.text = std::move(*tm);
    else if (!a.prompt_text.empty()) parsed = tm.status().with_context("--prompt needs the model's tokenizer");
  }
  auto add_text = [&p](const std::string& t) {
    p.ids.push_back(encode_prompt(*p.text, t, /*allow_special=*/false));
    p.shown.push_back(quoted(t));
  };
  if (parsed.ok())
    for (const std::string& t : a.prompt_text) add_text(t);
  if (Status st = rs.agree(parsed); !st.ok()) return st;
  if (p.ids.empty() && p.text)
    for (const std::string& t : kDemoTexts) add_text(t);
  if (p.ids.empty()) {
    p.ids = kDemoPrompts;
    for (const auto& ids : p.ids) p.shown.push_back("[" + join(ids) + "]");
  }
  return p;
}

// Request i: prompt i, seed + i. A refused request stops the engine (the other ranks end
// their loop) and fails the run.
// --regex R / --grammar FILE: the whole-output text constraint (grammar/text_constraint.h).
Result<OutputConstraint> text_constraint(const GenerateArgs& a) {
  OutputConstraint c;
  c.field = a.regex.empty() ? "--grammar" : "--regex";
  c.text_kind = a.regex.empty() ? TextConstraint::kGbnf : TextConstraint::kRegex;
  c.text = a.regex;
  if (!a.grammar_file.empty()) {
    Result<std::vector<uint8_t>> bytes = read_file(a.grammar_file, 1 << 20);
    if (!bytes.ok()) return bytes.status().with_context("--grammar");
    c.text.assign(bytes->begin(), bytes->end());
  }
  Result<grammar::Grammar> g = compile_constraint(c);  // errors name the flag
  if (!g.ok()) return g.status();
  c.compiled = std::make_shared<const grammar::Grammar>(std::move(*g));
  return c;
}

// --json / --json-schema FILE / --regex R / --grammar FILE: the constraint every request takes
// (errors name the flag).
Result<OutputConstraint> output_constraint(const GenerateArgs& a) {
  const int given = a.json + !a.json_schema_file.empty() + !a.regex.empty() + !a.grammar_file.empty();
  if (given > 1) return Status::error("--json, --json-schema, --regex and --grammar: give one of them");
  if (!a.regex.empty() || !a.grammar_file.empty()) return text_constraint(a);
  OutputConstraint c;
  if (a.json) c.json_schema = R"({"type":"object"})";
  c.strict = !a.json_best_effort;
  c.whitespace_flexible = a.json_whitespace == "flexible";
  if (!a.json_schema_file.empty()) {
    Result<std::vector<uint8_t>> bytes = read_file(a.json_schema_file, 1 << 20);
    if (!bytes.ok()) return bytes.status().with_context("--json-schema");
    c.json_schema.assign(bytes->begin(), bytes->end());
  }
  if (!c.json_schema.empty()) {  // name what is relaxed (compiled once: the requests share it)
    Result<grammar::Grammar> g = compile_constraint(c);
    if (!g.ok()) return g.status().with_context("--json-schema");
    // Under strict only annotations are listed (formats no validator knows), as the server's
    // X-Relaxed-Keywords does.
    const char* verb = c.strict ? "--json-schema ignores" : "--json-best-effort relaxes";
    for (const std::string& r : g->relaxed) std::fprintf(stderr, "dsv4: %s %s\n", verb, r.c_str());
    c.compiled = std::make_shared<const grammar::Grammar>(std::move(*g));
  }
  return c;
}

Status add_requests(Engine& engine, RankSession& rs, const GenerateArgs& a, const Prompts& prompts) {
  const Result<LogitAdjustments> adjust = a.penalties.adjustments(engine.config().vocab_size);
  const Result<OutputConstraint> constraint = output_constraint(a);
  if (!adjust.ok() || !constraint.ok()) {
    if (Status st = engine.stop(); !st.ok()) rs.abort_job(st);
    return adjust.ok() ? constraint.status() : adjust.status();
  }
  for (size_t i = 0; i < prompts.ids.size(); ++i) {
    GenerationRequest g;
    g.prompt = prompts.ids[i];
    g.max_tokens = a.max_tokens;
    g.sampling = {a.temperature, a.top_p, a.seed + i, a.top_k, a.min_p};
    g.adjust = *adjust;
    g.stop_strings = a.stop;
    g.n = a.n;
    g.constraint = *constraint;
    Result<int64_t> id = engine.add_request(std::move(g));
    if (!id.ok()) {
      if (Status st = engine.stop(); !st.ok()) rs.abort_job(st);
      return id.status().with_context("prompt " + std::to_string(i));
    }
  }
  return {};
}

// What the step reports add up to over the run.
struct RunTotals {
  int64_t committed = 0, drafts = 0, accepted = 0, steps = 0, prefix_hits = 0, preempted = 0, rounds = 0;
  std::vector<int64_t> accepted_at = std::vector<int64_t>(StepReport::kMaxAcceptedAt, 0);  // rounds by drafts accepted
  double seconds = 0;  // wall time of the loop

  void add(const StepReport& rep) {
    ++steps;
    committed += rep.committed;
    drafts += rep.drafts;
    accepted += rep.accepted;
    rounds += rep.rounds;
    for (int k = 0; k < StepReport::kMaxAcceptedAt; ++k) accepted_at[k] += rep.accepted_at[k];
    prefix_hits += rep.prefix_hit_tokens;
    preempted += rep.preempted;
  }
};

struct Output {
  std::vector<int32_t> tokens;
  std::string text;
  std::string finish;
  std::string error;
};

// Steps until every request finished, collecting each request's output (ids are 0..n-1 in
// order) and printing one line per step when step_lines.
Status run_steps(Engine& engine, RankSession& rs, bool step_lines, std::vector<Output>& outs, RunTotals& totals) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!engine.idle()) {
    Result<StepReport> rep = engine.step();
    if (!rep.ok()) {
      if (rs.groups()) rs.end_failed_job(rep.status());
      return rep.status();
    }
    totals.add(*rep);
    for (RequestUpdate& u : engine.updates()) {
      Output& o = outs[static_cast<size_t>(u.id)];
      o.tokens.insert(o.tokens.end(), u.tokens.begin(), u.tokens.end());
      o.text += u.text;
      if (u.finished) {
        o.finish = finish_reason_name(u.reason);
        o.error = u.error;
      }
    }
    if (step_lines)
      std::printf("step %3lld: batch %d, rows %d, tokens %d, %.2f ms\n", static_cast<long long>(totals.steps),
                  rep->batch, rep->rows, rep->committed, rep->seconds * 1e3);
  }
  if (Status st = engine.stop(); !st.ok()) rs.abort_job(st);
  totals.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {};
}

// Per request, per choice with n > 1 (outs: request i's choice k at i·n + k, its engine id):
// verbose, one line of prompt and output ids and one of the text as a JSON string (with a
// tokenizer); else a header naming the prompt, then the generated text as it is (its ids
// without a tokenizer). The first that ended with an error is the run's status.
Status print_outputs(const std::vector<Output>& outs, const Prompts& prompts, int32_t n, bool verbose) {
  Status failed;
  for (size_t j = 0; j < outs.size(); ++j) {
    const Output& o = outs[j];
    const size_t i = j / static_cast<size_t>(n);
    const std::string name = n > 1 ? fmt::format("request {} choice {}", i, j % static_cast<size_t>(n))
                                   : fmt::format("request {}", i);
    if (failed.ok() && !o.error.empty()) failed = Status::errorf("{}: {}", name, o.error);
    if (!verbose) {
      std::printf("%s (%s), prompt %s:\n%s\n\n", name.c_str(), o.finish.c_str(), prompts.shown[i].c_str(),
                  prompts.text ? o.text.c_str() : ("[" + join(o.tokens) + "]").c_str());
      continue;
    }
    std::printf("%s (%s): prompt [%s] -> [%s]\n", name.c_str(), o.finish.c_str(), join(prompts.ids[i]).c_str(),
                join(o.tokens).c_str());
    if (prompts.text) std::printf("%s text: %s\n", name.c_str(), quoted(o.text).c_str());
  }
  return failed;
}

// Tokens/s, then the draft acceptance (MTP; DSpark per round and by draft position),
// preemptions and prefix-cache reuse.
void print_summary(const RunTotals& t, const EngineOptions& eo, const EngineFlags& ef) {
  std::printf("%lld tokens in %lld steps, %.3f s: %.1f tokens/s", static_cast<long long>(t.committed),
              static_cast<long long>(t.steps), t.seconds, t.committed / (t.seconds > 0 ? t.seconds : 1));
  if (eo.mtp)
    std::printf(", MTP acceptance %lld/%lld = %.2f", static_cast<long long>(t.accepted),
                static_cast<long long>(t.drafts), t.drafts ? static_cast<double>(t.accepted) / t.drafts : 0.0);
  if (eo.dspark_gamma > 0) {
    // Per draft position k: the share of rounds that accepted at least k drafts.
    std::string by_pos;
    int64_t at_least = t.rounds;
    for (int k = 1; k <= eo.dspark_gamma && k < StepReport::kMaxAcceptedAt; ++k) {
      at_least -= t.accepted_at[k - 1];
      by_pos += fmt::format("{}{:.2f}", k > 1 ? " " : "", t.rounds ? static_cast<double>(at_least) / t.rounds : 0.0);
    }
    std::printf(", DSpark: %lld rounds, %.2f drafts accepted per round (%lld/%lld), acceptance by position [%s]",
                static_cast<long long>(t.rounds), t.rounds ? static_cast<double>(t.accepted) / t.rounds : 0.0,
                static_cast<long long>(t.accepted), static_cast<long long>(t.drafts), by_pos.c_str());
  }
  if (t.preempted > 0) std::printf(", %lld preemptions (recomputed)", static_cast<long long>(t.preempted));
  if (ef.prefix_blocks > 0)
    std::printf(", prefix cache: %lld prompt positions reused", static_cast<long long>(t.prefix_hits));
  std::printf("\n");
}

// Rank 0's collective traffic per step (dsv4 plan predicts it).
void print_seam_bytes(Engine& engine, int64_t steps, bool overlap) {
  const ModelRunner::SeamBytes b = engine.seam_bytes();
  const double n = static_cast<double>(steps > 0 ? steps : 1);
  std::printf("rank 0 sent per step (mean of %lld): attn_a2a %.0f B, o_reduce %.0f B, moe_counts %.0f B, "
              "moe_dispatch %.0f B, moe_combine %.0f B, head_gather %.0f B, head_logits %.0f B; seams copied %.0f B\n",
              static_cast<long long>(steps), b.attn_a2a / n, b.o_reduce / n, b.moe_counts / n, b.moe_dispatch / n,
              b.moe_combine / n, b.head_gather / n, b.head_logits / n, b.copied / n);
  // Seam wall time (parallel/seam_time.h): exposed = blocked in collectives; overlapped = a
  // non-blocking collective in flight while the seam computed.
  const ModelRunner::SeamTimes t = engine.seam_times();
  auto us = [&](double s) { return s * 1e6 / n; };
  std::printf("rank 0 seam time per step (us, %s): moe %.1f (exposed %.1f, dispatch wait %.1f, overlapped %.1f, "
              "%lld/%lld done at a poke), attn %.1f (exposed %.1f), head %.1f (exposed %.1f)\n",
              overlap ? "overlap on" : "overlap off", us(t.moe.total), us(t.moe.exposed), us(t.moe.waited),
              us(t.moe.overlapped), static_cast<long long>(t.moe.done_at_poke), static_cast<long long>(t.moe.started),
              us(t.attn.total), us(t.attn.exposed), us(t.head.total), us(t.head.exposed));
}

int run_generate(const GenerateArgs& a) {
  const EngineFlags& ef = a.engine;
  Result<ModelSession> session = start_model_session(ef);
  if (!session.ok()) return fail(session.status());
  RankSession& rs = *session->ranks;
  const LoadedModel& model = *session->model;
  const std::string& dir = model.dir;
  const ModelConfig& cfg = model.cfg;
  Result<Prompts> prompts = read_prompts(a, dir, rs);
  if (!prompts.ok()) return fail(prompts.status());
  Result<Limits> lim = engine_limits(ef, rs.world_size());
  if (!lim.ok()) return fail(lim.status());
  Result<EngineOptions> eo = engine_options(ef, cfg, rs);
  if (!eo.ok()) return fail(eo.status());
  eo->tokenizer = prompts->text ? &prompts->text->tokenizer : nullptr;
  auto engine = Engine::create(cfg, model.weights, *lim, *eo);
  if (Status st = rs.agree(engine.status()); !st.ok()) return fail(st);
  if (!rs.primary()) return follow_rank0(**engine, rs);
  if (Status st = add_requests(**engine, rs, a, *prompts); !st.ok()) return fail(st);
  if (a.verbose)
    std::printf("model %s: %d layers, vocab %lld; %zu requests, batch size %d%s, temperature %g, top-p %g%s\n",
                dir.c_str(), cfg.num_hidden_layers, static_cast<long long>(cfg.vocab_size), prompts->ids.size(),
                ef.batch_size, spec_label(*eo).empty() ? "" : (", " + spec_label(*eo) + " drafts").c_str(),
                a.temperature, a.top_p,
                rs.world_size() > 1 ? fmt::format("; {} ranks (tp {})", rs.world_size(), ef.ranks.tp).c_str() : "");
  std::vector<Output> outs(prompts->ids.size() * static_cast<size_t>(a.n));
  RunTotals totals;
  if (Status st = run_steps(**engine, rs, a.verbose && !a.quiet_steps, outs, totals); !st.ok()) return fail(st);
  const Status failed = print_outputs(outs, *prompts, a.n, a.verbose);
  print_summary(totals, *eo, ef);
  if (rs.world_size() > 1) print_seam_bytes(**engine, totals.steps, rs.groups()->overlap);
  return failed.ok() ? 0 : fail(failed);
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Generate tokens for one or more prompts (continuous batching)");
  add_engine_options(sub, &a->engine);
  sub->add_option("--prompt", a->prompt_text,
                  "Prompt text, encoded with the model's tokenizer.json (repeat for several prompts)")
      ->take_all();
  sub->add_option("--prompt-ids", a->prompt_ids,
                  "Comma-separated prompt token ids, or @FILE (ids separated by commas and/or whitespace); "
                  "repeat for several prompts")
      ->take_all();
  sub->add_option("--max-tokens", a->max_tokens, "Tokens to generate per request")->capture_default_str();
  sub->add_option("--temperature", a->temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  sub->add_option("--top-p", a->top_p, "Nucleus sampling threshold in (0, 1]")->capture_default_str();
  sub->add_option("--top-k", a->top_k, "Keep only the K most likely ids (0 = off)")->capture_default_str();
  sub->add_option("--min-p", a->min_p, "Drop ids below P times the top probability, P in [0, 1] (0 = off)")
      ->capture_default_str();
  add_penalty_options(sub, &a->penalties);
  sub->add_option("--seed", a->seed, "Seed of request i is seed + i")->capture_default_str();
  sub->add_option("--stop", a->stop, "Stop string (repeatable; matched on the output text, needs the tokenizer)")
      ->take_all();
  sub->add_option("-n,--n", a->n,
                  "Choices per prompt: the prompt is computed once, choice k samples with a seed derived from the "
                  "request's and k (choice 0: the request's)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxChoices));
  sub->add_flag("--json", a->json, "Each output is one JSON object (constrained decoding; needs the tokenizer)");
  sub->add_option("--json-schema", a->json_schema_file,
                  "Each output is one JSON value of the JSON Schema in FILE (docs/serving.md: structured output)");
  sub->add_flag("--json-best-effort", a->json_best_effort,
                "With --json-schema: keywords the engine cannot enforce are relaxed (as strict: false) and "
                "listed on stderr, not refused");
  sub->add_option("--regex", a->regex,
                  "Each whole output matches the regex R (ECMA-262 u subset; docs/serving.md: vLLM's constraints)");
  sub->add_option("--grammar", a->grammar_file,
                  "Each output is in the language of the GBNF grammar in FILE (llama.cpp's dialect, regular "
                  "rules only; docs/serving.md)");
  sub->add_option("--json-whitespace", a->json_whitespace,
                  "Whitespace in --json/--json-schema values: compact (\", \" and \": \" only) or flexible (up to "
                  "16 characters per gap); a schema's root x-guidance overrides it")
      ->capture_default_str()
      ->check(CLI::IsMember({"compact", "flexible"}));
  sub->add_flag("--verbose", a->verbose,
                "Also print the model line, one line per step, and per request its prompt and output token ids "
                "and its text as a JSON string");
  sub->add_flag("--quiet-steps", a->quiet_steps, "With --verbose: no step lines");
  return {sub, [a]() { return run_generate(*a); }};
}

}  // namespace dsv4::cli
