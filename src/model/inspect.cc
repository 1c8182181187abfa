// Checkpoint report for `dsv4 inspect` (see inspect.h).
#include "model/inspect.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "io/safetensors.h"
#include "model/cache_bytes.h"
#include "model/checkpoint_table.h"
#include "model/config.h"
#include "model/weights.h"

namespace dsv4 {
namespace {

std::string bytes_str(int64_t n) {
  if (n >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(n) / (1 << 20));
  if (n >= (int64_t{1} << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(n) / (1 << 10));
  return fmt::format("{} B", n);
}

void config_section(const ModelConfig& c, std::string& out) {
  auto line = [&out](const std::string& s) { out += "  " + s + "\n"; };
  out += "config:\n";
  line(fmt::format("vocab_size {}, hidden_size {}, layers {} + {}, max_position_embeddings {}",
                   c.vocab_size, c.hidden_size, c.num_hidden_layers,
                   c.dspark ? fmt::format("{} DSpark stages", c.n_dspark_stages())
                            : fmt::format("{} MTP", c.num_nextn_predict_layers),
                   c.max_position_embeddings));
  line(fmt::format("attention: {} heads x head_dim {} (nope {}, rope {}), kv heads {}, "
                   "q_lora_rank {}, o_groups {} x o_lora_rank {}, sliding_window {}",
                   c.num_attention_heads, c.head_dim, c.nope_head_dim(), c.qk_rope_head_dim,
                   c.num_key_value_heads, c.q_lora_rank, c.o_groups, c.o_lora_rank,
                   c.sliding_window));
  line(fmt::format("indexer: {} heads x {}, index_topk {}", c.index_n_heads, c.index_head_dim,
                   c.index_topk));
  line(fmt::format("moe: {} routed (top {}) + {} shared experts, moe_intermediate_size {}, "
                   "num_hash_layers {}, scoring {}, routed_scaling_factor {}, swiglu_limit {}",
                   c.n_routed_experts, c.num_experts_per_tok, c.n_shared_experts,
                   c.moe_intermediate_size, c.num_hash_layers, c.scoring_func,
                   c.routed_scaling_factor, c.swiglu_limit));
  line(fmt::format("hc: hc_mult {} (M = {}), sinkhorn iters {}, hc_eps {}", c.hc_mult,
                   c.hc_mix(), c.hc_sinkhorn_iters, c.hc_eps));
  line(fmt::format("rope: main theta {}; compress theta {} + {} factor {} "
                   "(original_max_position_embeddings {}, beta_fast {}, beta_slow {})",
                   c.rope_theta, c.compress_rope_theta, c.rope_scaling.type,
                   c.rope_scaling.factor, c.rope_scaling.original_max_position_embeddings,
                   c.rope_scaling.beta_fast, c.rope_scaling.beta_slow));
  std::string q = "absent";
  if (c.quantization_config) {
    const QuantizationConfig& qc = *c.quantization_config;
    q = fmt::format("{} {} {} block [{}]", qc.quant_method, qc.fmt, qc.scale_fmt,
                    fmt::join(qc.weight_block_size, ", "));
  }
  if (c.dspark) {
    const DSparkConfig& d = *c.dspark;
    line(fmt::format("drafter: DSpark, {} stages reading the stream means of layers [{}] "
                     "(main_proj {} -> {}), block size (default gamma) {}, noise token {}, Markov "
                     "rank {} (num_nextn_predict_layers {} is not used)",
                     c.n_dspark_stages(), fmt::join(d.target_layer_ids, ", "),
                     static_cast<int64_t>(d.target_layer_ids.size()) * c.hidden_size,
                     c.hidden_size, d.block_size, d.noise_token_id, d.markov_rank,
                     c.num_nextn_predict_layers));
  } else {
    line(c.num_nextn_predict_layers > 0 ? "drafter: MTP (one layer, model.md §11)" : "drafter: none");
  }
  line(fmt::format("storage: quantization_config {}, expert_dtype {} -> dense matrices {}, "
                   "routed experts {}",
                   q, c.expert_dtype ? *c.expert_dtype : std::string("absent"),
                   storage_form_name(c.dense_storage()), storage_form_name(c.expert_storage())));
}

void schedule_section(const ModelConfig& c, std::string& out) {
  out += "layer schedule:\n";
  out += fmt::format("  {:>5}  {:<10} {:>5}  {:<4} {:<6} {}\n", "layer", "name", "ratio", "attn",
                     "router", "rope");
  for (int l = 0; l < c.n_checkpoint_layers(); ++l) {
    std::string name = layer_prefix(c, l);
    if (!name.empty() && name.back() == '.') name.pop_back();
    const int ratio = c.layer_ratio(l);
    const std::string rope =
        ratio == 0 ? fmt::format("main (theta {}, no YaRN)", c.rope_theta)
                   : fmt::format("compress (theta {} + YaRN)", c.compress_rope_theta);
    std::string role;
    if (c.is_mtp_layer(l)) role = "  MTP";
    if (c.is_dspark_stage(l)) {
      const int s = l - c.num_hidden_layers;
      role = fmt::format("  DSpark stage {}{}{}", s, s == 0 ? ", main_proj" : "",
                         s == c.n_dspark_stages() - 1 ? ", head + Markov + confidence" : "");
    }
    if (c.dspark && l < c.num_hidden_layers &&
        std::find(c.dspark->target_layer_ids.begin(), c.dspark->target_layer_ids.end(), l) !=
            c.dspark->target_layer_ids.end())
      role = "  DSpark target features";
    out += fmt::format("  {:>5}  {:<10} {:>5}  {:<4} {:<6} {}{}\n", l, name, ratio,
                       attention_kind_name(c.attention_kind(l)),
                       l < c.num_hidden_layers && c.is_hash_layer(l) ? "hash" : "score", rope, role);
  }
}

void tensor_section(const SafetensorsSet& files, size_t n_expected, std::string& out) {
  struct Tally {
    int64_t n = 0;
    int64_t bytes = 0;
  };
  std::map<std::string_view, Tally> by_dtype;
  Tally total;
  for (const auto& [name, view] : files.tensors()) {
    Tally& t = by_dtype[dtype_name(view->dtype)];
    ++t.n;
    t.bytes += static_cast<int64_t>(view->n_bytes);
    ++total.n;
    total.bytes += static_cast<int64_t>(view->n_bytes);
  }
  out += fmt::format("tensors: {} in {} file(s), {} ({} bytes); the table expects {}\n", total.n,
                     files.n_files(), bytes_str(total.bytes), total.bytes, n_expected);
  for (const auto& [dtype, t] : by_dtype)
    out += fmt::format("  {:<8} {:>6} tensors  {:>12} bytes  ({})\n", dtype, t.n, t.bytes,
                       bytes_str(t.bytes));
}

}  // namespace

InspectReport inspect_checkpoint(const std::string& dir) {
  InspectReport r;
  std::string& out = r.text;
  out += fmt::format("checkpoint: {}\n", dir);

  Result<ModelConfig> cfg_r = load_config(dir, /*validate_config=*/false);
  if (!cfg_r.ok()) {
    out += fmt::format("config: ERROR {}\n", cfg_r.message());
    out += "result: FAILED\n";
    r.error = cfg_r.message();
    return r;
  }
  const ModelConfig& cfg = cfg_r.value();
  config_section(cfg, out);

  const Status valid = validate(cfg);
  const Status level_a = valid.ok() ? validate_level_a(cfg) : Status::error("skipped");
  if (valid.ok()) {
    schedule_section(cfg, out);
    out += "cache per token of context (packed FP8/FP4 rows vs bf16):\n" + cache_bytes_table(cfg);
  }

  Result<SafetensorsSet> files = SafetensorsSet::open_dir(dir);
  const size_t n_expected = valid.ok() ? expected_tensors(cfg).size() : 0;
  if (files.ok()) tensor_section(files.value(), n_expected, out);

  out += "validation:\n";
  out += fmt::format("  validate: {}\n", valid.ok() ? "ok" : "ERROR " + valid.message());
  const std::string level_a_text =
      level_a.ok() ? "ok" : (valid.ok() ? "not supported: " : "") + level_a.message();
  out += fmt::format("  validate_level_a: {}\n", level_a_text);
  bool loaded = false;
  std::string load_error;
  if (!files.ok()) {
    out += fmt::format("  open: ERROR {}\n", files.message());
  } else if (!valid.ok()) {
    out += "  load_weights: skipped (config invalid)\n";
  } else {
    LoadReport rep;
    Result<Weights> w = load_weights(files.value(), cfg, &rep);
    loaded = w.ok();
    if (loaded) {
      out += fmt::format("  load_weights: ok ({} tensors, {}; {} unexpected, {} warnings, {} BF16 "
                         "in place of FP8/FP4)\n",
                         rep.n_tensors, bytes_str(rep.n_bytes), rep.unexpected.size(),
                         rep.warnings.size(), rep.n_bf16_fallback);
      if (cfg.dspark)
        out += fmt::format("  drafter: DSpark, {} mtp.* tensors, each taken once\n",
                           rep.drafter.size());
    } else {
      out += fmt::format("  load_weights: ERROR {}\n", w.message());
      load_error = w.message();
    }
    for (const std::string& u : rep.unexpected) out += fmt::format("    unexpected: {}\n", u);
    for (const std::string& m : rep.warnings) out += fmt::format("    warning: {}\n", m);
  }
  // Level A is a property of the config, not of the checkpoint's integrity: reported only.
  r.ok = valid.ok() && files.ok() && loaded;
  if (!valid.ok()) r.error = valid.message();
  else if (!files.ok()) r.error = files.message();
  else if (!loaded) r.error = load_error;
  out += fmt::format("result: {}\n", r.ok ? "OK" : "FAILED");
  return r;
}

}  // namespace dsv4
