// ModelConfig: parsing of the released Flash config.json, presets, validation rules
// (model.md §14.2, §0.2; runtime.md §6.1) and the storage table of checkpoint.md §5.7.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/placement.h"
#include "support/contains.h"

namespace dsv4 {
namespace {

using json = nlohmann::json;
// Message check: `text` contains `part`.
using test::Contains;

// config.json of deepseek-ai/DeepSeek-V4-Flash as released (checkpoint.md §2), including the
// descriptive fields the engine ignores and one unknown extra field.
constexpr const char* kFlashConfigJson = R"({
  "architectures": ["DeepseekV4ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 0,
  "compress_ratios": [0, 0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                      4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                      4, 128, 4, 128, 4, 128, 4, 0],
  "compress_rope_theta": 160000,
  "eos_token_id": 1,
  "expert_dtype": "fp4",
  "hc_eps": 1e-06,
  "hc_mult": 4,
  "hc_sinkhorn_iters": 20,
  "head_dim": 512,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "index_head_dim": 128,
  "index_n_heads": 64,
  "index_topk": 512,
  "initializer_range": 0.02,
  "max_position_embeddings": 1048576,
  "model_type": "deepseek_v4",
  "moe_intermediate_size": 2048,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "norm_topk_prob": true,
  "num_attention_heads": 64,
  "num_experts_per_tok": 6,
  "num_hash_layers": 3,
  "num_hidden_layers": 43,
  "num_key_value_heads": 1,
  "num_nextn_predict_layers": 1,
  "o_groups": 8,
  "o_lora_rank": 1024,
  "q_lora_rank": 1024,
  "qk_rope_head_dim": 64,
  "quantization_config": {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "scale_fmt": "ue8m0",
    "weight_block_size": [128, 128]
  },
  "rms_norm_eps": 1e-06,
  "rope_scaling": {
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 16,
    "original_max_position_embeddings": 65536,
    "type": "yarn"
  },
  "rope_theta": 10000,
  "routed_scaling_factor": 1.5,
  "scoring_func": "sqrtsoftplus",
  "sliding_window": 128,
  "swiglu_limit": 10.0,
  "tie_word_embeddings": false,
  "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16",
  "transformers_version": "4.57.1",
  "use_cache": true,
  "vocab_size": 129280,
  "some_future_field": {"nested": [1, 2, 3]}
})";

ModelConfig parse_ok(const std::string& text) {
  auto r = parse_config_json(text, "config.json");
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : ModelConfig{};
}

std::string parse_error(const json& j) {
  auto r = parse_config_json(j.dump(), "cfg.json");
  EXPECT_FALSE(r.ok());
  return r.message();
}

TEST(Config, ParsesReleasedFlashConfig) {
  const ModelConfig c = parse_ok(kFlashConfigJson);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 43);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.num_key_value_heads, 1);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.num_hash_layers, 3);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.scoring_func, "sqrtsoftplus");
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.topk_method, "noaux_tc");
  EXPECT_DOUBLE_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(c.hc_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_DOUBLE_EQ(c.compress_rope_theta, 160000);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 16);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 65536);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_DOUBLE_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.model_type, "deepseek_v4");
  ASSERT_EQ(c.architectures.size(), 1u);
  EXPECT_EQ(c.architectures[0], "DeepseekV4ForCausalLM");
  ASSERT_TRUE(c.quantization_config.has_value());
  EXPECT_EQ(c.quantization_config->quant_method, "fp8");
  EXPECT_EQ(c.quantization_config->fmt, "e4m3");
  EXPECT_EQ(c.quantization_config->scale_fmt, "ue8m0");
  EXPECT_EQ(c.quantization_config->activation_scheme, "dynamic");
  EXPECT_EQ(c.quantization_config->weight_block_size, (std::vector<int64_t>{128, 128}));
  ASSERT_TRUE(c.expert_dtype.has_value());
  EXPECT_EQ(*c.expert_dtype, "fp4");
  EXPECT_TRUE(validate(c).ok()) << validate(c).message();
  EXPECT_TRUE(validate_level_a(c).ok()) << validate_level_a(c).message();
}

TEST(Config, DerivedValuesAndSchedule) {
  const ModelConfig c = parse_ok(kFlashConfigJson);
  EXPECT_EQ(c.nope_head_dim(), 448);
  EXPECT_EQ(c.hc_mix(), 24);
  EXPECT_EQ(c.hc_dim(), 16384);
  EXPECT_EQ(c.n_layers_total(), 44);
  EXPECT_EQ(c.wo_a_in(), 4096);
  EXPECT_EQ(c.wo_b_in(), 8192);
  int n_swa = 0, n_csa = 0, n_hca = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    switch (c.attention_kind(l)) {
      case AttentionKind::kSWA: ++n_swa; break;
      case AttentionKind::kCSA: ++n_csa; EXPECT_EQ(l % 2, 0) << l; break;
      case AttentionKind::kHCA: ++n_hca; EXPECT_EQ(l % 2, 1) << l; break;
    }
  }
  EXPECT_EQ(n_swa, 2);
  EXPECT_EQ(n_csa, 21);
  EXPECT_EQ(n_hca, 20);
  EXPECT_EQ(c.attention_kind(43), AttentionKind::kSWA);  // MTP
  EXPECT_TRUE(c.is_mtp_layer(43));
  EXPECT_TRUE(c.is_hash_layer(2));
  EXPECT_FALSE(c.is_hash_layer(3));
  EXPECT_EQ(c.compressor_out(2), 1024);
  EXPECT_EQ(c.compressor_out(3), 512);
  EXPECT_EQ(attention_kind_name(AttentionKind::kHCA), "HCA");
}

TEST(Config, FlashPresetEqualsReleasedConfig) {
  auto p = preset_config("flash", true);
  ASSERT_TRUE(p.ok()) << p.message();
  const json want = to_config_json(parse_ok(kFlashConfigJson));
  EXPECT_EQ(to_config_json(*p), want);
  // The released text minus the unknown field equals what we write (field names and values).
  json released = json::parse(kFlashConfigJson);
  released.erase("some_future_field");
  EXPECT_EQ(to_config_json(*p), released);
}

TEST(Config, PresetsValidate) {
  for (const char* name : {"tiny", "tiny2", "flash"}) {
    for (bool q : {false, true}) {
      auto c = preset_config(name, q);
      ASSERT_TRUE(c.ok()) << c.message();
      EXPECT_TRUE(validate(*c).ok()) << name << ": " << validate(*c).message();
      EXPECT_TRUE(validate_level_a(*c).ok()) << name << ": " << validate_level_a(*c).message();
      EXPECT_EQ(c->bos_token_id, 0);
      EXPECT_EQ(c->eos_token_id, 1);
      EXPECT_EQ(c->quantization_config.has_value(), q);
      EXPECT_EQ(c->expert_dtype.has_value(), q);
    }
  }
  for (int tp : {1, 2, 4})
    for (int ep : {1, 2, 4}) {
      auto c = preset_config("tiny", true);
      const Topology t = *make_topology(4, 0, tp, 4 / tp, ep);
      EXPECT_TRUE(validate_topology(*c, t).ok()) << tp << " " << ep;
      auto c2 = preset_config("tiny2", true);
      EXPECT_TRUE(validate_topology(*c2, t).ok()) << tp << " " << ep;
    }
  EXPECT_FALSE(preset_config("huge", false).ok());
  EXPECT_TRUE(Contains(preset_config("huge", false).message(), "huge"));
}

TEST(Config, TinyPresetValues) {
  const ModelConfig t = *preset_config("tiny", false);
  EXPECT_EQ(t.vocab_size, 512);
  EXPECT_EQ(t.hidden_size, 128);
  EXPECT_EQ(t.num_hidden_layers, 4);
  EXPECT_EQ(t.compress_ratios, (std::vector<int>{0, 4, 8, 4, 0}));
  EXPECT_EQ(t.num_hash_layers, 2);
  EXPECT_EQ(t.num_attention_heads, 4);
  EXPECT_EQ(t.head_dim, 80);
  EXPECT_EQ(t.qk_rope_head_dim, 16);
  EXPECT_EQ(t.q_lora_rank, 128);
  EXPECT_EQ(t.o_groups, 4);
  EXPECT_EQ(t.o_lora_rank, 128);
  EXPECT_EQ(t.sliding_window, 8);
  EXPECT_EQ(t.index_n_heads, 2);
  EXPECT_EQ(t.index_head_dim, 32);
  EXPECT_EQ(t.index_topk, 4);
  EXPECT_EQ(t.n_routed_experts, 8);
  EXPECT_EQ(t.num_experts_per_tok, 2);
  EXPECT_EQ(t.n_shared_experts, 1);
  EXPECT_EQ(t.moe_intermediate_size, 128);
  EXPECT_DOUBLE_EQ(t.routed_scaling_factor, 1.5);
  EXPECT_DOUBLE_EQ(t.swiglu_limit, 1.0);
  EXPECT_EQ(t.hc_mult, 4);
  EXPECT_EQ(t.hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(t.hc_eps, 1e-6);
  EXPECT_DOUBLE_EQ(t.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(t.rope_theta, 10000);
  EXPECT_DOUBLE_EQ(t.compress_rope_theta, 160000);
  EXPECT_DOUBLE_EQ(t.rope_scaling.factor, 16);
  EXPECT_EQ(t.max_position_embeddings, 1024);
  EXPECT_EQ(t.num_nextn_predict_layers, 1);
  EXPECT_EQ(t.wo_a_in(), 80);
  EXPECT_EQ(t.wo_b_in(), 512);

  const ModelConfig t2 = *preset_config("tiny2", true);
  EXPECT_EQ(t2.hidden_size, 256);
  EXPECT_EQ(t2.compress_ratios, (std::vector<int>{0, 4, 128, 4, 0}));
  EXPECT_EQ(t2.head_dim, 192);
  EXPECT_EQ(t2.qk_rope_head_dim, 64);
  EXPECT_EQ(t2.q_lora_rank, 256);
  EXPECT_EQ(t2.sliding_window, 16);
  EXPECT_EQ(t2.index_n_heads, 4);
  EXPECT_EQ(t2.index_head_dim, 128);
  EXPECT_EQ(t2.index_topk, 8);
  EXPECT_EQ(t2.moe_intermediate_size, 256);
  EXPECT_DOUBLE_EQ(t2.swiglu_limit, 2.0);
  EXPECT_EQ(*t2.expert_dtype, "fp4");
  EXPECT_EQ(t2.wo_a_in(), 192);
}

TEST(Config, RoundTripThroughJson) {
  for (const char* name : {"tiny", "tiny2", "flash"})
    for (bool q : {false, true}) {
      const ModelConfig c = *preset_config(name, q);
      const std::string text = to_config_json_text(c);
      const ModelConfig back = parse_ok(text);
      EXPECT_EQ(to_config_json(back), to_config_json(c)) << name;
      const json j = json::parse(text);
      EXPECT_EQ(j.contains("quantization_config"), q);
      EXPECT_EQ(j.contains("expert_dtype"), q);
    }
}

// dspark.md §1.2, §5: the DSpark presets, their fields and the layer indexing around them.
TEST(Config, DsparkPresetsAndFields) {
  for (const char* name : {"tiny-ds", "tiny-ds-w80", "tiny2-ds", "flash-0731"})
    for (bool q : {false, true}) {
      SCOPED_TRACE(name);
      const ModelConfig c = *preset_config(name, q);
      ASSERT_TRUE(c.dspark.has_value());
      EXPECT_TRUE(validate(c).ok()) << validate(c).message();
      EXPECT_TRUE(validate_level_a(c).ok()) << validate_level_a(c).message();
      EXPECT_EQ(c.num_nextn_predict_layers, 1);  // stale, as in the release
      EXPECT_EQ(c.n_mtp_layers(), 0);
      EXPECT_EQ(c.n_dspark_stages(), 3);
      EXPECT_EQ(c.n_layers_total(), c.num_hidden_layers);
      EXPECT_EQ(c.n_checkpoint_layers(), c.num_hidden_layers + 3);
      EXPECT_FALSE(c.is_mtp_layer(c.num_hidden_layers));
      EXPECT_TRUE(c.is_dspark_stage(c.num_hidden_layers + 2));
      EXPECT_FALSE(c.no_mtp_reason().empty());
      EXPECT_EQ(c.dspark->block_size, 5);
      const ModelConfig back = parse_ok(to_config_json_text(c));
      EXPECT_EQ(to_config_json(back), to_config_json(c));
      ASSERT_TRUE(back.dspark.has_value());
      EXPECT_EQ(back.dspark->target_layer_ids, c.dspark->target_layer_ids);
    }
  const ModelConfig t = *preset_config("tiny-ds", true);
  EXPECT_EQ(t.compress_ratios, (std::vector<int>{0, 4, 8, 4, 0, 0, 0}));
  EXPECT_EQ(t.dspark->target_layer_ids, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(t.dspark->noise_token_id, 511);
  EXPECT_EQ(t.dspark->markov_rank, 48);
  EXPECT_EQ(t.sliding_window, 8);
  EXPECT_EQ(preset_config("tiny-ds-w80", true)->sliding_window, 80);
  EXPECT_EQ(preset_config("tiny2-ds", true)->hidden_size, 256);
  const ModelConfig f = *preset_config("flash-0731", true);
  EXPECT_EQ(f.compress_ratios.size(), 46u);
  EXPECT_EQ(f.dspark->target_layer_ids, (std::vector<int>{40, 41, 42}));
  EXPECT_EQ(f.dspark->noise_token_id, 128799);
  EXPECT_EQ(f.dspark->markov_rank, 256);
  // The plain presets have no drafter fields.
  EXPECT_FALSE(json::parse(to_config_json_text(*preset_config("tiny", true))).contains("dspark_block_size"));
  // A field of the wrong type is named.
  json j = to_config_json(t);
  j["dspark_target_layer_ids"] = "1,2,3";
  auto r = parse_config_json(j.dump(), "config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.message(), "dspark_target_layer_ids"));
}

TEST(Config, MissingRequiredFieldIsNamed) {
  const json full = json::parse(kFlashConfigJson);
  for (const char* field : {"vocab_size", "hidden_size", "num_hidden_layers", "head_dim",
                            "compress_ratios", "hc_eps", "rope_scaling", "index_topk",
                            "scoring_func", "num_nextn_predict_layers", "bos_token_id"}) {
    json j = full;
    j.erase(field);
    const std::string m = parse_error(j);
    EXPECT_TRUE(Contains(m, "missing required field"));
    EXPECT_TRUE(Contains(m, std::string("'") + field + "'"));
    EXPECT_TRUE(Contains(m, "cfg.json"));
  }
  json j = full;
  j["rope_scaling"].erase("factor");
  EXPECT_TRUE(Contains(parse_error(j), "'rope_scaling.factor'"));
  j = full;
  j["quantization_config"].erase("scale_fmt");
  EXPECT_TRUE(Contains(parse_error(j), "'quantization_config.scale_fmt'"));
}

TEST(Config, WrongTypeIsNamed) {
  const json full = json::parse(kFlashConfigJson);
  struct Case {
    const char* field;
    json value;
    const char* want;
    const char* found;
  };
  const Case cases[] = {
      {"hidden_size", "4096", "expected integer", "found string"},
      {"hidden_size", 4096.5, "expected integer", "found number (non-integer)"},
      {"rms_norm_eps", "1e-6", "expected number", "found string"},
      {"norm_topk_prob", 1, "expected boolean", "found integer"},
      {"scoring_func", 3, "expected string", "found integer"},
      {"rope_scaling", json::array(), "expected object", "found array"},
      {"compress_ratios", 4, "expected array of integers", "found integer"},
      {"quantization_config", "fp8", "expected object", "found string"},
      {"expert_dtype", 4, "expected string", "found integer"},
      {"vocab_size", nullptr, "expected integer", "found null"},
  };
  for (const Case& c : cases) {
    json j = full;
    j[c.field] = c.value;
    const std::string m = parse_error(j);
    EXPECT_TRUE(Contains(m, std::string("'") + c.field + "'")) << m;
    EXPECT_TRUE(Contains(m, c.want)) << m;
    EXPECT_TRUE(Contains(m, c.found)) << m;
  }
  json j = full;
  j["compress_ratios"][5] = "x";
  EXPECT_TRUE(Contains(parse_error(j), "'compress_ratios[5]'"));
  j = full;
  j["num_hidden_layers"] = int64_t{1} << 40;
  EXPECT_TRUE(Contains(parse_error(j), "out of range"));
  EXPECT_TRUE(Contains(parse_error(json::array()), "JSON object"));
  auto bad = parse_config_json("{\"vocab_size\": ", "x.json");
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.message(), "x.json: invalid JSON"));
}

TEST(Config, UnknownFieldsAreIgnored) {
  json j = json::parse(kFlashConfigJson);
  j["auto_map"] = {{"AutoConfig", "x"}};
  j["rope_scaling"]["mscale"] = 1.0;
  j["quantization_config"]["extra"] = true;
  auto r = parse_config_json(j.dump(), "c");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(validate(*r).ok());
  // Optional descriptive fields may be absent.
  for (const char* f : {"architectures", "attention_dropout", "initializer_range",
                        "transformers_version", "use_cache", "attention_bias", "model_type"})
    j.erase(f);
  EXPECT_TRUE(parse_config_json(j.dump(), "c").ok());
}

// Each rule: a mutation of a valid config and the text the message must contain.
struct Rule {
  const char* name;
  std::function<void(ModelConfig&)> mutate;
  std::vector<const char*> want;
};

TEST(Config, EveryValidationRuleNamesItsField) {
  const Rule rules[] = {
      {"positive dim", [](ModelConfig& c) { c.hidden_size = 0; }, {"'hidden_size'", "0", "positive"}},
      {"positive vocab", [](ModelConfig& c) { c.vocab_size = -1; }, {"'vocab_size'", "-1"}},
      {"positive window", [](ModelConfig& c) { c.sliding_window = 0; }, {"'sliding_window'"}},
      {"positive topk", [](ModelConfig& c) { c.index_topk = 0; }, {"'index_topk'"}},
      {"dim too large", [](ModelConfig& c) { c.hidden_size = int64_t{1} << 30; },
       {"'hidden_size'", "maximum"}},
      {"head_dim > rope", [](ModelConfig& c) { c.head_dim = 16; }, {"'head_dim'", "16", "nope"}},
      {"rope even", [](ModelConfig& c) { c.qk_rope_head_dim = 15; c.head_dim = 79; },
       {"'qk_rope_head_dim'", "15", "even"}},
      {"index_head_dim > rope", [](ModelConfig& c) { c.index_head_dim = 16; },
       {"'index_head_dim'", "16", "exceed qk_rope_head_dim"}},
      {"index_head_dim pow2", [](ModelConfig& c) { c.index_head_dim = 48; },
       {"'index_head_dim'", "48", "power of two"}},
      {"heads % o_groups", [](ModelConfig& c) { c.o_groups = 3; },
       {"'num_attention_heads'", "o_groups = 3"}},
      {"ratios length", [](ModelConfig& c) { c.compress_ratios.pop_back(); },
       {"'compress_ratios'", "4 entries", "5"}},
      {"negative ratio", [](ModelConfig& c) { c.compress_ratios[1] = -4; },
       {"'compress_ratios[1]'", "-4"}},
      {"MTP ratio", [](ModelConfig& c) { c.compress_ratios[4] = 4; },
       {"'compress_ratios[4]'", "MTP"}},
      {"experts_per_tok", [](ModelConfig& c) { c.num_experts_per_tok = 9; },
       {"'num_experts_per_tok'", "9", "n_routed_experts = 8"}},
      {"hash layers", [](ModelConfig& c) { c.num_hash_layers = 5; },
       {"'num_hash_layers'", "5", "num_hidden_layers = 4"}},
      {"hc_mult", [](ModelConfig& c) { c.hc_mult = 0; }, {"'hc_mult'", "0"}},
      {"scoring_func", [](ModelConfig& c) { c.scoring_func = "softmax"; },
       {"'scoring_func'", "softmax", "sqrtsoftplus"}},
      {"rope type", [](ModelConfig& c) { c.rope_scaling.type = "linear"; },
       {"'rope_scaling.type'", "linear", "yarn"}},
      {"rope factor", [](ModelConfig& c) { c.rope_scaling.factor = 0; }, {"'rope_scaling.factor'"}},
      {"beta order", [](ModelConfig& c) { c.rope_scaling.beta_fast = 0.5; },
       {"'rope_scaling.beta_fast'"}},
      {"rope_theta", [](ModelConfig& c) { c.rope_theta = 1; }, {"'rope_theta'"}},
      {"compress_rope_theta", [](ModelConfig& c) { c.compress_rope_theta = -1; },
       {"'compress_rope_theta'"}},
      {"eps", [](ModelConfig& c) { c.rms_norm_eps = 0; }, {"'rms_norm_eps'"}},
      {"hc_eps", [](ModelConfig& c) { c.hc_eps = -1; }, {"'hc_eps'"}},
      {"kv heads", [](ModelConfig& c) { c.num_key_value_heads = 2; }, {"'num_key_value_heads'"}},
      {"shared experts", [](ModelConfig& c) { c.n_shared_experts = 2; }, {"'n_shared_experts'"}},
      {"nextn", [](ModelConfig& c) { c.num_nextn_predict_layers = 2; c.compress_ratios.push_back(0); },
       {"'num_nextn_predict_layers'"}},
      {"topk_method", [](ModelConfig& c) { c.topk_method = "greedy"; }, {"'topk_method'"}},
      {"norm_topk_prob", [](ModelConfig& c) { c.norm_topk_prob = false; }, {"'norm_topk_prob'"}},
      {"tie", [](ModelConfig& c) { c.tie_word_embeddings = true; }, {"'tie_word_embeddings'"}},
      {"hidden_act", [](ModelConfig& c) { c.hidden_act = "gelu"; }, {"'hidden_act'"}},
      {"bos", [](ModelConfig& c) { c.bos_token_id = 512; }, {"'bos_token_id'", "512"}},
      {"eos", [](ModelConfig& c) { c.eos_token_id = -1; }, {"'eos_token_id'"}},
      {"expert_dtype without quantization_config",
       [](ModelConfig& c) { c.quantization_config.reset(); c.expert_dtype = "fp4"; },
       {"'expert_dtype'", "'quantization_config'", "absent"}},
      {"expert_dtype value", [](ModelConfig& c) { c.expert_dtype = "int4"; },
       {"'expert_dtype'", "int4"}},
      {"quant method", [](ModelConfig& c) { c.quantization_config->quant_method = "awq"; },
       {"'quantization_config.quant_method'", "awq"}},
      {"block size", [](ModelConfig& c) { c.quantization_config->weight_block_size = {64, 64}; },
       {"'quantization_config.weight_block_size'", "64, 64"}},
      {"scale fmt", [](ModelConfig& c) { c.quantization_config->scale_fmt = "fp32"; },
       {"'quantization_config.scale_fmt'"}},
      {"fp4 expert dims", [](ModelConfig& c) { c.moe_intermediate_size = 100; },
       {"'moe_intermediate_size'", "100", "32"}},
  };
  for (const Rule& r : rules) {
    ModelConfig c = *preset_config("tiny", true);
    r.mutate(c);
    const Status st = validate(c);
    ASSERT_FALSE(st.ok()) << r.name;
    for (const char* w : r.want) EXPECT_TRUE(Contains(st.message(), w)) << r.name;
  }
}

TEST(Config, LevelARules) {
  ModelConfig c = *preset_config("tiny", true);
  c.head_dim = 48;  // nope 32
  Status st = validate_level_a(c);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "head_dim - qk_rope_head_dim"));
  EXPECT_TRUE(Contains(st.message(), "= 32"));
  EXPECT_TRUE(Contains(st.message(), "64"));

  c = *preset_config("tiny", true);
  c.index_head_dim = 16;
  c.qk_rope_head_dim = 8;
  c.head_dim = 72;
  st = validate_level_a(c);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "'index_head_dim' = 16"));

  for (auto [field, mutate] :
       std::vector<std::pair<const char*, std::function<void(ModelConfig&)>>>{
           {"'hidden_size' = 96", [](ModelConfig& m) { m.hidden_size = 96; }},
           {"'q_lora_rank' = 64", [](ModelConfig& m) { m.q_lora_rank = 64; }},
           {"o_groups * o_lora_rank", [](ModelConfig& m) { m.o_lora_rank = 16; }},
           {"'moe_intermediate_size' = 64", [](ModelConfig& m) { m.moe_intermediate_size = 64; }}}) {
    ModelConfig q = *preset_config("tiny", true);
    mutate(q);
    EXPECT_TRUE(validate(q).ok()) << validate(q).message();
    st = validate_level_a(q);
    ASSERT_FALSE(st.ok()) << field;
    EXPECT_TRUE(Contains(st.message(), field));
    EXPECT_TRUE(Contains(st.message(), "128"));
    // Unquantized: no actq, so the 128 rule does not apply.
    ModelConfig b = *preset_config("tiny", false);
    mutate(b);
    EXPECT_TRUE(validate_level_a(b).ok()) << field << ": " << validate_level_a(b).message();
  }
}

TEST(Config, ParallelRules) {
  const ModelConfig c = *preset_config("tiny", true);  // o_groups 4, vocab 512, E 8, Ro 128
  auto topo = [](int world, int tp, int ep) { return make_topology(world, 0, tp, tp > 0 ? world / tp : 0, ep); };
  EXPECT_TRUE(validate_topology(c, *topo(1, 1, 1)).ok());
  EXPECT_TRUE(validate_topology(c, *topo(8, 4, 8)).ok());
  auto fails = [&](const ModelConfig& m, int tp, int ep, int world, const char* want) {
    const Result<Topology> t = topo(world, tp, ep);
    const Status st = t.ok() ? validate_topology(m, *t) : t.status();
    ASSERT_FALSE(st.ok()) << want;
    EXPECT_TRUE(Contains(st.message(), want)) << st.message();
  };
  fails(c, 3, 1, 3, "o_groups = 4");
  fails(c, 0, 1, 1, "--tp 0");
  fails(c, 2, 1, 3, "but the world has 3");
  fails(c, 1, 3, 3, "n_routed_experts = 8");
  fails(c, 1, 2, 3, "--ep 2");
  ModelConfig v = c;
  v.vocab_size = 510;
  fails(v, 4, 1, 4, "vocab_size = 510");
  ModelConfig r = c;
  r.o_lora_rank = 64;
  fails(r, 2, 1, 2, "o_lora_rank = 64");
  EXPECT_TRUE(validate_topology(r, *topo(1, 1, 1)).ok());  // tp = 1: any o_lora_rank
}

TEST(Config, StorageTable) {
  ModelConfig c = *preset_config("tiny", true);
  // present + "fp4": FP8 + FP4 (the Flash release)
  EXPECT_EQ(c.dense_storage(), StorageForm::kFP8);
  EXPECT_EQ(c.expert_storage(), StorageForm::kFP4);
  // present + "fp8"
  c.expert_dtype = "fp8";
  EXPECT_EQ(c.dense_storage(), StorageForm::kFP8);
  EXPECT_EQ(c.expert_storage(), StorageForm::kFP8);
  EXPECT_TRUE(validate(c).ok());
  // present + absent: experts default to FP8
  c.expert_dtype.reset();
  EXPECT_EQ(c.dense_storage(), StorageForm::kFP8);
  EXPECT_EQ(c.expert_storage(), StorageForm::kFP8);
  EXPECT_TRUE(validate(c).ok());
  // absent + absent: BF16 variant
  c.quantization_config.reset();
  EXPECT_EQ(c.dense_storage(), StorageForm::kBF16);
  EXPECT_EQ(c.expert_storage(), StorageForm::kBF16);
  EXPECT_TRUE(validate(c).ok());
  // absent + present: rejected naming both fields (also when parsed from JSON)
  c.expert_dtype = "fp8";
  const Status st = validate(c);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "'expert_dtype'"));
  EXPECT_TRUE(Contains(st.message(), "'quantization_config'"));
  json j = json::parse(kFlashConfigJson);
  j.erase("quantization_config");
  auto parsed = parse_config_json(j.dump(), "c");
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(validate(*parsed).ok());
  EXPECT_EQ(storage_form_name(StorageForm::kFP4), "FP4");
}

// Bounded random mutation of the released text: parsing and validation never crash, and
// every outcome is either a config or an error message naming the source.
TEST(Config, RandomMutationsNeverCrash) {
  const std::string base = kFlashConfigJson;
  std::mt19937 rng(1234);
  const std::string alphabet = "0123456789-.eE{}[]\",:truefalsnul \\";
  int n_ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string t = base;
    const int n_edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n_edits && !t.empty(); ++k) {
      const size_t pos = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: t.erase(pos, 1 + rng() % 8); break;
        default: t.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
      }
    }
    auto r = parse_config_json(t, "fuzz.json");
    if (!r.ok()) {
      EXPECT_TRUE(Contains(r.message(), "fuzz.json: "));
      continue;
    }
    ++n_ok;
    (void)validate(*r);
    (void)validate_level_a(*r);
    (void)validate_topology(*r, *make_topology(4, 0, 2, 2, 2));
  }
  EXPECT_GT(n_ok, 0);
}

}  // namespace
}  // namespace dsv4
