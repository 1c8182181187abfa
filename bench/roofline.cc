// Byte and FLOP counting of roofline.h.
#include "roofline.h"

#include <algorithm>
#include <cmath>

#include "base/math.h"
#include "numeric/cache_rows.h"

namespace dsv4::bench {

int64_t matrix_bytes(StorageForm form, int64_t out, int64_t in) {
  switch (form) {
    case StorageForm::kBF16: return out * in * 2;
    case StorageForm::kF32: return out * in * 4;
    case StorageForm::kI64: return out * in * 8;
    case StorageForm::kFP8: return out * in + ceil_div<int64_t>(out, 128) * ceil_div<int64_t>(in, 128);
    case StorageForm::kFP4: return out * in / 2 + out * in / 32;
  }
  return 0;
}

Cost matrix_cost(StorageForm form, int64_t out, int64_t in, int64_t T) {
  return Cost{static_cast<double>(matrix_bytes(form, out, in)), 2.0 * static_cast<double>(T * out * in)};
}

namespace {

// A layer's matrices over T rows (not the embedding rows, not the caches).
Cost layer_weights_cost(const ModelConfig& cfg, int layer, int64_t T, double experts_hit) {
  const int64_t D = cfg.hidden_size, H = cfg.num_attention_heads, Dh = cfg.head_dim, Rq = cfg.q_lora_rank;
  const int64_t F = cfg.moe_intermediate_size, Hi = cfg.index_n_heads, Di = cfg.index_head_dim;
  const int ratio = cfg.layer_ratio(layer);
  const StorageForm dense = cfg.dense_storage(), bf = StorageForm::kBF16;

  Cost c;
  c += matrix_cost(StorageForm::kF32, 2 * int64_t{cfg.hc_mix()}, cfg.hc_dim(), T);  // hc_attn_fn + hc_ffn_fn
  c += matrix_cost(dense, Rq, D, T);                                                 // wq_a
  c += matrix_cost(dense, H * Dh, Rq, T);                                            // wq_b
  c += matrix_cost(dense, Dh, D, T);                                                 // wkv
  c += matrix_cost(dense, int64_t{cfg.o_groups} * cfg.o_lora_rank, cfg.wo_a_in(), T);  // wo_a (as stored)
  c += matrix_cost(dense, D, cfg.wo_b_in(), T);                                      // wo_b
  if (ratio > 0) c += matrix_cost(bf, 2 * cfg.compressor_out(layer), D, T);          // compressor wkv + wgate
  if (ratio == kCsaRatio) {
    c += matrix_cost(dense, Hi * Di, Rq, T);    // indexer wq_b
    c += matrix_cost(bf, Hi, D, T);             // weights_proj
    c += matrix_cost(bf, 2 * 2 * Di, D, T);     // indexer compressor wkv + wgate
  }
  c += matrix_cost(bf, cfg.n_routed_experts, D, T);              // gate
  c += matrix_cost(dense, 3 * F * int64_t{cfg.n_shared_experts}, D, T);  // shared w1, w3, w2
  c.bytes += experts_hit * 3.0 * static_cast<double>(matrix_bytes(cfg.expert_storage(), F, D));
  c.flops += 2.0 * static_cast<double>(T * cfg.num_experts_per_tok * 3 * F * D);
  return c;
}

// Attention over `keys` packed KV rows, one row.
Cost attended_keys_cost(const ModelConfig& cfg, int64_t keys) {
  const KvRowFormat kv{static_cast<int>(cfg.head_dim), static_cast<int>(cfg.qk_rope_head_dim)};
  return Cost{static_cast<double>(keys * kv.bytes()),
              4.0 * static_cast<double>(int64_t{cfg.num_attention_heads} * cfg.head_dim * keys)};
}

}  // namespace

Cost layer_step_cost(const ModelConfig& cfg, int layer, std::span<const RequestRows> reqs, int64_t experts_hit) {
  int64_t T = 0;
  for (const RequestRows& r : reqs) T += r.n;
  const int64_t Hi = cfg.index_n_heads, Di = cfg.index_head_dim;
  const int ratio = cfg.layer_ratio(layer);
  Cost c = layer_weights_cost(cfg, layer, T, static_cast<double>(experts_hit));
  c.bytes += static_cast<double>(T * cfg.hidden_size * 2);  // embedding rows

  const IndexKeyFormat key{static_cast<int>(Di)};
  for (const RequestRows& r : reqs)
    for (int64_t p = r.p0; p < r.p0 + r.n; ++p) {
      int64_t keys = std::min<int64_t>(p + 1, cfg.sliding_window), index_keys = 0;
      if (ratio == kCsaRatio) {
        index_keys = (p + 1) / ratio;
        keys += std::min<int64_t>(index_keys, cfg.index_topk);
      } else if (ratio > 0) {
        keys += (p + 1) / ratio;
      }
      c += attended_keys_cost(cfg, keys);
      c.bytes += static_cast<double>(index_keys * key.bytes());
      c.flops += 2.0 * static_cast<double>(Hi * Di * index_keys);
    }
  return c;
}

Cost head_cost(const ModelConfig& cfg, int64_t T) {
  Cost c = matrix_cost(StorageForm::kBF16, cfg.vocab_size, cfg.hidden_size, T);
  c += matrix_cost(StorageForm::kF32, cfg.hc_mult, cfg.hc_dim(), T);
  return c;
}

Cost dspark_commit_cost(const ModelConfig& cfg, int64_t T) {
  const int64_t D = cfg.hidden_size, F = static_cast<int64_t>(cfg.dspark->target_layer_ids.size()) * D;
  Cost c{static_cast<double>(T * F * 2), 0};  // features
  c += matrix_cost(cfg.dense_storage(), D, F, T);  // main_proj
  for (int s = 0; s < cfg.n_dspark_stages(); ++s) c += matrix_cost(cfg.dense_storage(), cfg.head_dim, D, T);  // wkv
  return c;
}

Cost markov_cost(const ModelConfig& cfg, int64_t B, int64_t gamma) {
  const int64_t Rm = cfg.dspark->markov_rank;
  Cost step = matrix_cost(StorageForm::kBF16, cfg.vocab_size, Rm, B);  // W2
  step.bytes += static_cast<double>(B * Rm * 2);                        // W1 rows
  return Cost{step.bytes * static_cast<double>(gamma), step.flops * static_cast<double>(gamma)};
}

Cost dspark_stages_cost(const ModelConfig& cfg, int64_t B, int64_t gamma, int64_t anchor, double experts_hit) {
  const int64_t T = B * gamma, keys = std::min<int64_t>(cfg.sliding_window, anchor + 1) + gamma;
  Cost c{static_cast<double>(T * cfg.hidden_size * 2), 0};  // embedding rows
  for (int s = 0; s < cfg.n_dspark_stages(); ++s) {
    c += layer_weights_cost(cfg, cfg.num_hidden_layers + s, T, experts_hit);
    const Cost attn = attended_keys_cost(cfg, keys);
    c += Cost{attn.bytes * static_cast<double>(T), attn.flops * static_cast<double>(T)};
  }
  return c;
}

Cost dspark_round_cost(const ModelConfig& cfg, int64_t B, int64_t gamma, int64_t anchor, double experts_hit) {
  Cost c = dspark_stages_cost(cfg, B, gamma, anchor, experts_hit);
  c += head_cost(cfg, B * gamma);
  c += markov_cost(cfg, B, gamma);
  return c;
}

double expected_experts_hit(int64_t n_experts, int64_t k, int64_t T) {
  const double e = static_cast<double>(n_experts);
  return e * (1.0 - std::pow(1.0 - static_cast<double>(k) / e, static_cast<double>(T)));
}

Fractions fractions(const Cost& cost, double seconds, double read_gbps, double peak_gflops) {
  Fractions f;
  if (seconds <= 0) return f;
  f.gbps = cost.bytes / seconds / 1e9;
  f.gflops = cost.flops / seconds / 1e9;
  f.bandwidth_fraction = read_gbps > 0 ? f.gbps / read_gbps : 0;
  f.compute_fraction = peak_gflops > 0 ? f.gflops / peak_gflops : 0;
  f.roofline_fraction = std::max(f.bandwidth_fraction, f.compute_fraction);
  return f;
}

double roofline_seconds(const Cost& cost, double read_gbps, double peak_gflops) {
  return std::max(read_gbps > 0 ? cost.bytes / (read_gbps * 1e9) : 0.0,
                  peak_gflops > 0 ? cost.flops / (peak_gflops * 1e9) : 0.0);
}

}  // namespace dsv4::bench
