// Linear shapes shared by the linear tests: the linears of tiny (model.md §14.1)
// and tiny2 (§14.1a) in their released storage, plus ragged shapes (partial
// tiles, odd output counts, partial K blocks, FP4 with in % 128 != 0).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "numeric/bf16.h"
#include "numeric/linear_weight.h"
#include "support/quant_weights.h"

namespace dsv4::kernels::linear_test {

struct Shape {
  const char* name;
  WeightFormat format;
  int64_t out, in;
};

inline constexpr Shape kPresetShapes[] = {
    {"tiny.wq_a", WeightFormat::kFP8, 128, 128},   {"tiny.wq_b", WeightFormat::kFP8, 320, 128},
    {"tiny.wkv", WeightFormat::kFP8, 80, 128},     {"tiny.wo_b", WeightFormat::kFP8, 128, 512},
    {"tiny.w1", WeightFormat::kFP4, 128, 128},     {"tiny.head", WeightFormat::kBF16, 512, 128},
    {"tiny.wo_a", WeightFormat::kBF16, 512, 80},   {"tiny2.wq_b", WeightFormat::kFP8, 768, 256},
    {"tiny2.wkv", WeightFormat::kFP8, 192, 256},   {"tiny2.wo_b", WeightFormat::kFP8, 256, 512},
    {"tiny2.w2", WeightFormat::kFP4, 256, 256},    {"tiny2.wo_a", WeightFormat::kBF16, 512, 192},
    {"tiny2.hc_fn", WeightFormat::kF32, 24, 1024}, {"tiny2.head", WeightFormat::kBF16, 512, 256},
};

inline constexpr Shape kRaggedShapes[] = {
    {"fp8.partial", WeightFormat::kFP8, 37, 200},  {"fp8.k8", WeightFormat::kFP8, 19, 136},
    {"bf16.partial", WeightFormat::kBF16, 45, 89}, {"f32.partial", WeightFormat::kF32, 23, 300},
    {"fp4.k160", WeightFormat::kFP4, 33, 160},     {"fp4.k32", WeightFormat::kFP4, 17, 32},
};

inline std::vector<bf16> random_rows(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  return test::random_bf16(rng, n, 1.0f);
}

}  // namespace dsv4::kernels::linear_test
