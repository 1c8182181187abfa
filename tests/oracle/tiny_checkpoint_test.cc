// make-tiny round trip (checkpoint.md §5, §5.7; model.md §14): every tensor of the table
// written with its dtype/shape, regenerated values equal the stored bytes, FP8/FP4
// weights within half a quantization step of the float sample, determinism by seed,
// tid2eid rows distinct and in range, scale bytes in 27..227, config.json round trip,
// the max_position_embeddings override, and the cached built-in model.
#include "oracle/tiny_checkpoint.h"
#include "support/tmp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "model/checkpoint_table.h"
#include "model/config.h"
#include "model/weights.h"
#include "numeric/bf16.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/ue8m0.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;


std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<uint8_t> bf16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t b = bf16::from_float(v[i]).bits;
    std::memcpy(&out[2 * i], &b, 2);
  }
  return out;
}

::testing::AssertionResult bytes_equal(const TensorView& view, const std::vector<uint8_t>& want) {
  if (view.n_bytes != want.size())
    return ::testing::AssertionFailure()
           << view.name << ": " << view.n_bytes << " bytes, want " << want.size();
  for (size_t i = 0; i < want.size(); ++i)
    if (view.data[i] != want[i])
      return ::testing::AssertionFailure() << view.name << ": byte " << i << " is "
                                           << int(view.data[i]) << ", want " << int(want[i]);
  return ::testing::AssertionSuccess();
}

// Spacing of the e4m3 grid around |v| (normal binades 2^k: 2^(k-3); subnormals 2^-9).
double e4m3_step(double a) {
  if (a < 0x1p-6) return 0x1p-9;
  return std::ldexp(1.0, std::ilogb(a) - 3);
}
// Spacing of the e2m1 grid around |v|: 0.5 below 2, 1 in [2, 4), 2 in [4, 6].
double e2m1_step(double a) { return a < 2.0 ? 0.5 : (a < 4.0 ? 1.0 : 2.0); }

// Dequantized FP8 weight within half an e4m3 step (times the block scale) of the sample.
::testing::AssertionResult fp8_close(const std::string& name, const std::vector<float>& w,
                                     const uint8_t* codes, const uint8_t* scale, int64_t out,
                                     int64_t in) {
  const int64_t n_bi = (in + 127) / 128;
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      const double s = ue8m0_decode(scale[(o / 128) * n_bi + i / 128]);
      const double deq = e4m3_decode(codes[o * in + i]) * s;
      const double x = w[o * in + i];
      const double lim = 0.5 * e4m3_step(std::fabs(x) / s) * s;
      if (!(std::fabs(deq - x) <= lim))
        return ::testing::AssertionFailure() << name << "[" << o << ", " << i << "]: sample " << x
                                             << ", dequantized " << deq << ", limit " << lim;
    }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fp4_close(const std::string& name, const std::vector<float>& w,
                                     const uint8_t* packed, const uint8_t* scale, int64_t out,
                                     int64_t in) {
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      const double s = ue8m0_decode(scale[o * (in / 32) + i / 32]);
      const double deq = e2m1_decode(e2m1_nibble(packed + o * in / 2, i)) * s;
      const double x = w[o * in + i];
      const double lim = 0.5 * e2m1_step(std::fabs(x) / s) * s;
      if (!(std::fabs(deq - x) <= lim))
        return ::testing::AssertionFailure() << name << "[" << o << ", " << i << "]: sample " << x
                                             << ", dequantized " << deq << ", limit " << lim;
    }
  return ::testing::AssertionSuccess();
}

// Checks one table entry against the file and the regenerated sample.
void check_tensor(const ModelConfig& cfg, const SafetensorsSet& files, const TensorSpec& spec,
                  uint64_t seed) {
  SCOPED_TRACE(spec.name);
  const TensorView* v = files.find(spec.name);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->dtype, spec.dtype);
  EXPECT_EQ(v->shape, spec.shape);
  if (spec.role == TensorRole::kScale) {
    for (size_t i = 0; i < v->n_bytes; ++i)
      ASSERT_TRUE(ue8m0_checkpoint_ok(v->data[i]))
          << "scale byte " << int(v->data[i]) << " at " << i;
    return;
  }
  Result<std::vector<float>> sample = tiny_tensor_sample(cfg, spec, seed);
  ASSERT_TRUE(sample.ok()) << sample.message();
  const std::vector<float>& w = sample.value();
  if (spec.role == TensorRole::kMatrix && spec.form != StorageForm::kBF16) {
    const TensorView* sv = files.find(spec.scale_name);
    ASSERT_NE(sv, nullptr);
    const QuantizedMatrix q = spec.form == StorageForm::kFP8
                                  ? quantize_fp8_blocks(w.data(), spec.out, spec.in)
                                  : quantize_fp4_rows(w.data(), spec.out, spec.in);
    EXPECT_TRUE(bytes_equal(*v, q.data));
    EXPECT_TRUE(bytes_equal(*sv, q.scale));
    if (spec.form == StorageForm::kFP8)
      EXPECT_TRUE(fp8_close(spec.name, w, v->data, sv->data, spec.out, spec.in));
    else
      EXPECT_TRUE(fp4_close(spec.name, w, v->data, sv->data, spec.out, spec.in));
    return;
  }
  switch (spec.dtype) {
    case DType::kBF16:
      EXPECT_TRUE(bytes_equal(*v, bf16_bytes(w)));
      break;
    case DType::kF32: {
      std::vector<uint8_t> want(w.size() * 4);
      std::memcpy(want.data(), w.data(), want.size());
      EXPECT_TRUE(bytes_equal(*v, want));
      break;
    }
    case DType::kI64: {
      std::vector<uint8_t> want(w.size() * 8);
      for (size_t i = 0; i < w.size(); ++i) {
        const int64_t id = static_cast<int64_t>(w[i]);
        std::memcpy(&want[8 * i], &id, 8);
      }
      EXPECT_TRUE(bytes_equal(*v, want));
      break;
    }
    default:
      ADD_FAILURE() << "unexpected dtype " << dtype_name(spec.dtype);
  }
}

// The loaded Linear views hold the written bytes (wo_a too: as stored, without actq).
void check_linear(const SafetensorsSet& files, const Linear& lin, const std::string& name,
                  bool is_wo_a) {
  SCOPED_TRACE(name);
  const TensorView* v = files.find(name);
  ASSERT_NE(v, nullptr);
  ASSERT_NE(lin.w.data, nullptr);
  if (lin.w.fp4_dot || lin.w.fp8_dot) {
    // Rewritten into the kernels' dot layouts at load: the same code at every (o, i).
    // FP4: the scales too, in the same tiles.
    LinearWeight stored = lin.w;
    stored.data = v->data;
    stored.fp4_dot = stored.fp8_dot = false;
    const TensorView* sv = files.find(scale_name_for(name));
    ASSERT_NE(sv, nullptr);
    if (lin.w.fp4_dot) stored.scale = sv->data;
    const auto code = lin.w.fp4_dot ? fp4_code : fp8_code;
    for (int64_t o = 0; o < lin.w.out; ++o)
      for (int64_t i = 0; i < lin.w.in; ++i) {
        ASSERT_EQ(code(lin.w, o, i), code(stored, o, i)) << o << ", " << i;
        if (lin.w.fp4_dot) {
          ASSERT_EQ(fp4_scale(lin.w, o, i), fp4_scale(stored, o, i)) << o << ", " << i;
        }
      }
  } else {
    EXPECT_EQ(0, std::memcmp(lin.w.data, v->data, v->n_bytes));
  }
  if (v->dtype == DType::kBF16) {
    EXPECT_EQ(lin.w.format, WeightFormat::kBF16);
    EXPECT_FALSE(lin.actq);
  } else {
    const TensorView* sv = files.find(scale_name_for(name));
    ASSERT_NE(sv, nullptr);
    ASSERT_NE(lin.w.scale, nullptr);
    if (!lin.w.fp4_dot) {
      EXPECT_EQ(0, std::memcmp(lin.w.scale, sv->data, sv->n_bytes));
    }
    EXPECT_EQ(lin.w.format, v->dtype == DType::kI8 ? WeightFormat::kFP4 : WeightFormat::kFP8);
    EXPECT_EQ(lin.actq, !is_wo_a);
  }
}

// config.json round-trips through load_config to the preset; the storage fields follow
// --quant; generation_config.json holds the release's values.
void check_config_files(const std::string& dir, const std::string& preset, TinyQuant quant) {
  Result<ModelConfig> loaded = load_config(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  Result<ModelConfig> want = preset_config(preset, quant == TinyQuant::kFp8);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(to_config_json(loaded.value()), to_config_json(want.value()));

  const nlohmann::json j = nlohmann::json::parse(read_text(dir + "/config.json"));
  EXPECT_EQ(j.at("bos_token_id"), 0);
  EXPECT_EQ(j.at("eos_token_id"), 1);
  if (quant == TinyQuant::kNone) {
    EXPECT_FALSE(j.contains("quantization_config"));
    EXPECT_FALSE(j.contains("expert_dtype"));
  } else {
    const nlohmann::json want_q = {{"activation_scheme", "dynamic"},
                                   {"fmt", "e4m3"},
                                   {"quant_method", "fp8"},
                                   {"scale_fmt", "ue8m0"},
                                   {"weight_block_size", {128, 128}}};
    EXPECT_EQ(j.at("quantization_config"), want_q);
    EXPECT_EQ(j.at("expert_dtype"), "fp4");
  }
  const nlohmann::json g = nlohmann::json::parse(read_text(dir + "/generation_config.json"));
  EXPECT_EQ(g, nlohmann::json({{"bos_token_id", 0},
                               {"eos_token_id", 1},
                               {"do_sample", true},
                               {"temperature", 1.0},
                               {"top_p", 1.0}}));
}

using RoundTripCase = std::tuple<std::string, TinyQuant>;

class TinyRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

// make-tiny -> load_config + load_weights: config files, every table entry (dtype, shape,
// bytes equal to the regenerated encoding, quantized values within half a step of the
// sample, every scale byte in 27..227), and the views load_weights hands the engine.
TEST_P(TinyRoundTrip, EveryTensorMatchesWhatWasWritten) {
  const auto& [preset, quant] = GetParam();
  constexpr uint64_t kSeed = 7;
  test::TmpDir tmp;
  ASSERT_TRUE(make_tiny_checkpoint(tmp.path(), preset, kSeed, quant).ok());
  check_config_files(tmp.path(), preset, quant);

  Result<ModelConfig> cfg = load_config(tmp.path());
  ASSERT_TRUE(cfg.ok()) << cfg.message();
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(tmp.path());
  ASSERT_TRUE(files.ok()) << files.message();
  LoadReport rep;
  Result<Weights> w = load_weights(files.value(), cfg.value(), &rep);
  ASSERT_TRUE(w.ok()) << w.message();
  EXPECT_TRUE(rep.unexpected.empty());
  EXPECT_TRUE(rep.warnings.empty());
  EXPECT_EQ(rep.n_bf16_fallback, 0);

  const std::vector<TensorSpec> table = expected_tensors(cfg.value());
  EXPECT_EQ(static_cast<size_t>(rep.n_tensors), table.size());
  EXPECT_EQ(files->tensors().size(), table.size());
  for (const TensorSpec& spec : table) check_tensor(cfg.value(), files.value(), spec, kSeed);

  // Storage forms of the variant.
  std::map<DType, int> n_by_dtype;
  for (const auto& [name, view] : files->tensors()) ++n_by_dtype[view->dtype];
  if (quant == TinyQuant::kFp8) {
    EXPECT_GT(n_by_dtype[DType::kF8_E4M3], 0);
    EXPECT_GT(n_by_dtype[DType::kI8], 0);
    EXPECT_EQ(n_by_dtype[DType::kF8_E8M0], n_by_dtype[DType::kF8_E4M3] + n_by_dtype[DType::kI8]);
  } else {
    EXPECT_EQ(n_by_dtype[DType::kF8_E4M3], 0);
    EXPECT_EQ(n_by_dtype[DType::kI8], 0);
    EXPECT_EQ(n_by_dtype[DType::kF8_E8M0], 0);
  }

  // What load_weights hands the engine is what was written.
  const ModelConfig& c = cfg.value();
  const Weights& wt = w.value();
  EXPECT_EQ(static_cast<const void*>(wt.embed), files->find("embed.weight")->data);
  check_linear(files.value(), wt.head, "head.weight", false);
  auto check_block = [&](const LayerWeights& L, int l) {
    const std::string p = layer_prefix(c, l);
    const AttentionWeights& a = L.attn;
    check_linear(files.value(), a.wq_a, p + "attn.wq_a.weight", false);
    check_linear(files.value(), a.wq_b, p + "attn.wq_b.weight", false);
    check_linear(files.value(), a.wkv, p + "attn.wkv.weight", false);
    check_linear(files.value(), a.wo_a, p + "attn.wo_a.weight", true);
    check_linear(files.value(), a.wo_b, p + "attn.wo_b.weight", false);
    if (a.indexer.present)
      check_linear(files.value(), a.indexer.wq_b, p + "attn.indexer.wq_b.weight", false);
    check_linear(files.value(), L.ffn.shared.w1, p + "ffn.shared_experts.w1.weight", false);
    check_linear(files.value(), L.ffn.shared.w2, p + "ffn.shared_experts.w2.weight", false);
    check_linear(files.value(), L.ffn.shared.w3, p + "ffn.shared_experts.w3.weight", false);
    ASSERT_EQ(L.ffn.experts.size(), static_cast<size_t>(c.n_routed_experts));
    for (int e = 0; e < c.n_routed_experts; ++e) {
      const std::string pe = p + "ffn.experts." + std::to_string(e) + ".";
      check_linear(files.value(), L.ffn.experts[e].w1, pe + "w1.weight", false);
      check_linear(files.value(), L.ffn.experts[e].w2, pe + "w2.weight", false);
      check_linear(files.value(), L.ffn.experts[e].w3, pe + "w3.weight", false);
    }
    EXPECT_EQ(L.ratio, c.layer_ratio(l));
    if (L.hash) {
      const TensorView* t = files->find(p + "ffn.gate.tid2eid");
      ASSERT_NE(t, nullptr);
      ASSERT_EQ(L.ffn.tid2eid.size(), static_cast<size_t>(t->numel()));
      for (int64_t i = 0; i < t->numel(); ++i) {
        int64_t id;
        std::memcpy(&id, t->data + 8 * i, 8);
        ASSERT_EQ(L.ffn.tid2eid[i], id);
      }
    }
  };
  ASSERT_EQ(wt.layers.size(), static_cast<size_t>(c.num_hidden_layers));
  for (int l = 0; l < c.num_hidden_layers; ++l) check_block(wt.layers[l], l);
  ASSERT_EQ(wt.mtp.size(), static_cast<size_t>(c.n_mtp_layers()));
  for (int i = 0; i < c.n_mtp_layers(); ++i) {
    const int l = c.num_hidden_layers + i;
    check_block(wt.mtp[i].block, l);
    check_linear(files.value(), wt.mtp[i].e_proj, layer_prefix(c, l) + "e_proj.weight", false);
    check_linear(files.value(), wt.mtp[i].h_proj, layer_prefix(c, l) + "h_proj.weight", false);
  }
  // DSpark presets (dspark.md §5): three stages in place of the stale MTP count, each taken.
  const DSparkWeights& d = wt.dspark;
  ASSERT_EQ(d.present, c.dspark.has_value());
  if (!d.present) return;
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  ASSERT_EQ(d.stages.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    check_block(d.stages[s], c.num_hidden_layers + s);
    EXPECT_FALSE(d.stages[s].hash);
    EXPECT_EQ(d.stages[s].kind, AttentionKind::kSWA);
  }
  check_linear(files.value(), d.main_proj, "mtp.0.main_proj.weight", false);
  EXPECT_EQ(d.main_proj.w.in, 3 * c.hidden_size);
  EXPECT_EQ(static_cast<const void*>(d.markov_w1), files->find("mtp.2.markov_head.markov_w1.weight")->data);
  EXPECT_EQ(static_cast<const void*>(d.markov_w2), files->find("mtp.2.markov_head.markov_w2.weight")->data);
  EXPECT_EQ(static_cast<const void*>(d.confidence), files->find("mtp.2.confidence_head.proj.weight")->data);
  // dspark.md §5: 241 mtp.* tensors in the released layout, 144 in the BF16 variant (tiny-ds).
  size_t n_mtp = 0;
  for (const auto& [name, view] : files->tensors()) n_mtp += name.starts_with("mtp.");
  EXPECT_EQ(rep.drafter.size(), n_mtp);
  if (c.hidden_size == 128) {
    EXPECT_EQ(n_mtp, quant == TinyQuant::kFp8 ? 241u : 144u);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, TinyRoundTrip,
                         ::testing::Combine(::testing::Values("tiny", "tiny2", "tiny-ds", "tiny2-ds"),
                                            ::testing::Values(TinyQuant::kNone, TinyQuant::kFp8)),
                         [](const ::testing::TestParamInfo<RoundTripCase>& info) {
                           std::string name = std::get<0>(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_" +
                                  std::string(tiny_quant_name(std::get<1>(info.param)));
                         });

TEST(TinyCheckpoint, DeterministicBySeed) {
  test::TmpDir tmp;
  ASSERT_TRUE(make_tiny_checkpoint(tmp.file("a"), "tiny", 3, TinyQuant::kFp8).ok());
  ASSERT_TRUE(make_tiny_checkpoint(tmp.file("b"), "tiny", 3, TinyQuant::kFp8).ok());
  ASSERT_TRUE(make_tiny_checkpoint(tmp.file("c"), "tiny", 4, TinyQuant::kFp8).ok());
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json"}) {
    const std::string a = read_text(tmp.file("a") + "/" + f);
    ASSERT_FALSE(a.empty()) << f;
    EXPECT_EQ(a, read_text(tmp.file("b") + "/" + f)) << f;
  }
  EXPECT_EQ(read_text(tmp.file("a") + "/config.json"), read_text(tmp.file("c") + "/config.json"));
  const std::string ma = read_text(tmp.file("a") + "/model.safetensors");
  const std::string mc = read_text(tmp.file("c") + "/model.safetensors");
  EXPECT_EQ(ma.size(), mc.size());  // same layout ...
  EXPECT_NE(ma, mc);                // ... other values

  // Every random tensor differs between the seeds (constants such as hc scales do not).
  Result<ModelConfig> cfg = tiny_config("tiny", TinyQuant::kFp8);
  ASSERT_TRUE(cfg.ok());
  for (const TensorSpec& spec : expected_tensors(cfg.value())) {
    if (spec.role == TensorRole::kScale || spec.name.find("_scale") != std::string::npos) continue;
    EXPECT_NE(tiny_tensor_sample(cfg.value(), spec, 3).value(),
              tiny_tensor_sample(cfg.value(), spec, 4).value())
        << spec.name;
  }
}

TEST(TinyCheckpoint, Tid2eidRowsDistinctAndInRange) {
  for (const char* preset : {"tiny", "tiny2"}) {
    Result<ModelConfig> cfg = tiny_config(preset, TinyQuant::kNone);
    ASSERT_TRUE(cfg.ok());
    int n_hash = 0;
    for (const TensorSpec& spec : expected_tensors(cfg.value())) {
      if (spec.name.find("tid2eid") == std::string::npos) continue;
      ++n_hash;
      const int64_t k = cfg->num_experts_per_tok;
      ASSERT_EQ(spec.shape, (std::vector<int64_t>{cfg->vocab_size, k}));
      const std::vector<float> ids = tiny_tensor_sample(cfg.value(), spec, 11).value();
      std::vector<int> used(cfg->n_routed_experts, 0);
      for (int64_t r = 0; r < cfg->vocab_size; ++r) {
        std::set<float> row(ids.begin() + r * k, ids.begin() + (r + 1) * k);
        ASSERT_EQ(row.size(), static_cast<size_t>(k)) << spec.name << " row " << r;
        for (const float id : row) {
          ASSERT_EQ(id, std::floor(id));
          ASSERT_GE(id, 0);
          ASSERT_LT(id, cfg->n_routed_experts);
          ++used[static_cast<int>(id)];
        }
      }
      for (int e = 0; e < cfg->n_routed_experts; ++e) EXPECT_GT(used[e], 0) << "expert " << e;
    }
    EXPECT_EQ(n_hash, cfg->num_hash_layers) << preset;
  }
}

TEST(TinyCheckpoint, InitializationFollowsModelMd14) {
  Result<ModelConfig> cfg = tiny_config("tiny2", TinyQuant::kFp8);
  ASSERT_TRUE(cfg.ok());
  std::map<std::string, TensorSpec> by_name;
  for (const TensorSpec& s : expected_tensors(cfg.value())) by_name[s.name] = s;
  auto stats = [&](const std::string& name) {
    const std::vector<float> v = tiny_tensor_sample(cfg.value(), by_name.at(name), 0).value();
    double m = 0, m2 = 0;
    for (const float x : v) m += x;
    m /= static_cast<double>(v.size());
    for (const float x : v) m2 += (x - m) * (x - m);
    return std::pair<double, double>(m, m2 / static_cast<double>(v.size()));
  };
  const double D = static_cast<double>(cfg->hidden_size);
  auto expect_dist = [&](const std::string& name, double mean, double var) {
    const auto [m, v] = stats(name);
    EXPECT_NEAR(m, mean, 4 * std::sqrt(var / 1000) + 1e-9) << name;
    EXPECT_NEAR(v, var, 0.15 * var) << name;
  };
  expect_dist("embed.weight", 0, 1 / D);
  expect_dist("head.weight", 0, 1 / D);
  expect_dist("layers.0.attn.wq_b.weight", 0, 1.0 / static_cast<double>(cfg->q_lora_rank));
  expect_dist("layers.1.ffn.experts.3.w2.weight", 0,
              1.0 / static_cast<double>(cfg->moe_intermediate_size));
  expect_dist("layers.1.attn.compressor.wkv.weight", 0, 1 / D);
  expect_dist("layers.0.hc_attn_fn", 0, 0.05);
  expect_dist("layers.2.attn.compressor.ape", 0, 0.03);
  expect_dist("mtp.0.hc_head_fn", 0, 0.05);
  expect_dist("layers.3.attn_norm.weight", 1, 0.1);
  EXPECT_EQ(tiny_tensor_sample(cfg.value(), by_name.at("layers.2.hc_ffn_scale"), 0).value(),
            (std::vector<float>{0.08f, 0.03f, 0.2f}));
  EXPECT_EQ(tiny_tensor_sample(cfg.value(), by_name.at("hc_head_scale"), 0).value(),
            (std::vector<float>{0.08f}));
  EXPECT_EQ(tiny_tensor_sample(cfg.value(), by_name.at("mtp.0.hc_head_scale"), 0).value(),
            (std::vector<float>{0.08f}));
  // Values depend on the name, not the table position.
  EXPECT_NE(tiny_tensor_sample(cfg.value(), by_name.at("layers.0.attn_norm.weight"), 0).value(),
            tiny_tensor_sample(cfg.value(), by_name.at("layers.1.attn_norm.weight"), 0).value());
  EXPECT_FALSE(tiny_tensor_sample(cfg.value(), by_name.at("layers.0.attn.wq_a.scale"), 0).ok());
}

// dspark.md §5: the drafter's tensors of tiny-ds.
TEST(TinyCheckpoint, DsparkInitialization) {
  Result<ModelConfig> cfg = tiny_config("tiny-ds", TinyQuant::kFp8);
  ASSERT_TRUE(cfg.ok()) << cfg.message();
  std::map<std::string, TensorSpec> by_name;
  for (const TensorSpec& s : expected_tensors(cfg.value())) by_name[s.name] = s;
  auto expect_dist = [&](const std::string& name, double mean, double var) {
    ASSERT_TRUE(by_name.count(name)) << name;
    const std::vector<float> v = tiny_tensor_sample(cfg.value(), by_name.at(name), 0).value();
    double m = 0, m2 = 0;
    for (const float x : v) m += x;
    m /= static_cast<double>(v.size());
    for (const float x : v) m2 += (x - m) * (x - m);
    m2 /= static_cast<double>(v.size());
    EXPECT_NEAR(m, mean, 4 * std::sqrt(var / static_cast<double>(v.size())) + 1e-9) << name;
    EXPECT_NEAR(m2, var, 0.2 * var) << name;
  };
  expect_dist("mtp.0.main_proj.weight", 0, 1.0 / 384);
  expect_dist("mtp.0.main_norm.weight", 1, 0.1);
  expect_dist("mtp.2.norm.weight", 1, 0.1);
  expect_dist("mtp.2.markov_head.markov_w1.weight", 0, 1.0);
  expect_dist("mtp.2.markov_head.markov_w2.weight", 0, 1.0 / 48);
  expect_dist("mtp.2.confidence_head.proj.weight", 0, 1.0 / 176);
  expect_dist("mtp.1.hc_attn_fn", 0, 0.05);
  EXPECT_EQ(by_name.at("mtp.2.markov_head.markov_w2.weight").shape, (std::vector<int64_t>{512, 48}));
  EXPECT_EQ(by_name.at("mtp.0.main_proj.scale").shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(by_name.count("mtp.1.main_proj.weight"), 0u);
  EXPECT_EQ(by_name.count("mtp.0.norm.weight"), 0u);
  EXPECT_EQ(by_name.count("mtp.0.e_proj.weight"), 0u);
  EXPECT_EQ(by_name.count("mtp.1.ffn.gate.tid2eid"), 0u);
}

TEST(TinyCheckpoint, QuantizeFp8BlocksHandExample) {
  // 130 x 130: blocks (0,0) 128x128, (0,1) 128x2, (1,0) 2x128, (1,1) 2x2.
  const int64_t O = 130, I = 130;
  std::vector<float> w(O * I, 0.0f);
  w[0] = 448.0f;              // block (0,0) amax 448 -> s = 1, byte 127
  w[5 * I + 129] = 1.0f;      // block (0,1) amax 1 -> t = 1/448 -> s = 2^-8, byte 119
  w[5 * I + 128] = -0.3f;
  w[129 * I + 3] = 0.0f;      // block (1,0) all zero -> floor 1e-4 -> s = 2^-22, byte 105
  w[128 * I + 128] = 6.0f;    // block (1,1) amax 6 -> t = 6/448 -> s = 2^-6, byte 121
  const QuantizedMatrix q = quantize_fp8_blocks(w.data(), O, I);
  ASSERT_EQ(q.scale, (std::vector<uint8_t>{127, 119, 105, 121}));
  EXPECT_EQ(q.data[0], e4m3_encode(448.0f));
  EXPECT_EQ(q.data[5 * I + 129], e4m3_encode(256.0f));
  EXPECT_EQ(q.data[5 * I + 128], e4m3_encode(-0.3f * 256.0f));
  EXPECT_EQ(q.data[128 * I + 128], e4m3_encode(384.0f));
  EXPECT_EQ(q.data[1], 0);
}

TEST(TinyCheckpoint, QuantizeFp4RowsPacksLowNibbleFirst) {
  std::vector<float> w(2 * 64, 0.0f);
  w[0] = 0.5f;   // row 0, group 0: amax 6 -> s = 1
  w[1] = 1.0f;
  w[2] = -6.0f;
  w[33] = 3.0f;  // row 0, group 1: amax 3 -> t = 0.5 -> s = 2^-1: 3 / 0.5 = 6
  w[64 + 0] = 0.75f;  // row 1, group 0: amax 0.75 -> t = 0.125 -> s = 2^-3: 6
  w[64 + 40] = -0x1p-20f;  // row 1, group 1: amax 2^-20 -> t = 2^-20/6 -> s = 2^-22: -4
  const QuantizedMatrix q = quantize_fp4_rows(w.data(), 2, 64);
  ASSERT_EQ(q.data.size(), 64u);
  ASSERT_EQ(q.scale, (std::vector<uint8_t>{127, 126, 124, 105}));
  EXPECT_EQ(q.data[0], 0x21);  // element 0 (0.5: code 1) low, element 1 (1.0: code 2) high
  EXPECT_EQ(q.data[1], 0x0F);  // element 2 = -6 (code 0xF) low, element 3 = 0 high
  EXPECT_EQ(q.data[16], 0x70);  // element 33 = 6 (code 7) in the high nibble of byte 16
  EXPECT_EQ(q.data[32], 0x07);
  EXPECT_EQ(q.data[32 + 20], 0x0E);  // row 1 element 40 = -2^-20 / 2^-22 = -4 (code 0xE) low
}

TEST(TinyCheckpoint, RejectsUnknownPresetAndQuant) {
  test::TmpDir tmp;
  const Status st = make_tiny_checkpoint(tmp.file("x"), "flash", 0, TinyQuant::kNone);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("flash"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(tmp.file("x") + "/model.safetensors"));
  Result<TinyQuant> q = parse_tiny_quant("int8");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.message().find("int8"), std::string::npos);
  // An output path below a regular file cannot be created.
  std::ofstream(tmp.file("file")) << "x";
  const Status st2 = make_tiny_checkpoint(tmp.file("file") + "/sub", "tiny", 0, TinyQuant::kNone);
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.message().find("file/sub"), std::string::npos) << st2.message();
}

// --max-position: config.json carries the override and nothing else changes (same tensors,
// byte for byte); values validate() rejects are rejected with its message, before writing.
TEST(TinyCheckpoint, MaxPositionOverrideChangesOnlyConfigField) {
  test::TmpDir tmp;
  TinyOverrides o;
  o.max_position_embeddings = 1048576;
  ASSERT_TRUE(make_tiny_checkpoint(tmp.file("plain"), "tiny", 5, TinyQuant::kFp8).ok());
  const Status st = make_tiny_checkpoint(tmp.file("long"), "tiny", 5, TinyQuant::kFp8, o);
  ASSERT_TRUE(st.ok()) << st.message();

  Result<ModelConfig> plain = load_config(tmp.file("plain"));
  Result<ModelConfig> long_cfg = load_config(tmp.file("long"));
  ASSERT_TRUE(plain.ok() && long_cfg.ok());
  EXPECT_EQ(plain->max_position_embeddings, 1024);
  EXPECT_EQ(long_cfg->max_position_embeddings, 1048576);
  ModelConfig back = long_cfg.value();
  back.max_position_embeddings = plain->max_position_embeddings;
  EXPECT_EQ(to_config_json(back), to_config_json(plain.value()));
  EXPECT_EQ(tiny_config("tiny", TinyQuant::kFp8, o)->max_position_embeddings, 1048576);

  auto a = SafetensorsFile::open(tmp.file("plain") + "/model.safetensors");
  auto b = SafetensorsFile::open(tmp.file("long") + "/model.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
  for (const auto& [name, view] : (*a)->tensors()) {
    const TensorView* other = (*b)->find(name);
    ASSERT_NE(other, nullptr) << name;
    EXPECT_EQ(other->dtype, view.dtype) << name;
    EXPECT_EQ(other->shape, view.shape) << name;
    EXPECT_TRUE(bytes_equal(*other, std::vector<uint8_t>(view.data, view.data + view.n_bytes)));
  }
  EXPECT_NE((*b)->metadata().at("dsv4_generator").find("max_position_embeddings=1048576"),
            std::string::npos);

  for (const int64_t bad : {int64_t{0}, int64_t{-1}, (int64_t{1} << 40) + 1}) {
    o.max_position_embeddings = bad;
    const std::string dir = tmp.file("bad" + std::to_string(bad));
    const Status e = make_tiny_checkpoint(dir, "tiny2", 0, TinyQuant::kNone, o);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.message().find("field 'max_position_embeddings' = " + std::to_string(bad)),
              std::string::npos)
        << e.message();
    EXPECT_FALSE(fs::exists(dir + "/config.json")) << bad;
  }
}

}  // namespace
}  // namespace dsv4
