// linear: engine vs reference for BF16 / F32 / FP8 / FP4 weights on the tiny and
// tiny2 shapes at every T in [1, kCapacity] with 1 and 2 threads; row and thread
// independence; the demo's FP8/FP4 block-form GEMM (model.md §0.4.4) against the
// x̂·ŵ form; partial K blocks; the grouped K tree of runtime.md §6.7.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/linear/linear.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/quant.h"
#include "numeric/ue8m0.h"
#include "support/poison.h"
#include "support/threads.h"
#include "support/quant_weights.h"
#include "support/tolerance.h"
#include "linear_shapes.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

using linear_test::Shape;
using linear_test::random_rows;
using test::run;
constexpr const auto& kShapes = linear_test::kPresetShapes;

TEST(Linear, Bf16OutEveryTMatchesRef) {
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(sh.name);
    const auto ow = test::random_weight(sh.format, sh.out, sh.in, 11);
    const LinearWeight w = ow.view();
    const bool actq = w.quantized();
    const auto x = random_rows(kCapacity * sh.in, 12);
    std::vector<bf16> want(kCapacity * sh.out);
    linear_ref(w, x.data(), kCapacity, want.data(), actq);
    // Engine on all kCapacity rows, single thread: the bit pattern every other call must give.
    std::vector<bf16> xq_full(kCapacity * sh.in), y_full(kCapacity * sh.out);
    const bf16* in_full = x.data();
    if (actq) {
      actq_rows(x.data(), kCapacity, sh.in, xq_full.data(), 0, 1);
      in_full = xq_full.data();
    }
    linear(w, in_full, kCapacity, y_full.data(), 0, 1);
    ASSERT_TRUE(test::all_close(y_full.data(), want.data(), kCapacity * sh.out, test::kBf16Out));
    // Each row alone (T = 1) equals its row of the full call.
    for (int t = 0; t < kCapacity; ++t) {
      std::vector<bf16> o(sh.out);
      linear(w, in_full + t * sh.in, 1, o.data(), 0, 1);
      ASSERT_TRUE(test::all_close(o.data(), y_full.data() + t * sh.out, sh.out, test::kExact)) << "row " << t;
    }
    RowBuffer<bf16> xq(kCapacity, sh.in), y(kCapacity, sh.out);
    for (int nthreads : {1, 2})
      for (int T = 1; T <= kCapacity; ++T) {
        xq.poison(T);
        y.poison(T);
        const bf16* in = x.data();
        if (actq) {
          run(nthreads, [&](int tid, int n) { actq_rows(x.data(), T, sh.in, xq.data(), tid, n); });
          ASSERT_TRUE(xq.sentinel_intact(T));
          in = xq.data();
        }
        run(nthreads, [&](int tid, int n) { linear(w, in, T, y.data(), tid, n); });
        ASSERT_TRUE(y.sentinel_intact(T)) << "T=" << T;
        // Same bits as the full call (row, T and thread independence), hence
        // within kBf16Out of the reference.
        ASSERT_TRUE(test::all_close(y.data(), y_full.data(), T * sh.out, test::kExact))
            << "T=" << T << " nthreads=" << nthreads;
      }
  }
}

TEST(Linear, F32OutEveryTMatchesRef) {
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(sh.name);
    const auto ow = test::random_weight(sh.format, sh.out, sh.in, 21);
    const LinearWeight w = ow.view();
    const auto x = random_rows(kCapacity * sh.in, 22);
    std::vector<float> xf(x.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = x[i].to_float() * 0.75f;  // not bf16-exact in general
    std::vector<float> want(kCapacity * sh.out), want_in(kCapacity * sh.out);
    linear_f32_ref(w, x.data(), kCapacity, want.data());
    linear_f32_in_ref(w, xf.data(), kCapacity, want_in.data());
    RowBuffer<float> y(kCapacity, sh.out), y2(kCapacity, sh.out);
    for (int nthreads : {1, 2})
      for (int T = 1; T <= kCapacity; ++T) {
        y.poison(T);
        y2.poison(T);
        run(nthreads, [&](int tid, int n) { linear_f32(w, x.data(), T, y.data(), tid, n); });
        run(nthreads, [&](int tid, int n) { linear_f32_in(w, xf.data(), T, y2.data(), tid, n); });
        ASSERT_TRUE(y.sentinel_intact(T));
        ASSERT_TRUE(y2.sentinel_intact(T));
        ASSERT_TRUE(test::all_close(y.data(), want.data(), T * sh.out, test::kF32Sum)) << "T=" << T;
        ASSERT_TRUE(test::all_close(y2.data(), want_in.data(), T * sh.out, test::kF32Sum)) << "T=" << T;
      }
  }
}

// wo_a stored FP8 but used without actq (model.md §0.4.4), K = head_dim not a
// multiple of 128: partial last K block and a ceil scale grid.
TEST(Linear, Fp8WithoutActqPartialK) {
  for (int64_t in : {80, 192}) {
    const auto ow = test::random_weight(WeightFormat::kFP8, 512, in, 81);
    const auto x = random_rows(kCapacity * in, 82);
    std::vector<bf16> want(kCapacity * 512);
    linear_ref(ow.view(), x.data(), kCapacity, want.data(), false);
    RowBuffer<bf16> y(kCapacity, 512);
    for (int nthreads : {1, 2})
      for (int T = 1; T <= kCapacity; ++T) {
        y.poison(T);
        run(nthreads, [&](int tid, int n) { linear(ow.view(), x.data(), T, y.data(), tid, n); });
        ASSERT_TRUE(y.sentinel_intact(T));
        ASSERT_TRUE(test::all_close(y.data(), want.data(), T * 512, test::kBf16Out)) << "in=" << in << " T=" << T;
      }
  }
}

// The bf16 output is exactly bf16 of the fp32 form (one rounding at the end).
TEST(Linear, Bf16OutIsRoundedF32Out) {
  const auto ow = test::random_weight(WeightFormat::kFP8, 768, 256, 31);
  const auto x = random_rows(kCapacity * 256, 32);
  std::vector<bf16> xq(x.size()), y(kCapacity * 768);
  std::vector<float> yf(kCapacity * 768);
  actq_rows(x.data(), kCapacity, 256, xq.data(), 0, 1);
  linear(ow.view(), xq.data(), kCapacity, y.data(), 0, 1);
  linear_f32(ow.view(), xq.data(), kCapacity, yf.data(), 0, 1);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i].bits, bf16::from_float(yf[i]).bits) << i;
}

// Demo FP8 GEMM (model.md §0.4.4): y_o = Σ_b f32(P_b · f32(s_x[b]·s_w[o/128, b])),
// P_b = Σ_{k∈b} q_x[k]·q_w[o,k] on the e4m3 codes; before the bf16 rounding.
std::vector<float> fp8_block_form(const test::OwnedWeight& w, const bf16* x, int64_t T) {
  const int64_t nb = w.in / 128;
  std::vector<float> y(T * w.out);
  std::vector<uint8_t> qx(w.in);
  std::vector<float> sx(nb);
  for (int64_t t = 0; t < T; ++t) {
    actq_row(x + t * w.in, w.in, qx.data(), sx.data());
    for (int64_t o = 0; o < w.out; ++o) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        float p = 0.0f;
        for (int64_t k = b * 128; k < b * 128 + 128; ++k)
          p += e4m3_decode(qx[k]) * e4m3_decode(w.data[o * w.in + k]);
        const float sw = ue8m0_decode(w.scale[(o / 128) * nb + b]);
        const float s = sx[b] * sw;
        acc += p * s;
      }
      y[t * w.out + o] = acc;
    }
  }
  return y;
}

// Demo FP4 GEMM: y_o = Σ_c f32(f32(P_c · s_x[32c/128]) · s_w[o, c]).
std::vector<float> fp4_block_form(const test::OwnedWeight& w, const bf16* x, int64_t T) {
  std::vector<float> y(T * w.out);
  std::vector<uint8_t> qx(w.in);
  std::vector<float> sx(w.in / 128);
  for (int64_t t = 0; t < T; ++t) {
    actq_row(x + t * w.in, w.in, qx.data(), sx.data());
    for (int64_t o = 0; o < w.out; ++o) {
      float acc = 0.0f;
      for (int64_t c = 0; c < w.in / 32; ++c) {
        float p = 0.0f;
        for (int64_t k = c * 32; k < c * 32 + 32; ++k)
          p += e4m3_decode(qx[k]) * e2m1_decode(e2m1_nibble(w.data.data() + o * (w.in / 2), k));
        const float a = p * sx[c * 32 / 128];
        acc += a * ue8m0_decode(w.scale[o * (w.in / 32) + c]);
      }
      y[t * w.out + o] = acc;
    }
  }
  return y;
}

TEST(Linear, Fp8BlockFormEqualsDequantizedDot) {
  for (const Shape& sh : kShapes) {
    if (sh.format != WeightFormat::kFP8) continue;
    SCOPED_TRACE(sh.name);
    // Distinct magnitudes per 128x128 block, so a per-row or per-tensor scale would fail.
    std::mt19937 rng(41);
    // x block b scaled by 2^e(b), the weight's K block by 2^-e(b) times 2^(2·(o/128 mod 2)):
    // activation and weight scales differ from block to block, products stay O(1/in).
    auto e = [](int64_t k) { return 3 * static_cast<int>((k / 128) % 3) - 3; };
    auto m = test::random_f32(rng, sh.out * sh.in, 1.0f / std::sqrt(static_cast<float>(sh.in)));
    for (int64_t o = 0; o < sh.out; ++o)
      for (int64_t k = 0; k < sh.in; ++k)
        m[o * sh.in + k] *= std::ldexp(1.0f, -e(k) + 2 * static_cast<int>((o / 128) % 2));
    const auto w = test::quantize_weight(sh.format, sh.out, sh.in, m);
    auto x = random_rows(kCapacity * sh.in, 42);
    for (int64_t i = 0; i < kCapacity * sh.in; ++i) x[i] = bf16::from_float(std::ldexp(x[i].to_float(), e(i % sh.in)));
    const auto want = fp8_block_form(w, x.data(), kCapacity);
    std::vector<bf16> xq(x.size());
    std::vector<float> got(want.size());
    actq_rows(x.data(), kCapacity, sh.in, xq.data(), 0, 1);
    linear_f32(w.view(), xq.data(), kCapacity, got.data(), 0, 1);
    EXPECT_TRUE(test::all_close(got.data(), want.data(), got.size(), test::kF32Sum));
  }
}

TEST(Linear, Fp4BlockFormEqualsDequantizedDot) {
  for (const Shape& sh : kShapes) {
    if (sh.format != WeightFormat::kFP4) continue;
    SCOPED_TRACE(sh.name);
    std::mt19937 rng(51);
    auto m = test::random_f32(rng, sh.out * sh.in, 0.05f);
    for (int64_t i = 0; i < sh.out * sh.in; ++i) m[i] *= std::ldexp(1.0f, static_cast<int>((i / 32) % 7) - 3);
    const auto w = test::quantize_weight(sh.format, sh.out, sh.in, m);
    const auto x = random_rows(kCapacity * sh.in, 52);
    const auto want = fp4_block_form(w, x.data(), kCapacity);
    std::vector<bf16> xq(x.size());
    std::vector<float> got(want.size());
    actq_rows(x.data(), kCapacity, sh.in, xq.data(), 0, 1);
    linear_f32(w.view(), xq.data(), kCapacity, got.data(), 0, 1);
    EXPECT_TRUE(test::all_close(got.data(), want.data(), got.size(), test::kF32Sum));
  }
}

// Dequantization uses the block's own scale: per 128x128 block (FP8), per row
// and 32 columns (FP4), checked element by element against the fp32 master.
TEST(Linear, DequantizationPerBlockScale) {
  std::mt19937 rng(61);
  const int64_t out = 192, in = 256;  // tiny2 wkv: 2 x 2 FP8 blocks, the second row block partial
  auto m = test::random_f32(rng, out * in, 1.0f);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < in; ++k) m[o * in + k] *= (o >= 128 ? 64.0f : 1.0f) * (k >= 128 ? 1.0f / 32 : 1.0f);
  for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kFP4}) {
    const auto w = test::quantize_weight(f, out, in, m);
    const float rel = f == WeightFormat::kFP8 ? 1.0f / 16 : 1.0f / 4;  // half a step, relative
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < in; ++k) {
        const float want = m[o * in + k], got = weight_at(w.view(), o, k);
        // Small values of a block fall into the subnormal/flush range of the format.
        const float floor = f == WeightFormat::kFP8 ? 0.002f * (o >= 128 ? 64.0f : 1.0f) : 0.3f * (o >= 128 ? 64.0f : 1.0f);
        ASSERT_LE(std::fabs(got - want), rel * std::fabs(want) + floor * (k >= 128 ? 1.0f / 32 : 1.0f))
            << "o=" << o << " k=" << k;
      }
  }
}

TEST(Linear, HandComputedBf16) {
  // W = [[1, 2, -1], [0.5, 0.25, 4]], x = [0.5, 0.25, 2] -> y = [-1, 8.3125]
  const bf16 wv[6] = {bf16::from_float(1), bf16::from_float(2), bf16::from_float(-1),
                      bf16::from_float(0.5f), bf16::from_float(0.25f), bf16::from_float(4)};
  const bf16 x[3] = {bf16::from_float(0.5f), bf16::from_float(0.25f), bf16::from_float(2)};
  const LinearWeight w{WeightFormat::kBF16, 2, 3, wv, nullptr};
  bf16 y[2];
  linear(w, x, 1, y, 0, 1);
  EXPECT_EQ(y[0].to_float(), -1.0f);
  EXPECT_EQ(y[1].to_float(), 8.3125f);
  // An FP8 weight with two K blocks and two scales: codes 1.0 (0x38) everywhere,
  // scales 2^-1 then 2^3; x̂ = x exactly (x = 1: actq scale 2^-8, code 256 exact).
  std::vector<uint8_t> codes(1 * 256, 0x38), scales = {ue8m0_encode_exp(-1), ue8m0_encode_exp(3)};
  const LinearWeight w8{WeightFormat::kFP8, 1, 256, codes.data(), scales.data()};
  std::vector<bf16> xs(256, bf16::from_float(1.0f)), xq(256);
  actq_rows(xs.data(), 1, 256, xq.data(), 0, 1);
  float yf;
  linear_f32(w8, xq.data(), 1, &yf, 0, 1);
  EXPECT_EQ(yf, 128 * 0.5f + 128 * 8.0f);
}

// The engine's block decode gives weight_at's value for every e4m3 code and
// e2m1 nibble, at ordinary, extreme and NaN scale bytes (x one-hot: y = w[o, k]).
TEST(Linear, EveryCodeDecodes) {
  for (auto [s0, s1] : {std::pair<uint8_t, uint8_t>{127, 130}, {27, 227}, {255, 0}}) {
    std::vector<uint8_t> codes(256 * 128), scales = {s0, s1};
    for (int o = 0; o < 256; ++o)
      for (int k = 0; k < 128; ++k) codes[o * 128 + k] = static_cast<uint8_t>(o);
    const LinearWeight w{WeightFormat::kFP8, 256, 128, codes.data(), scales.data()};
    std::vector<bf16> x(128, bf16::from_float(0.0f));
    x[37] = bf16::from_float(1.0f);
    std::vector<float> y(256);
    linear_f32(w, x.data(), 1, y.data(), 0, 1);
    for (int o = 0; o < 256; ++o) {
      const float want = weight_at(w, o, 37);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(y[o])) << o;
      } else {
        ASSERT_EQ(y[o], want) << "code " << o << " scale " << int(o < 128 ? s0 : s1);
      }
    }
  }
  std::vector<uint8_t> packed(16 * 16), scales(16);
  for (int o = 0; o < 16; ++o) {
    for (int j = 0; j < 16; ++j) packed[o * 16 + j] = static_cast<uint8_t>(o | (o << 4));
    scales[o] = static_cast<uint8_t>(o == 3 ? 255 : o == 4 ? 0 : 100 + 3 * o);
  }
  const LinearWeight w4{WeightFormat::kFP4, 16, 32, packed.data(), scales.data()};
  for (int k : {10, 11}) {  // low and high nibble
    std::vector<bf16> x(32, bf16::from_float(0.0f));
    x[k] = bf16::from_float(1.0f);
    std::vector<float> y(16);
    linear_f32(w4, x.data(), 1, y.data(), 0, 1);
    for (int o = 0; o < 16; ++o) {
      const float want = weight_at(w4, o, k);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(y[o])) << o;
      } else {
        ASSERT_EQ(y[o], want) << "nibble " << o;
      }
      if (o != 3) {
        ASSERT_EQ(want, e2m1_decode(static_cast<uint8_t>(o)) * ue8m0_decode(scales[o])) << o;
      }
    }
  }
}

// linear_slice: output ranges with strides, K ranges and the grouped tree.
TEST(Linear, SliceAndGroupedTree) {
  for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kBF16}) {
    const int64_t out = 256, in = 512, T = 7;  // tiny2 wo_b: 4 K blocks
    const auto ow = test::random_weight(f, out, in, 71);
    const LinearWeight w = ow.view();
    auto x = random_rows(T * in, 72);
    if (f == WeightFormat::kFP8) actq_rows(x.data(), T, in, x.data(), 0, 1);
    std::vector<float> full(T * out), beta(4 * T * out), grouped(T * out), grouped128(T * out);
    linear_f32(w, x.data(), T, full.data(), 0, 1);
    for (int kb = 0; kb < 4; ++kb) {
      LinearSlice s;
      s.k0 = kb * 128;
      s.k1 = s.k0 + 128;
      linear_slice(w, s, x.data(), T, beta.data() + kb * T * out, 0, 1);
    }
    LinearSlice g;
    g.k_group = 256;  // two groups of two blocks
    linear_slice(w, g, x.data(), T, grouped.data(), 0, 1);
    g.k_group = 128;  // every block its own group: same as the plain chain
    linear_slice(w, g, x.data(), T, grouped128.data(), 0, 1);
    for (int64_t i = 0; i < T * out; ++i) {
      const float* b = beta.data() + i;
      const int64_t st = T * out;
      const float plain = ((b[0] + b[st]) + b[2 * st]) + b[3 * st];
      const float tree = (b[0] + b[st]) + (b[2 * st] + b[3 * st]);
      ASSERT_EQ(full[i], plain) << i;
      ASSERT_EQ(grouped[i], tree) << i;
      ASSERT_EQ(grouped128[i], plain) << i;
    }
    // Output range [100, 230) into a wider strided buffer, input with a wider stride.
    std::vector<bf16> xw(T * (in + 40));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < in; ++k) xw[t * (in + 40) + 3 + k] = x[t * in + k];
    LinearSlice s;
    s.o0 = 100;
    s.o1 = 230;
    s.x_stride = in + 40;
    s.y_stride = 300;
    std::vector<float> ys(T * 300, -1.0f);
    for (int nthreads : {1, 2})
      run(nthreads, [&](int tid, int n) { linear_slice(w, s, xw.data() + 3, T, ys.data(), tid, n); });
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < 300; ++j) {
        if (j < 130) ASSERT_EQ(ys[t * 300 + j], full[t * out + 100 + j]);
        else ASSERT_EQ(ys[t * 300 + j], -1.0f);
      }
  }
}

}  // namespace
}  // namespace dsv4::kernels
