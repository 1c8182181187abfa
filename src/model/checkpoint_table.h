// The one table of checkpoint tensors (checkpoint.md §5): every name with its stored dtype,
// stored shape and storage form, derived from a ModelConfig. The loader, make-tiny and
// inspect all read it; nothing else spells a tensor name.
//
// Layout (shapes [out, in] for matrices; D hidden, H heads, Dh head_dim, V vocab,
// E routed experts, F moe_intermediate_size, N hc_mult, M = (2+N)·N, c compressor width):
//   globals   embed.weight [V, D] BF16, head.weight [V, D] BF16, norm.weight [D] BF16,
//             hc_head_fn [N, N·D] F32, hc_head_base [N] F32, hc_head_scale [1] F32
//   per layer (prefix "layers.{l}." or "mtp.{i}."):
//             attn_norm/ffn_norm [D], hc_{attn,ffn}_{fn [M, N·D], base [M], scale [3]},
//             attn.attn_sink [H] F32, attn.wq_a [Rq, D]*, attn.q_norm [Rq],
//             attn.wq_b [H·Dh, Rq]*, attn.wkv [Dh, D]*, attn.kv_norm [Dh],
//             attn.wo_a [G·Ro, H·Dh/G]*, attn.wo_b [D, G·Ro]*, ffn.gate.weight [E, D] BF16,
//             ffn.gate.bias [E] F32 (score layers) | ffn.gate.tid2eid [V, K] I64 (hash layers),
//             ffn.shared_experts.w1/w3 [F, D]*, w2 [D, F]*, ffn.experts.{e}.w1/w3 [F, D]**,
//             w2 [D, F]**
//   CSA (ratio 4, c = 2·Dh, ci = 2·Di): attn.compressor.{wkv,wgate} [c, D] BF16,
//             attn.compressor.ape [4, c] F32, attn.compressor.norm [Dh] BF16,
//             attn.indexer.wq_b [Hi·Di, Rq]*, attn.indexer.weights_proj [Hi, D] BF16,
//             attn.indexer.compressor.{wkv,wgate} [ci, D], ape [4, ci], norm [Di]
//   HCA (ratio r, c = Dh): attn.compressor.{wkv,wgate} [Dh, D], ape [r, Dh], norm [Dh]
//   MTP extras: e_proj/h_proj [D, D]*, enorm/hnorm/norm [D], hc_head_{fn,base,scale}
//   DSpark stages (dspark.md §1.4; score-routed, SWA): stage 0 adds main_proj [D, |Lt|·D]* and
//             main_norm [D]; the last stage norm [D], hc_head_*, markov_head.markov_w1/w2
//             [V, Rm] BF16 and confidence_head.proj [1, D + Rm] BF16
//   * FP8-class (ModelConfig::dense_storage()), ** routed expert (expert_storage()); each
//   quantized matrix is followed by its "<prefix>.scale" (F8_E8M0) entry.
// Order: globals, then layers 0..L-1, then the MTP layer or the DSpark stages; a scale directly
// after its matrix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"

namespace dsv4 {

enum class TensorRole {
  kPlain,   // used as stored (norms, hc params, ape, bias, tid2eid, BF16-only projections)
  kMatrix,  // a quantizable linear weight: FP8-class or routed expert (may be BF16 variant)
  kScale,   // the F8_E8M0 scale of a kMatrix stored FP8 / FP4
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;  // stored shape
  TensorRole role = TensorRole::kPlain;
  StorageForm form = StorageForm::kBF16;  // kScale: the form of the matrix it scales
  int64_t out = 0;             // kMatrix / kScale: logical [out, in] of the matrix
  int64_t in = 0;
  std::string scale_name;      // kMatrix stored FP8/FP4: name of its scale tensor
  std::string scale_of;        // kScale: name of the matrix it scales
  int layer = -1;              // layer index (MTP: num_hidden_layers + i); -1 for globals
  bool routed_expert = false;  // ffn.experts.{e}.w* (and their scales)
  bool actq = false;           // kMatrix: input gets actq when stored FP8/FP4 (false: wo_a)

  int64_t numel() const;
  size_t n_bytes() const;      // numel · dtype_size
};

// Layer-name prefix: "layers.{l}." for l < num_hidden_layers, else "mtp.{l - L}.".
std::string layer_prefix(const ModelConfig& cfg, int l);

// Name of the scale tensor of matrix `weight_name` ("x.weight" -> "x.scale").
std::string scale_name_for(const std::string& weight_name);

// The weight (+ scale) entries of one quantizable matrix with logical [out, in] in `form`
// (kBF16: one entry of shape [out, in]; kFP8: + scale [ceil(out/128), ceil(in/128)];
// kFP4: I8 [out, in/2] + scale [out, in/32]). `like` supplies name, layer and flags.
std::vector<TensorSpec> matrix_specs(const TensorSpec& like, StorageForm form);

// Every tensor the config implies, in table order (see above). Requires validate(cfg) ok.
std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg);
// Only the tensors of layer l (l may be an MTP or DSpark stage index), in table order.
std::vector<TensorSpec> layer_tensors(const ModelConfig& cfg, int l);
// Only the 6 global tensors.
std::vector<TensorSpec> global_tensors(const ModelConfig& cfg);

}  // namespace dsv4
