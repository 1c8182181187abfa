#include "numeric/quant.h"

#include <bit>
#include <cmath>

#include "base/check.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/ue8m0.h"

namespace dsv4 {
namespace {
constexpr float kNaN = std::bit_cast<float>(0x7fc00000u);

float pow2(int k) { return std::ldexp(1.0f, k); }

// Scale for a raw block amax; NaN when the block holds a NaN.
float scale_for(float amax_raw, float floor, int (*exponent)(float, float)) {
  if (std::isnan(amax_raw)) return kNaN;
  return pow2(exponent(amax_raw, floor));
}
}  // namespace

int pow2_scale_exponent(float amax, float inv_qmax) {
  const float t = amax * inv_qmax;
  const uint32_t u = std::bit_cast<uint32_t>(t);
  const int e = static_cast<int>((u >> 23) & 0xff) - 127;
  return e + ((u & 0x7fffffu) != 0 ? 1 : 0);
}

int e4m3_scale_exponent(float amax_raw, float floor) {
  const float a = amax_raw > floor ? amax_raw : floor;
  return pow2_scale_exponent(std::isinf(a) ? 0x1p127f : a, 1.0f / 448.0f);
}

int e2m1_scale_exponent(float amax_raw, float floor) {
  const float a = amax_raw > floor ? amax_raw : floor;
  return pow2_scale_exponent(std::isinf(a) ? 0x1p127f : a, 1.0f / 6.0f);
}

float block_amax(const bf16* v, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(v[i].to_float());
    if (std::isnan(a)) return kNaN;
    m = a > m ? a : m;
  }
  return m;
}

float block_amax(const float* v, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(v[i]);
    if (std::isnan(a)) return kNaN;
    m = a > m ? a : m;
  }
  return m;
}

void actq_row(const bf16* x, int64_t n, uint8_t* codes, float* scales) {
  DSV4_CHECK(n % kActqBlock == 0, "actq row length {} is not a multiple of {}", n, kActqBlock);
  for (int64_t b = 0; b < n / kActqBlock; ++b) {
    const bf16* xb = x + b * kActqBlock;
    const float s = scale_for(block_amax(xb, kActqBlock), kActqAmaxFloor, e4m3_scale_exponent);
    scales[b] = s;
    for (int i = 0; i < kActqBlock; ++i) {
      const float q = xb[i].to_float() / s;  // exact: s is a power of two
      codes[b * kActqBlock + i] = e4m3_encode(q);  // encoder saturates (clamp ±448)
    }
  }
}

void actq_dequant_row(const bf16* x, int64_t n, bf16* xhat) {
  DSV4_CHECK(n % kActqBlock == 0, "actq row length {} is not a multiple of {}", n, kActqBlock);
  for (int64_t b = 0; b < n / kActqBlock; ++b) {
    const bf16* xb = x + b * kActqBlock;
    const float s = scale_for(block_amax(xb, kActqBlock), kActqAmaxFloor, e4m3_scale_exponent);
    for (int i = 0; i < kActqBlock; ++i) {
      const float q = e4m3_decode(e4m3_encode(xb[i].to_float() / s));
      xhat[b * kActqBlock + i] = bf16::from_float(q * s);
    }
  }
}

uint8_t e4m3_block_encode(const bf16* v, int n, uint8_t* codes) {
  const float amax = block_amax(v, n);
  if (std::isnan(amax)) {
    for (int i = 0; i < n; ++i) codes[i] = 0;
    return kUe8m0Nan;
  }
  const int k = e4m3_scale_exponent(amax);
  const float inv = pow2(-k);  // exact: a power of two
  for (int i = 0; i < n; ++i) codes[i] = e4m3_encode(v[i].to_float() * inv);
  return ue8m0_encode_exp(k);
}

uint8_t e2m1_block_encode(const bf16* v, int n, uint8_t* packed) {
  const float amax = block_amax(v, n);
  if (std::isnan(amax)) {
    for (int i = 0; i < n / 2; ++i) packed[i] = 0;
    return kUe8m0Nan;
  }
  const int k = e2m1_scale_exponent(amax);
  const float inv = pow2(-k);
  for (int i = 0; i < n / 2; ++i)
    packed[i] = static_cast<uint8_t>(e2m1_encode(v[2 * i].to_float() * inv) |
                                     (e2m1_encode(v[2 * i + 1].to_float() * inv) << 4));
  return ue8m0_encode_exp(k);
}

void fp8sim_row(bf16* v, int64_t n, int block) {
  DSV4_CHECK(n % block == 0 && block <= 128, "fp8sim row length {} is not a multiple of {}", n, block);
  uint8_t codes[128];
  for (int64_t b = 0; b < n / block; ++b) {
    bf16* vb = v + b * block;
    const float s = ue8m0_decode(e4m3_block_encode(vb, block, codes));
    for (int i = 0; i < block; ++i) vb[i] = bf16::from_float(e4m3_decode(codes[i]) * s);
  }
}

void fp4sim_row(bf16* v, int64_t n, int block) {
  DSV4_CHECK(n % block == 0 && block % 2 == 0 && block <= 128, "fp4sim row length {} is not a multiple of {}", n,
             block);
  uint8_t packed[64];
  for (int64_t b = 0; b < n / block; ++b) {
    bf16* vb = v + b * block;
    const float s = ue8m0_decode(e2m1_block_encode(vb, block, packed));
    for (int i = 0; i < block; ++i) vb[i] = bf16::from_float(e2m1_decode(e2m1_nibble(packed, i)) * s);
  }
}

}  // namespace dsv4
