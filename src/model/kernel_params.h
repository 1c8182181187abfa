// Kernel parameters derived from the model config, shared by the runner and the
// whole-model reference: a layer compressor's parameters and weight view
// (kernels/compressor/compressor.h) and the two RoPE profiles' inverse frequencies
// (runtime.md §2.8: main for SWA layers, compress with YaRN for compressed layers).
#pragma once

#include <vector>

#include "kernels/compressor/compressor.h"
#include "kernels/rope/rope.h"
#include "model/config.h"
#include "model/weights.h"

namespace dsv4 {

inline kernels::CompressorParams compressor_params(const ModelConfig& cfg, const CompressorWeights& c,
                                                   bool indexer) {
  kernels::CompressorParams p;
  p.kind = indexer ? kernels::CompressorKind::kIndexer : kernels::CompressorKind::kMain;
  p.hidden = static_cast<int>(cfg.hidden_size);
  p.dim = static_cast<int>(c.dim);
  p.rope_dim = static_cast<int>(cfg.qk_rope_head_dim);
  p.ratio = c.ratio;
  p.eps = static_cast<float>(cfg.rms_norm_eps);
  return p;
}

inline kernels::CompressorWeights compressor_view(const CompressorWeights& c, const float* inv_freq) {
  return kernels::CompressorWeights{c.wkv.w, c.wgate.w, c.ape, c.norm, inv_freq};
}

inline std::vector<float> rope_inv_freq_main(const ModelConfig& cfg) {
  kernels::RopeParams rp;
  rp.rope_dim = static_cast<int>(cfg.qk_rope_head_dim);
  rp.theta = cfg.rope_theta;
  return kernels::rope_inv_freq(rp);
}

inline std::vector<float> rope_inv_freq_compress(const ModelConfig& cfg) {
  kernels::RopeParams rp;
  rp.rope_dim = static_cast<int>(cfg.qk_rope_head_dim);
  rp.theta = cfg.compress_rope_theta;
  rp.yarn = true;
  rp.yarn_factor = cfg.rope_scaling.factor;
  rp.original_max_pos = static_cast<double>(cfg.rope_scaling.original_max_position_embeddings);
  rp.beta_fast = cfg.rope_scaling.beta_fast;
  rp.beta_slow = cfg.rope_scaling.beta_slow;
  return kernels::rope_inv_freq(rp);
}

}  // namespace dsv4
