// bench/roofline.h against a hand computation for one small quantized CSA layer.
#include <gtest/gtest.h>

#include <vector>

#include "roofline.h"

namespace dsv4::bench {
namespace {

// D 256, H 4, Dh 128 (Dr 64), Rq 128, G 2, Ro 64, W 16, F 128, E 8, K 2, one shared
// expert, N 2 (M 8, N·D 512), Hi 2, Di 64, index_topk 8, ratio 4; FP8 dense, FP4 experts.
ModelConfig small_csa() {
  ModelConfig c;
  c.hidden_size = 256;
  c.num_attention_heads = 4;
  c.head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 128;
  c.o_groups = 2;
  c.o_lora_rank = 64;
  c.sliding_window = 16;
  c.moe_intermediate_size = 128;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.n_shared_experts = 1;
  c.hc_mult = 2;
  c.index_n_heads = 2;
  c.index_head_dim = 64;
  c.index_topk = 8;
  c.vocab_size = 1000;
  c.num_hidden_layers = 1;
  c.num_nextn_predict_layers = 0;
  c.compress_ratios = {4};
  c.quantization_config = QuantizationConfig{};
  c.expert_dtype = "fp4";
  return c;
}

TEST(Roofline, MatrixBytes) {
  EXPECT_EQ(matrix_bytes(StorageForm::kFP8, 300, 256), 300 * 256 + 3 * 2);  // ceil(300/128) = 3
  EXPECT_EQ(matrix_bytes(StorageForm::kFP4, 128, 256), 128 * 128 + 128 * 8);
  EXPECT_EQ(matrix_bytes(StorageForm::kBF16, 10, 20), 400);
}

TEST(Roofline, CsaLayerStepByHand) {
  const ModelConfig cfg = small_csa();
  const std::vector<RequestRows> rows = {{7, 2}};  // positions 7 and 8, T = 2
  const Cost c = layer_step_cost(cfg, 0, rows, /*experts_hit=*/3);
  // Weights (bytes; FLOPs = 2·T·out·in):
  //   hc_attn_fn + hc_ffn_fn [16, 512] f32      32768        32768
  //   wq_a FP8 [128, 256] + 1x2 scales          32770       131072
  //   wq_b FP8 [512, 128] + 4x1                 65540       262144
  //   wkv FP8 [128, 256] + 1x2                  32770       131072
  //   wo_a FP8 [128, 256] + 1x2                 32770       131072
  //   wo_b FP8 [256, 128] + 2x1                 32770       131072
  //   compressor wkv + wgate bf16 [512, 256]   262144       524288
  //   indexer wq_b FP8 [128, 128] + 1           16385        65536
  //   weights_proj bf16 [2, 256]                 1024         2048
  //   indexer compressor bf16 [256, 256]       131072       262144
  //   gate bf16 [8, 256]                         4096         8192
  //   shared w1 w3 w2 FP8 (3 x 128x256) + 6     98310       393216
  //   routed: 3 hit x 3 x (16384 + 1024)       156672       786432 (T·K·3·F·D·2)
  //   embedding rows 2 x 256 x 2                 1024
  // Caches (KV row (2·64 + 64 + 1 + 7)/8·8 = 200 B, index key (32 + 2 + 3)/4·4 = 36 B):
  //   p = 7: 8 window + min(8/4, 8) = 2 compressed, 2 index keys: 2072 B, 4·4·128·10 + 2·2·64·2 = 20992
  //   p = 8: 9 window + 2 compressed, 2 index keys:               2272 B, 4·4·128·11 + 512 = 23040
  EXPECT_DOUBLE_EQ(c.bytes, 904459.0);
  EXPECT_DOUBLE_EQ(c.flops, 2905088.0);
}

TEST(Roofline, HeadAndFractions) {
  const ModelConfig cfg = small_csa();
  const Cost h = head_cost(cfg, 4);
  EXPECT_DOUBLE_EQ(h.bytes, 1000.0 * 256 * 2 + 2.0 * 512 * 4);
  EXPECT_DOUBLE_EQ(h.flops, 2.0 * 4 * 1000 * 256 + 2.0 * 4 * 2 * 512);
  const Fractions f = fractions(Cost{2e9, 1e9}, 0.1, 40.0, 20.0);  // 20 GB/s, 10 GFLOP/s
  EXPECT_DOUBLE_EQ(f.gbps, 20.0);
  EXPECT_DOUBLE_EQ(f.bandwidth_fraction, 0.5);
  EXPECT_DOUBLE_EQ(f.gflops, 10.0);
  EXPECT_DOUBLE_EQ(f.compute_fraction, 0.5);
  EXPECT_DOUBLE_EQ(f.roofline_fraction, 0.5);
  EXPECT_NEAR(expected_experts_hit(8, 2, 1), 2.0, 1e-12);
  EXPECT_NEAR(expected_experts_hit(256, 6, 1000), 256.0, 1e-6);
}

// small_csa with one DSpark stage (ratio 0) reading layer 0's features, Markov rank 16.
ModelConfig small_dspark() {
  ModelConfig c = small_csa();
  c.compress_ratios = {4, 0};
  c.dspark = DSparkConfig{5, 0, {0}, 16};
  return c;
}

TEST(Roofline, DsparkByHand) {
  const ModelConfig cfg = small_dspark();
  ASSERT_EQ(cfg.n_dspark_stages(), 1);
  // Commit of T = 3 rows: features 3 x 256 bf16 1536 B; main_proj FP8 [256, 256] + 2x2 scales
  // 65540 B, 2·3·256·256 FLOPs; the stage's wkv FP8 [128, 256] + 1x2 32770 B, 2·3·128·256.
  const Cost commit = dspark_commit_cost(cfg, 3);
  EXPECT_DOUBLE_EQ(commit.bytes, 1536.0 + 65540 + 32770);
  EXPECT_DOUBLE_EQ(commit.flops, 393216.0 + 196608);
  // Markov, B = 2, γ = 3: per step W2 [1000, 16] bf16 32000 B + 2 W1 rows 64 B, 2·2·1000·16.
  const Cost markov = markov_cost(cfg, 2, 3);
  EXPECT_DOUBLE_EQ(markov.bytes, 3.0 * (32000 + 64));
  EXPECT_DOUBLE_EQ(markov.flops, 3.0 * 64000);
  // Stage over B = 2 rounds of γ = 3 rows (T = 6) at anchor 5:
  //   embedding rows 6 x 256 x 2                     3072
  //   hc fns 32768, wq_a 32770, wq_b 65540, wkv 32770, wo_a 32770, wo_b 32770, gate 4096,
  //   shared 98310, routed 3 hit x 3 x 17408 = 156672: 488466 B;
  //   FLOPs 2·6·(16·512 + 128·256 + 512·128 + 128·256 + 128·256 + 256·128 + 8·256 + 384·256)
  //   + 2·6·2·3·128·256 = 3661824 + 2359296
  //   each row attends min(16, 6) + 3 = 9 keys of 200 B: 6 x 1800 B, 6 x 4·4·128·9 FLOPs
  const Cost stage = dspark_stages_cost(cfg, 2, 3, 5, 3.0);
  EXPECT_DOUBLE_EQ(stage.bytes, 3072.0 + 488466 + 10800);
  EXPECT_DOUBLE_EQ(stage.flops, 3661824.0 + 2359296 + 110592);
  const Cost round = dspark_round_cost(cfg, 2, 3, 5, 3.0);
  const Cost head = head_cost(cfg, 6);
  EXPECT_DOUBLE_EQ(round.bytes, stage.bytes + head.bytes + markov.bytes);
  EXPECT_DOUBLE_EQ(round.flops, stage.flops + head.flops + markov.flops);
}

}  // namespace
}  // namespace dsv4::bench
