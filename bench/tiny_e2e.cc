// Engine decode steps on a model directory (tiny_e2e.h).
#include "tiny_e2e.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/limits.h"
#include "model/weights.h"
#include "runtime/engine.h"

namespace dsv4::bench {
namespace {

constexpr int kPrompt = 8;

Cost model_step_cost(const ModelConfig& cfg, int B, int64_t pos) {
  std::vector<RequestRows> rows(static_cast<size_t>(B), RequestRows{pos, 1});
  const double hit = expected_experts_hit(cfg.n_routed_experts, cfg.num_experts_per_tok, B);
  Cost c;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    Cost layer = layer_step_cost(cfg, l, rows, 0);
    layer.bytes += hit * 3.0 * static_cast<double>(matrix_bytes(cfg.expert_storage(), cfg.moe_intermediate_size,
                                                                 cfg.hidden_size));
    if (l > 0) layer.bytes -= static_cast<double>(B * cfg.hidden_size * 2);  // embedding rows once
    c += layer;
  }
  c += head_cost(cfg, B);
  return c;
}

}  // namespace

Result<std::vector<CaseResult>> run_tiny_e2e(const std::string& model_dir, const std::vector<int>& batches,
                                             int warmup, int repeats, int threads) {
  Result<ModelConfig> cfg = load_config(model_dir);
  if (!cfg.ok()) return cfg.status();
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(model_dir);
  if (!files.ok()) return files.status();
  Result<Weights> w = load_weights(files.value(), cfg.value(), nullptr);
  if (!w.ok()) return w.status();
  const int max_b = batches.empty() ? 1 : *std::max_element(batches.begin(), batches.end());
  const int steps = warmup + repeats;
  Limits lim;
  lim.max_batch = max_b;
  lim.max_seqs = max_b;
  lim.max_rows = std::max(64, max_b * kPrompt);
  lim.max_chunk = kPrompt;
  lim.max_decode_rows = 1;
  lim.max_context = std::min<int64_t>(cfg.value().max_position_embeddings, 1024);
  lim.n_threads = threads;
  std::vector<CaseResult> out;
  for (int B : batches) {
    Result<std::unique_ptr<Engine>> engine = Engine::create(cfg.value(), w.value(), lim, EngineOptions{});
    if (!engine.ok()) return engine.status();
    for (int r = 0; r < B; ++r) {
      GenerationRequest req;
      for (int j = 0; j < kPrompt; ++j) req.prompt.push_back(static_cast<int32_t>((r * 31 + j * 7 + 3) % 500 + 2));
      req.max_tokens = steps + 1;
      req.stop_at_eos = false;
      Result<int64_t> id = (*engine)->add_request(std::move(req));
      if (!id.ok()) return id.status();
    }
    std::vector<double> ms;
    int decode_steps = 0;
    while (!(*engine)->idle()) {
      const auto t0 = std::chrono::steady_clock::now();
      Result<StepReport> rep = (*engine)->step();
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!rep.ok()) return rep.status();
      (*engine)->updates().clear();
      if (rep->batch == B && rep->rows == B && ++decode_steps > warmup) ms.push_back(t);
    }
    out.push_back(timed_case("tiny-e2e", "decode", "", B, 1, threads, ms,
                             model_step_cost(cfg.value(), B, kPrompt + warmup + repeats / 2)));
  }
  return out;
}

}  // namespace dsv4::bench
