// Random test weights in every stored form of numeric/linear_weight.h, built
// from an fp32 master with the Level-A scale rule (numeric/quant.h):
//   FP8: per 128x128 block s = 2^E(amax/448), codes e4m3(w/s), grid ceil(out/128) x ceil(in/128)
//   FP4: per row and 32 columns s = 2^E(amax/6), codes e2m1(w/s), packed low nibble = even element
// plus random bf16 rows. Header-only; tests own the storage, LinearWeight views it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "numeric/bf16.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/linear_weight.h"
#include "numeric/quant.h"
#include "numeric/ue8m0.h"

namespace dsv4::test {

struct OwnedWeight {
  WeightFormat format = WeightFormat::kBF16;
  int64_t out = 0, in = 0;
  std::vector<uint8_t> data;   // bytes of the stored tensor
  std::vector<uint8_t> scale;  // ue8m0 bytes (FP8 / FP4)
  LinearWeight view() const {
    return LinearWeight{format, out, in, data.data(), scale.empty() ? nullptr : scale.data()};
  }
};

inline std::vector<float> random_f32(std::mt19937& rng, int64_t n, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<bf16> random_bf16(std::mt19937& rng, int64_t n, float sigma, float mean = 0.0f) {
  std::normal_distribution<float> d(mean, sigma);
  std::vector<bf16> v(n);
  for (auto& x : v) x = bf16::from_float(d(rng));
  return v;
}

// Stores the fp32 master m [out, in] in the given format.
inline OwnedWeight quantize_weight(WeightFormat f, int64_t out, int64_t in, const std::vector<float>& m) {
  OwnedWeight w;
  w.format = f;
  w.out = out;
  w.in = in;
  switch (f) {
    case WeightFormat::kBF16: {
      w.data.resize(out * in * 2);
      auto* p = reinterpret_cast<bf16*>(w.data.data());
      for (int64_t i = 0; i < out * in; ++i) p[i] = bf16::from_float(m[i]);
      break;
    }
    case WeightFormat::kF32:
      w.data.resize(out * in * 4);
      std::memcpy(w.data.data(), m.data(), out * in * 4);
      break;
    case WeightFormat::kFP8: {
      const int64_t nbo = (out + 127) / 128, nbk = (in + 127) / 128;
      w.data.resize(out * in);
      w.scale.resize(nbo * nbk);
      for (int64_t bo = 0; bo < nbo; ++bo)
        for (int64_t bk = 0; bk < nbk; ++bk) {
          const int64_t o1 = std::min(out, bo * 128 + 128), k1 = std::min(in, bk * 128 + 128);
          float amax = 0.0f;
          for (int64_t o = bo * 128; o < o1; ++o)
            for (int64_t k = bk * 128; k < k1; ++k) amax = std::max(amax, std::fabs(m[o * in + k]));
          const int e = e4m3_scale_exponent(amax);
          w.scale[bo * nbk + bk] = ue8m0_encode_exp(e);
          const float s = std::ldexp(1.0f, e);
          for (int64_t o = bo * 128; o < o1; ++o)
            for (int64_t k = bk * 128; k < k1; ++k) w.data[o * in + k] = e4m3_encode(m[o * in + k] / s);
        }
      break;
    }
    case WeightFormat::kFP4: {
      w.data.assign(out * in / 2, 0);
      w.scale.resize(out * in / 32);
      for (int64_t o = 0; o < out; ++o)
        for (int64_t c = 0; c < in / 32; ++c) {
          const float amax = block_amax(m.data() + o * in + c * 32, 32);
          const int e = e2m1_scale_exponent(amax);
          w.scale[o * (in / 32) + c] = ue8m0_encode_exp(e);
          const float s = std::ldexp(1.0f, e);
          for (int64_t j = 0; j < 32; ++j) {
            const int64_t k = c * 32 + j;
            const uint8_t nib = e2m1_encode(m[o * in + k] / s);
            w.data[o * (in / 2) + k / 2] |= static_cast<uint8_t>((k & 1) ? nib << 4 : nib);
          }
        }
      break;
    }
  }
  return w;
}

// N(0, 1/in) master (model.md §14.2 initialization) stored in format f.
inline OwnedWeight random_weight(WeightFormat f, int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  return quantize_weight(f, out, in, random_f32(rng, out * in, 1.0f / std::sqrt(static_cast<float>(in))));
}

// Norm weight 1 + N(0, 0.1), bf16.
inline std::vector<bf16> random_norm_weight(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  return random_bf16(rng, n, 0.1f, 1.0f);
}

}  // namespace dsv4::test
