// The checkpoint tensor table against checkpoint.md §5 (Flash inventory, counts, §5.7 forms).
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <string>

#include "model/checkpoint_table.h"

namespace dsv4 {
namespace {

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& t) {
  std::map<std::string, TensorSpec> m;
  for (const auto& s : t) EXPECT_TRUE(m.emplace(s.name, s).second) << "duplicate " << s.name;
  return m;
}

using Shape = std::vector<int64_t>;

void expect_tensor(const std::map<std::string, TensorSpec>& m, const std::string& name, DType dtype,
                   const Shape& shape) {
  auto it = m.find(name);
  ASSERT_NE(it, m.end()) << name;
  EXPECT_EQ(it->second.dtype, dtype) << name;
  EXPECT_EQ(it->second.shape, shape) << name;
}

TEST(CheckpointTable, FlashCounts) {
  const ModelConfig c = *preset_config("flash", true);
  const auto t = expected_tensors(c);
  EXPECT_EQ(t.size(), 69187u);  // checkpoint.md §5.6
  EXPECT_EQ(global_tensors(c).size(), 6u);
  EXPECT_EQ(layer_tensors(c, 0).size(), 1565u);       // SWA
  EXPECT_EQ(layer_tensors(c, 1).size(), 1565u);
  EXPECT_EQ(layer_tensors(c, 2).size(), 1565u + 11);  // CSA
  EXPECT_EQ(layer_tensors(c, 3).size(), 1565u + 4);   // HCA
  EXPECT_EQ(layer_tensors(c, 43).size(), 1575u);      // MTP
  size_t main = 0;
  for (int l = 0; l < 43; ++l) main += layer_tensors(c, l).size();
  EXPECT_EQ(main, 67606u);
  // 82 distinct name patterns after replacing every integer by one placeholder.
  std::set<std::string> patterns;
  for (const auto& s : t) {
    std::string p;
    for (size_t i = 0; i < s.name.size(); ++i) {
      if (std::isdigit(static_cast<unsigned char>(s.name[i]))) {
        p += '#';
        while (i + 1 < s.name.size() && std::isdigit(static_cast<unsigned char>(s.name[i + 1]))) ++i;
      } else {
        p += s.name[i];
      }
    }
    patterns.insert(p);
  }
  EXPECT_EQ(patterns.size(), 82u);
  // ≈ 159.6 GB (checkpoint.md §1).
  double bytes = 0;
  for (const auto& s : t) bytes += static_cast<double>(s.n_bytes());
  EXPECT_NEAR(bytes / 1e9, 159.6, 0.05);
  // Table order: globals first, scales directly after their matrix.
  EXPECT_EQ(t[0].name, "embed.weight");
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].role == TensorRole::kScale) {
      ASSERT_GT(i, 0u);
      EXPECT_EQ(t[i - 1].name, t[i].scale_of);
      EXPECT_EQ(t[i - 1].scale_name, t[i].name);
    }
  }
}

TEST(CheckpointTable, FlashShapesAndDtypes) {
  const ModelConfig c = *preset_config("flash", true);
  const auto m = by_name(expected_tensors(c));
  // §5.1
  expect_tensor(m, "embed.weight", DType::kBF16, {129280, 4096});
  expect_tensor(m, "head.weight", DType::kBF16, {129280, 4096});
  expect_tensor(m, "norm.weight", DType::kBF16, {4096});
  expect_tensor(m, "hc_head_fn", DType::kF32, {4, 16384});
  expect_tensor(m, "hc_head_base", DType::kF32, {4});
  expect_tensor(m, "hc_head_scale", DType::kF32, {1});
  // §5.2
  const std::string p = "layers.7.";
  expect_tensor(m, p + "attn_norm.weight", DType::kBF16, {4096});
  expect_tensor(m, p + "ffn_norm.weight", DType::kBF16, {4096});
  expect_tensor(m, p + "hc_attn_fn", DType::kF32, {24, 16384});
  expect_tensor(m, p + "hc_ffn_base", DType::kF32, {24});
  expect_tensor(m, p + "hc_ffn_scale", DType::kF32, {3});
  expect_tensor(m, p + "attn.attn_sink", DType::kF32, {64});
  expect_tensor(m, p + "attn.wq_a.weight", DType::kF8_E4M3, {1024, 4096});
  expect_tensor(m, p + "attn.wq_a.scale", DType::kF8_E8M0, {8, 32});
  expect_tensor(m, p + "attn.q_norm.weight", DType::kBF16, {1024});
  expect_tensor(m, p + "attn.wq_b.weight", DType::kF8_E4M3, {32768, 1024});
  expect_tensor(m, p + "attn.wq_b.scale", DType::kF8_E8M0, {256, 8});
  expect_tensor(m, p + "attn.wkv.weight", DType::kF8_E4M3, {512, 4096});
  expect_tensor(m, p + "attn.wkv.scale", DType::kF8_E8M0, {4, 32});
  expect_tensor(m, p + "attn.kv_norm.weight", DType::kBF16, {512});
  expect_tensor(m, p + "attn.wo_a.weight", DType::kF8_E4M3, {8192, 4096});
  expect_tensor(m, p + "attn.wo_a.scale", DType::kF8_E8M0, {64, 32});
  expect_tensor(m, p + "attn.wo_b.weight", DType::kF8_E4M3, {4096, 8192});
  expect_tensor(m, p + "attn.wo_b.scale", DType::kF8_E8M0, {32, 64});
  expect_tensor(m, p + "ffn.gate.weight", DType::kBF16, {256, 4096});
  expect_tensor(m, p + "ffn.gate.bias", DType::kF32, {256});
  expect_tensor(m, p + "ffn.shared_experts.w1.weight", DType::kF8_E4M3, {2048, 4096});
  expect_tensor(m, p + "ffn.shared_experts.w1.scale", DType::kF8_E8M0, {16, 32});
  expect_tensor(m, p + "ffn.shared_experts.w2.weight", DType::kF8_E4M3, {4096, 2048});
  expect_tensor(m, p + "ffn.shared_experts.w2.scale", DType::kF8_E8M0, {32, 16});
  expect_tensor(m, p + "ffn.shared_experts.w3.scale", DType::kF8_E8M0, {16, 32});
  expect_tensor(m, p + "ffn.experts.255.w1.weight", DType::kI8, {2048, 2048});
  expect_tensor(m, p + "ffn.experts.255.w1.scale", DType::kF8_E8M0, {2048, 128});
  expect_tensor(m, p + "ffn.experts.0.w2.weight", DType::kI8, {4096, 1024});
  expect_tensor(m, p + "ffn.experts.0.w2.scale", DType::kF8_E8M0, {4096, 64});
  expect_tensor(m, p + "ffn.experts.3.w3.weight", DType::kI8, {2048, 2048});
  EXPECT_EQ(m.count("layers.7.ffn.experts.256.w1.weight"), 0u);
  // Router kind: tid2eid for l < 3, bias otherwise.
  for (int l : {0, 1, 2}) {
    const std::string q = "layers." + std::to_string(l) + ".";
    expect_tensor(m, q + "ffn.gate.tid2eid", DType::kI64, {129280, 6});
    EXPECT_EQ(m.count(q + "ffn.gate.bias"), 0u);
  }
  EXPECT_EQ(m.count("layers.3.ffn.gate.tid2eid"), 0u);
  // §5.3 CSA (layer 4) and §5.4 HCA (layer 5); SWA layers have neither.
  expect_tensor(m, "layers.4.attn.compressor.wkv.weight", DType::kBF16, {1024, 4096});
  expect_tensor(m, "layers.4.attn.compressor.wgate.weight", DType::kBF16, {1024, 4096});
  expect_tensor(m, "layers.4.attn.compressor.ape", DType::kF32, {4, 1024});
  expect_tensor(m, "layers.4.attn.compressor.norm.weight", DType::kBF16, {512});
  expect_tensor(m, "layers.4.attn.indexer.wq_b.weight", DType::kF8_E4M3, {8192, 1024});
  expect_tensor(m, "layers.4.attn.indexer.wq_b.scale", DType::kF8_E8M0, {64, 8});
  expect_tensor(m, "layers.4.attn.indexer.weights_proj.weight", DType::kBF16, {64, 4096});
  expect_tensor(m, "layers.4.attn.indexer.compressor.wkv.weight", DType::kBF16, {256, 4096});
  expect_tensor(m, "layers.4.attn.indexer.compressor.wgate.weight", DType::kBF16, {256, 4096});
  expect_tensor(m, "layers.4.attn.indexer.compressor.ape", DType::kF32, {4, 256});
  expect_tensor(m, "layers.4.attn.indexer.compressor.norm.weight", DType::kBF16, {128});
  expect_tensor(m, "layers.5.attn.compressor.wkv.weight", DType::kBF16, {512, 4096});
  expect_tensor(m, "layers.5.attn.compressor.ape", DType::kF32, {128, 512});
  expect_tensor(m, "layers.5.attn.compressor.norm.weight", DType::kBF16, {512});
  EXPECT_EQ(m.count("layers.5.attn.indexer.wq_b.weight"), 0u);
  EXPECT_EQ(m.count("layers.1.attn.compressor.wkv.weight"), 0u);
  // §5.5 MTP
  expect_tensor(m, "mtp.0.e_proj.weight", DType::kF8_E4M3, {4096, 4096});
  expect_tensor(m, "mtp.0.e_proj.scale", DType::kF8_E8M0, {32, 32});
  expect_tensor(m, "mtp.0.h_proj.scale", DType::kF8_E8M0, {32, 32});
  expect_tensor(m, "mtp.0.enorm.weight", DType::kBF16, {4096});
  expect_tensor(m, "mtp.0.hnorm.weight", DType::kBF16, {4096});
  expect_tensor(m, "mtp.0.norm.weight", DType::kBF16, {4096});
  expect_tensor(m, "mtp.0.hc_head_fn", DType::kF32, {4, 16384});
  expect_tensor(m, "mtp.0.hc_head_scale", DType::kF32, {1});
  expect_tensor(m, "mtp.0.ffn.gate.bias", DType::kF32, {256});
  expect_tensor(m, "mtp.0.ffn.experts.17.w2.weight", DType::kI8, {4096, 1024});
  expect_tensor(m, "mtp.0.attn.wo_a.weight", DType::kF8_E4M3, {8192, 4096});
  EXPECT_EQ(m.count("mtp.0.ffn.gate.tid2eid"), 0u);
  EXPECT_EQ(m.count("mtp.0.attn.compressor.wkv.weight"), 0u);
  EXPECT_EQ(m.count("mtp.0.embed.weight"), 0u);
  // Roles and flags.
  const auto& wo_a = m.at("layers.7.attn.wo_a.weight");
  EXPECT_EQ(wo_a.role, TensorRole::kMatrix);
  EXPECT_FALSE(wo_a.actq);
  EXPECT_EQ(wo_a.out, 8192);
  EXPECT_EQ(wo_a.in, 4096);
  EXPECT_EQ(wo_a.scale_name, "layers.7.attn.wo_a.scale");
  EXPECT_TRUE(m.at("layers.7.attn.wo_b.weight").actq);
  const auto& e = m.at("layers.7.ffn.experts.0.w2.weight");
  EXPECT_TRUE(e.routed_expert);
  EXPECT_EQ(e.form, StorageForm::kFP4);
  EXPECT_EQ(e.out, 4096);
  EXPECT_EQ(e.in, 2048);
  const auto& es = m.at("layers.7.ffn.experts.0.w2.scale");
  EXPECT_EQ(es.role, TensorRole::kScale);
  EXPECT_EQ(es.form, StorageForm::kFP4);
  EXPECT_EQ(es.scale_of, "layers.7.ffn.experts.0.w2.weight");
  EXPECT_EQ(m.at("layers.7.ffn.gate.weight").role, TensorRole::kPlain);
  EXPECT_EQ(m.at("layers.7.ffn.gate.bias").form, StorageForm::kF32);
  EXPECT_EQ(m.at("layers.0.ffn.gate.tid2eid").form, StorageForm::kI64);
  EXPECT_EQ(m.at("layers.7.attn.wq_a.weight").layer, 7);
  EXPECT_EQ(m.at("mtp.0.e_proj.weight").layer, 43);
  EXPECT_EQ(m.at("embed.weight").layer, -1);
}

TEST(CheckpointTable, Bf16VariantHasNoScales) {
  const ModelConfig c = *preset_config("flash", false);
  const auto t = expected_tensors(c);
  // 69,187 minus one scale per quantized matrix: per layer 8 FP8-class + 768 experts,
  // + 1 (indexer.wq_b) per CSA layer, + 2 (e_proj, h_proj) in MTP.
  EXPECT_EQ(t.size(), 69187u - (44u * 776 + 21 + 2));
  const auto m = by_name(t);
  for (const auto& s : t) EXPECT_NE(s.role, TensorRole::kScale) << s.name;
  expect_tensor(m, "layers.7.attn.wq_a.weight", DType::kBF16, {1024, 4096});
  expect_tensor(m, "layers.7.ffn.experts.0.w1.weight", DType::kBF16, {2048, 4096});
  expect_tensor(m, "layers.7.ffn.experts.0.w2.weight", DType::kBF16, {4096, 2048});
  expect_tensor(m, "mtp.0.h_proj.weight", DType::kBF16, {4096, 4096});
  EXPECT_EQ(m.at("layers.7.attn.wq_a.weight").form, StorageForm::kBF16);
}

TEST(CheckpointTable, ExpertDtypeSelectsExpertForm) {
  ModelConfig c = *preset_config("tiny", true);
  c.expert_dtype = "fp8";
  auto m = by_name(expected_tensors(c));
  expect_tensor(m, "layers.0.ffn.experts.0.w1.weight", DType::kF8_E4M3, {128, 128});
  expect_tensor(m, "layers.0.ffn.experts.0.w1.scale", DType::kF8_E8M0, {1, 1});
  c.expert_dtype.reset();  // default FP8
  m = by_name(expected_tensors(c));
  expect_tensor(m, "layers.0.ffn.experts.0.w1.weight", DType::kF8_E4M3, {128, 128});
}

TEST(CheckpointTable, TinyShapes) {
  const ModelConfig c = *preset_config("tiny", true);
  const auto m = by_name(expected_tensors(c));
  expect_tensor(m, "layers.0.attn.wo_a.weight", DType::kF8_E4M3, {512, 80});
  expect_tensor(m, "layers.0.attn.wo_a.scale", DType::kF8_E8M0, {4, 1});
  expect_tensor(m, "layers.0.attn.wq_b.weight", DType::kF8_E4M3, {320, 128});
  expect_tensor(m, "layers.0.attn.wq_b.scale", DType::kF8_E8M0, {3, 1});
  expect_tensor(m, "layers.0.ffn.gate.tid2eid", DType::kI64, {512, 2});
  expect_tensor(m, "layers.1.ffn.gate.tid2eid", DType::kI64, {512, 2});
  expect_tensor(m, "layers.2.ffn.gate.bias", DType::kF32, {8});
  expect_tensor(m, "layers.1.attn.indexer.wq_b.weight", DType::kF8_E4M3, {64, 128});
  expect_tensor(m, "layers.1.attn.indexer.compressor.ape", DType::kF32, {4, 64});
  expect_tensor(m, "layers.2.attn.compressor.ape", DType::kF32, {8, 80});
  expect_tensor(m, "layers.2.attn.compressor.wkv.weight", DType::kBF16, {80, 128});
  expect_tensor(m, "layers.1.attn.compressor.wkv.weight", DType::kBF16, {160, 128});
  expect_tensor(m, "layers.3.ffn.experts.7.w2.weight", DType::kI8, {128, 64});
  expect_tensor(m, "layers.3.ffn.experts.7.w2.scale", DType::kF8_E8M0, {128, 4});
  expect_tensor(m, "mtp.0.ffn.gate.bias", DType::kF32, {8});
  expect_tensor(m, "hc_head_fn", DType::kF32, {4, 512});
  expect_tensor(m, "layers.0.hc_attn_fn", DType::kF32, {24, 512});
  EXPECT_EQ(layer_prefix(c, 4), "mtp.0.");
  EXPECT_EQ(layer_prefix(c, 3), "layers.3.");
  EXPECT_EQ(scale_name_for("a.b.weight"), "a.b.scale");
}

TEST(CheckpointTable, MatrixSpecsForms) {
  TensorSpec like;
  like.name = "x.weight";
  like.out = 300;
  like.in = 320;
  auto b = matrix_specs(like, StorageForm::kBF16);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].shape, (Shape{300, 320}));
  EXPECT_EQ(b[0].dtype, DType::kBF16);
  auto f8 = matrix_specs(like, StorageForm::kFP8);
  ASSERT_EQ(f8.size(), 2u);
  EXPECT_EQ(f8[1].shape, (Shape{3, 3}));  // ceil(300/128), ceil(320/128)
  EXPECT_EQ(f8[1].name, "x.scale");
  auto f4 = matrix_specs(like, StorageForm::kFP4);
  ASSERT_EQ(f4.size(), 2u);
  EXPECT_EQ(f4[0].shape, (Shape{300, 160}));
  EXPECT_EQ(f4[0].dtype, DType::kI8);
  EXPECT_EQ(f4[1].shape, (Shape{300, 10}));
  EXPECT_EQ(f4[0].n_bytes(), 300u * 160);
}

}  // namespace
}  // namespace dsv4
