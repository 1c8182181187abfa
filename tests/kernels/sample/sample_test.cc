// Sampling (model.md §10.2): the spec's check values of the counter-based uniform, engine
// against the reference at every T in [1, kCapacity] (1 and 2 threads, mixed per-row
// parameters), ties, top-p edge cases, zero-probability ids, the temperature floor and
// parameter validation.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/sample/sample.h"
#include "support/poison.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

constexpr int64_t kVocab = 512;  // tiny / tiny2 vocab_size

std::vector<int32_t> run_engine(const std::vector<float>& logits, int64_t T, int64_t V,
                                const std::vector<SampleRow>& rows, int nthreads) {
  ThreadPool pool(nthreads);
  const int64_t bytes = sample_scratch_bytes(V, nthreads);
  std::vector<uint64_t> scratch(bytes / 8 + 1, ~uint64_t{0});  // NaN-filled floats
  std::vector<int32_t> tokens(T);
  pool.run([&](int tid, int n) {
    sample(logits.data(), T, V, rows.data(), tokens.data(), scratch.data(), bytes, tid, n);
  });
  return tokens;
}

int32_t one(const std::vector<float>& logits, SamplingParams p, int64_t q, int j, bool engine) {
  const SampleRow row{p, q, j};
  const int64_t V = static_cast<int64_t>(logits.size());
  if (engine) return run_engine(logits, 1, V, {row}, 1)[0];
  int32_t tok = -1;
  sample_ref(logits.data(), 1, V, &row, &tok);
  return tok;
}

// The engine's tokens at every T in [1, kCapacity] for each thread count equal want[0, T):
// NaN-filled scratch, sentinel rows past T untouched. logits: [kCapacity, kVocab] or row pointers.
template <class Logits>
void expect_every_t(Logits logits, const std::vector<SampleRow>& rows, const std::vector<int32_t>& want,
                    std::initializer_list<int> thread_counts) {
  for (int nthreads : thread_counts) {
    ThreadPool pool(nthreads);
    const int64_t bytes = sample_scratch_bytes(kVocab, nthreads);
    std::vector<uint64_t> scratch(bytes / 8);
    RowBuffer<int32_t> tokens(kCapacity, 1);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      std::fill(scratch.begin(), scratch.end(), ~uint64_t{0});
      tokens.poison(T);
      pool.run([&](int tid, int n) {
        sample(logits, T, kVocab, rows.data(), tokens.data(), scratch.data(), bytes, tid, n);
      });
      for (int64_t t = 0; t < T; ++t)
        ASSERT_EQ(tokens.v[t], want[t]) << nthreads << " threads, T " << T << " row " << t;
      ASSERT_TRUE(tokens.sentinel_intact(T)) << T;
    }
  }
}

TEST(SampleRng, SpecCheckValues) {
  EXPECT_EQ(sample_mix(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(sample_uniform(0, 0, 0), 10946269 * 0x1p-24f);
  EXPECT_EQ(sample_uniform(0, 1, 0), 2650882 * 0x1p-24f);
  EXPECT_EQ(sample_uniform(0, 1, 1), 9445646 * 0x1p-24f);
  EXPECT_EQ(sample_uniform(42, 7, 0), 15965310 * 0x1p-24f);
}

TEST(Sample, EngineMatchesReferenceAtEveryT) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  RowBuffer<float> logits(kCapacity, kVocab);
  for (int64_t t = 0; t < kCapacity; ++t) {
    const float spread = 1.0f + static_cast<float>(t % 5) * 2.0f;
    for (int64_t v = 0; v < kVocab; ++v) logits.row(t)[v] = spread * n01(rng);
    if (t % 7 == 3)  // exact ties at the top
      for (int64_t v = 0; v < 6; ++v) logits.row(t)[v * 40] = 20.0f;
    if (t % 11 == 5)  // coarse logits: many exactly equal probabilities
      for (int64_t v = 0; v < kVocab; ++v) logits.row(t)[v] = std::round(logits.row(t)[v]);
  }
  const float temps[] = {0.0f, 0.6f, 1.0f, 2.0f, 1e-7f};
  const float top_ps[] = {1.0f, 0.9f, 0.5f, 0.01f};
  std::vector<SampleRow> rows;
  for (int64_t t = 0; t < kCapacity; ++t)
    rows.push_back({{temps[t % 5], top_ps[(t / 5) % 4], 1000u + static_cast<uint64_t>(t % 3)},
                    17 + t,
                    static_cast<int>(t % 2)});
  std::vector<int32_t> want(kCapacity);
  sample_ref(logits.data(), kCapacity, kVocab, rows.data(), want.data());
  const std::vector<float> flat(logits.v.begin(), logits.v.end());
  expect_every_t(flat.data(), rows, want, {1, 2});
  // Many positions per row: the same tokens from both.
  for (int64_t t = 0; t < kCapacity; t += 4)
    for (int64_t q = 0; q < 50; ++q) {
      const std::vector<float> row(logits.row(t), logits.row(t) + kVocab);
      ASSERT_EQ(one(row, rows[t].params, q, 0, true), one(row, rows[t].params, q, 0, false));
    }
}

// Rows at any addresses (the engine samples rows of a compact logits buffer in any order):
// every T in [1, kCapacity] and 1..4 threads give the reference's tokens.
TEST(Sample, RowPointersMatchReferenceForEveryThreadCount) {
  std::mt19937 rng(21);
  std::normal_distribution<float> n01(0.0f, 2.0f);
  RowBuffer<float> logits(kCapacity, kVocab);
  for (float& v : logits.v) v = n01(rng);
  std::vector<const float*> at(kCapacity);
  std::vector<SampleRow> rows;
  for (int64_t t = 0; t < kCapacity; ++t) {
    at[t] = logits.row((t * 17) % kCapacity);  // rows out of order
    rows.push_back({{t % 3 == 0 ? 0.0f : 0.9f, t % 2 == 0 ? 1.0f : 0.8f, 5u + static_cast<uint64_t>(t)}, 40 + t, 0});
  }
  std::vector<int32_t> want(kCapacity);
  for (int64_t t = 0; t < kCapacity; ++t) sample_ref(at[t], 1, kVocab, &rows[t], &want[t]);
  expect_every_t(at.data(), rows, want, {1, 2, 3, 4});
}

TEST(Sample, ManyEqualProbabilitiesAndFlashVocab) {
  // Integer logits over 512 ids (runs of equal p decide which id sits where) and one row of
  // Flash's vocabulary (129280: the radix sort needs several passes).
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> level(-6, 2);
  std::vector<float> coarse(kVocab);
  for (auto& v : coarse) v = static_cast<float>(level(rng));
  for (int64_t q = 0; q < 300; ++q)
    ASSERT_EQ(one(coarse, {1.0f, 1.0f, 8}, q, 0, true), one(coarse, {1.0f, 1.0f, 8}, q, 0, false))
        << q;
  std::normal_distribution<float> n01(0.0f, 3.0f);
  std::vector<float> big(129280);
  for (auto& v : big) v = n01(rng);
  for (int64_t q = 0; q < 4; ++q)
    for (float top_p : {1.0f, 0.95f}) {
      const SamplingParams sp{0.8f, top_p, 99};
      ASSERT_EQ(one(big, sp, q, 0, true), one(big, sp, q, 0, false)) << q;
    }
}

TEST(Sample, GreedyLowestIdOnTies) {
  const std::vector<float> l{2, 5, 5, 1, 5};
  for (bool engine : {false, true}) {
    EXPECT_EQ(one(l, {0.0f, 1.0f, 0}, 3, 0, engine), 1);
    EXPECT_EQ(one(l, {0.0f, 0.001f, 7}, 3, 0, engine), 1);  // top_p ignored
  }
}

TEST(Sample, EqualProbabilitiesOrderedByLowerId) {
  // p ≈ [0.1, 0.4, 0.4, 0.1]; the order is v = 1, 2, 0, 3 and c_K ≈ 1.
  const std::vector<float> l{0.0f, std::log(4.0f), std::log(4.0f), 0.0f};
  for (bool engine : {false, true}) {
    // U(0,1,0) = 0.158: θ < c_1 = 0.4 → the lower id of the tie.
    EXPECT_EQ(one(l, {1.0f, 1.0f, 0}, 1, 0, engine), 1);
    // U(0,0,0) = 0.652: c_1 = 0.4 ≤ θ < c_2 = 0.8 → id 2.
    EXPECT_EQ(one(l, {1.0f, 1.0f, 0}, 0, 0, engine), 2);
    // U(42,7,0) = 0.952: past c_3 = 0.9 → id 3 (the higher id of the second tie).
    EXPECT_EQ(one(l, {1.0f, 1.0f, 42}, 7, 0, engine), 3);
  }
}

TEST(Sample, TopPEdges) {
  const std::vector<float> l{std::log(0.3f), std::log(0.5f), std::log(0.2f)};  // order 1, 0, 2
  for (bool engine : {false, true}) {
    // top_p = 1 keeps all: U(42,7,0) = 0.952 > c_2 ≈ 0.8 → the least likely id 2.
    EXPECT_EQ(one(l, {1.0f, 1.0f, 42}, 7, 0, engine), 2);
    // top_p = 0.7 keeps {1, 0}: θ = 0.952·0.8 ≈ 0.76 → id 0.
    EXPECT_EQ(one(l, {1.0f, 0.7f, 42}, 7, 0, engine), 0);
    // top_p below the top probability keeps the single most likely token, whatever u.
    for (int64_t q = 0; q < 200; ++q) ASSERT_EQ(one(l, {1.0f, 0.2f, 5}, q, 0, engine), 1);
    // top_p = 1 reaches every id over many draws.
    std::vector<int> seen(3, 0);
    for (int64_t q = 0; q < 200; ++q) ++seen[one(l, {1.0f, 1.0f, 5}, q, 0, engine)];
    for (int v = 0; v < 3; ++v) EXPECT_GT(seen[v], 10) << v;
  }
}

TEST(Sample, ZeroProbabilityNeverChosen) {
  // −∞ logits and a logit 200 below the max (exp underflows to 0 in fp32).
  const std::vector<float> l{-INFINITY, 0.0f, -200.0f, 0.0f, -INFINITY};
  for (bool engine : {false, true}) {
    std::vector<int> seen(5, 0);
    for (int64_t q = 0; q < 400; ++q)
      for (float top_p : {1.0f, 0.999f}) ++seen[one(l, {1.0f, top_p, 11}, q, 0, engine)];
    EXPECT_EQ(seen[0] + seen[2] + seen[4], 0);
    EXPECT_GT(seen[1], 100);
    EXPECT_GT(seen[3], 100);
  }
}

TEST(Sample, TemperatureFloor) {
  // Logits 1e-5 apart: at T = 1e-5, x = [0, 1] (p ≈ 0.27, 0.73); a smaller positive T is raised to
  // 1e-5 and gives the same tokens.
  const std::vector<float> l{0.0f, 1e-5f};
  for (bool engine : {false, true}) {
    int zeros = 0;
    for (int64_t q = 0; q < 300; ++q) {
      const int32_t a = one(l, {1e-5f, 1.0f, 3}, q, 0, engine);
      ASSERT_EQ(one(l, {1e-9f, 1.0f, 3}, q, 0, engine), a);
      zeros += a == 0;
    }
    EXPECT_GT(zeros, 40);
    EXPECT_LT(zeros, 130);
  }
}

TEST(Sample, DrawFrequenciesFollowP) {
  const std::vector<float> l{0.0f, 1.0f, 2.0f, -1.0f};
  double S = 0;
  for (float v : l) S += std::exp(v);
  std::vector<int> seen(4, 0);
  const int n = 20000;
  for (int64_t q = 0; q < n; ++q) ++seen[one(l, {1.0f, 1.0f, 77}, q, 0, true)];
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(seen[v] / double(n), std::exp(l[v]) / S, 0.015) << v;
}

TEST(Sample, ValidationNamesTheField) {
  EXPECT_TRUE(validate_sampling_params({0.0f, 1.0f, 0}).ok());
  EXPECT_TRUE(validate_sampling_params({0.7f, 0.5f, 0}).ok());
  EXPECT_TRUE(validate_sampling_params({1e-9f, 1e-9f, 0}).ok());
  for (float t : {-1.0f, -1e-30f, NAN, INFINITY}) {
    const Status s = validate_sampling_params({t, 1.0f, 0});
    EXPECT_FALSE(s.ok()) << t;
    EXPECT_NE(s.message().find("temperature"), std::string::npos) << s.message();
  }
  for (float p : {0.0f, -0.5f, 1.0000001f, 2.0f, NAN, INFINITY}) {
    const Status s = validate_sampling_params({1.0f, p, 0});
    EXPECT_FALSE(s.ok()) << p;
    EXPECT_NE(s.message().find("top_p"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace dsv4::kernels
