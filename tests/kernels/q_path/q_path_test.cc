// q_path: the per-head bf16 RMS of A4 (hand case, differs from the fp32-factor
// form), engine vs reference at every T in [1, kCapacity] with 1 and 2 threads
// for tiny and tiny2 dims, FP8 and BF16 storage; rows bit-identical across T.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/linear/linear.h"
#include "kernels/q_path/q_path.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "support/poison.h"
#include "support/threads.h"
#include "support/quant_weights.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

constexpr float kEps = 1e-6f;

using test::pool2;
using test::run;

// Level-B form: fp32 factor ρ_Dh, one rounding.
void head_rms_fp32_factor(bf16* v, int n) {
  const float rho = rms_factor(v, n, kEps);
  for (int i = 0; i < n; ++i) v[i] = bf16::from_float(v[i].to_float() * rho);
}

TEST(HeadRms, HandComputed) {
  // q = (0.875, 0.5, −1.125, 1.5), Dh = 4:
  //   sq = (0.765625, 0.25, 1.265625, 2.25) (exact), Σ = 4.53125, μ = bf16(4.53125·0.25) = 1.1328125,
  //   v = bf16(1.1328125 + 1e-6) = 1.1328125, r = bf16(1/sqrt(1.1328125) = 0.939558) = 0.94140625,
  //   q·r = (0.823730, 0.470703, −1.059082, 1.412109) -> bf16 (0.82421875, 0.470703125, −1.0625, 1.4140625).
  // The fp32-factor form gives (0.8203125, 0.470703125, −1.0546875, 1.40625).
  const float in[4] = {0.875f, 0.5f, -1.125f, 1.5f};
  bf16 a[4], b[4];
  for (int i = 0; i < 4; ++i) a[i] = b[i] = bf16::from_float(in[i]);
  head_rms(a, 1, 1, 4, kEps, 0, 1);
  EXPECT_EQ(a[0].to_float(), 0.82421875f);
  EXPECT_EQ(a[1].to_float(), 0.470703125f);
  EXPECT_EQ(a[2].to_float(), -1.0625f);
  EXPECT_EQ(a[3].to_float(), 1.4140625f);
  head_rms_fp32_factor(b, 4);
  EXPECT_EQ(b[0].to_float(), 0.8203125f);
  EXPECT_EQ(b[2].to_float(), -1.0546875f);
  EXPECT_EQ(b[3].to_float(), 1.40625f);
  // A square that is not bf16-exact: 1.9921875² = 3.96881 -> bf16 3.96875.
  bf16 c[2] = {bf16::from_float(1.9921875f), bf16::from_float(0.0f)};
  head_rms_ref(c, 1, 1, 2, kEps);
  //   Σ = 3.96875, μ = bf16(1.984375) = 1.984375, v = bf16(1.984376) = 1.984375,
  //   r = bf16(0.709885) = 0.7109375, q0 = bf16(1.416321) = 1.4140625.
  EXPECT_EQ(c[0].to_float(), 1.4140625f);
  EXPECT_EQ(c[1].to_float(), 0.0f);
}

TEST(HeadRms, EveryTMatchesRefAndDiffersFromFp32Factor) {
  for (int dh : {80, 192}) {
    const int H = 4;
    std::mt19937 rng(dh);
    const auto x = test::random_bf16(rng, kCapacity * H * dh, 0.7f);
    std::vector<bf16> want(x);
    head_rms_ref(want.data(), kCapacity, H, dh, kEps);
    RowBuffer<bf16> y(kCapacity, H * dh);
    for (int nthreads : {1, 2})
      for (int T = 1; T <= kCapacity; ++T) {
        y.poison(T);
        std::copy(x.begin(), x.begin() + T * H * dh, y.v.begin());
        run(nthreads, [&](int tid, int n) { head_rms(y.data(), T, H, dh, kEps, tid, n); });
        ASSERT_TRUE(y.sentinel_intact(T));
        ASSERT_TRUE(test::all_close(y.data(), want.data(), T * H * dh, test::kExact)) << "T=" << T;
      }
    std::vector<bf16> b(x);
    for (int64_t v = 0; v < kCapacity * H; ++v) head_rms_fp32_factor(b.data() + v * dh, dh);
    int64_t differ = 0;
    for (size_t i = 0; i < b.size(); ++i) differ += b[i].bits != want[i].bits;
    // model.md §6.1: roughly 30 % of the elements differ.
    EXPECT_GT(differ, static_cast<int64_t>(b.size() / 10)) << differ << " of " << b.size();
  }
}

// Values over many binades, zeros, subnormals (squares underflow) and large values (squares
// round to Inf), so any change of a head's summation order or rounding shows in the bits.
std::vector<bf16> wide_bf16(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-12, 12), kind(0, 99);
  std::vector<bf16> v(n);
  for (auto& x : v) {
    const int k = kind(rng);
    const float f = k == 0 ? 0.0f : k == 1 ? std::ldexp(n01(rng), -130) : k == 2 ? std::ldexp(n01(rng), 70) : std::ldexp(n01(rng), e(rng));
    x = bf16::from_float(f);
  }
  return v;
}

// Every ISA variant of head_rms gives head_rms_ref's bits: head counts around the 8- and
// 16-head groups, dims on and off the vector width, every T with 1 and 2 threads, a NaN and
// an Inf in a few heads.
TEST(HeadRms, EveryIsaMatchesRefBitForBit) {
  struct Case {
    int H, dh, T;
  };
  for (const Case c : {Case{1, 512, 3}, Case{5, 80, kCapacity}, Case{16, 64, 9}, Case{17, 48, 7}, Case{64, 512, 4},
                       Case{3, 24, 11}, Case{9, 20, 5}}) {
    std::mt19937 rng(c.H * 1000 + c.dh);
    auto x = wide_bf16(rng, int64_t{c.T} * c.H * c.dh);
    if (x.size() > 3 * static_cast<size_t>(c.dh)) {
      x[c.dh + 5] = bf16::from_bits(0x7fc1);  // NaN in head 1
      x[2 * c.dh + 1] = bf16::from_float(std::numeric_limits<float>::infinity());
    }
    std::vector<bf16> want(x);
    head_rms_ref(want.data(), c.T, c.H, c.dh, kEps);
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      set_q_path_isa(isa);
      for (int nthreads : {1, 2})
        for (int T = 1; T <= c.T; ++T) {
          RowBuffer<bf16> y(c.T, c.H * c.dh);
          y.poison(T);
          std::copy(x.begin(), x.begin() + int64_t{T} * c.H * c.dh, y.v.begin());
          run(nthreads, [&](int tid, int n) { head_rms(y.data(), T, c.H, c.dh, kEps, tid, n); });
          ASSERT_TRUE(y.sentinel_intact(T));
          ASSERT_EQ(0, std::memcmp(y.data(), want.data(), sizeof(bf16) * T * c.H * c.dh))
              << isa_name(isa) << " H=" << c.H << " dh=" << c.dh << " T=" << T << " threads=" << nthreads;
        }
    }
    set_q_path_isa(detect_isa());
  }
}

// The summation order reaches the output: each head holds 128 and 8 at dims p, p + 1
// (p = h mod 5) and 2^-6 elsewhere. In ascending order the smalls after the pair are absorbed
// (Σ = 16448 + p·2^-12 rounds to 16448, μ = 32.125 a tie that rounds to 32); any order that
// adds five or more smalls before the pair gives μ above the tie (32.25), so every output moves.
TEST(HeadRms, EveryIsaKeepsTheAscendingOrder) {
  const int H = 37, dh = 512;
  std::vector<bf16> x(int64_t{H} * dh, bf16::from_float(0.015625f));
  for (int h = 0; h < H; ++h) {
    x[h * dh + h % 5] = bf16::from_float(128.0f);
    x[h * dh + h % 5 + 1] = bf16::from_float(8.0f);
  }
  std::vector<bf16> want(x), reversed(x.rbegin(), x.rend());
  head_rms_ref(want.data(), 1, H, dh, kEps);
  head_rms_ref(reversed.data(), 1, H, dh, kEps);
  ASSERT_NE(want[0].bits, reversed[H * dh - 1].bits) << "the case is not order-sensitive";
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_q_path_isa(isa);
    std::vector<bf16> y(x);
    head_rms(y.data(), 1, H, dh, kEps, 0, 1);
    EXPECT_EQ(0, std::memcmp(y.data(), want.data(), sizeof(bf16) * y.size())) << isa_name(isa);
  }
  set_q_path_isa(detect_isa());
}

// Phase 4 (head_rms, then RoPE in the same pass on the vector variants) on every ISA equals
// head_rms_ref then rope_ref bit for bit: RoPE dims fused (whole registers) or not, every T,
// 1 and 2 threads (a row's heads split between them).
TEST(QPath, Phase4EveryIsaMatchesHeadRmsThenRope) {
  struct Case {
    int H, dh, dr;
  };
  for (const Case c : {Case{64, 512, 64}, Case{5, 80, 16}, Case{3, 48, 8}, Case{17, 192, 64}, Case{2, 24, 8}}) {
    QPathParams p{0, 0, c.H, c.dh, c.dr, kEps};
    RopeParams rp;
    rp.rope_dim = c.dr;
    const auto inv = rope_inv_freq(rp);
    QPathWeights w;
    w.inv_freq = inv.data();
    const int T_max = c.dh >= 512 ? 6 : kCapacity;
    std::mt19937 rng(c.H * 31 + c.dh);
    const auto x = wide_bf16(rng, int64_t{T_max} * c.H * c.dh);
    std::vector<int64_t> pos(T_max);
    for (int t = 0; t < T_max; ++t) pos[t] = 11 * t * t + 2;
    std::vector<bf16> want(x);
    head_rms_ref(want.data(), T_max, c.H, c.dh, kEps);
    rope_ref(inv.data(), c.dr, want.data(), T_max, c.H, c.dh, pos.data(), false);
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      set_q_path_isa(isa);
      for (int nthreads : {1, 2})
        for (int T = 1; T <= T_max; ++T) {
          RowBuffer<bf16> q(T_max, c.H * c.dh);
          q.poison(T);
          std::copy(x.begin(), x.begin() + int64_t{T} * c.H * c.dh, q.v.begin());
          const QPathIO io{T, nullptr, pos.data(), nullptr, q.data(), nullptr};
          run(nthreads, [&](int tid, int n) { q_path(4, p, w, io, tid, n); });
          ASSERT_TRUE(q.sentinel_intact(T));
          ASSERT_EQ(0, std::memcmp(q.data(), want.data(), sizeof(bf16) * T * c.H * c.dh))
              << isa_name(isa) << " H=" << c.H << " dh=" << c.dh << " dr=" << c.dr << " T=" << T;
        }
    }
    set_q_path_isa(detect_isa());
  }
}

struct Dims {
  const char* name;
  QPathParams p;
  bool yarn;
};
const Dims kDims[] = {
    {"tiny", {128, 128, 4, 80, 16, kEps}, false},
    {"tiny2", {256, 256, 4, 192, 64, kEps}, true},
};

TEST(QPath, EveryTMatchesRef) {
  for (const Dims& d : kDims)
    for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kBF16}) {
      const QPathParams& p = d.p;
      SCOPED_TRACE(::testing::Message() << d.name << (f == WeightFormat::kFP8 ? " fp8" : " bf16"));
      const int64_t HD = int64_t{p.n_heads} * p.head_dim;
      const auto wq_a = test::random_weight(f, p.q_lora_rank, p.hidden, 1);
      const auto wq_b = test::random_weight(f, HD, p.q_lora_rank, 2);
      const auto q_norm = test::random_norm_weight(p.q_lora_rank, 3);
      RopeParams rp;
      rp.rope_dim = p.rope_dim;
      rp.theta = d.yarn ? 160000.0 : 10000.0;
      rp.yarn = d.yarn;
      const auto inv = rope_inv_freq(rp);
      const QPathWeights w{wq_a.view(), q_norm.data(), wq_b.view(), inv.data()};
      std::mt19937 rng(4);
      const auto a = test::random_bf16(rng, kCapacity * p.hidden, 1.0f);
      std::vector<int64_t> pos(kCapacity);
      for (int64_t t = 0; t < kCapacity; ++t) pos[t] = 3 * t + 7;
      std::vector<bf16> want_qr(kCapacity * p.q_lora_rank), want_q(kCapacity * HD);
      q_path_ref(p, w, a.data(), kCapacity, pos.data(), want_qr.data(), want_q.data());

      RowBuffer<bf16> qr(kCapacity, p.q_lora_rank), q(kCapacity, HD);
      std::vector<bf16> scratch(q_path_scratch_elems(p, kCapacity));
      std::vector<bf16> full_qr, full_q;
      for (int nthreads : {1, 2})
        for (int T = kCapacity; T >= 1; --T) {
          qr.poison(T);
          q.poison(T);
          std::fill(scratch.begin(), scratch.end(), test::nan_value<bf16>());
          const QPathIO io{T, a.data(), pos.data(), qr.data(), q.data(), scratch.data()};
          for (int ph = 0; ph < kQPathPhases; ++ph)
            run(nthreads, [&](int tid, int n) { q_path(ph, p, w, io, tid, n); });
          ASSERT_TRUE(qr.sentinel_intact(T));
          ASSERT_TRUE(q.sentinel_intact(T));
          if (full_q.empty()) {  // first call: T = kCapacity, one thread
            full_qr.assign(qr.v.begin(), qr.v.end());
            full_q.assign(q.v.begin(), q.v.end());
            // Stage by stage against the reference operators fed with the engine's
            // previous stage (qa is in scratch after aq, q_path.h).
            const bf16* qa = scratch.data() + T * p.hidden;
            std::vector<bf16> s_qa(T * p.q_lora_rank), s_qr(T * p.q_lora_rank), s_q(T * HD);
            linear_ref(w.wq_a, a.data(), T, s_qa.data(), w.wq_a.quantized());
            EXPECT_TRUE(test::all_close(qa, s_qa.data(), T * p.q_lora_rank, test::kBf16Out));
            rmsnorm_ref(qa, w.q_norm, s_qr.data(), T, p.q_lora_rank, kEps);
            EXPECT_TRUE(test::all_close(qr.data(), s_qr.data(), T * p.q_lora_rank, test::kBf16Out));
            linear_ref(w.wq_b, qr.data(), T, s_q.data(), w.wq_b.quantized());
            head_rms_ref(s_q.data(), T, p.n_heads, p.head_dim, kEps);
            rope_ref(w.inv_freq, p.rope_dim, s_q.data(), T, p.n_heads, p.head_dim, pos.data(), false);
            EXPECT_TRUE(test::all_close(q.data(), s_q.data(), T * HD, test::kQuantized));
            // End to end: a flipped bf16 rounding early on moves later stages by a step.
            EXPECT_TRUE(test::all_close(qr.data(), want_qr.data(), T * p.q_lora_rank, test::kQuantized));
            EXPECT_TRUE(test::all_close(q.data(), want_q.data(), T * HD, test::kQuantized));
          }
          ASSERT_TRUE(test::all_close(qr.data(), full_qr.data(), T * p.q_lora_rank, test::kExact)) << "T=" << T;
          ASSERT_TRUE(test::all_close(q.data(), full_q.data(), T * HD, test::kExact)) << "T=" << T;
        }
    }
}

}  // namespace
}  // namespace dsv4::kernels
