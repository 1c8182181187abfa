// Speculative decoding end to end (spec_e2e.h).
#include "spec_e2e.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "base/math.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/limits.h"
#include "model/weights.h"
#include "runtime/engine.h"
#include "text/tokenizer_dir.h"

#include "bench_util.h"

namespace dsv4::bench {
namespace {

constexpr int kMaxChunk = 32;

// A model directory held for the Engines of the run (they keep references to both).
struct LoadedModel {
  ModelConfig cfg;
  std::unique_ptr<SafetensorsSet> files;
  std::unique_ptr<Weights> weights;
};

Result<std::unique_ptr<LoadedModel>> load(const std::string& dir) {
  auto m = std::make_unique<LoadedModel>();
  Result<ModelConfig> cfg = load_config(dir);
  if (!cfg.ok()) return cfg.status();
  m->cfg = std::move(cfg.value());
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(dir);
  if (!files.ok()) return files.status();
  m->files = std::make_unique<SafetensorsSet>(std::move(files.value()));
  Result<Weights> w = load_weights(*m->files, m->cfg, nullptr);
  if (!w.ok()) return w.status();
  m->weights = std::make_unique<Weights>(std::move(w.value()));
  return m;
}

struct Variant {
  std::string label;  // plain | mtp | dspark g=5
  const LoadedModel* model = nullptr;
  EngineOptions options;
  int rows = 1;       // rows per request and step at most (S)
  int gamma = 0;      // drafts per round (MTP: 1)
};

// One run's outcome.
struct Run {
  double seconds = 0;
  int64_t steps = 0, committed = 0, drafts = 0, accepted = 0, rounds = 0;
  std::vector<int64_t> by_accepted = std::vector<int64_t>(StepReport::kMaxAcceptedAt, 0);
  std::vector<std::vector<int32_t>> tokens;  // per prompt
};

Result<Run> decode_all(const Variant& v, const std::vector<std::vector<int32_t>>& prompts, int B, int max_gamma,
                       const SpecE2eSets& sets) {
  const ModelConfig& cfg = v.model->cfg;
  int64_t longest = 0;
  for (const std::vector<int32_t>& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  Limits lim;
  lim.max_batch = B;
  lim.max_seqs = B;
  lim.max_chunk = kMaxChunk;
  lim.max_decode_rows = 1;  // the Engine raises it for MTP and DSpark
  lim.max_rows = std::max(64, B * (1 + max_gamma));
  lim.max_context = ceil_div<int64_t>(longest + sets.tokens + max_gamma + 8, lim.page_tokens) * lim.page_tokens;
  lim.max_context = std::min(lim.max_context, cfg.max_position_embeddings);
  lim.n_threads = sets.threads;
  Result<std::unique_ptr<Engine>> engine = Engine::create(cfg, *v.model->weights, lim, v.options);
  if (!engine.ok()) return engine.status();
  for (const std::vector<int32_t>& p : prompts) {
    GenerationRequest req;
    req.prompt = p;
    req.max_tokens = sets.tokens;
    req.stop_at_eos = false;
    Result<int64_t> id = (*engine)->add_request(std::move(req));
    if (!id.ok()) return id.status();
  }
  Run run;
  run.tokens.resize(prompts.size());
  const auto t0 = std::chrono::steady_clock::now();
  while (!(*engine)->idle()) {
    Result<StepReport> rep = (*engine)->step();
    if (!rep.ok()) return rep.status();
    ++run.steps;
    run.committed += rep->committed;
    run.drafts += rep->drafts;
    run.accepted += rep->accepted;
    run.rounds += rep->rounds;
    for (int k = 0; k < StepReport::kMaxAcceptedAt; ++k) run.by_accepted[k] += rep->accepted_at[k];
    for (RequestUpdate& u : (*engine)->updates()) {
      if (!u.error.empty()) return Status::errorf("spec-e2e {}: request {} failed: {}", v.label, u.id, u.error);
      std::vector<int32_t>& out = run.tokens[static_cast<size_t>(u.id)];
      out.insert(out.end(), u.tokens.begin(), u.tokens.end());
    }
    (*engine)->updates().clear();
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

// Lossless: every prompt's tokens equal the reference's.
Status same_tokens(const Run& ref, const Run& run, const std::string& label, int B) {
  for (size_t i = 0; i < ref.tokens.size(); ++i) {
    const std::vector<int32_t>&a = ref.tokens[i], &b = run.tokens[i];
    const auto [pa, pb] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    if (pa != a.end() || pb != b.end()) {
      const size_t k = static_cast<size_t>(pa - a.begin());
      return Status::errorf("spec-e2e: {} at B = {} differs from plain decoding on prompt {} at generated token {}: "
                            "{} instead of {} (speculative decoding must be lossless)",
                            label, B, i, k, pb != b.end() ? std::to_string(*pb) : "nothing",
                            pa != a.end() ? std::to_string(*pa) : "nothing");
    }
  }
  return Status();
}

CaseResult summarize(const Variant& v, int B, const std::vector<Run>& runs, int threads) {
  std::vector<double> rate, step_ms;
  for (const Run& r : runs) {
    rate.push_back(static_cast<double>(r.committed) / r.seconds);
    step_ms.push_back(r.seconds * 1e3 / static_cast<double>(std::max<int64_t>(1, r.steps)));
  }
  CaseResult c = timed_case("spec-e2e", "spec", v.label, B, v.rows, threads, step_ms, Cost{});
  c.measured_tokens_per_s = median(rate);
  const Run& r = runs.front();  // counts are the same in every run (greedy, deterministic)
  const double rounds = static_cast<double>(std::max<int64_t>(1, r.rounds));
  c.extra = {{"gamma", v.gamma},
             {"steps", static_cast<double>(r.steps)},
             {"tokens", static_cast<double>(r.committed)},
             {"tokens_per_step", static_cast<double>(r.committed) / static_cast<double>(std::max<int64_t>(1, r.steps))},
             {"drafts", static_cast<double>(r.drafts)},
             {"accepted", static_cast<double>(r.accepted)},
             {"rounds", static_cast<double>(r.rounds)},
             {"accepted_per_round", static_cast<double>(r.accepted) / rounds}};
  std::vector<double> at, by;
  int64_t at_least = r.rounds;
  for (int k = 0; k <= v.gamma && k < StepReport::kMaxAcceptedAt; ++k) {
    by.push_back(static_cast<double>(r.by_accepted[k]));
    if (k == 0) continue;
    at_least -= r.by_accepted[k - 1];
    at.push_back(static_cast<double>(at_least) / rounds);
  }
  c.extra_lists = {{"acceptance_at", at}, {"rounds_by_accepted", by}};
  return c;
}

}  // namespace

Result<std::vector<CaseResult>> run_spec_e2e(const std::string& plain_dir, const std::string& dspark_dir,
                                             const std::vector<std::string>& prompts, const SpecE2eSets& sets) {
  Result<std::unique_ptr<LoadedModel>> plain = load(plain_dir);
  if (!plain.ok()) return plain.status();
  Result<std::unique_ptr<LoadedModel>> ds = load(dspark_dir);
  if (!ds.ok()) return ds.status();
  Result<TextModel> text = load_tokenizer_dir(plain_dir);
  if (!text.ok()) return text.status().with_context("spec-e2e needs the model's tokenizer");
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& p : prompts) ids.push_back(encode_prompt(*text, p, /*allow_special=*/false));
  if (ids.empty()) return Status::error("spec-e2e: no prompts");

  std::vector<Variant> variants;
  variants.push_back({"plain", plain->get(), EngineOptions{}, 1, 0});
  Variant mtp{"mtp", plain->get(), EngineOptions{}, 2, 1};
  mtp.options.mtp = true;
  variants.push_back(mtp);
  int max_gamma = 1;
  for (int g : sets.gammas) {
    if (g < 1 || g > kMaxDsparkGamma) return Status::errorf("--gammas: {} outside [1, {}]", g, kMaxDsparkGamma);
    Variant d{fmt::format("dspark g={}", g), ds->get(), EngineOptions{}, 1 + g, g};
    d.options.dspark_gamma = g;
    variants.push_back(d);
    max_gamma = std::max(max_gamma, g);
  }
  // runs[b][v]: the timed runs of variant v at batches[b].
  const size_t nb = sets.batches.size(), nv = variants.size();
  std::vector<std::vector<std::vector<Run>>> runs(nb, std::vector<std::vector<Run>>(nv));
  std::vector<Run> reference;  // plain at the first B: what every run must produce
  for (int pass = 0; pass <= sets.repeats; ++pass)  // pass 0: warm-up
    for (size_t b = 0; b < nb; ++b)
      for (size_t v = 0; v < nv; ++v) {
        Result<Run> r = decode_all(variants[v], ids, sets.batches[b], max_gamma, sets);
        if (!r.ok()) return r.status().with_context(fmt::format("spec-e2e {} at B = {}", variants[v].label,
                                                               sets.batches[b]));
        if (reference.empty()) reference.push_back(r.value());
        DSV4_RETURN_IF_ERROR(same_tokens(reference.front(), r.value(), variants[v].label, sets.batches[b]));
        if (pass > 0) runs[b][v].push_back(std::move(r.value()));
      }
  std::vector<CaseResult> out;
  for (size_t b = 0; b < nb; ++b) {
    const size_t first = out.size();
    for (size_t v = 0; v < nv; ++v) out.push_back(summarize(variants[v], sets.batches[b], runs[b][v], sets.threads));
    for (size_t v = 0; v < nv; ++v)
      out[first + v].extra.push_back({"speed_up", out[first + v].tokens_per_s() / out[first].tokens_per_s()});
  }
  return out;
}

void print_spec_e2e(const std::vector<CaseResult>& cases, const SpecE2eSets& sets) {
  if (cases.empty()) return;
  std::printf("\nspec-e2e: greedy decode of the demo prompts, %d tokens each, median of %d interleaved runs (each "
              "from the first step to idle, prefill included); outputs identical to plain decoding in every run\n",
              sets.tokens, sets.repeats);
  std::printf("%-12s %3s %3s %10s %8s %7s %8s %11s %8s  %s\n", "variant", "B", "thr", "tokens/s", "speed-up", "steps",
              "tok/step", "acc/round", "step_ms", "acceptance by position");
  for (const CaseResult& c : cases) {
    std::string at;
    for (const auto& [k, v] : c.extra_lists)
      if (k == "acceptance_at")
        for (double a : v) at += fmt::format("{}{:.2f}", at.empty() ? "" : " ", a);
    std::printf("%-12s %3d %3d %10.1f %7.2fx %7.0f %8.2f %11.2f %8.3f  [%s]\n", c.shape.c_str(), c.B, c.threads,
                c.tokens_per_s(), c.extra_value("speed_up"), c.extra_value("steps"),
                c.extra_value("tokens_per_step"), c.extra_value("accepted_per_round"), c.step_ms, at.c_str());
  }
  std::fflush(stdout);
}

}  // namespace dsv4::bench
