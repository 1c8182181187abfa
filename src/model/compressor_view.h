// The compressor kernel's parameters and weight view for one compressor of a layer
// (kernels/compressor/compressor.h), shared by the runner and the whole-model reference.
#pragma once

#include "kernels/compressor/compressor.h"
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

}  // namespace dsv4
