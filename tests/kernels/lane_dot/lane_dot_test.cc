// Lane dots: every ISA variant against the reference, bit for bit, for fp32 and bf16 weights,
// every row count of a pass and lengths around the 8-lane grid (tails of 1..7), with values
// whose sums depend on the order (wide exponent spread, cancellation), NaN and Inf; and a row's
// result does not depend on the rows it shares a pass with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/lane_dot/lane_dot.h"

namespace dsv4::kernels {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Values spread over many binades, so any change of the summation order shows in the bits.
float spread(std::mt19937& rng) {
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-20, 20);
  return std::ldexp(n01(rng), e(rng));
}

template <class W>
void check_every_isa(const std::vector<W>& w, const std::vector<std::vector<bf16>>& rows, int64_t n) {
  std::vector<float> want(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) want[r] = lane_dot_ref(w.data(), rows[r].data(), n);
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_lane_dot_isa(isa);
    for (int R = 1; R <= kLaneDotMaxRows; ++R) {
      for (size_t r0 = 0; r0 + R <= rows.size(); ++r0) {
        const bf16* x[kLaneDotMaxRows];
        for (int q = 0; q < R; ++q) x[q] = rows[r0 + q].data();
        float out[kLaneDotMaxRows];
        std::fill(out, out + kLaneDotMaxRows, -7.0f);
        lane_dot_rows(w.data(), x, R, n, out);
        for (int q = 0; q < R; ++q)
          ASSERT_TRUE(same_bits(out[q], want[r0 + q]) || (std::isnan(out[q]) && std::isnan(want[r0 + q])))
              << isa_name(isa) << " n=" << n << " R=" << R << " row " << r0 + q << ": " << out[q] << " vs "
              << want[r0 + q];
        for (int q = R; q < kLaneDotMaxRows; ++q) ASSERT_EQ(out[q], -7.0f) << "wrote past rows";
      }
    }
  }
  set_lane_dot_isa(detect_isa());
}

TEST(LaneDot, EveryVariantEqualsReference) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 63, 64, 129, 1000}) {
    std::vector<float> wf(static_cast<size_t>(n));
    std::vector<bf16> wb(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      wf[i] = spread(rng);
      wb[i] = bf16::from_float(spread(rng));
    }
    std::vector<std::vector<bf16>> rows(10, std::vector<bf16>(static_cast<size_t>(n)));
    for (auto& row : rows)
      for (bf16& v : row) v = bf16::from_float(spread(rng));
    if (n > 3) {  // a NaN in one row and an Inf in another stay in their rows
      rows[2][3] = bf16::from_float(std::numeric_limits<float>::quiet_NaN());
      rows[4][n - 1] = bf16::from_float(std::numeric_limits<float>::infinity());
    }
    check_every_isa(wf, rows, n);
    check_every_isa(wb, rows, n);
  }
}

// lane_dot_block: every weight count and row count of a pass, every variant, each (weight, row)
// dot equal to the reference's; outputs past n_w·rows untouched.
TEST(LaneDot, BlockEqualsReferenceEveryVariant) {
  std::mt19937 rng(11);
  for (int64_t n : {1, 7, 8, 9, 23, 64, 129, 1000}) {
    std::vector<std::vector<bf16>> w(kLaneDotMaxWeights, std::vector<bf16>(static_cast<size_t>(n)));
    std::vector<std::vector<bf16>> rows(kLaneDotMaxRows, std::vector<bf16>(static_cast<size_t>(n)));
    for (auto* set : {&w, &rows})
      for (auto& v : *set)
        for (bf16& e : v) e = bf16::from_float(spread(rng));
    if (n > 3) {
      rows[1][2] = bf16::from_float(std::numeric_limits<float>::quiet_NaN());
      w[2][n - 1] = bf16::from_float(std::numeric_limits<float>::infinity());
    }
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      set_lane_dot_isa(isa);
      for (int n_w = 1; n_w <= kLaneDotMaxWeights; ++n_w)
        for (int R = 1; R <= kLaneDotMaxRows; ++R) {
          const bf16* wp[kLaneDotMaxWeights];
          const bf16* xp[kLaneDotMaxRows];
          for (int i = 0; i < n_w; ++i) wp[i] = w[(i + R) % kLaneDotMaxWeights].data();
          for (int q = 0; q < R; ++q) xp[q] = rows[(q + n_w) % kLaneDotMaxRows].data();
          float out[kLaneDotMaxWeights * kLaneDotMaxRows + 1];
          std::fill(std::begin(out), std::end(out), -7.0f);
          lane_dot_block(wp, n_w, xp, R, n, out);
          for (int i = 0; i < n_w; ++i)
            for (int q = 0; q < R; ++q) {
              const float want = lane_dot_ref(wp[i], xp[q], n), got = out[i * R + q];
              ASSERT_TRUE(same_bits(got, want) || (std::isnan(got) && std::isnan(want)))
                  << isa_name(isa) << " n=" << n << " n_w=" << n_w << " R=" << R << " (" << i << ", " << q << ")";
            }
          ASSERT_EQ(out[n_w * R], -7.0f) << "wrote past the outputs";
        }
    }
    set_lane_dot_isa(detect_isa());
  }
}

// The lane order itself, on a case worked by hand: lane l holds element l only (n = 8), so the
// result is ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)); with p0 = 2^24, p4 = 1, p1 = -2^24,
// p5 = 1 and the rest 0 that is (2^24 + 1 rounds to 2^24) + (-2^24 + 1) = 1, where a plain
// ascending sum gives 0 + ... = 2.
TEST(LaneDot, LaneOrderByHand) {
  const float big = 16777216.0f;
  const std::vector<float> w = {big, -big, 0, 0, 1, 1, 0, 0};
  std::vector<bf16> x(8, bf16::from_float(1.0f));
  EXPECT_EQ(lane_dot_ref(w.data(), x.data(), 8), 1.0f);
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_lane_dot_isa(isa);
    const bf16* xs[1] = {x.data()};
    float out = 0;
    lane_dot_rows(w.data(), xs, 1, 8, &out);
    EXPECT_EQ(out, 1.0f) << isa_name(isa);
  }
  set_lane_dot_isa(detect_isa());
}

}  // namespace
}  // namespace dsv4::kernels
