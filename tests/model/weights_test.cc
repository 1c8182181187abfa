// Checkpoint loader on hand-built tiny checkpoints (written with SafetensorsWriter): both
// storage variants, the §5.7 exceptions, and every error of the checklist (checkpoint.md §7).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kernels/linear/linear.h"
#include "model/checkpoint_table.h"
#include "model/config.h"
#include "model/placement.h"
#include "model/weights.h"
#include "numeric/e4m3.h"
#include "numeric/ue8m0.h"
#include "support/contains.h"
#include "support/tmp_dir.h"

namespace dsv4 {
namespace {

using Shape = std::vector<int64_t>;

using test::Contains;

// A fresh directory under $DSV4_TEST_TMP (or /tmp), removed at scope exit.
using test::TmpDir;

struct Tensor {
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};
using Ckpt = std::map<std::string, Tensor>;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Valid deterministic contents for one tensor of the table.
Tensor fill(const TensorSpec& s, const ModelConfig& cfg) {
  Tensor t{s.dtype, s.shape, std::vector<uint8_t>(s.n_bytes())};
  const int64_t n = numel(s.shape);
  for (int64_t i = 0; i < n; ++i) {
    switch (s.dtype) {
      case DType::kBF16: {
        const bf16 v = bf16::from_float(0.01f * static_cast<float>(i % 17) - 0.05f);
        std::memcpy(&t.bytes[i * 2], &v, 2);
        break;
      }
      case DType::kF32: {
        const float v = 0.25f * static_cast<float>(i % 5 - 2);
        std::memcpy(&t.bytes[i * 4], &v, 4);
        break;
      }
      case DType::kF8_E4M3: {
        uint8_t c = static_cast<uint8_t>((i * 37) & 0xFF);
        if ((c & 0x7F) == 0x7F) c = 0x38;
        t.bytes[i] = c;
        break;
      }
      case DType::kF8_E8M0: t.bytes[i] = static_cast<uint8_t>(120 + i % 10); break;
      case DType::kI8: t.bytes[i] = static_cast<uint8_t>((i * 13) & 0xFF); break;
      case DType::kI64: {  // tid2eid: row t holds (t + k) % E, distinct
        const int64_t K = s.shape[1];
        const int64_t v = (i / K + i % K) % cfg.n_routed_experts;
        std::memcpy(&t.bytes[i * 8], &v, 8);
        break;
      }
      default: ADD_FAILURE() << "unexpected dtype in table for " << s.name;
    }
  }
  return t;
}

Ckpt make_ckpt(const ModelConfig& cfg) {
  Ckpt c;
  for (const TensorSpec& s : expected_tensors(cfg)) c[s.name] = fill(s, cfg);
  return c;
}

void write_ckpt(const std::string& dir, const ModelConfig& cfg, const Ckpt& ckpt) {
  std::ofstream(dir + "/config.json") << to_config_json_text(cfg);
  SafetensorsWriter w;
  for (const auto& [name, t] : ckpt) w.add(name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
  const Status st = w.write(dir + "/model.safetensors");
  ASSERT_TRUE(st.ok()) << st.message();
}

// Writes `ckpt` with `file_cfg` as config.json and loads it with the config read back.
Result<Weights> write_and_load(const TmpDir& dir, const ModelConfig& file_cfg, const Ckpt& ckpt,
                               LoadReport* report) {
  write_ckpt(dir.path(), file_cfg, ckpt);
  auto cfg = load_config(dir.path());
  if (!cfg.ok()) return cfg.status();
  auto set = SafetensorsSet::open_dir(dir.path());
  if (!set.ok()) return set.status();
  return load_weights(*set, *cfg, report);
}

std::string load_error(const ModelConfig& cfg, const Ckpt& ckpt) {
  TmpDir dir;
  LoadReport rep;
  auto w = write_and_load(dir, cfg, ckpt, &rep);
  EXPECT_FALSE(w.ok());
  return w.message();
}

ModelConfig tiny(bool quantized) { return *preset_config("tiny", quantized); }

TEST(Weights, LoadsReleasedLayout) {
  const ModelConfig cfg = tiny(true);
  const Ckpt ckpt = make_ckpt(cfg);
  TmpDir dir;
  LoadReport rep;
  auto r = write_and_load(dir, cfg, ckpt, &rep);
  ASSERT_TRUE(r.ok()) << r.message();
  const Weights& w = *r;
  EXPECT_EQ(rep.n_tensors, static_cast<int64_t>(expected_tensors(cfg).size()));
  EXPECT_TRUE(rep.unexpected.empty());
  EXPECT_TRUE(rep.warnings.empty());
  EXPECT_EQ(rep.n_bf16_fallback, 0);
  ASSERT_EQ(w.layers.size(), 4u);
  ASSERT_EQ(w.mtp.size(), 1u);
  EXPECT_NE(w.embed, nullptr);
  EXPECT_EQ(w.head.w.format, WeightFormat::kBF16);
  EXPECT_EQ(w.head.w.out, 512);
  EXPECT_NE(w.hc_head.scale, nullptr);

  const AttentionKind kinds[] = {AttentionKind::kSWA, AttentionKind::kCSA, AttentionKind::kHCA,
                                 AttentionKind::kCSA};
  for (int l = 0; l < 4; ++l) {
    const LayerWeights& L = w.layers[l];
    EXPECT_EQ(L.layer, l);
    EXPECT_EQ(L.kind, kinds[l]);
    EXPECT_EQ(L.hash, l < 2);
    EXPECT_EQ(L.ffn.bias == nullptr, l < 2);
    EXPECT_EQ(L.ffn.tid2eid.size(), l < 2 ? 512u * 2 : 0u);
    EXPECT_EQ(L.attn.compressor.present, l != 0);
    EXPECT_EQ(L.attn.indexer.present, l == 1 || l == 3);
    EXPECT_EQ(L.ffn.experts.size(), 8u);
    // FP8-class linears: codes as stored, actq on.
    for (const Linear* lin : {&L.attn.wq_a, &L.attn.wq_b, &L.attn.wkv, &L.attn.wo_b,
                              &L.ffn.shared.w1, &L.ffn.shared.w2, &L.ffn.shared.w3}) {
      EXPECT_EQ(lin->stored, StorageForm::kFP8);
      EXPECT_EQ(lin->w.format, WeightFormat::kFP8);
      EXPECT_TRUE(lin->actq);
      EXPECT_NE(lin->w.scale, nullptr);
    }
    // wo_a: FP8 as stored (a view of the file), no actq.
    EXPECT_EQ(L.attn.wo_a.stored, StorageForm::kFP8);
    EXPECT_EQ(L.attn.wo_a.w.format, WeightFormat::kFP8);
    EXPECT_FALSE(L.attn.wo_a.actq);
    EXPECT_NE(L.attn.wo_a.w.scale, nullptr);
    EXPECT_EQ(L.attn.wo_a.w.out, 512);
    EXPECT_EQ(L.attn.wo_a.w.in, 80);
    // Routed experts: packed FP4 with the logical input width.
    const Linear& e2 = L.ffn.experts[5].w2;
    EXPECT_EQ(e2.stored, StorageForm::kFP4);
    EXPECT_EQ(e2.w.format, WeightFormat::kFP4);
    EXPECT_EQ(e2.w.out, 128);
    EXPECT_EQ(e2.w.in, 128);
    EXPECT_TRUE(e2.actq);
    EXPECT_EQ(L.ffn.gate.w.format, WeightFormat::kBF16);
    EXPECT_FALSE(L.ffn.gate.actq);
  }
  // Views are zero-copy, except matrices the loader rewrites into the kernels' dot layouts
  // (on every variant): FP8 of whole 16 x 128 tiles, same codes.
  const auto* view = w.files.find("layers.2.attn.wq_b.weight");
  ASSERT_NE(view, nullptr);
  const LinearWeight& wq_b = w.layers[2].attn.wq_b.w;
  ASSERT_TRUE(wq_b.fp8_dot);
  LinearWeight stored = wq_b;
  stored.data = view->data;
  stored.fp8_dot = false;
  for (int64_t o = 0; o < wq_b.out; ++o)
    for (int64_t i = 0; i < wq_b.in; ++i) ASSERT_EQ(fp8_code(wq_b, o, i), fp8_code(stored, o, i)) << o << ", " << i;
  const auto* wo_a_view = w.files.find("layers.3.attn.wo_a.weight");  // K = 80: no tiles
  ASSERT_NE(wo_a_view, nullptr);
  EXPECT_FALSE(w.layers[3].attn.wo_a.w.fp8_dot);
  EXPECT_EQ(w.layers[3].attn.wo_a.w.data, wo_a_view->data);
  // tid2eid as written: row t = (t + k) % 8.
  EXPECT_EQ(w.layers[1].ffn.tid2eid[2 * 300 + 1], (300 + 1) % 8);
  // Compressor widths: CSA 2·Dh with overlap, HCA Dh.
  EXPECT_EQ(w.layers[1].attn.compressor.width, 160);
  EXPECT_EQ(w.layers[2].attn.compressor.width, 80);
  EXPECT_EQ(w.layers[2].attn.compressor.ratio, 8);
  EXPECT_EQ(w.layers[1].attn.indexer.compressor.width, 64);
  EXPECT_EQ(w.layers[1].attn.indexer.weights_proj.w.out, 2);
  // wo_a decodes to W = e4m3(code) · 2^(scale − 127), exact in bf16 (ceil scale grid, K = 80).
  const Tensor& codes = ckpt.at("layers.3.attn.wo_a.weight");
  const Tensor& sc = ckpt.at("layers.3.attn.wo_a.scale");  // [4, 1]
  for (int64_t o : {0, 127, 128, 300, 511})
    for (int64_t i : {0, 41, 79}) {
      const float want = e4m3_decode(codes.bytes[o * 80 + i]) * ue8m0_decode(sc.bytes[o / 128]);
      EXPECT_EQ(kernels::weight_at(w.layers[3].attn.wo_a.w, o, i), want) << o << "," << i;
      EXPECT_EQ(bf16::from_float(want).to_float(), want) << o << "," << i;
    }
  // MTP layer: SWA, score routing, own projections and head params.
  const MtpWeights& m = w.mtp[0];
  EXPECT_EQ(m.block.layer, 4);
  EXPECT_EQ(m.block.kind, AttentionKind::kSWA);
  EXPECT_FALSE(m.block.hash);
  EXPECT_NE(m.block.ffn.bias, nullptr);
  EXPECT_EQ(m.e_proj.stored, StorageForm::kFP8);
  EXPECT_TRUE(m.h_proj.actq);
  EXPECT_NE(m.hc_head.fn, nullptr);
  EXPECT_NE(m.enorm, nullptr);
}

TEST(Weights, LoadsBf16Variant) {
  const ModelConfig cfg = *preset_config("tiny2", false);
  TmpDir dir;
  LoadReport rep;
  auto r = write_and_load(dir, cfg, make_ckpt(cfg), &rep);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(rep.unexpected.empty());
  for (const LayerWeights& L : r->layers) {
    for (const Linear* lin : {&L.attn.wq_a, &L.attn.wo_a, &L.attn.wo_b, &L.ffn.experts[0].w1,
                              &L.ffn.shared.w2}) {
      EXPECT_EQ(lin->stored, StorageForm::kBF16);
      EXPECT_EQ(lin->w.format, WeightFormat::kBF16);
      EXPECT_FALSE(lin->actq);
      EXPECT_EQ(lin->w.scale, nullptr);
    }
    EXPECT_EQ(L.ffn.experts[0].w2.w.in, 256);
  }
}

TEST(Weights, MixedBf16PerTensorAccepted) {
  const ModelConfig cfg = tiny(true);
  Ckpt ckpt = make_ckpt(cfg);
  // The demo's converted layout: wo_a in BF16, its scale dropped; one expert matrix too.
  for (const char* name : {"layers.1.attn.wo_a.weight", "layers.2.ffn.experts.3.w2.weight"}) {
    const auto& orig = ckpt.at(name);
    const Shape logical = orig.dtype == DType::kI8 ? Shape{orig.shape[0], orig.shape[1] * 2}
                                                   : orig.shape;
    ckpt[name] = Tensor{DType::kBF16, logical, std::vector<uint8_t>(numel(logical) * 2, 0)};
    ckpt.erase(scale_name_for(name));
  }
  TmpDir dir;
  LoadReport rep;
  auto r = write_and_load(dir, cfg, ckpt, &rep);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(rep.n_bf16_fallback, 2);
  const Linear& wo_a = r->layers[1].attn.wo_a;
  EXPECT_EQ(wo_a.stored, StorageForm::kBF16);
  EXPECT_FALSE(wo_a.actq);
  const Linear& e = r->layers[2].ffn.experts[3].w2;
  EXPECT_EQ(e.stored, StorageForm::kBF16);
  EXPECT_FALSE(e.actq);  // actq follows the stored form
  EXPECT_EQ(r->layers[2].ffn.experts[2].w2.stored, StorageForm::kFP4);
}

TEST(Weights, Fp4ExpertsDetectedWithoutExpertDtype) {
  const ModelConfig fp4 = tiny(true);
  ModelConfig no_field = fp4;
  no_field.expert_dtype.reset();  // the first Flash config.json revision
  TmpDir dir;
  LoadReport rep;
  auto r = write_and_load(dir, no_field, make_ckpt(fp4), &rep);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_TRUE(Contains(rep.warnings[0], "expert_dtype"));
  EXPECT_TRUE(Contains(rep.warnings[0], "FP4"));
  EXPECT_EQ(r->layers[0].ffn.experts[0].w1.stored, StorageForm::kFP4);
  // And the default (FP8 experts) also loads with the same config.
  ModelConfig fp8 = fp4;
  fp8.expert_dtype = "fp8";
  TmpDir dir2;
  auto r2 = write_and_load(dir2, no_field, make_ckpt(fp8), &rep);
  ASSERT_TRUE(r2.ok()) << r2.message();
  EXPECT_TRUE(rep.warnings.empty());
  EXPECT_EQ(r2->layers[0].ffn.experts[0].w1.stored, StorageForm::kFP8);
}

TEST(Weights, ExpertFormMustMatchExpertDtype) {
  ModelConfig fp8 = tiny(true);
  fp8.expert_dtype = "fp8";
  const std::string m = load_error(tiny(true), make_ckpt(fp8));
  EXPECT_TRUE(Contains(m, "layers.0.ffn.experts.0.w1.weight"));
  EXPECT_TRUE(Contains(m, "I8 [128, 64] (FP4)"));
  EXPECT_TRUE(Contains(m, "found F8_E4M3 [128, 128]"));
}

TEST(Weights, UnexpectedTensorsReported) {
  const ModelConfig cfg = tiny(true);
  Ckpt ckpt = make_ckpt(cfg);
  ckpt["layers.0.attn.extra"] = Tensor{DType::kF32, {2}, std::vector<uint8_t>(8)};
  ckpt["mtp.1.enorm.weight"] = Tensor{DType::kBF16, {128}, std::vector<uint8_t>(256)};
  TmpDir dir;
  LoadReport rep;
  auto r = write_and_load(dir, cfg, ckpt, &rep);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(rep.unexpected, (std::vector<std::string>{"layers.0.attn.extra", "mtp.1.enorm.weight"}));
}

TEST(Weights, WrongShapeNamesTensorAndBothShapes) {
  const ModelConfig cfg = tiny(true);
  Ckpt ckpt = make_ckpt(cfg);
  ckpt["layers.1.attn.kv_norm.weight"] = Tensor{DType::kBF16, {79}, std::vector<uint8_t>(158)};
  std::string m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "'layers.1.attn.kv_norm.weight'"));
  EXPECT_TRUE(Contains(m, "expected BF16 [80]"));
  EXPECT_TRUE(Contains(m, "found BF16 [79]"));

  ckpt = make_ckpt(cfg);
  ckpt["layers.0.attn.wq_a.weight"].shape = {128, 64};
  ckpt["layers.0.attn.wq_a.weight"].bytes.resize(128 * 64);
  m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "'layers.0.attn.wq_a.weight'"));
  EXPECT_TRUE(Contains(m, "F8_E4M3 [128, 128] (FP8)"));
  EXPECT_TRUE(Contains(m, "found F8_E4M3 [128, 64]"));

  ckpt = make_ckpt(cfg);
  ckpt["layers.0.attn.wq_a.scale"] = Tensor{DType::kF8_E8M0, {1, 2}, std::vector<uint8_t>(2, 127)};
  m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "'layers.0.attn.wq_a.scale'"));
  EXPECT_TRUE(Contains(m, "expected F8_E8M0 [1, 1], found F8_E8M0 [1, 2]"));
}

TEST(Weights, WrongDtypeNamesTensor) {
  const ModelConfig cfg = tiny(true);
  Ckpt ckpt = make_ckpt(cfg);
  ckpt["hc_head_base"] = Tensor{DType::kBF16, {4}, std::vector<uint8_t>(8)};
  std::string m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "'hc_head_base'"));
  EXPECT_TRUE(Contains(m, "expected F32 [4], found BF16 [4]"));

  ckpt = make_ckpt(cfg);
  ckpt["layers.2.attn.wo_b.weight"].dtype = DType::kI8;
  m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "'layers.2.attn.wo_b.weight'"));
  EXPECT_TRUE(Contains(m, "found I8 [128, 512]"));
}

TEST(Weights, MissingTensorsListed) {
  const ModelConfig cfg = tiny(true);
  Ckpt ckpt = make_ckpt(cfg);
  ckpt.erase("layers.3.attn.attn_sink");
  ckpt.erase("mtp.0.hnorm.weight");
  ckpt.erase("layers.1.attn.indexer.compressor.ape");
  const std::string m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "missing 3 of the"));
  EXPECT_TRUE(Contains(m, "layers.1.attn.indexer.compressor.ape"));
  EXPECT_TRUE(Contains(m, "layers.3.attn.attn_sink"));
  EXPECT_TRUE(Contains(m, "mtp.0.hnorm.weight"));

  ckpt = make_ckpt(cfg);
  ckpt.erase("layers.0.attn.wkv.scale");
  const std::string m2 = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m2, "'layers.0.attn.wkv.scale': missing"));
}

TEST(Weights, ScaleByteOutOfRange) {
  const ModelConfig cfg = tiny(true);
  for (uint8_t bad : {uint8_t{26}, uint8_t{228}, uint8_t{255}, uint8_t{0}}) {
    Ckpt ckpt = make_ckpt(cfg);
    ckpt["layers.2.ffn.experts.1.w3.scale"].bytes[4 * 5 + 3] = bad;  // [128, 4]: row 5, col 3
    const std::string m = load_error(cfg, ckpt);
    EXPECT_TRUE(Contains(m, "'layers.2.ffn.experts.1.w3.scale'"));
    EXPECT_TRUE(Contains(m, fmt::format("scale byte {} at index 23 (row 5, column 3)", bad)));
    EXPECT_TRUE(Contains(m, "27..227"));
  }
  Ckpt ok = make_ckpt(cfg);
  ok["layers.2.attn.wo_b.scale"].bytes[0] = 27;
  ok["layers.2.attn.wo_b.scale"].bytes[1] = 227;
  TmpDir dir;
  LoadReport rep;
  EXPECT_TRUE(write_and_load(dir, cfg, ok, &rep).ok());
}

// A rank checks the bytes of what it reads only (LoadOptions::reads, model/placement.h): a
// corrupt expert outside its EP share loads; the rank holding it names the tensor.
TEST(Weights, RankReadsOnlyItsShare) {
  const ModelConfig cfg = tiny(true);  // 8 routed experts
  Ckpt ckpt = make_ckpt(cfg);
  ckpt["layers.2.ffn.experts.6.w1.scale"].bytes[0] = 0;
  TmpDir dir;
  write_ckpt(dir.path(), cfg, ckpt);
  auto set = SafetensorsSet::open_dir(dir.path());
  ASSERT_TRUE(set.ok());
  for (int ep_rank : {0, 1}) {  // ep 2: rank 0 holds experts 0-3, rank 1 experts 4-7
    const Topology t = *make_topology(2, ep_rank, 2, 1, 2);
    LoadOptions o;
    o.reads = [&](const std::string& name) { return rank_reads(name, cfg, t); };
    Result<Weights> w = load_weights(*set, cfg, nullptr, o);
    if (ep_rank == 0) {
      EXPECT_TRUE(w.ok()) << w.message();
    } else {
      ASSERT_FALSE(w.ok());
      EXPECT_TRUE(Contains(w.message(), "'layers.2.ffn.experts.6.w1.scale'"));
    }
  }
  EXPECT_FALSE(load_weights(*set, cfg, nullptr).ok());
}

TEST(Weights, Fp8NanCodeRejected) {
  const ModelConfig cfg = tiny(true);
  for (uint8_t nan : {uint8_t{0x7F}, uint8_t{0xFF}}) {
    Ckpt ckpt = make_ckpt(cfg);
    ckpt["layers.0.attn.wkv.weight"].bytes[128 * 3 + 17] = nan;
    const std::string m = load_error(cfg, ckpt);
    EXPECT_TRUE(Contains(m, "'layers.0.attn.wkv.weight'"));
    EXPECT_TRUE(Contains(m, fmt::format("NaN code 0x{:02X}", nan)));
    EXPECT_TRUE(Contains(m, "row 3, column 17"));
  }
}

void set_id(Ckpt& ckpt, const std::string& name, int64_t token, int64_t slot, int64_t id) {
  std::memcpy(&ckpt[name].bytes[(token * 2 + slot) * 8], &id, 8);
}

TEST(Weights, Tid2eidChecked) {
  const ModelConfig cfg = tiny(true);
  for (int64_t bad : {int64_t{8}, int64_t{-1}, int64_t{1} << 40}) {
    Ckpt ckpt = make_ckpt(cfg);
    set_id(ckpt, "layers.1.ffn.gate.tid2eid", 3, 1, bad);
    const std::string m = load_error(cfg, ckpt);
    EXPECT_TRUE(Contains(m, "'layers.1.ffn.gate.tid2eid'"));
    EXPECT_TRUE(Contains(m, fmt::format("expert id {} at token 3, slot 1", bad)));
    EXPECT_TRUE(Contains(m, "n_routed_experts = 8"));
  }
  Ckpt ckpt = make_ckpt(cfg);
  ckpt["layers.0.ffn.gate.tid2eid"] = Tensor{DType::kI64, {512, 3}, std::vector<uint8_t>(512 * 3 * 8)};
  std::string m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "expected I64 [512, 2], found I64 [512, 3]"));
  ckpt = make_ckpt(cfg);
  ckpt["layers.0.ffn.gate.tid2eid"].dtype = DType::kF32;
  ckpt["layers.0.ffn.gate.tid2eid"].shape = {512, 4};
  m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "'layers.0.ffn.gate.tid2eid'"));

  // Repeated ids in a row: loads, with a warning naming layer and token.
  ckpt = make_ckpt(cfg);
  set_id(ckpt, "layers.1.ffn.gate.tid2eid", 77, 0, 5);
  set_id(ckpt, "layers.1.ffn.gate.tid2eid", 77, 1, 5);
  TmpDir dir;
  LoadReport rep;
  auto r = write_and_load(dir, cfg, ckpt, &rep);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_TRUE(Contains(rep.warnings[0], "layer 1"));
  EXPECT_TRUE(Contains(rep.warnings[0], "token 77"));
  EXPECT_EQ(r->layers[1].ffn.tid2eid[77 * 2], 5);
}

TEST(Weights, ScaleNextToBf16MatrixRejected) {
  const ModelConfig cfg = tiny(false);
  Ckpt ckpt = make_ckpt(cfg);
  ckpt["layers.0.attn.wq_a.scale"] = Tensor{DType::kF8_E8M0, {1, 1}, {127}};
  std::string m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "'layers.0.attn.wq_a.scale'"));
  EXPECT_TRUE(Contains(m, "BF16 matrix 'layers.0.attn.wq_a.weight'"));
  // Quantized config, BF16 matrix that kept its scale.
  const ModelConfig q = tiny(true);
  ckpt = make_ckpt(q);
  ckpt["layers.0.attn.wq_a.weight"] = Tensor{DType::kBF16, {128, 128}, std::vector<uint8_t>(128 * 256)};
  m = load_error(q, ckpt);
  EXPECT_TRUE(Contains(m, "'layers.0.attn.wq_a.scale'"));
  // BF16 config, file in FP8: the table's BF16 form is the only one.
  ckpt = make_ckpt(q);
  m = load_error(cfg, ckpt);
  EXPECT_TRUE(Contains(m, "expected BF16 [128, 128] (BF16), found F8_E4M3 [128, 128]"));
}

// safetensors does not require aligned data: pack every tensor back to back (odd-sized
// scales first shift everything after them) and check that typed views get aligned copies.
TEST(Weights, MisalignedDataIsRealigned) {
  const ModelConfig cfg = tiny(true);
  const Ckpt ckpt = make_ckpt(cfg);
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (const auto& [name, t] : ckpt) {
    header[name] = {{"dtype", std::string(dtype_name(t.dtype))},
                    {"shape", t.shape},
                    {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  const std::string h = header.dump();  // no padding: data starts wherever the header ends
  std::vector<uint8_t> file(8);
  const uint64_t n = h.size();
  std::memcpy(file.data(), &n, 8);
  file.insert(file.end(), h.begin(), h.end());
  file.insert(file.end(), data.begin(), data.end());
  TmpDir dir;
  std::ofstream(dir.path() + "/config.json") << to_config_json_text(cfg);
  std::ofstream(dir.path() + "/model.safetensors", std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  auto set = SafetensorsSet::open_dir(dir.path());
  ASSERT_TRUE(set.ok()) << set.message();
  LoadReport rep;
  auto r = load_weights(*set, cfg, &rep);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_GT(rep.n_realigned, 0);
  EXPECT_EQ(static_cast<int64_t>(r->realigned.size()), rep.n_realigned);
  auto aligned = [](const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  const auto check_bf16 = [&](const bf16* p, const std::string& name) {
    ASSERT_TRUE(aligned(p, 2)) << name;
    EXPECT_EQ(std::memcmp(p, ckpt.at(name).bytes.data(), ckpt.at(name).bytes.size()), 0) << name;
  };
  const auto check_f32 = [&](const float* p, const std::string& name) {
    ASSERT_TRUE(aligned(p, 4)) << name;
    EXPECT_EQ(std::memcmp(p, ckpt.at(name).bytes.data(), ckpt.at(name).bytes.size()), 0) << name;
  };
  for (int l = 0; l < 4; ++l) {
    const LayerWeights& L = r->layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    check_bf16(L.attn_norm, p + "attn_norm.weight");
    check_bf16(L.attn.kv_norm, p + "attn.kv_norm.weight");
    check_f32(L.hc_attn.fn, p + "hc_attn_fn");
    check_f32(L.attn.attn_sink, p + "attn.attn_sink");
    check_bf16(static_cast<const bf16*>(L.ffn.gate.w.data), p + "ffn.gate.weight");
  }
  check_f32(r->hc_head.base, "hc_head_base");
  check_bf16(r->embed, "embed.weight");
}

// ---- DSpark drafter (dspark.md §1.3-§1.5, §6 "Loader") ----

ModelConfig tiny_ds(bool quantized) { return *preset_config("tiny-ds", quantized); }

// Erases every tensor whose name starts with `prefix`.
void erase_prefix(Ckpt& c, const std::string& prefix) {
  std::erase_if(c, [&](const auto& kv) { return kv.first.starts_with(prefix); });
}

TEST(Weights, DsparkLoadsBothLayoutsAndTakesEveryStageTensorOnce) {
  for (bool q : {true, false}) {
    SCOPED_TRACE(q ? "released" : "bf16");
    const ModelConfig cfg = tiny_ds(q);
    const Ckpt ckpt = make_ckpt(cfg);
    TmpDir dir;
    LoadReport rep;
    auto w = write_and_load(dir, cfg, ckpt, &rep);
    ASSERT_TRUE(w.ok()) << w.message();
    EXPECT_TRUE(rep.unexpected.empty());
    EXPECT_TRUE(w->mtp.empty());
    ASSERT_TRUE(w->dspark.present);
    EXPECT_EQ(w->dspark.stages.size(), 3u);
    std::vector<std::string> want;
    for (const auto& [name, t] : ckpt)
      if (name.starts_with("mtp.")) want.push_back(name);
    EXPECT_EQ(rep.drafter, want);  // both sorted
    EXPECT_EQ(want.size(), q ? 241u : 144u);
  }
  // A tiny checkpoint with its MTP layer still loads as MTP.
  const ModelConfig mtp = tiny(true);
  TmpDir dir;
  auto w = write_and_load(dir, mtp, make_ckpt(mtp), nullptr);
  ASSERT_TRUE(w.ok()) << w.message();
  EXPECT_EQ(w->mtp.size(), 1u);
  EXPECT_FALSE(w->dspark.present);
}

TEST(Weights, DsparkRefusalsNameTheFieldOrTensor) {
  const ModelConfig cfg = tiny_ds(true);
  // One dspark_* field missing: the config does not parse.
  {
    nlohmann::json j = to_config_json(cfg);
    j.erase("dspark_markov_rank");
    auto r = parse_config_json(j.dump(), "config.json");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(Contains(r.message(), "dspark_markov_rank missing"));
  }
  // MTP tensors next to the dspark_* fields.
  {
    Ckpt c = make_ckpt(cfg);
    const Ckpt m = make_ckpt(tiny(true));
    c["mtp.0.e_proj.weight"] = m.at("mtp.0.e_proj.weight");
    c["mtp.0.e_proj.scale"] = m.at("mtp.0.e_proj.scale");
    EXPECT_TRUE(Contains(load_error(cfg, c), "'mtp.0.e_proj.weight' in a DSpark checkpoint"));
  }
  // DSpark tensors without the fields.
  {
    ModelConfig no_fields = cfg;
    no_fields.dspark.reset();
    no_fields.compress_ratios.resize(5);
    Ckpt c = make_ckpt(tiny(true));
    erase_prefix(c, "mtp.");
    for (const auto& [name, t] : make_ckpt(cfg))
      if (name.starts_with("mtp.")) c[name] = t;
    EXPECT_TRUE(Contains(load_error(no_fields, c), "dspark_markov_rank missing"));
  }
  // No main_proj.
  {
    Ckpt c = make_ckpt(cfg);
    c.erase("mtp.0.main_proj.weight");
    c.erase("mtp.0.main_proj.scale");
    EXPECT_TRUE(Contains(load_error(cfg, c), "mtp.0.main_proj.weight"));
  }
  // Stages {0, 2}.
  {
    Ckpt c = make_ckpt(cfg);
    erase_prefix(c, "mtp.1.");
    EXPECT_TRUE(Contains(load_error(cfg, c), "stages {0, 2}"));
  }
  // A stage without one expert.
  {
    Ckpt c = make_ckpt(cfg);
    erase_prefix(c, "mtp.1.ffn.experts.7.");
    const std::string m = load_error(cfg, c);
    EXPECT_TRUE(Contains(m, "missing 3 of the"));
    EXPECT_TRUE(Contains(m, "mtp.1.ffn.experts.7.w1.weight"));
  }
  // A head set on a middle stage.
  {
    Ckpt c = make_ckpt(cfg);
    c["mtp.1.norm.weight"] = c.at("mtp.2.norm.weight");
    EXPECT_TRUE(Contains(load_error(cfg, c), "'mtp.1.norm.weight': not a tensor of this DSpark"));
  }
  // compress_ratios one entry short: two stages announced, three present.
  {
    ModelConfig short_cfg = cfg;
    short_cfg.compress_ratios.pop_back();
    const std::string m = load_error(short_cfg, make_ckpt(cfg));
    EXPECT_TRUE(Contains(m, "hold 3 DSpark stages"));
    EXPECT_TRUE(Contains(m, "compress_ratios has 6 entries"));
  }
  // Config rules: a non-zero stage ratio, unsorted Lt, ν >= V, and no stage at all.
  {
    ModelConfig c = cfg;
    c.compress_ratios[5] = 4;
    EXPECT_TRUE(Contains(validate(c).message(), "compress_ratios[5]' = 4 must be 0: the DSpark stage 1"));
    c = cfg;
    c.dspark->target_layer_ids = {1, 3, 2};
    EXPECT_TRUE(Contains(validate(c).message(), "'dspark_target_layer_ids' = [1, 3, 2] must be strictly ascending"));
    c = cfg;
    c.dspark->target_layer_ids = {1, 4};
    EXPECT_TRUE(Contains(validate(c).message(), "'dspark_target_layer_ids[1]' = 4 must lie in [0, num_hidden_layers = 4)"));
    c = cfg;
    c.dspark->noise_token_id = 512;
    EXPECT_TRUE(Contains(validate(c).message(), "'dspark_noise_token_id' = 512 must lie in [0, vocab_size = 512)"));
    c = cfg;
    c.compress_ratios.resize(4);
    EXPECT_TRUE(Contains(validate(c).message(), "'compress_ratios' has 4 entries: a DSpark checkpoint"));
    c = cfg;
    c.dspark->markov_rank = 0;
    EXPECT_TRUE(Contains(validate(c).message(), "'dspark_markov_rank' = 0"));
    c = cfg;
    c.dspark->block_size = 0;
    EXPECT_TRUE(Contains(validate(c).message(), "'dspark_block_size' = 0"));
  }
  // Markov tables [V, Rm + 1].
  {
    Ckpt c = make_ckpt(cfg);
    c["mtp.2.markov_head.markov_w1.weight"] =
        Tensor{DType::kBF16, {512, 49}, std::vector<uint8_t>(512 * 49 * 2)};
    const std::string m = load_error(cfg, c);
    EXPECT_TRUE(Contains(m, "'mtp.2.markov_head.markov_w1.weight'"));
    EXPECT_TRUE(Contains(m, "expected BF16 [512, 48], found BF16 [512, 49]"));
  }
  // A .scale next to markov_w1 (BF16 in every variant).
  {
    Ckpt c = make_ckpt(cfg);
    c["mtp.2.markov_head.markov_w1.scale"] = Tensor{DType::kF8_E8M0, {4, 1}, std::vector<uint8_t>(4, 127)};
    EXPECT_TRUE(Contains(load_error(cfg, c), "'mtp.2.markov_head.markov_w1.scale': a scale next to"));
  }
  // An unknown mtp.* name, and a malformed stage prefix.
  {
    Ckpt c = make_ckpt(cfg);
    c["mtp.0.attn.extra"] = Tensor{DType::kF32, {2}, std::vector<uint8_t>(8)};
    EXPECT_TRUE(Contains(load_error(cfg, c), "'mtp.0.attn.extra': not a tensor of this DSpark"));
    c = make_ckpt(cfg);
    c["mtp.x.norm.weight"] = c.at("mtp.2.norm.weight");
    EXPECT_TRUE(Contains(load_error(cfg, c), "'mtp.x.norm.weight': not a drafter tensor name"));
  }
}

TEST(Weights, InvalidConfigRejected) {
  ModelConfig cfg = tiny(true);
  const Ckpt ckpt = make_ckpt(cfg);
  TmpDir dir;
  write_ckpt(dir.path(), cfg, ckpt);
  auto set = SafetensorsSet::open_dir(dir.path());
  ASSERT_TRUE(set.ok()) << set.message();
  cfg.index_head_dim = 48;
  auto r = load_weights(*set, cfg, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.message(), "'index_head_dim'"));
}

}  // namespace
}  // namespace dsv4
