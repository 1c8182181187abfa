// Model configuration: the Hugging Face config.json of DeepSeek-V4 (checkpoint.md §2) with
// its released field names, derived values as member functions, the presets tiny / tiny2
// (model.md §14.1, §14.1a) and flash (model.md §1.1), and the validation rules of
// model.md §14.2 (math), §0.2 (Level-A block sizes) and runtime.md §6.1 (parallel split).
//
// Layer indexing: main layers l = 0 .. num_hidden_layers-1, then the drafter's layers
// l = num_hidden_layers .. n_checkpoint_layers()-1 (`mtp.{l - num_hidden_layers}.` in the
// checkpoint): the MTP layer (model.md §11), or with the dspark_* fields the NS DSpark stages
// (dspark.md §1; NS = len(compress_ratios) - num_hidden_layers, never num_nextn_predict_layers).
// compress_ratios has one entry per index l: 0 = SWA, 4 = CSA (overlapping, with indexer), any
// other positive value = HCA (non-overlapping).
//
// Storage (checkpoint.md §5.7): quantization_config absent -> every matrix BF16;
// present -> FP8-class matrices FP8 (128x128 ue8m0 scales), routed experts per expert_dtype
// ("fp4": packed e2m1 + 1x32 scales; "fp8" or absent: FP8 128x128). expert_dtype without
// quantization_config is rejected by validate(), naming both fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace dsv4 {

// rope_scaling object of config.json (YaRN; model.md §4.1).
struct RopeScaling {
  std::string type = "yarn";
  double factor = 16.0;
  int64_t original_max_position_embeddings = 65536;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// quantization_config object of config.json (the release: fp8 e4m3, ue8m0, 128x128, dynamic).
struct QuantizationConfig {
  std::string activation_scheme = "dynamic";
  std::string fmt = "e4m3";
  std::string quant_method = "fp8";
  std::string scale_fmt = "ue8m0";
  std::vector<int64_t> weight_block_size = {128, 128};
};

enum class AttentionKind { kSWA, kCSA, kHCA };
std::string_view attention_kind_name(AttentionKind k);  // "SWA" | "CSA" | "HCA"

// How a tensor is stored in the checkpoint. Matrices are kBF16, kFP8 (F8_E4M3 + F8_E8M0
// scale [ceil(O/128), ceil(I/128)]) or kFP4 (I8 [O, I/2] + F8_E8M0 scale [O, I/32]);
// other tensors are kBF16, kF32 or kI64.
enum class StorageForm { kBF16, kF32, kI64, kFP8, kFP4 };
std::string_view storage_form_name(StorageForm f);  // "BF16" | "F32" | "I64" | "FP8" | "FP4"

// The DSpark drafter fields of config.json (dspark.md §1.2); all four or none.
struct DSparkConfig {
  int64_t block_size = 0;             // dspark_block_size: trained γ, the default γ (>= 1)
  int64_t noise_token_id = 0;         // dspark_noise_token_id ν in [0, vocab_size)
  std::vector<int> target_layer_ids;  // dspark_target_layer_ids Lt: strictly ascending, < L
  int64_t markov_rank = 0;            // dspark_markov_rank Rm (>= 1)
};

// Largest DSpark draft block γ (dspark_block_size and every run's --gamma; sizes the drafter's
// attention lists).
constexpr int kMaxDsparkGamma = 64;

// The CSA compression ratio (overlap and indexer are keyed on ratio == 4, model.md §14.2).
constexpr int kCsaRatio = 4;

struct ModelConfig {
  // --- descriptive (optional in config.json; release values as defaults) ---
  std::vector<std::string> architectures = {"DeepseekV4ForCausalLM"};
  std::string model_type = "deepseek_v4";
  bool attention_bias = false;
  double attention_dropout = 0.0;
  double initializer_range = 0.02;
  std::string transformers_version = "4.57.1";
  bool use_cache = true;

  // --- required ---
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 1;
  int64_t head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t q_lora_rank = 0;
  int64_t o_lora_rank = 0;
  int o_groups = 0;
  int64_t sliding_window = 0;
  int64_t moe_intermediate_size = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int num_experts_per_tok = 0;
  int num_hash_layers = 0;
  double routed_scaling_factor = 1.5;
  std::string scoring_func = "sqrtsoftplus";
  bool norm_topk_prob = true;
  std::string topk_method = "noaux_tc";
  double swiglu_limit = 10.0;
  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  int index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  RopeScaling rope_scaling;
  std::vector<int> compress_ratios;  // num_hidden_layers + MTP layers or DSpark stages
  int64_t max_position_embeddings = 0;
  int num_nextn_predict_layers = 1;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  bool tie_word_embeddings = false;
  std::string hidden_act = "silu";
  std::string torch_dtype = "bfloat16";

  // --- optional storage fields (checkpoint.md §5.7) ---
  std::optional<QuantizationConfig> quantization_config;
  std::optional<std::string> expert_dtype;  // "fp4" | "fp8"

  // --- optional drafter fields (dspark.md §1.2): present = a DSpark checkpoint ---
  std::optional<DSparkConfig> dspark;

  // --- derived ---
  int64_t nope_head_dim() const { return head_dim - qk_rope_head_dim; }
  int hc_mix() const { return (2 + hc_mult) * hc_mult; }  // M: rows of hc_attn_fn / hc_ffn_fn
  int64_t hc_dim() const { return hc_mult * hidden_size; }  // N·D: columns of every hc_*_fn
  // MTP layers (model.md §11): num_nextn_predict_layers, 0 in a DSpark checkpoint (where the
  // field is a stale 1, dspark.md §1.2).
  int n_mtp_layers() const { return dspark ? 0 : num_nextn_predict_layers; }
  // DSpark stages NS (dspark.md §1.3): the compress_ratios entries past the main layers.
  int n_dspark_stages() const {
    return dspark ? static_cast<int>(compress_ratios.size()) - num_hidden_layers : 0;
  }
  // Layers that run as target blocks with caches: the main layers and the MTP layer.
  int n_layers_total() const { return num_hidden_layers + n_mtp_layers(); }
  // Every layer of the checkpoint: n_layers_total() plus the DSpark stages.
  int n_checkpoint_layers() const { return n_layers_total() + n_dspark_stages(); }
  bool is_mtp_layer(int l) const { return l >= num_hidden_layers && !dspark; }
  bool is_dspark_stage(int l) const { return l >= num_hidden_layers && dspark.has_value(); }
  int layer_ratio(int l) const;            // compress_ratios[l] (DSV4_CHECK on range)
  AttentionKind attention_kind(int l) const;  // 0 -> SWA, 4 -> CSA, else HCA
  bool is_hash_layer(int l) const { return l < num_hash_layers; }  // MTP: never (validated)
  int64_t heads_per_group() const { return num_attention_heads / o_groups; }
  int64_t wo_a_in() const { return heads_per_group() * head_dim; }  // wo_a [G·Ro, H·Dh/G]
  int64_t wo_b_in() const { return o_groups * o_lora_rank; }        // wo_b [D, G·Ro]
  // Width of one main-compressor projection: 2·head_dim for CSA (overlap), head_dim for HCA.
  int64_t compressor_out(int l) const;
  // Storage of the FP8-class matrices (wq_a, wq_b, wkv, wo_a, wo_b, indexer.wq_b, shared
  // experts, MTP e_proj/h_proj): kFP8 if quantization_config is present, else kBF16.
  StorageForm dense_storage() const;
  // Storage of routed experts: kBF16 without quantization_config; else kFP4 for
  // expert_dtype "fp4", kFP8 for "fp8" or absent (the loader may detect FP4 and warn).
  StorageForm expert_storage() const;
  bool quantized() const { return quantization_config.has_value(); }
  // Why the MTP layer cannot run, for messages: "" when it can.
  std::string no_mtp_reason() const;
};

// Parses config.json text. Structural checks only: a missing required field is an error
// naming it; a present field of the wrong JSON type is an error naming the field and the
// expected and found types; unknown fields are ignored. `source_name` prefixes messages.
Result<ModelConfig> parse_config_json(std::string_view text, const std::string& source_name);
// Reads DIR/config.json and parses it; with `validate_config`, also runs validate().
Result<ModelConfig> load_config(const std::string& dir, bool validate_config = true);
// Every field of checkpoint.md §2 (quantization_config / expert_dtype / dspark_* only when
// present).
nlohmann::json to_config_json(const ModelConfig& cfg);
std::string to_config_json_text(const ModelConfig& cfg);  // pretty-printed, 2-space indent

// Presets: "tiny", "tiny2" (model.md §14.1, §14.1a), "flash" (model.md §1.1, bos 0, eos 1), and
// their DSpark forms (dspark.md §5): "tiny-ds", "tiny-ds-w80" (sliding_window 80), "tiny2-ds",
// "flash-0731" (Flash with the three stages of the 0731 release).
// `quantized` = the released layout (quantization_config + expert_dtype "fp4"); false = the
// BF16 variant (both absent). Unknown name: error naming it.
Result<ModelConfig> preset_config(std::string_view name, bool quantized);

// model.md §14.2 (math validity) plus the supported-value checks (scoring_func, rope type,
// storage fields, ...). The message names the field, its value and the rule violated.
Status validate(const ModelConfig& cfg);
// model.md §0.2 / §14.2 Level A (first runs validate() and returns its error): nope % 64, index_head_dim % 32, and when quantized the
// input dims of FP8/FP4 linears (hidden_size, q_lora_rank, o_groups·o_lora_rank,
// moe_intermediate_size) % 128.
Status validate_level_a(const ModelConfig& cfg);
// The rules of a rank topology (runtime.md §6.1) are model/placement.h's validate_topology.

}  // namespace dsv4
