// Hyper-connections: engine (hc_mix + hc_pre_apply / hc_head_apply, hc_post) against the
// reference at every T in [1, kCapacity] with 1 and 2 threads, row independence, and
// hand-computed Sinkhorn / gate / post cases (model.md §5, §0.4.5 A2, A14, A15).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/math.h"
#include "base/thread_pool.h"
#include "kernels/hc/hc.h"
#include "support/poison.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

// model.md §14.1 / §14.1a: hc_mult 4, Th 20, εh = ε = 1e-6; D = 128 / 256.
const HcParams kTiny{4, 128, 20, 1e-6f, 1e-6f};
const HcParams kTiny2{4, 256, 20, 1e-6f, 1e-6f};

struct HcData {
  std::vector<float> fn, scale, base;  // hc_pre
  std::vector<float> head_fn, head_scale, head_base;
  RowBuffer<bf16> X;            // [cap, N·D]
  RowBuffer<bf16> f;            // [cap, D]
  RowBuffer<float> post, comb;  // hc_post inputs
  HcData(const HcParams& p, uint32_t seed)
      : X(kCapacity, p.width()),
        f(kCapacity, p.hidden),
        post(kCapacity, p.hc_mult),
        comb(kCapacity, p.hc_mult * p.hc_mult) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    // §14.2 initialization: fn N(0, 0.05), base N(0, 3), scale [0.08, 0.03, 0.2].
    for (int64_t i = 0; i < p.n_mix() * p.width(); ++i) fn.push_back(0.05f * n01(rng));
    for (int64_t i = 0; i < p.n_mix(); ++i) base.push_back(3.0f * n01(rng));
    scale = {0.08f, 0.03f, 0.2f};
    for (int64_t i = 0; i < p.hc_mult * p.width(); ++i) head_fn.push_back(0.05f * n01(rng));
    for (int64_t i = 0; i < p.hc_mult; ++i) head_base.push_back(3.0f * n01(rng));
    head_scale = {0.08f};
    for (auto& v : X.v) v = bf16::from_float(n01(rng));
    for (auto& v : f.v) v = bf16::from_float(n01(rng));
    std::uniform_real_distribution<float> u01(0.0f, 1.0f);
    for (auto& v : post.v) v = 2.0f * u01(rng);
    for (auto& v : comb.v) v = u01(rng);
  }
  HcPreWeights pre_w() const { return {fn.data(), scale.data(), base.data()}; }
  HcHeadWeights head_w() const { return {head_fn.data(), head_scale.data(), head_base.data()}; }
};

struct PreOut {
  RowBuffer<bf16> y;
  RowBuffer<float> post, comb, mix;
  explicit PreOut(const HcParams& p)
      : y(kCapacity, p.hidden),
        post(kCapacity, p.hc_mult),
        comb(kCapacity, p.hc_mult * p.hc_mult),
        mix(kCapacity, p.n_mix()) {}
  void poison(int64_t T) {
    y.poison(T);
    post.poison(T);
    comb.poison(T);
    mix.poison(kCapacity);  // scratch: NaN everywhere
  }
};

void run_pre(ThreadPool& pool, const bf16* X, const HcPreWeights& w, const HcParams& p, int64_t T,
             PreOut& o) {
  pool.run([&](int tid, int n) { hc_mix(X, w.fn, p.n_mix(), p, T, o.mix.data(), tid, n); });
  pool.run([&](int tid, int n) {
    hc_pre_apply(X, w, p, T, o.mix.data(), o.y.data(), o.post.data(), o.comb.data(), tid, n);
  });
}

void run_head(ThreadPool& pool, const bf16* X, const HcHeadWeights& w, const HcParams& p, int64_t T,
              float* mix, bf16* y) {
  pool.run([&](int tid, int n) { hc_mix(X, w.fn, p.hc_mult, p, T, mix, tid, n); });
  pool.run([&](int tid, int n) { hc_head_apply(X, w, p, T, mix, y, tid, n); });
}

class HcPreset : public ::testing::TestWithParam<int> {
 protected:
  const HcParams& params() const { return GetParam() == 0 ? kTiny : kTiny2; }
};

TEST_P(HcPreset, PreMatchesReferenceAtEveryT) {
  const HcParams& p = params();
  HcData d(p, 11 + GetParam());
  const int64_t N = p.hc_mult, D = p.hidden;
  PreOut ref(p);
  hc_pre_ref(d.X.data(), d.pre_w(), p, kCapacity, ref.y.data(), ref.post.data(), ref.comb.data());
  PreOut full(p);
  {
    ThreadPool pool(1);
    full.poison(kCapacity);
    run_pre(pool, d.X.data(), d.pre_w(), p, kCapacity, full);
  }
  ASSERT_TRUE(test::all_close(full.y.data(), ref.y.data(), kCapacity * D, test::kBf16Out, "y"));
  ASSERT_TRUE(
      test::all_close(full.post.data(), ref.post.data(), kCapacity * N, test::kF32Sum, "post"));
  ASSERT_TRUE(
      test::all_close(full.comb.data(), ref.comb.data(), kCapacity * N * N, test::kF32Sum, "comb"));
  for (int nthreads : {1, 2}) {
    ThreadPool pool(nthreads);
    PreOut o(p);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      o.poison(T);
      run_pre(pool, d.X.data(), d.pre_w(), p, T, o);
      // Bit-identical to the T = kCapacity run (row independence, any thread count).
      ASSERT_TRUE(test::all_close(o.y.data(), full.y.data(), T * D, test::kExact, "y")) << T;
      ASSERT_TRUE(test::all_close(o.post.data(), full.post.data(), T * N, test::kExact, "post"))
          << T;
      ASSERT_TRUE(test::all_close(o.comb.data(), full.comb.data(), T * N * N, test::kExact, "comb"))
          << T;
      ASSERT_TRUE(o.y.sentinel_intact(T)) << T;
      ASSERT_TRUE(o.post.sentinel_intact(T)) << T;
      ASSERT_TRUE(o.comb.sentinel_intact(T)) << T;
    }
  }
  // Each row alone.
  ThreadPool pool(2);
  PreOut one(p);
  for (int64_t t = 0; t < kCapacity; ++t) {
    one.poison(1);
    run_pre(pool, d.X.row(t), d.pre_w(), p, 1, one);
    ASSERT_TRUE(test::all_close(one.y.data(), full.y.row(t), D, test::kExact, "y row")) << t;
    ASSERT_TRUE(test::all_close(one.comb.data(), full.comb.row(t), N * N, test::kExact, "comb row"))
        << t;
  }
}

TEST_P(HcPreset, HeadMatchesReferenceAtEveryT) {
  const HcParams& p = params();
  HcData d(p, 21 + GetParam());
  const int64_t D = p.hidden;
  RowBuffer<bf16> ref(kCapacity, D), full(kCapacity, D), y(kCapacity, D);
  RowBuffer<float> mix(kCapacity, p.hc_mult);
  hc_head_ref(d.X.data(), d.head_w(), p, kCapacity, ref.data());
  {
    ThreadPool pool(1);
    full.poison(kCapacity);
    mix.poison(kCapacity);
    run_head(pool, d.X.data(), d.head_w(), p, kCapacity, mix.data(), full.data());
  }
  ASSERT_TRUE(test::all_close(full.data(), ref.data(), kCapacity * D, test::kBf16Out, "head y"));
  for (int nthreads : {1, 2}) {
    ThreadPool pool(nthreads);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      y.poison(T);
      mix.poison(kCapacity);
      run_head(pool, d.X.data(), d.head_w(), p, T, mix.data(), y.data());
      ASSERT_TRUE(test::all_close(y.data(), full.data(), T * D, test::kExact, "head y")) << T;
      ASSERT_TRUE(y.sentinel_intact(T)) << T;
    }
  }
  ThreadPool pool(2);
  for (int64_t t = 0; t < kCapacity; ++t) {
    y.poison(1);
    run_head(pool, d.X.row(t), d.head_w(), p, 1, mix.data(), y.data());
    ASSERT_TRUE(test::all_close(y.data(), full.row(t), D, test::kExact, "head row")) << t;
  }
}

TEST_P(HcPreset, PostMatchesReferenceAtEveryT) {
  const HcParams& p = params();
  HcData d(p, 31 + GetParam());
  const int64_t W = p.width();
  RowBuffer<bf16> ref(kCapacity, W), out(kCapacity, W);
  hc_post_ref(d.f.data(), d.X.data(), d.post.data(), d.comb.data(), p, kCapacity, ref.data());
  for (int nthreads : {1, 2, 3}) {
    ThreadPool pool(nthreads);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      out.poison(T);
      pool.run([&](int tid, int n) {
        hc_post(d.f.data(), d.X.data(), d.post.data(), d.comb.data(), p, T, out.data(), tid, n);
      });
      // Same ops in the same order as the reference: bit-identical.
      ASSERT_TRUE(test::all_close(out.data(), ref.data(), T * W, test::kExact, "X'")) << T;
      ASSERT_TRUE(out.sentinel_intact(T)) << T;
      // By hidden columns (the model's fused wo_b / MoE-down runs), with ragged column units.
      for (int64_t align : {64, 48}) {
        out.poison(T);
        pool.run([&](int tid, int n) {
          const Range c = split_aligned(p.hidden, align, tid, n);
          hc_post_cols(d.f.data(), d.X.data(), d.post.data(), d.comb.data(), p, T, c.begin, c.end, out.data());
        });
        ASSERT_TRUE(test::all_close(out.data(), ref.data(), T * W, test::kExact, "X' by columns")) << T;
        ASSERT_TRUE(out.sentinel_intact(T)) << T;
      }
    }
    // In place (X_out == X), the way the model updates its streams.
    RowBuffer<bf16> X = d.X;
    pool.run([&](int tid, int n) {
      hc_post(d.f.data(), X.data(), d.post.data(), d.comb.data(), p, kCapacity, X.data(), tid, n);
    });
    ASSERT_TRUE(test::all_close(X.data(), ref.data(), kCapacity * W, test::kExact, "in place"));
  }
  RowBuffer<bf16> Xr = d.X;
  hc_post_ref(d.f.data(), Xr.data(), d.post.data(), d.comb.data(), p, kCapacity, Xr.data());
  ASSERT_TRUE(test::all_close(Xr.data(), ref.data(), kCapacity * W, test::kExact, "ref in place"));
}

// dspark.md §2 (A17): the stream mean, into a slice of wider feature rows; the rest of each
// row and the rows past T keep their contents.
TEST_P(HcPreset, StreamMeanMatchesReferenceAtEveryT) {
  const HcParams& p = params();
  HcData d(p, 41 + GetParam());
  const int64_t D = p.hidden, stride = 3 * D, off = D;
  std::vector<bf16> ref(static_cast<size_t>(kCapacity * stride), bf16::from_float(0.0f));
  hc_stream_mean_ref(d.X.data(), p, kCapacity, ref.data() + off, stride);
  // Hand check of one element: the fp32 sum of the four streams times 1/4, rounded once.
  float sum = 0.0f;
  for (int64_t k = 0; k < p.hc_mult; ++k) sum += d.X.data()[(3 * p.hc_mult + k) * D + 5].to_float();
  EXPECT_EQ(ref[3 * stride + off + 5].bits, bf16::from_float(sum * 0.25f).bits);
  const bf16 sentinel = bf16::from_float(-1234.0f);
  for (int nthreads : {1, 2}) {
    ThreadPool pool(nthreads);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      std::vector<bf16> out(static_cast<size_t>(kCapacity * stride), sentinel);
      pool.run([&](int tid, int n) { hc_stream_mean(d.X.data(), p, T, out.data() + off, stride, tid, n); });
      for (int64_t t = 0; t < kCapacity; ++t)
        for (int64_t i = 0; i < stride; ++i) {
          const bool written = t < T && i >= off && i < off + D;
          ASSERT_EQ(out[t * stride + i].bits, written ? ref[t * stride + i].bits : sentinel.bits)
              << "T " << T << " row " << t << " col " << i;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, HcPreset, ::testing::Values(0, 1),
                         [](const auto& info) { return info.param == 0 ? "tiny" : "tiny2"; });

// ---- hand-computed cases ----

// Independent double-precision Sinkhorn of §5.1 (softmax rows + εh, column step, Th−1 × (row, column)).
std::vector<double> sinkhorn_double(const std::vector<double>& Z, int N, int iters, double eps) {
  std::vector<double> C(N * N);
  for (int j = 0; j < N; ++j) {
    double mu = Z[j * N], S = 0;
    for (int k = 0; k < N; ++k) mu = std::max(mu, Z[j * N + k]);
    for (int k = 0; k < N; ++k) S += std::exp(Z[j * N + k] - mu);
    for (int k = 0; k < N; ++k) C[j * N + k] = std::exp(Z[j * N + k] - mu) / S + eps;
  }
  auto col = [&] {
    for (int k = 0; k < N; ++k) {
      double s = eps;
      for (int j = 0; j < N; ++j) s += C[j * N + k];
      for (int j = 0; j < N; ++j) C[j * N + k] /= s;
    }
  };
  col();
  for (int it = 1; it < iters; ++it) {
    for (int j = 0; j < N; ++j) {
      double s = eps;
      for (int k = 0; k < N; ++k) s += C[j * N + k];
      for (int k = 0; k < N; ++k) C[j * N + k] /= s;
    }
    col();
  }
  return C;
}

double sigmoid_d(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// fn = 0 makes m = 0, so z = base: the gates and the Sinkhorn input are chosen directly.
struct ChosenLogits {
  HcParams p;
  std::vector<float> fn, scale{0.08f, 0.03f, 0.2f}, base;
  std::vector<bf16> X;
  ChosenLogits(int64_t N, int64_t D, std::vector<float> b)
      : p{N, D, 20, 1e-6f, 1e-6f},
        fn(p.n_mix() * p.width(), 0.0f),
        base(std::move(b)),
        X(p.width()) {
    for (int64_t i = 0; i < p.width(); ++i)
      X[i] = bf16::from_float(0.25f * static_cast<float>(i % 7) - 0.5f);
  }
};

void run_both(const ChosenLogits& c, std::vector<bf16>* y, std::vector<float>* post,
              std::vector<float>* comb, bool engine) {
  const HcPreWeights w{c.fn.data(), c.scale.data(), c.base.data()};
  y->assign(c.p.hidden, bf16{});
  post->assign(c.p.hc_mult, 0.0f);
  comb->assign(c.p.hc_mult * c.p.hc_mult, 0.0f);
  if (!engine) {
    hc_pre_ref(c.X.data(), w, c.p, 1, y->data(), post->data(), comb->data());
    return;
  }
  std::vector<float> mix(c.p.n_mix());
  hc_mix(c.X.data(), w.fn, c.p.n_mix(), c.p, 1, mix.data(), 0, 1);
  hc_pre_apply(c.X.data(), w, c.p, 1, mix.data(), y->data(), post->data(), comb->data(), 0, 1);
}

TEST(HcHand, SinkhornTwoStreams) {
  // Z = [[0, 1], [2, −1]]: the limit is [[a, 1−a], [1−a, a]] with a/(1−a) = e^-2 (the cross
  // ratio Z00 + Z11 − Z01 − Z10 = −4 is invariant under row/column scaling), a = sigmoid(−2).
  ChosenLogits c(2, 128, {0.5f, -1.0f, 0.0f, 3.0f, 0.0f, 1.0f, 2.0f, -1.0f});
  const std::vector<double> want = sinkhorn_double({0, 1, 2, -1}, 2, 20, 1e-6);
  const double a = sigmoid_d(-2.0);
  for (bool engine : {false, true}) {
    std::vector<bf16> y;
    std::vector<float> post, comb;
    run_both(c, &y, &post, &comb, engine);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(comb[i], want[i], 1e-6) << i << " engine " << engine;
    EXPECT_NEAR(comb[0], a, 1e-5);
    EXPECT_NEAR(comb[1], 1 - a, 1e-5);
    EXPECT_NEAR(comb[2], 1 - a, 1e-5);
    EXPECT_NEAR(comb[3], a, 1e-5);
    for (int k = 0; k < 2; ++k) EXPECT_NEAR(comb[k] + comb[2 + k], 1.0, 3e-6) << "column " << k;
    // Gates: pre = sigmoid(base) + εh, post = 2·sigmoid(base).
    const double pre0 = sigmoid_d(0.5) + 1e-6, pre1 = sigmoid_d(-1.0) + 1e-6;
    EXPECT_NEAR(post[0], 2 * sigmoid_d(0.0), 1e-6);
    EXPECT_NEAR(post[1], 2 * sigmoid_d(3.0), 1e-6);
    for (int d = 0; d < 128; ++d) {
      const double want_y = pre0 * c.X[d].to_float() + pre1 * c.X[128 + d].to_float();
      EXPECT_NEAR(y[d].to_float(), want_y, std::fabs(want_y) / 256 + 1e-6) << d;
    }
  }
}

TEST(HcHand, SinkhornFourStreamsColumnSums) {
  std::vector<float> base(24, 0.0f);
  const std::vector<double> Z = {3, -2, 0.5, 1, -1, 4, 0, 2, 0.25, 0.75, -3, 1.5, 2, 2, 2, -0.5};
  for (int i = 0; i < 16; ++i) base[8 + i] = static_cast<float>(Z[i]);
  ChosenLogits c(4, 128, base);
  const std::vector<double> want = sinkhorn_double(Z, 4, 20, 1e-6);
  for (bool engine : {false, true}) {
    std::vector<bf16> y;
    std::vector<float> post, comb;
    run_both(c, &y, &post, &comb, engine);
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(comb[i], want[i], 1e-6) << i;
    for (int k = 0; k < 4; ++k) {
      double col = 0, row = 0;
      for (int j = 0; j < 4; ++j) col += comb[j * 4 + k], row += comb[k * 4 + j];
      EXPECT_NEAR(col, 1.0, 1e-5) << "column " << k;  // the loop ends on a column step
      EXPECT_NEAR(row, 1.0, 1e-2) << "row " << k;     // rows only approximately
    }
  }
}

TEST(HcHand, SingleStreamDegenerates) {
  // hc_mult = 1: M = 3, comb is 1×1 ≈ 1, y = bf16(f32(pre·x)).
  ChosenLogits c(1, 128, {0.7f, -0.3f, 5.0f});
  for (bool engine : {false, true}) {
    std::vector<bf16> y;
    std::vector<float> post, comb;
    run_both(c, &y, &post, &comb, engine);
    EXPECT_NEAR(comb[0], 1.0, 1e-5);
    EXPECT_NEAR(post[0], 2 * sigmoid_d(-0.3), 1e-6);
    const float pre = static_cast<float>(1.0f / (1.0f + std::exp(-0.7f))) + 1e-6f;
    for (int d = 0; d < 128; ++d)
      EXPECT_EQ(y[d].bits, bf16::from_float(pre * c.X[d].to_float()).bits) << d;
  }
}

TEST(HcHand, RmsFactorAndMix) {
  // N = 1, X ≡ 2: ρ = 1/sqrt(4 + ε); fn ≡ 1/128 gives Σ fn·x = 2 exactly, m = 2ρ ≈ 1;
  // z = m·scale + base.
  HcParams p{1, 128, 20, 1e-6f, 1e-6f};
  std::vector<float> fn(128, 1.0f / 128), scale{0.5f}, base{0.25f};
  std::vector<bf16> X(128, bf16::from_float(2.0f));
  const double m = 2.0 / std::sqrt(4.0 + 1e-6), pre = sigmoid_d(m * 0.5 + 0.25) + 1e-6;
  std::vector<bf16> y_ref(128), y(128);
  hc_head_ref(X.data(), {fn.data(), scale.data(), base.data()}, p, 1, y_ref.data());
  float mix = 0;
  hc_mix(X.data(), fn.data(), 1, p, 1, &mix, 0, 1);
  EXPECT_EQ(mix, 2.0f);
  hc_head_apply(X.data(), {fn.data(), scale.data(), base.data()}, p, 1, &mix, y.data(), 0, 1);
  for (int d = 0; d < 128; ++d) {
    EXPECT_EQ(y[d].bits, bf16::from_float(static_cast<float>(2 * pre)).bits);
    EXPECT_EQ(y_ref[d].bits, y[d].bits);
  }
}

TEST(HcHand, PostOrientation) {
  // comb[j][k]: j = source stream, k = destination. N = 2, D = 3, dyadic values (exact).
  HcParams p{2, 3, 20, 1e-6f, 1e-6f};
  const std::vector<float> post{1.0f, 0.5f}, comb{0.25f, 0.5f, 0.75f, 0.5f};
  std::vector<bf16> f(3, bf16::from_float(2.0f)), X(6), out(6), out_ref(6);
  for (int d = 0; d < 3; ++d) {
    X[d] = bf16::from_float(1.0f);
    X[3 + d] = bf16::from_float(-4.0f);
  }
  hc_post_ref(f.data(), X.data(), post.data(), comb.data(), p, 1, out_ref.data());
  hc_post(f.data(), X.data(), post.data(), comb.data(), p, 1, out.data(), 0, 1);
  for (int d = 0; d < 3; ++d) {
    // X'_0 = 1·2 + 0.25·1 + 0.75·(−4) = −0.75;  X'_1 = 0.5·2 + 0.5·1 + 0.5·(−4) = −0.5
    EXPECT_EQ(out[d].to_float(), -0.75f);
    EXPECT_EQ(out[3 + d].to_float(), -0.5f);
    EXPECT_EQ(out_ref[d].bits, out[d].bits);
    EXPECT_EQ(out_ref[3 + d].bits, out[3 + d].bits);
  }
}

}  // namespace
}  // namespace dsv4::kernels
