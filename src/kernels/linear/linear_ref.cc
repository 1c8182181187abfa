// Oracle for linear.h: per output, the fp32 sum over K of the dequantized weight times the
// (actq-dequantized) input, written as plain loops in the engine's fixed K order (16 lanes
// per 128-wide block, lanes folded, blocks chained; FP4: pair chains per 32-column group,
// scaled and summed per block; FP8: one pair chain per block, scaled; linear.h). Level A leaves the order free
// (model.md §0.3); pinning it here makes engine and reference agree bit for bit, which the
// whole-model reference (oracle/reference_model.h) relies on.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "base/math.h"
#include "kernels/linear/linear.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/quant.h"
#include "numeric/ue8m0.h"

namespace dsv4::kernels {

float weight_at(const LinearWeight& w, int64_t o, int64_t i) {
  switch (w.format) {
    case WeightFormat::kBF16:
      return static_cast<const bf16*>(w.data)[bf16_offset(w, o, i)].to_float();
    case WeightFormat::kF32:
      return static_cast<const float*>(w.data)[o * w.in + i];
    case WeightFormat::kFP8: {
      const int64_t nbk = ceil_div<int64_t>(w.in, 128);
      return e4m3_decode(fp8_code(w, o, i)) * ue8m0_decode(w.scale[(o / 128) * nbk + i / 128]);
    }
    case WeightFormat::kFP4: {
      return e2m1_decode(fp4_code(w, o, i)) * ue8m0_decode(fp4_scale(w, o, i));
    }
  }
  DSV4_CHECK(false, "unknown weight format");
  return 0.0f;
}

namespace {

// Chains the betas of the 128-wide K blocks of n columns in the engine K order: the plain
// block chain (k_group 0) or the grouped tree (linear.h). beta(k0, width) is block k0's.
template <class Beta>
float chain_blocks(int64_t n, int64_t k_group, Beta beta) {
  constexpr int64_t kBlock = 128;
  float total = 0.0f, group = 0.0f;
  for (int64_t k0 = 0; k0 < n; k0 += kBlock) {
    const float b = beta(k0, std::min(kBlock, n - k0));
    if (k_group == 0) {  // blocks chained
      total = k0 == 0 ? b : total + b;
      continue;
    }
    group = k0 % k_group == 0 ? b : group + b;  // blocks chained inside a group,
    if ((k0 + kBlock) % k_group == 0 || k0 + kBlock >= n)  // then the groups chained
      total = k0 < k_group ? group : total + group;
  }
  return total;
}

// Σ₃₂ wrow[i]·x[i], i < n, in the engine K order (see linear_dot_ref): per block, 16 lanes
// (lane l sums k ≡ l mod 16 ascending), folded.
float dot_in_order(const float* wrow, const float* x, int64_t n, int64_t k_group) {
  constexpr int64_t kLanes = 16;
  return chain_blocks(n, k_group, [&](int64_t k0, int64_t width) {
    float lane[kLanes] = {};
    for (int64_t i = k0; i < k0 + width; ++i) lane[(i - k0) % kLanes] += wrow[i] * x[i];
    for (int64_t h = kLanes / 2; h >= 1; h /= 2)
      for (int64_t l = 0; l < h; ++l) lane[l] += lane[l + h];
    return lane[0];
  });
}

// The FP4 K order (linear.h): per 32-column group g, P_g chains the column pairs ascending,
// the odd column first; beta = P_0·S_0 + P_1·S_1 + ... ascending; code[i] the e2m1 values
// (unscaled), scale[i / 32] the groups' 2^(s-127).
float fp4_dot_in_order(const float* code, const float* scale, const float* x, int64_t n, int64_t k_group) {
  return chain_blocks(n, k_group, [&](int64_t k0, int64_t width) {
    float beta = 0.0f;
    for (int64_t g = k0; g < k0 + width; g += 32) {
      float p = 0.0f;
      for (int64_t j = g; j < g + 32; ++j) {  // j ^ 1: the odd column of a pair first (written
        const int64_t i = j ^ 1;              // so: GCC 12.2 -O2 miscompiles a pair-step loop)
        p += code[i] * x[i];
      }
      const float ps = p * scale[g / 32];
      beta = g == k0 ? ps : beta + ps;
    }
    return beta;
  });
}

// The FP8 K order (linear.h, linear_fp8.h): per 128-column block, P chains the column pairs
// ascending, the odd column first (a last unpaired column alone); beta = P·S; code[i] the
// e4m3 values (unscaled), scale[i / 128] the blocks' 2^(s-127).
float fp8_dot_in_order(const float* code, const float* scale, const float* x, int64_t n, int64_t k_group) {
  return chain_blocks(n, k_group, [&](int64_t k0, int64_t width) {
    float p = 0.0f;
    for (int64_t r = 0; r < width; ++r) {  // r ^ 1 as in fp4_dot_in_order
      const int64_t i = k0 + (r % 2 == 0 && r + 1 == width ? r : r ^ 1);
      p += code[i] * x[i];
    }
    return p * scale[k0 / 128];
  });
}

// Row o of an FP8 weight as e4m3 values and block scales (exact fp32).
void fp8_row(const LinearWeight& w, int64_t o, float* code, float* scale) {
  const int64_t nbk = ceil_div<int64_t>(w.in, 128);
  for (int64_t i = 0; i < w.in; ++i) code[i] = e4m3_decode(fp8_code(w, o, i));
  for (int64_t b = 0; b < nbk; ++b) scale[b] = ue8m0_decode(w.scale[(o / 128) * nbk + b]);
}

// Row o of an FP4 weight as e2m1 values and group scales (exact fp32).
void fp4_row(const LinearWeight& w, int64_t o, float* code, float* scale) {
  for (int64_t i = 0; i < w.in; ++i) code[i] = e2m1_decode(fp4_code(w, o, i));
  for (int64_t g = 0; g < w.in / 32; ++g) scale[g] = ue8m0_decode(fp4_scale(w, o, 32 * g));
}

void weight_row(const LinearWeight& w, int64_t o, float* wrow) {
  for (int64_t i = 0; i < w.in; ++i) wrow[i] = weight_at(w, o, i);
}

// Row o of w decoded for its K order: wrow the fp32 weights, or for FP4 / FP8 the e2m1 /
// e4m3 values and scale the group / block scales; scratch of w.in floats each.
void decode_row(const LinearWeight& w, int64_t o, float* wrow, float* scale) {
  if (w.format == WeightFormat::kFP4) fp4_row(w, o, wrow, scale);
  else if (w.format == WeightFormat::kFP8) fp8_row(w, o, wrow, scale);
  else weight_row(w, o, wrow);
}
// Σ₃₂ W[o, i]·x[i] in the engine K order of w's format, on decode_row's row.
float row_dot(const LinearWeight& w, const float* wrow, const float* scale, const float* x, int64_t k_group) {
  if (w.format == WeightFormat::kFP4) return fp4_dot_in_order(wrow, scale, x, w.in, k_group);
  if (w.format == WeightFormat::kFP8) return fp8_dot_in_order(wrow, scale, x, w.in, k_group);
  return dot_in_order(wrow, x, w.in, k_group);
}

// y[t·out + o] = dot of row o with x row t, for fp32 input rows x [T, in].
template <class Y>
void rows_times_weight(const LinearWeight& w, const float* x, int64_t T, Y* y, int64_t k_group = 0) {
  std::vector<float> wrow(w.in), scale(w.in);
  for (int64_t o = 0; o < w.out; ++o) {
    decode_row(w, o, wrow.data(), scale.data());
    for (int64_t t = 0; t < T; ++t) {
      const float v = row_dot(w, wrow.data(), scale.data(), x + t * w.in, k_group);
      if constexpr (std::is_same_v<Y, bf16>) y[t * w.out + o] = bf16::from_float(v);
      else y[t * w.out + o] = v;
    }
  }
}

std::vector<float> to_f32(const bf16* x, int64_t n) {
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) f[i] = x[i].to_float();
  return f;
}

}  // namespace

float linear_dot_ref(const LinearWeight& w, int64_t o, const float* x, int64_t k_group) {
  std::vector<float> wrow(w.in), scale(w.in);
  decode_row(w, o, wrow.data(), scale.data());
  return row_dot(w, wrow.data(), scale.data(), x, k_group);
}

void linear_ref(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, bool apply_actq, int64_t k_group) {
  std::vector<bf16> xhat(T * w.in);
  for (int64_t t = 0; t < T; ++t) {
    if (apply_actq) actq_dequant_row(x + t * w.in, w.in, xhat.data() + t * w.in);
    else std::copy_n(x + t * w.in, w.in, xhat.data() + t * w.in);
  }
  rows_times_weight(w, to_f32(xhat.data(), T * w.in).data(), T, y, k_group);
}

void linear_f32_ref(const LinearWeight& w, const bf16* x, int64_t T, float* y) {
  rows_times_weight(w, to_f32(x, T * w.in).data(), T, y);
}

void linear_f32_in_ref(const LinearWeight& w, const float* x, int64_t T, float* y) { rows_times_weight(w, x, T, y); }

}  // namespace dsv4::kernels
