// The core GEMV/GEMM of the engine at the layer's shapes: y[T, out] = W[out, in]·x[T, in]
// with FP8 (attention wq_a, wo_b) and FP4 (routed expert w1/w3, w2) weights, the engine's
// linear kernel (actq'd bf16 input, bf16 output), and the same shapes through oneDNN's bf16
// matmul (onednn_cases.h). Each call reads a different copy of the weight (the copies
// span `span_bytes`, more than the last-level cache), as a decode step streams every
// layer's weights from DRAM. Step time = median over the calls; bytes = the weight as the
// kernel reads it (roofline.h matrix_bytes), FLOPs = 2·T·out·in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "report.h"

namespace dsv4::bench {

struct GemmShape {
  std::string name;  // "wq_a", "wo_b", "w1", "w2"
  StorageForm form;  // kFP8 | kFP4 (engine); oneDNN runs the shape in bf16
  int64_t out = 0, in = 0;
  std::string label() const;  // "wq_a 1024x4096"
};

// wq_a [Rq, D] and wo_b [D, G·Ro] in the dense storage, w1 [F, D] and w2 [D, F] in the
// expert storage of cfg (quantized).
std::vector<GemmShape> gemm_shapes(const ModelConfig& cfg);

struct GemmSets {
  std::vector<int> rows;              // T
  int repeats = 5;                    // passes over the weight copies
  int64_t span_bytes = int64_t{96} << 20;
};

// Cases "gemm-fp8" / "gemm-fp4" (phase "gemm", B = T, S = 1).
std::vector<CaseResult> run_gemm_cases(const std::vector<GemmShape>& shapes, const GemmSets& sets, int threads);

// Copies of a random weight of a shape in `form`, back to back (shared with the oneDNN cases).
struct WeightCopies {
  int64_t bytes_each = 0, data_bytes = 0;
  int n = 0;
  std::vector<uint8_t> data, scale;
};
WeightCopies make_weight_copies(StorageForm form, int64_t out, int64_t in, int64_t span_bytes);

}  // namespace dsv4::bench
