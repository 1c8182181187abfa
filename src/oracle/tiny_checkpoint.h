// Random tiny checkpoints in the released format (checkpoint.md §1, §2, §5;
// model.md §14). A checkpoint directory holds config.json, generation_config.json,
// model.safetensors and the tiny tokenizer of text.md §5 with every tensor of expected_tensors(cfg).
//
// Values: each tensor draws its own stream, seeded by (seed, FNV-1a of its name),
// so a tensor's values do not depend on the order of the table. N(0, v) below
// is mean 0, *variance* v (model.md §14.2 "Suggested random initialization"):
//   linear weights [O, I]          N(0, 1/I)
//   embed.weight, head.weight      N(0, 1/hidden_size)
//   every *norm.weight             1 + N(0, 0.1)
//   attn_sink N(0, 1); ape N(0, 0.03); gate.bias N(0, 0.1)
//   hc_*_fn N(0, 0.05); hc_*_base N(0, 3); hc_{attn,ffn}_scale [0.08, 0.03, 0.2];
//   hc_head_scale [0.08]
//   gate.tid2eid [vocab, k]        k distinct expert ids per row, uniform
//   DSpark (dspark.md §5): markov_w1 N(0, 1); markov_w2 [V, Rm] N(0, 1/Rm), main_proj and
//   confidence_head.proj N(0, 1/in) as every projection
// Storage (--quant fp8, the released layout): FP8 matrices get one ue8m0 scale
// per 128x128 block, s = 2^e4m3_scale_exponent(block amax) (the Level-A scale
// rule, model.md §0.4.3) and codes e4m3(w / s); FP4 experts one scale per row
// per 32 inputs, s = 2^e2m1_scale_exponent(amax), nibbles e2m1(w / s) packed
// low = even element. --quant none: every matrix BF16 (checkpoint.md §5.7).
// BF16 tensors hold bf16_rne(sample); F32 the sample; I64 the ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/checkpoint_table.h"
#include "model/config.h"

namespace dsv4 {

enum class TinyQuant { kNone, kFp8 };

// "none" | "fp8".
Result<TinyQuant> parse_tiny_quant(std::string_view name);
std::string_view tiny_quant_name(TinyQuant q);

// config.json fields that replace the preset's value when set. None changes a tensor.
struct TinyOverrides {
  std::optional<int64_t> max_position_embeddings;  // presets: 1024
};

// Config of a tiny checkpoint: the preset (tiny | tiny2 | tiny-ds | tiny-ds-w80 | tiny2-ds)
// with the overrides, with
// quantization_config and expert_dtype "fp4" for kFp8, neither for kNone. Errors:
// an unknown preset; validate()'s error for an override it rejects.
Result<ModelConfig> tiny_config(const std::string& preset, TinyQuant quant,
                                const TinyOverrides& overrides = {});

// Writes config.json, generation_config.json, model.safetensors and the tiny
// tokenizer (tokenizer.json, tokenizer_config.json; text/tiny_tokenizer.h) into out_dir
// (created if missing; existing files of those names are replaced and a stale
// model.safetensors.index.json is removed).
Status make_tiny_checkpoint(const std::string& out_dir, const std::string& preset, uint64_t seed,
                            TinyQuant quant, const TinyOverrides& overrides = {});

// The float sample of one tensor in logical shape (row-major; a packed FP4
// matrix is [O, I] here), before storage encoding; tid2eid ids as exact floats.
// Error for a tensor name the initialization rules do not cover.
Result<std::vector<float>> tiny_tensor_sample(const ModelConfig& cfg, const TensorSpec& spec,
                                              uint64_t seed);

// Encoded storage of a matrix sample w [O, I] (row-major).
struct QuantizedMatrix {
  std::vector<uint8_t> data;   // FP8: codes [O, I]; FP4: packed [O, I/2]
  std::vector<uint8_t> scale;  // FP8: [ceil(O/128), ceil(I/128)]; FP4: [O, I/32]
};
QuantizedMatrix quantize_fp8_blocks(const float* w, int64_t out, int64_t in);
QuantizedMatrix quantize_fp4_rows(const float* w, int64_t out, int64_t in);  // in % 32 == 0

// Version of the generator's output (the safetensors "dsv4_generator" metadata); a change of
// values or layout bumps it.
constexpr int kTinyCheckpointVersion = 2;  // 2: tokenizer files (text.md §5)

}  // namespace dsv4
