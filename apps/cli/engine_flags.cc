#include "engine_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "io/safetensors.h"
#include "kernels/logit_adjust/logit_adjust.h"

namespace dsv4::cli {

void add_penalty_options(CLI::App* sub, PenaltyFlags* f) {
  sub->add_option("--frequency-penalty", f->adjust.frequency_penalty,
                  "Subtract F per earlier occurrence of an id among the generated tokens, F in [-2, 2] (0 = off)")
      ->capture_default_str();
  sub->add_option("--presence-penalty", f->adjust.presence_penalty,
                  "Subtract P from every id generated so far, P in [-2, 2] (0 = off)")
      ->capture_default_str();
  sub->add_option("--repetition-penalty", f->adjust.repetition_penalty,
                  "Divide positive logits (multiply negative ones) of prompt and generated ids by R > 0 (1 = off)")
      ->capture_default_str();
  sub->add_option("--logit-bias", f->logit_bias, "ID=BIAS: add BIAS in [-100, 100] to token ID's logit (repeatable)")
      ->take_all();
}

Result<LogitAdjustments> PenaltyFlags::adjustments(int64_t V) const {
  LogitAdjustments a = adjust;
  for (const std::string& item : logit_bias) {
    const size_t eq = item.find('=');
    int32_t id = -1;
    float bias = 0;
    bool ok = eq != std::string::npos;
    try {
      size_t used = 0;
      if (ok) id = std::stoi(item.substr(0, eq), &used);
      ok = ok && used == eq;
      if (ok) bias = std::stof(item.substr(eq + 1), &used);
      ok = ok && used == item.size() - eq - 1;
    } catch (const std::exception&) {
      ok = false;
    }
    if (!ok) return Status::errorf("--logit-bias: '{}' is not ID=BIAS (e.g. 17=-100)", item);
    a.logit_bias.emplace_back(id, bias);
  }
  std::sort(a.logit_bias.begin(), a.logit_bias.end());
  if (Status st = kernels::validate_logit_adjustments(a, V); !st.ok()) return st;
  return a;
}

void add_engine_options(CLI::App* sub, EngineFlags* f) {
  sub->add_option("--model", f->model, kModelHelp);
  sub->add_flag("--mtp", f->mtp, "Speculative decode with the MTP layer's drafts (= --spec mtp)");
  sub->add_option("--spec", f->spec,
                  "Speculative decoding: none, mtp (the MTP layer, one draft per step) or dspark (the DSpark "
                  "drafter, --gamma drafts per round; a DeepSeek-V4-Flash-0731 checkpoint); outputs equal plain "
                  "decoding")
      ->check(CLI::IsMember({"none", "mtp", "dspark"}))
      ->capture_default_str();
  sub->add_option("--gamma", f->gamma, "DSpark drafts per round, 1..64 (default: the checkpoint's dspark_block_size)");
  sub->add_option("--verify", f->verify,
                  "DSpark verification: exact (outputs equal plain decoding) or rejection (at temperature > 0 "
                  "drafts are sampled from the drafter and accepted by speculative sampling: the same "
                  "distribution as plain sampling, not the same tokens; spec/dspark.md 4.3)")
      ->check(CLI::IsMember({"exact", "rejection"}))
      ->capture_default_str();
  sub->add_option("--batch-size", f->batch_size,
                  "Sequences per rank (cache slots); a step decodes up to ranks x this many requests (B_MAX)")
      ->capture_default_str();
  sub->add_option("--threads", f->threads, "Worker threads of the engine")->capture_default_str();
  sub->add_option("--max-chunk", f->max_chunk, "Largest prefill chunk per request")->capture_default_str();
  sub->add_option("--max-context", f->max_context, "Positions per sequence (prompt + completion)")
      ->capture_default_str();
  sub->add_option("--page-tokens", f->page_tokens,
                  "Positions per compressed-cache block (a multiple of every compress ratio)")
      ->capture_default_str();
  sub->add_option("--cache-blocks", f->cache_blocks,
                  "Compressed-cache blocks per rank, shared by its requests (0 = enough for every slot at "
                  "max-context)")
      ->capture_default_str();
  sub->add_option("--prefix-blocks", f->prefix_blocks, "Prefix-cache entries (prompt blocks kept for reuse; 0 = off)")
      ->capture_default_str();
  sub->add_option("--isa", f->isa, kIsaHelp)->capture_default_str();
  add_rank_options(sub, &f->ranks);
  sub->add_option("--cp-prefill", f->cp_prefill,
                  "With --tp > 1: prompts of at least N positions are prefilled context-parallel over the "
                  "owner's TP group (0 = never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_test_hooks(sub, &f->test_min_step_seconds);
}

void add_test_hooks(CLI::App* sub, double* min_step_seconds) {
  // Hidden (no group): tests make a step slow so that timeouts, disconnects and Ctrl-C happen
  // mid-answer on a machine of any speed (docs/development.md).
  sub->add_option("--test-min-step-seconds", *min_step_seconds)->group("")->check(CLI::NonNegativeNumber);
}

Result<Limits> engine_limits(const EngineFlags& f, int world) {
  if (f.batch_size < 1) return Status::errorf("--batch-size = {} must be at least 1", f.batch_size);
  Limits lim;
  // Per rank: the sequences and the cache blocks; the step holds every rank's rows.
  lim.max_seqs = f.batch_size;
  lim.max_batch = f.batch_size * world;
  lim.max_chunk = f.max_chunk;
  lim.max_decode_rows = f.mtp || f.spec == "mtp" ? 2 : 1;  // DSpark: the engine sets 1 + gamma
  lim.max_rows = std::max(f.max_chunk, 2 * f.batch_size) * world;
  lim.max_context = f.max_context;
  lim.n_threads = f.threads;
  lim.page_tokens = f.page_tokens;
  lim.cache_blocks = f.cache_blocks;
  lim.prefix_blocks = f.prefix_blocks;
  return lim;
}

namespace {

Status apply_spec(const EngineFlags& f, const ModelConfig& cfg, EngineOptions* eo) {
  if (f.mtp && f.spec != "none" && f.spec != "mtp")
    return Status::errorf("--mtp is --spec mtp; it contradicts --spec {}", f.spec);
  if (f.gamma != 0 && f.spec != "dspark") return Status::error("--gamma needs --spec dspark");
  if (f.verify != "exact" && f.spec != "dspark") return Status::error("--verify rejection needs --spec dspark");
  eo->dspark_rejection = f.verify == "rejection";
  eo->mtp = f.mtp || f.spec == "mtp";
  eo->dspark_gamma = 0;
  if (f.spec == "dspark") {
    if (!cfg.dspark)
      return Status::error("--spec dspark: the checkpoint has no DSpark drafter (config.json has no dspark_* "
                           "fields; a DeepSeek-V4-Flash-0731 checkpoint has them)");
    eo->dspark_gamma = f.gamma != 0 ? f.gamma : static_cast<int32_t>(cfg.dspark->block_size);
  }
  return Status();
}

}  // namespace

Result<EngineOptions> engine_options(const EngineFlags& f, const ModelConfig& cfg, RankSession& rs) {
  EngineOptions eo;
  DSV4_RETURN_IF_ERROR(apply_spec(f, cfg, &eo));
  eo.ranks = rs.groups();
  eo.cp_prefill_tokens = f.cp_prefill;
  eo.min_step_seconds = f.test_min_step_seconds;
  // Test hook: DSV4_TEST_FAIL_STEP=RANK:STEP fails that rank's step STEP (Engine fail_step).
  if (const char* v = std::getenv("DSV4_TEST_FAIL_STEP"); v != nullptr) {
    int rank = -1;
    long long step = -1;
    if (std::sscanf(v, "%d:%lld", &rank, &step) != 2 || rank < 0 || step < 0)
      return Status::errorf("DSV4_TEST_FAIL_STEP = \"{}\": expected RANK:STEP", v);
    if (rank == rs.rank()) eo.fail_step = step;
  }
  return eo;
}

std::string spec_label(const EngineOptions& eo) {
  if (eo.mtp) return "MTP";
  if (eo.dspark_gamma > 0)
    return fmt::format("DSpark (gamma {}{})", eo.dspark_gamma, eo.dspark_rejection ? ", rejection sampling" : "");
  return "";
}

Result<std::unique_ptr<LoadedModel>> load_model(RankSession& rs, const EngineFlags& f) {
  DSV4_RETURN_IF_ERROR(select_isa(f.isa));
  Result<std::string> dir = rs.model_dir(f.model);
  if (!dir.ok()) return dir.status();
  Result<ModelConfig> cfg = load_config(*dir);
  Result<SafetensorsSet> files = cfg.ok() ? SafetensorsSet::open_dir(*dir) : Result<SafetensorsSet>(cfg.status());
  Result<Weights> w = files.ok() ? load_weights(*files, *cfg, nullptr, rs.load_options(*cfg))
                                 : Result<Weights>(files.status());
  DSV4_RETURN_IF_ERROR(rs.agree(w.status()));
  DSV4_RETURN_IF_ERROR(rs.bind(*cfg));
  return std::unique_ptr<LoadedModel>(new LoadedModel{*dir, std::move(*cfg), std::move(*w)});
}

Result<ModelSession> start_model_session(const EngineFlags& f) {
  ModelSession session;
  Result<std::unique_ptr<RankSession>> ranks = RankSession::start(f.ranks);
  if (!ranks.ok()) return ranks.status();
  session.ranks = std::move(*ranks);
  Result<std::unique_ptr<LoadedModel>> model = load_model(*session.ranks, f);
  if (!model.ok()) return model.status();
  session.model = std::move(*model);
  return session;
}

int follow_rank0(Engine& engine, RankSession& rs) {
  while (!engine.stopped())
    if (Result<StepReport> rep = engine.step(); !rep.ok()) rs.end_failed_job(rep.status());  // rank 0 prints it
  return 0;
}

}  // namespace dsv4::cli
