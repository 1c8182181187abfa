// A linear layer's weight as the checkpoint stores it (checkpoint.md §4, §5.7),
// viewed without copying. Logical shape [out, in]; y_o = Σ_i W[o,i]·x_i.
//   kBF16: data = bf16 [out, in], no scale                       (no actq)
//   kF32 : data = f32 [out, in], no scale                        (no actq)
//   kFP8 : data = e4m3 codes [out, in], scale = ue8m0 [ceil(out/128), ceil(in/128)]
//   kFP4 : data = packed e2m1 [out, in/2] (low nibble = even element),
//          scale = ue8m0 [out, in/32]
// `actq` follows the *stored* form (model.md §0.4.4): FP8/FP4 get it, except
// wo_a, which the model dequantizes to bf16 at load and runs without it.
#pragma once

#include <cstdint>

namespace dsv4 {

enum class WeightFormat { kBF16, kF32, kFP8, kFP4 };

struct LinearWeight {
  WeightFormat format = WeightFormat::kBF16;
  int64_t out = 0;
  int64_t in = 0;
  const void* data = nullptr;
  const uint8_t* scale = nullptr;

  bool quantized() const { return format == WeightFormat::kFP8 || format == WeightFormat::kFP4; }
};

}  // namespace dsv4
