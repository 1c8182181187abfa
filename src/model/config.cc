// config.json parsing, presets and validation (checkpoint.md §2, §5.7; model.md §1.1, §14).
#include "model/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "io/json_bounded.h"

namespace dsv4 {

using json = nlohmann::json;

std::string_view attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::kSWA: return "SWA";
    case AttentionKind::kCSA: return "CSA";
    case AttentionKind::kHCA: return "HCA";
  }
  return "?";
}

std::string_view storage_form_name(StorageForm f) {
  switch (f) {
    case StorageForm::kBF16: return "BF16";
    case StorageForm::kF32: return "F32";
    case StorageForm::kI64: return "I64";
    case StorageForm::kFP8: return "FP8";
    case StorageForm::kFP4: return "FP4";
  }
  return "?";
}

int ModelConfig::layer_ratio(int l) const {
  DSV4_CHECK(l >= 0 && l < static_cast<int>(compress_ratios.size()), "layer {} of {}", l,
             compress_ratios.size());
  return compress_ratios[l];
}

AttentionKind ModelConfig::attention_kind(int l) const {
  const int r = layer_ratio(l);
  if (r == 0) return AttentionKind::kSWA;
  return r == kCsaRatio ? AttentionKind::kCSA : AttentionKind::kHCA;
}

int64_t ModelConfig::compressor_out(int l) const {
  const int r = layer_ratio(l);
  return r == kCsaRatio ? 2 * head_dim : head_dim;
}

std::string ModelConfig::no_mtp_reason() const {
  if (dspark)
    return "the checkpoint's drafter is DSpark (config.json has the dspark_* fields), not an MTP "
           "layer (dspark.md §1.3)";
  if (num_nextn_predict_layers < 1) return "the checkpoint has no MTP layer (num_nextn_predict_layers = 0)";
  return "";
}

StorageForm ModelConfig::dense_storage() const {
  return quantization_config ? StorageForm::kFP8 : StorageForm::kBF16;
}

StorageForm ModelConfig::expert_storage() const {
  if (!quantization_config) return StorageForm::kBF16;
  if (expert_dtype && *expert_dtype == "fp4") return StorageForm::kFP4;
  return StorageForm::kFP8;
}

// ------------------------------------------------------------------------------------------
// Parsing

namespace {

// Reads fields of one JSON object; the first error is kept and reported.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string prefix, std::string source)
      : obj_(obj), prefix_(std::move(prefix)), source_(std::move(source)) {}

  const Status& status() const { return status_; }

  // Returns the field or nullptr when absent (json null counts as absent for optional
  // fields); records an error when required and absent.
  const json* get(const char* name, bool required) {
    const json* v = required ? json_member(obj_, name) : json_optional(obj_, name);
    if (!v && required) fail(fmt::format("missing required field '{}'", path(name)));
    return v;
  }

  // A boolean, integer (in the range of T), number or string field.
  template <class T>
  void field(const char* name, T& out, bool required = true) {
    if (const json* v = get(name, required)) read(path(name), *v, out);
  }

  // An array of integers or of strings.
  template <class T>
  void array(const char* name, std::vector<T>& out, bool required = true) {
    const json* v = get(name, required);
    if (!v) return;
    if (!v->is_array())
      return wrong_type(path(name), fmt::format("array of {}s", json_type_name(json_type_of<T>())), *v);
    std::vector<T> r(v->size());
    for (size_t i = 0; i < v->size(); ++i)
      if (!read(fmt::format("{}[{}]", path(name), i), (*v)[i], r[i])) return;
    out = std::move(r);
  }

  // Returns the nested object or nullptr (absent optional / error recorded).
  const json* object(const char* name, bool required) {
    const json* v = get(name, required);
    if (!v) return nullptr;
    if (!v->is_object()) {
      wrong_type(path(name), "object", *v);
      return nullptr;
    }
    return v;
  }

  // Reads the nested object `name` with read(FieldReader&) (its errors name "name.field");
  // false when it is absent (optional) or not an object.
  template <class Read>
  bool nested(const char* name, bool required, Read&& read) {
    const json* v = object(name, required);
    if (!v) return false;
    FieldReader inner(*v, path(name), source_);
    read(inner);
    merge(inner.status());
    return true;
  }

  std::string path(const char* name) const { return json_path(prefix_, name); }
  void fail(std::string msg) {
    if (status_.ok()) status_ = Status::error(source_ + ": " + msg);
  }
  void merge(const Status& st) {
    if (status_.ok()) status_ = st;
  }

 private:
  template <class T>
  bool read(const std::string& where, const json& v, T& out) {
    switch (json_read(v, out)) {
      case JsonRead::kOk: return true;
      case JsonRead::kWrongType: wrong_type(where, json_type_name(json_type_of<T>()), v); break;
      case JsonRead::kOutOfRange: fail(fmt::format("field '{}' = {} is out of range", where, v.dump())); break;
    }
    return false;
  }
  void wrong_type(const std::string& where, std::string_view want, const json& v) {
    fail(fmt::format("field '{}': expected {}, found {}", where, want,
                     v.is_number_float() ? "number (non-integer)" : json_kind(v)));
  }

  const json& obj_;
  std::string prefix_;
  std::string source_;
  Status status_;
};

// Optional fields that describe the checkpoint and do not change the model.
void read_descriptive_fields(FieldReader& r, ModelConfig& c) {
  r.array("architectures", c.architectures, false);
  r.field("model_type", c.model_type, false);
  r.field("attention_bias", c.attention_bias, false);
  r.field("attention_dropout", c.attention_dropout, false);
  r.field("initializer_range", c.initializer_range, false);
  r.field("transformers_version", c.transformers_version, false);
  r.field("use_cache", c.use_cache, false);
}

// Required fields: the architecture's sizes and constants.
void read_model_fields(FieldReader& r, ModelConfig& c) {
  r.field("vocab_size", c.vocab_size);
  r.field("hidden_size", c.hidden_size);
  r.field("num_hidden_layers", c.num_hidden_layers);
  r.field("num_attention_heads", c.num_attention_heads);
  r.field("num_key_value_heads", c.num_key_value_heads);
  r.field("head_dim", c.head_dim);
  r.field("qk_rope_head_dim", c.qk_rope_head_dim);
  r.field("q_lora_rank", c.q_lora_rank);
  r.field("o_lora_rank", c.o_lora_rank);
  r.field("o_groups", c.o_groups);
  r.field("sliding_window", c.sliding_window);
  r.field("moe_intermediate_size", c.moe_intermediate_size);
  r.field("n_routed_experts", c.n_routed_experts);
  r.field("n_shared_experts", c.n_shared_experts);
  r.field("num_experts_per_tok", c.num_experts_per_tok);
  r.field("num_hash_layers", c.num_hash_layers);
  r.field("routed_scaling_factor", c.routed_scaling_factor);
  r.field("scoring_func", c.scoring_func);
  r.field("norm_topk_prob", c.norm_topk_prob);
  r.field("topk_method", c.topk_method);
  r.field("swiglu_limit", c.swiglu_limit);
  r.field("hc_mult", c.hc_mult);
  r.field("hc_sinkhorn_iters", c.hc_sinkhorn_iters);
  r.field("hc_eps", c.hc_eps);
  r.field("rms_norm_eps", c.rms_norm_eps);
  r.field("index_n_heads", c.index_n_heads);
  r.field("index_head_dim", c.index_head_dim);
  r.field("index_topk", c.index_topk);
  r.field("rope_theta", c.rope_theta);
  r.field("compress_rope_theta", c.compress_rope_theta);
}

void read_rope_scaling(FieldReader& r, ModelConfig& c) {
  r.nested("rope_scaling", true, [&](FieldReader& s) {
    s.field("type", c.rope_scaling.type);
    s.field("factor", c.rope_scaling.factor);
    s.field("original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings);
    s.field("beta_fast", c.rope_scaling.beta_fast);
    s.field("beta_slow", c.rope_scaling.beta_slow);
  });
}

// Required fields after rope_scaling: the layer schedule, token ids, activation and dtype.
void read_schedule_fields(FieldReader& r, ModelConfig& c) {
  r.array("compress_ratios", c.compress_ratios);
  r.field("max_position_embeddings", c.max_position_embeddings);
  r.field("num_nextn_predict_layers", c.num_nextn_predict_layers);
  r.field("bos_token_id", c.bos_token_id);
  r.field("eos_token_id", c.eos_token_id);
  r.field("tie_word_embeddings", c.tie_word_embeddings);
  r.field("hidden_act", c.hidden_act);
  r.field("torch_dtype", c.torch_dtype);
}

// Optional storage fields: quantization_config and expert_dtype (checkpoint.md §5.7).
void read_storage_fields(FieldReader& r, ModelConfig& c) {
  QuantizationConfig qc;
  const bool quantized = r.nested("quantization_config", false, [&](FieldReader& s) {
    s.field("activation_scheme", qc.activation_scheme);
    s.field("fmt", qc.fmt);
    s.field("quant_method", qc.quant_method);
    s.field("scale_fmt", qc.scale_fmt);
    s.array("weight_block_size", qc.weight_block_size);
  });
  if (quantized) c.quantization_config = std::move(qc);
  if (r.get("expert_dtype", false)) {
    std::string ed;
    r.field("expert_dtype", ed, false);
    c.expert_dtype = ed;
  }
}

// DSpark drafter fields (dspark.md §1.2): all four or none.
void read_dspark_fields(FieldReader& r, ModelConfig& c) {
  static constexpr const char* kDsparkFields[] = {"dspark_block_size", "dspark_noise_token_id",
                                                  "dspark_target_layer_ids", "dspark_markov_rank"};
  std::vector<std::string> present, absent;
  for (const char* f : kDsparkFields) (r.get(f, false) ? present : absent).push_back(f);
  if (!present.empty() && !absent.empty())
    r.fail(fmt::format("{} missing: a DSpark checkpoint has all four dspark_* fields (found {})",
                       fmt::join(absent, ", "), fmt::join(present, ", ")));
  if (!absent.empty()) return;
  DSparkConfig d;
  r.field("dspark_block_size", d.block_size);
  r.field("dspark_noise_token_id", d.noise_token_id);
  r.array("dspark_target_layer_ids", d.target_layer_ids);
  r.field("dspark_markov_rank", d.markov_rank);
  c.dspark = std::move(d);
}

}  // namespace

Result<ModelConfig> parse_config_json(std::string_view text, const std::string& source_name) {
  std::string parser_message;
  Result<json> parsed = parse_json_bounded(text, kMaxJsonDepth, &parser_message);
  if (!parsed.ok())
    return Status::errorf("{}: invalid JSON: {}", source_name,
                          parser_message.empty() ? parsed.message() : parser_message);
  const json& j = *parsed;
  if (!j.is_object())
    return Status::errorf("{}: top level must be a JSON object, found {}", source_name,
                          j.type_name());
  ModelConfig c;
  FieldReader r(j, "", source_name);
  read_descriptive_fields(r, c);
  read_model_fields(r, c);
  read_rope_scaling(r, c);
  read_schedule_fields(r, c);
  read_storage_fields(r, c);
  read_dspark_fields(r, c);
  if (!r.status().ok()) return r.status();
  return c;
}

Result<ModelConfig> load_config(const std::string& dir, bool validate_config) {
  const std::string path = dir + "/config.json";
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::errorf("{}: cannot open (is {} a checkpoint directory?)", path, dir);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Status::errorf("{}: read error", path);
  auto cfg = parse_config_json(ss.str(), path);
  if (!cfg.ok()) return cfg;
  if (validate_config) DSV4_RETURN_IF_ERROR(validate(*cfg).with_context(path));
  return cfg;
}

// ------------------------------------------------------------------------------------------
// Writing

namespace {
// Integral values of fields that the release writes as integers are written as integers.
json num_out(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15)
    return json(static_cast<int64_t>(v));
  return json(v);
}
}  // namespace

json to_config_json(const ModelConfig& c) {
  json j;
  j["architectures"] = c.architectures;
  j["model_type"] = c.model_type;
  j["attention_bias"] = c.attention_bias;
  j["attention_dropout"] = c.attention_dropout;
  j["initializer_range"] = c.initializer_range;
  j["transformers_version"] = c.transformers_version;
  j["use_cache"] = c.use_cache;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["q_lora_rank"] = c.q_lora_rank;
  j["o_lora_rank"] = c.o_lora_rank;
  j["o_groups"] = c.o_groups;
  j["sliding_window"] = c.sliding_window;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["num_hash_layers"] = c.num_hash_layers;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["scoring_func"] = c.scoring_func;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["topk_method"] = c.topk_method;
  j["swiglu_limit"] = c.swiglu_limit;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["rope_theta"] = num_out(c.rope_theta);
  j["compress_rope_theta"] = num_out(c.compress_rope_theta);
  j["rope_scaling"] = json{{"type", c.rope_scaling.type},
                           {"factor", num_out(c.rope_scaling.factor)},
                           {"original_max_position_embeddings",
                            c.rope_scaling.original_max_position_embeddings},
                           {"beta_fast", num_out(c.rope_scaling.beta_fast)},
                           {"beta_slow", num_out(c.rope_scaling.beta_slow)}};
  j["compress_ratios"] = c.compress_ratios;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["hidden_act"] = c.hidden_act;
  j["torch_dtype"] = c.torch_dtype;
  if (c.quantization_config) {
    const auto& q = *c.quantization_config;
    j["quantization_config"] = json{{"activation_scheme", q.activation_scheme},
                                    {"fmt", q.fmt},
                                    {"quant_method", q.quant_method},
                                    {"scale_fmt", q.scale_fmt},
                                    {"weight_block_size", q.weight_block_size}};
  }
  if (c.expert_dtype) j["expert_dtype"] = *c.expert_dtype;
  if (c.dspark) {
    j["dspark_block_size"] = c.dspark->block_size;
    j["dspark_noise_token_id"] = c.dspark->noise_token_id;
    j["dspark_target_layer_ids"] = c.dspark->target_layer_ids;
    j["dspark_markov_rank"] = c.dspark->markov_rank;
  }
  return j;
}

std::string to_config_json_text(const ModelConfig& cfg) { return to_config_json(cfg).dump(2) + "\n"; }

// ------------------------------------------------------------------------------------------
// Presets

namespace {

ModelConfig flash_base() {
  ModelConfig c;
  c.vocab_size = 129280;
  c.hidden_size = 4096;
  c.num_hidden_layers = 43;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 1;
  c.head_dim = 512;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 1024;
  c.o_lora_rank = 1024;
  c.o_groups = 8;
  c.sliding_window = 128;
  c.moe_intermediate_size = 2048;
  c.n_routed_experts = 256;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 6;
  c.num_hash_layers = 3;
  c.routed_scaling_factor = 1.5;
  c.scoring_func = "sqrtsoftplus";
  c.norm_topk_prob = true;
  c.topk_method = "noaux_tc";
  c.swiglu_limit = 10.0;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.rms_norm_eps = 1e-6;
  c.index_n_heads = 64;
  c.index_head_dim = 128;
  c.index_topk = 512;
  c.rope_theta = 10000;
  c.compress_rope_theta = 160000;
  c.rope_scaling = RopeScaling{"yarn", 16, 65536, 32, 1};
  c.compress_ratios.assign(44, 0);
  for (int l = 2; l < 43; ++l) c.compress_ratios[l] = (l % 2 == 0) ? 4 : 128;
  c.max_position_embeddings = 1048576;
  c.num_nextn_predict_layers = 1;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  c.tie_word_embeddings = false;
  c.hidden_act = "silu";
  c.torch_dtype = "bfloat16";
  return c;
}

// Fields common to tiny and tiny2 (model.md §14.1, §14.1a).
ModelConfig tiny_common() {
  ModelConfig c = flash_base();
  c.vocab_size = 512;
  c.num_hidden_layers = 4;
  c.num_hash_layers = 2;
  c.num_attention_heads = 4;
  c.o_groups = 4;
  c.o_lora_rank = 128;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.n_shared_experts = 1;
  c.max_position_embeddings = 1024;
  c.num_nextn_predict_layers = 1;
  return c;
}

}  // namespace

Result<ModelConfig> preset_config(std::string_view name, bool quantized) {
  // DSpark forms (dspark.md §5): the base preset with its MTP entry replaced by three stages.
  struct DsForm {
    std::string_view name, base;
    int64_t window;  // 0: the base's
  };
  static constexpr DsForm kDsForms[] = {
      {"tiny-ds", "tiny", 0}, {"tiny-ds-w80", "tiny", 80}, {"tiny2-ds", "tiny2", 0},
      {"flash-0731", "flash", 0}};
  for (const DsForm& f : kDsForms) {
    if (name != f.name) continue;
    const std::string_view base = f.base;
    Result<ModelConfig> r = preset_config(base, quantized);
    if (!r.ok()) return r.status();
    ModelConfig c = std::move(r.value());
    const int L = c.num_hidden_layers;
    c.compress_ratios.resize(static_cast<size_t>(L));
    c.compress_ratios.insert(c.compress_ratios.end(), 3, 0);
    c.num_nextn_predict_layers = 1;  // stale, as in the release
    DSparkConfig d;
    d.block_size = 5;
    d.noise_token_id = base == "flash" ? 128799 : c.vocab_size - 1;
    d.target_layer_ids = base == "flash" ? std::vector<int>{40, 41, 42} : std::vector<int>{L - 3, L - 2, L - 1};
    d.markov_rank = base == "flash" ? 256 : 48;
    c.dspark = std::move(d);
    if (f.window) c.sliding_window = f.window;
    return c;
  }
  ModelConfig c;
  if (name == "flash") {
    c = flash_base();
  } else if (name == "tiny") {
    c = tiny_common();
    c.hidden_size = 128;
    c.compress_ratios = {0, 4, 8, 4, 0};
    c.head_dim = 80;
    c.qk_rope_head_dim = 16;
    c.q_lora_rank = 128;
    c.sliding_window = 8;
    c.index_n_heads = 2;
    c.index_head_dim = 32;
    c.index_topk = 4;
    c.moe_intermediate_size = 128;
    c.swiglu_limit = 1.0;
  } else if (name == "tiny2") {
    c = tiny_common();
    c.hidden_size = 256;
    c.compress_ratios = {0, 4, 128, 4, 0};
    c.head_dim = 192;
    c.qk_rope_head_dim = 64;
    c.q_lora_rank = 256;
    c.sliding_window = 16;
    c.index_n_heads = 4;
    c.index_head_dim = 128;
    c.index_topk = 8;
    c.moe_intermediate_size = 256;
    c.swiglu_limit = 2.0;
  } else {
    return Status::errorf("unknown preset '{}' (known: tiny, tiny2, flash, tiny-ds, tiny-ds-w80, "
                          "tiny2-ds, flash-0731)",
                          name);
  }
  if (quantized) {
    c.quantization_config = QuantizationConfig{};
    c.expert_dtype = "fp4";
  }
  return c;
}

// ------------------------------------------------------------------------------------------
// Validation

namespace {

// Sanity bounds on sizes so that every shape product in the tensor table fits in int64.
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 512;
constexpr int64_t kMaxHeads = 1 << 16;
constexpr int64_t kMaxExperts = 1024;  // bounds the table (layers x experts x 6 entries)
constexpr int64_t kMaxDsparkStages = 16;

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

class Collector {
 public:
  template <class... Args>
  void add(fmt::format_string<Args...> f, Args&&... args) {
    msgs_.push_back(fmt::format(f, std::forward<Args>(args)...));
  }
  void positive(const char* field, int64_t v, int64_t max) {
    if (v <= 0) add("field '{}' = {} must be positive", field, v);
    else if (v > max) add("field '{}' = {} exceeds the supported maximum {}", field, v, max);
  }
  void equals(const char* field, const std::string& v, const char* want) {
    if (v != want) add("field '{}' = \"{}\" is not supported (must be \"{}\")", field, v, want);
  }
  Status status(const char* what) const {
    if (msgs_.empty()) return Status();
    std::string m = fmt::format("invalid {}: ", what);
    for (size_t i = 0; i < msgs_.size(); ++i) m += (i ? "; " : "") + msgs_[i];
    return Status::error(m);
  }

 private:
  std::vector<std::string> msgs_;
};

}  // namespace

namespace {

// Every size is positive and bounded.
void check_sizes(const ModelConfig& c, Collector& e) {
  e.positive("vocab_size", c.vocab_size, kMaxDim);
  e.positive("hidden_size", c.hidden_size, kMaxDim);
  e.positive("num_hidden_layers", c.num_hidden_layers, kMaxLayers);
  e.positive("num_attention_heads", c.num_attention_heads, kMaxHeads);
  e.positive("head_dim", c.head_dim, kMaxHeads);
  e.positive("qk_rope_head_dim", c.qk_rope_head_dim, kMaxHeads);
  e.positive("q_lora_rank", c.q_lora_rank, kMaxDim);
  e.positive("o_lora_rank", c.o_lora_rank, kMaxDim);
  e.positive("o_groups", c.o_groups, kMaxHeads);
  e.positive("sliding_window", c.sliding_window, kMaxDim);
  e.positive("moe_intermediate_size", c.moe_intermediate_size, kMaxDim);
  e.positive("n_routed_experts", c.n_routed_experts, kMaxExperts);
  e.positive("num_experts_per_tok", c.num_experts_per_tok, kMaxHeads);
  e.positive("index_n_heads", c.index_n_heads, kMaxHeads);
  e.positive("index_head_dim", c.index_head_dim, kMaxHeads);
  e.positive("index_topk", c.index_topk, kMaxDim);
  e.positive("max_position_embeddings", c.max_position_embeddings, int64_t{1} << 40);
  e.positive("hc_sinkhorn_iters", c.hc_sinkhorn_iters, 1 << 16);
  e.positive("rope_scaling.original_max_position_embeddings",
             c.rope_scaling.original_max_position_embeddings, int64_t{1} << 40);
}

// The relations the shapes need (one K=V head, RoPE pairs, Hadamard, groups, top-k).
void check_shapes(const ModelConfig& c, Collector& e) {
  if (c.num_key_value_heads != 1)
    e.add("field 'num_key_value_heads' = {} is not supported (must be 1: one shared K=V head)",
          c.num_key_value_heads);
  if (c.n_shared_experts != 1)
    e.add("field 'n_shared_experts' = {} is not supported (must be 1)", c.n_shared_experts);
  if (c.head_dim > 0 && c.qk_rope_head_dim > 0 && c.head_dim <= c.qk_rope_head_dim)
    e.add("field 'head_dim' = {} must exceed qk_rope_head_dim = {} (head_dim = nope + "
          "qk_rope_head_dim with nope > 0)",
          c.head_dim, c.qk_rope_head_dim);
  if (c.qk_rope_head_dim > 0 && c.qk_rope_head_dim % 2 != 0)
    e.add("field 'qk_rope_head_dim' = {} must be even (RoPE rotates pairs)", c.qk_rope_head_dim);
  if (c.index_head_dim > 0 && c.qk_rope_head_dim > 0 && c.index_head_dim <= c.qk_rope_head_dim)
    e.add("field 'index_head_dim' = {} must exceed qk_rope_head_dim = {} (RoPE acts on its "
          "last qk_rope_head_dim dims)",
          c.index_head_dim, c.qk_rope_head_dim);
  if (c.index_head_dim > 0 && !is_pow2(c.index_head_dim))
    e.add("field 'index_head_dim' = {} must be a power of two (Sylvester Hadamard)",
          c.index_head_dim);
  if (c.num_attention_heads > 0 && c.o_groups > 0 && c.num_attention_heads % c.o_groups != 0)
    e.add("field 'num_attention_heads' = {} must be divisible by o_groups = {}",
          c.num_attention_heads, c.o_groups);
  if (c.n_routed_experts > 0 && c.num_experts_per_tok > c.n_routed_experts)
    e.add("field 'num_experts_per_tok' = {} must not exceed n_routed_experts = {}",
          c.num_experts_per_tok, c.n_routed_experts);
  if (c.num_hash_layers < 0 || c.num_hash_layers > c.num_hidden_layers)
    e.add("field 'num_hash_layers' = {} must lie in [0, num_hidden_layers = {}]",
          c.num_hash_layers, c.num_hidden_layers);
  if (c.hc_mult < 1 || c.hc_mult > 64)
    e.add("field 'hc_mult' = {} must lie in [1, 64]", c.hc_mult);
  if (c.num_nextn_predict_layers < 0 || c.num_nextn_predict_layers > 1)
    e.add("field 'num_nextn_predict_layers' = {} is not supported (must be 0 or 1)",
          c.num_nextn_predict_layers);
}

// Layer schedule: main layers, then the MTP layer or the DSpark stages (all SWA).
void check_layer_schedule(const ModelConfig& c, Collector& e) {
  const int64_t n_ratios = static_cast<int64_t>(c.compress_ratios.size());
  if (c.dspark) {
    if (n_ratios <= c.num_hidden_layers || n_ratios > c.num_hidden_layers + kMaxDsparkStages)
      e.add("field 'compress_ratios' has {} entries: a DSpark checkpoint has num_hidden_layers = "
            "{} entries plus one per stage, 1 to {} stages (dspark.md §1.3)",
            n_ratios, c.num_hidden_layers, kMaxDsparkStages);
  } else if (n_ratios != int64_t{c.num_hidden_layers} + c.num_nextn_predict_layers) {
    e.add("field 'compress_ratios' has {} entries, must have num_hidden_layers + "
          "num_nextn_predict_layers = {} + {} = {}",
          n_ratios, c.num_hidden_layers, c.num_nextn_predict_layers,
          int64_t{c.num_hidden_layers} + c.num_nextn_predict_layers);
  }
  for (int64_t l = 0; l < n_ratios; ++l) {
    const int r = c.compress_ratios[l];
    if (r < 0 || r > kMaxDim)
      e.add("field 'compress_ratios[{}]' = {} must be 0 (SWA), 4 (CSA) or another positive "
            "ratio (HCA) up to {}",
            l, r, kMaxDim);
    else if (l >= c.num_hidden_layers && r != 0)
      e.add("field 'compress_ratios[{}]' = {} must be 0: the {} is a sliding-window layer", l, r,
            c.dspark ? fmt::format("DSpark stage {}", l - c.num_hidden_layers)
                     : std::string("MTP layer"));
  }
}

// The DSpark drafter fields (dspark.md §1.2).
void check_dspark(const ModelConfig& c, Collector& e) {
  if (!c.dspark) return;
  const DSparkConfig& d = *c.dspark;
  if (d.block_size < 1 || d.block_size > kMaxDsparkGamma)
    e.add("field 'dspark_block_size' = {} must lie in [1, {}]", d.block_size, kMaxDsparkGamma);
  if (d.noise_token_id < 0 || d.noise_token_id >= c.vocab_size)
    e.add("field 'dspark_noise_token_id' = {} must lie in [0, vocab_size = {})",
          d.noise_token_id, c.vocab_size);
  if (d.markov_rank < 1 || d.markov_rank > kMaxDim)
    e.add("field 'dspark_markov_rank' = {} must lie in [1, {}]", d.markov_rank, kMaxDim);
  if (d.target_layer_ids.empty())
    e.add("field 'dspark_target_layer_ids' is empty (the drafter reads at least one layer)");
  for (size_t i = 0; i < d.target_layer_ids.size(); ++i) {
    const int l = d.target_layer_ids[i];
    if (l < 0 || l >= c.num_hidden_layers)
      e.add("field 'dspark_target_layer_ids[{}]' = {} must lie in [0, num_hidden_layers = {})",
            i, l, c.num_hidden_layers);
    else if (i > 0 && l <= d.target_layer_ids[i - 1]) {
      e.add("field 'dspark_target_layer_ids' = [{}] must be strictly ascending (dspark.md §1.2)",
            fmt::join(d.target_layer_ids, ", "));
      break;
    }
  }
}

// The one supported value of each choice.
void check_supported_values(const ModelConfig& c, Collector& e) {
  e.equals("scoring_func", c.scoring_func, "sqrtsoftplus");
  e.equals("topk_method", c.topk_method, "noaux_tc");
  e.equals("hidden_act", c.hidden_act, "silu");
  e.equals("torch_dtype", c.torch_dtype, "bfloat16");
  e.equals("model_type", c.model_type, "deepseek_v4");
  e.equals("rope_scaling.type", c.rope_scaling.type, "yarn");
  if (!c.norm_topk_prob)
    e.add("field 'norm_topk_prob' = false is not supported (must be true)");
  if (c.tie_word_embeddings)
    e.add("field 'tie_word_embeddings' = true is not supported (the model has its own "
          "head.weight)");
  if (c.attention_bias) e.add("field 'attention_bias' = true is not supported (must be false)");
}

// Real-valued fields.
void check_real_fields(const ModelConfig& c, Collector& e) {
  auto finite_pos = [&](const char* f, double v) {
    if (!(std::isfinite(v) && v > 0)) e.add("field '{}' = {} must be finite and positive", f, v);
  };
  finite_pos("rms_norm_eps", c.rms_norm_eps);
  finite_pos("hc_eps", c.hc_eps);
  finite_pos("routed_scaling_factor", c.routed_scaling_factor);
  finite_pos("rope_scaling.factor", c.rope_scaling.factor);
  finite_pos("rope_scaling.beta_fast", c.rope_scaling.beta_fast);
  finite_pos("rope_scaling.beta_slow", c.rope_scaling.beta_slow);
  if (!std::isfinite(c.swiglu_limit))
    e.add("field 'swiglu_limit' = {} must be finite (<= 0 disables the clamp)", c.swiglu_limit);
  if (!(std::isfinite(c.rope_theta) && c.rope_theta > 1))
    e.add("field 'rope_theta' = {} must be finite and > 1", c.rope_theta);
  if (!(std::isfinite(c.compress_rope_theta) && c.compress_rope_theta > 1))
    e.add("field 'compress_rope_theta' = {} must be finite and > 1", c.compress_rope_theta);
  if (c.rope_scaling.beta_fast < c.rope_scaling.beta_slow)
    e.add("field 'rope_scaling.beta_fast' = {} must be >= rope_scaling.beta_slow = {}",
          c.rope_scaling.beta_fast, c.rope_scaling.beta_slow);
}

// bos / eos inside the vocabulary.
void check_token_ids(const ModelConfig& c, Collector& e) {
  if (c.vocab_size > 0) {
    if (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size)
      e.add("field 'bos_token_id' = {} must lie in [0, vocab_size = {})", c.bos_token_id,
            c.vocab_size);
    if (c.eos_token_id < 0 || c.eos_token_id >= c.vocab_size)
      e.add("field 'eos_token_id' = {} must lie in [0, vocab_size = {})", c.eos_token_id,
            c.vocab_size);
  }
}

// Storage fields (checkpoint.md §5.7).
void check_storage(const ModelConfig& c, Collector& e) {
  if (c.expert_dtype && !c.quantization_config)
    e.add("field 'expert_dtype' = \"{}\" is present but 'quantization_config' is absent: "
          "rejected (an unquantized checkpoint has neither field)",
          *c.expert_dtype);
  if (c.expert_dtype && *c.expert_dtype != "fp4" && *c.expert_dtype != "fp8")
    e.add("field 'expert_dtype' = \"{}\" is not supported (must be \"fp4\" or \"fp8\")",
          *c.expert_dtype);
  if (c.quantization_config) {
    const auto& q = *c.quantization_config;
    e.equals("quantization_config.quant_method", q.quant_method, "fp8");
    e.equals("quantization_config.fmt", q.fmt, "e4m3");
    e.equals("quantization_config.scale_fmt", q.scale_fmt, "ue8m0");
    e.equals("quantization_config.activation_scheme", q.activation_scheme, "dynamic");
    if (q.weight_block_size != std::vector<int64_t>{128, 128})
      e.add("field 'quantization_config.weight_block_size' = [{}] is not supported (must be "
            "[128, 128])",
            fmt::join(q.weight_block_size, ", "));
  }
  if (c.expert_storage() == StorageForm::kFP4) {
    if (c.hidden_size > 0 && c.hidden_size % 32 != 0)
      e.add("field 'hidden_size' = {} must be a multiple of 32 (input dim of FP4 experts w1/w3, "
            "expert_dtype \"fp4\")",
            c.hidden_size);
    if (c.moe_intermediate_size > 0 && c.moe_intermediate_size % 32 != 0)
      e.add("field 'moe_intermediate_size' = {} must be a multiple of 32 (input dim of FP4 "
            "experts w2, expert_dtype \"fp4\")",
            c.moe_intermediate_size);
  }
}

}  // namespace

Status validate(const ModelConfig& c) {
  Collector e;
  check_sizes(c, e);
  check_shapes(c, e);
  check_layer_schedule(c, e);
  check_dspark(c, e);
  check_supported_values(c, e);
  check_real_fields(c, e);
  check_token_ids(c, e);
  check_storage(c, e);
  return e.status("config");
}

Status validate_level_a(const ModelConfig& c) {
  DSV4_RETURN_IF_ERROR(validate(c));  // the Level-A rules presuppose a valid config
  Collector e;
  if (c.nope_head_dim() % 64 != 0)
    e.add("head_dim - qk_rope_head_dim = {} - {} = {} must be a multiple of 64 (fp8sim_64 "
          "block of the KV nope dims, model.md §0.2)",
          c.head_dim, c.qk_rope_head_dim, c.nope_head_dim());
  if (c.index_head_dim % 32 != 0)
    e.add("field 'index_head_dim' = {} must be a multiple of 32 (fp4sim_32 block, model.md §0.2)",
          c.index_head_dim);
  if (c.quantized()) {
    auto blk = [&](const char* field, int64_t v, const char* linears) {
      if (v % 128 != 0)
        e.add("field '{}' = {} must be a multiple of 128 (actq block on the input of the "
              "FP8/FP4 linears {}, model.md §0.2)",
              field, v, linears);
    };
    blk("hidden_size", c.hidden_size, "wq_a, wkv, shared/routed w1, w3, e_proj, h_proj");
    blk("q_lora_rank", c.q_lora_rank, "wq_b, indexer.wq_b");
    if (c.wo_b_in() % 128 != 0)
      e.add("o_groups * o_lora_rank = {} * {} = {} must be a multiple of 128 (actq block on "
            "the wo_b input, model.md §0.2)",
            c.o_groups, c.o_lora_rank, c.wo_b_in());
    blk("moe_intermediate_size", c.moe_intermediate_size, "shared/routed w2");
  }
  return e.status("config for Level A");
}

}  // namespace dsv4
