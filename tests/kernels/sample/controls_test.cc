// The top_k and min_p sampling controls (docs/numerics.md "Sampling controls: top_k and min_p"):
// engine against the reference at every T in [1, kCapacity] with each control alone and in
// combination, ties, top_k = 1, top_k ≥ V, min_p = 1, the renormalized top_p, a request's
// token alone equal to its token in any batch, both controls off equal to §10.2 as written
// (an independent copy of that rule), π for speculative verification and validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/sample/sample.h"
#include "support/poison.h"

namespace dsv4::kernels {
namespace {

constexpr int64_t kControlsVocab = 512;

SamplingParams controls(float temperature, float top_p, uint64_t seed, int32_t top_k, float min_p) {
  SamplingParams sp{temperature, top_p, seed};
  sp.top_k = top_k;
  sp.min_p = min_p;
  return sp;
}

std::vector<int32_t> engine_tokens(const float* logits, int64_t T, int64_t V, const std::vector<SampleRow>& rows,
                                   int nthreads) {
  ThreadPool pool(nthreads);
  const int64_t bytes = sample_scratch_bytes(V, nthreads);
  std::vector<uint64_t> scratch(bytes / 8 + 1, ~uint64_t{0});  // NaN-filled floats
  test::RowBuffer<int32_t> tokens(test::kCapacity, 1);
  tokens.poison(T);
  pool.run([&](int tid, int n) { sample(logits, T, V, rows.data(), tokens.data(), scratch.data(), bytes, tid, n); });
  EXPECT_TRUE(tokens.sentinel_intact(T)) << T;
  return std::vector<int32_t>(tokens.v.begin(), tokens.v.begin() + T);
}

int32_t token_of(const std::vector<float>& l, const SamplingParams& sp, int64_t q, bool engine) {
  const SampleRow row{sp, q, 0};
  const int64_t V = static_cast<int64_t>(l.size());
  if (engine) return engine_tokens(l.data(), 1, V, {row}, 1)[0];
  int32_t tok = -1;
  sample_ref(l.data(), 1, V, &row, &tok);
  return tok;
}

// model.md §10.2 as written (no top_k, no min_p), independent of the kernel sources.
int32_t section_10_2(const std::vector<float>& l, const SampleRow& row) {
  const SamplingParams& sp = row.params;
  const int64_t V = static_cast<int64_t>(l.size());
  if (sp.temperature == 0.0f) return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  const float T = std::max(sp.temperature, kMinTemperature);
  std::vector<float> x(V), p(V);
  for (int64_t v = 0; v < V; ++v) x[v] = l[v] / T;
  const float mu = *std::max_element(x.begin(), x.end());
  float lane[8] = {};
  for (int64_t v = 0; v < V; ++v) lane[v % 8] += p[v] = std::exp(x[v] - mu);
  const float S = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (float& e : p) e = e / S;
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  std::vector<float> c(V + 1, 0.0f);
  for (int64_t k = 1; k <= V; ++k) c[k] = c[k - 1] + p[order[k - 1]];
  int64_t K = V;
  for (int64_t k = 1; sp.top_p != 1.0f && k <= V; ++k)
    if (c[k] >= sp.top_p) {
      K = k;
      break;
    }
  const float theta = sample_uniform(sp.seed, row.position, row.draft_slot) * c[K];
  for (int64_t k = 1; k <= K; ++k)
    if (c[k] > theta) return order[k - 1];
  return order[0];
}

test::RowBuffer<float> mixed_logits(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  test::RowBuffer<float> logits(test::kCapacity, kControlsVocab);
  for (int64_t t = 0; t < test::kCapacity; ++t) {
    const float spread = 1.0f + static_cast<float>(t % 5) * 2.0f;
    for (int64_t v = 0; v < kControlsVocab; ++v) logits.row(t)[v] = spread * n01(rng);
    if (t % 7 == 3)  // exact ties at the top
      for (int64_t v = 0; v < 6; ++v) logits.row(t)[v * 40] = 20.0f;
    if (t % 11 == 5)  // coarse logits: many exactly equal probabilities
      for (int64_t v = 0; v < kControlsVocab; ++v) logits.row(t)[v] = std::round(logits.row(t)[v]);
  }
  return logits;
}

// Engine = reference at every T in [1, kCapacity], 1 and 2 threads; each row alone gives its
// batch token (the token never depends on the other rows).
void expect_rows_match(test::RowBuffer<float>& logits, const std::vector<SampleRow>& rows) {
  std::vector<int32_t> want(test::kCapacity);
  sample_ref(logits.data(), test::kCapacity, kControlsVocab, rows.data(), want.data());
  for (int nthreads : {1, 2})
    for (int64_t T = 1; T <= test::kCapacity; ++T) {
      const std::vector<int32_t> got = engine_tokens(logits.data(), T, kControlsVocab, rows, nthreads);
      for (int64_t t = 0; t < T; ++t)
        ASSERT_EQ(got[t], want[t]) << nthreads << " threads, T " << T << " row " << t << " top_k "
                                   << rows[t].params.top_k << " min_p " << rows[t].params.min_p;
    }
  for (int64_t t = 0; t < test::kCapacity; ++t) {
    const std::vector<SampleRow> alone = {rows[t]};
    ASSERT_EQ(engine_tokens(logits.row(t), 1, kControlsVocab, alone, 1)[0], want[t]) << "row " << t << " alone";
  }
}

TEST(SampleControls, EachControlMatchesReferenceAtEveryT) {
  test::RowBuffer<float> logits = mixed_logits(9);
  const float temps[] = {0.0f, 0.6f, 1.0f, 2.0f, 1e-7f};
  const int32_t top_ks[] = {1, 2, 5, 40, 511, 512, 100000};
  const float min_ps[] = {1e-6f, 0.01f, 0.1f, 0.5f, 1.0f};
  std::vector<SampleRow> by_k, by_min_p;
  for (int64_t t = 0; t < test::kCapacity; ++t) {
    const uint64_t seed = 1000u + static_cast<uint64_t>(t % 3);
    by_k.push_back({controls(temps[t % 5], 1.0f, seed, top_ks[t % 7], 0.0f), 17 + t, static_cast<int>(t % 2)});
    by_min_p.push_back({controls(temps[t % 5], 1.0f, seed, 0, min_ps[t % 5 == 0 ? 1 : (t / 5) % 5]), 17 + t, 0});
  }
  expect_rows_match(logits, by_k);
  expect_rows_match(logits, by_min_p);
}

TEST(SampleControls, CombinationsMatchReferenceAtEveryT) {
  test::RowBuffer<float> logits = mixed_logits(13);
  const float temps[] = {0.6f, 1.0f, 2.0f, 0.0f};
  const int32_t top_ks[] = {0, 1, 3, 20, 512};
  const float min_ps[] = {0.0f, 0.02f, 0.3f, 1.0f};
  const float top_ps[] = {1.0f, 0.9f, 0.5f, 0.01f};
  std::vector<SampleRow> rows;
  for (int64_t t = 0; t < test::kCapacity; ++t)
    rows.push_back({controls(temps[t % 4], top_ps[(t / 4) % 4], 7u + static_cast<uint64_t>(t), top_ks[t % 5],
                             min_ps[(t / 3) % 4]),
                    100 + t, 0});
  expect_rows_match(logits, rows);
  // Many positions per row.
  for (int64_t t = 0; t < test::kCapacity; t += 3) {
    const std::vector<float> row(logits.row(t), logits.row(t) + kControlsVocab);
    for (int64_t q = 0; q < 40; ++q)
      ASSERT_EQ(token_of(row, rows[t].params, q, true), token_of(row, rows[t].params, q, false)) << t << " " << q;
  }
}

TEST(SampleControls, OffIsSection10_2BitForBit) {
  test::RowBuffer<float> logits = mixed_logits(17);
  const float top_ps[] = {1.0f, 0.9f, 0.5f, 0.01f, 0.999f};
  for (int64_t t = 0; t < test::kCapacity; ++t) {
    const std::vector<float> row(logits.row(t), logits.row(t) + kControlsVocab);
    for (int64_t q = 0; q < 20; ++q)
      for (const float top_p : top_ps)
        for (const int32_t top_k : {0, 512, 513, 1 << 30}) {  // top_k ≥ V is off too
          const SamplingParams sp = controls(t % 4 == 0 ? 0.0f : 0.8f, top_p, 5u + static_cast<uint64_t>(t), top_k, 0.0f);
          const int32_t want = section_10_2(row, SampleRow{sp, q, 0});
          for (bool engine : {false, true}) ASSERT_EQ(token_of(row, sp, q, engine), want) << t << " " << q;
        }
  }
  // Flash's vocabulary (several radix passes), top_p below 1.
  std::mt19937 rng(4);
  std::normal_distribution<float> n01(0.0f, 3.0f);
  std::vector<float> big(129280);
  for (auto& v : big) v = n01(rng);
  for (int64_t q = 0; q < 3; ++q) {
    const SamplingParams sp = controls(0.8f, 0.95f, 99, 0, 0.0f);
    const int32_t want = section_10_2(big, SampleRow{sp, q, 0});
    ASSERT_EQ(token_of(big, sp, q, true), want);
    ASSERT_EQ(token_of(big, controls(0.8f, 0.95f, 99, 200000, 0.0f), q, true), want);
    ASSERT_EQ(token_of(big, controls(0.8f, 0.95f, 99, 50, 0.0f), q, true),
              token_of(big, controls(0.8f, 0.95f, 99, 50, 0.0f), q, false));
    ASSERT_EQ(token_of(big, controls(0.8f, 0.95f, 99, 0, 0.05f), q, true),
              token_of(big, controls(0.8f, 0.95f, 99, 0, 0.05f), q, false));
  }
}

TEST(SampleControls, TopKOneIsTheMostLikelyId) {
  // Ties at the top: the lower id, whatever u; distinct logits: greedy's token.
  const std::vector<float> tie{2, 5, 5, 1, 5};
  std::mt19937 rng(23);
  std::normal_distribution<float> n01(0.0f, 2.0f);
  std::vector<float> l(kControlsVocab);
  for (auto& v : l) v = n01(rng);
  for (bool engine : {false, true})
    for (int64_t q = 0; q < 100; ++q) {
      ASSERT_EQ(token_of(tie, controls(1.0f, 1.0f, 3, 1, 0.0f), q, engine), 1);
      ASSERT_EQ(token_of(l, controls(1.5f, 0.9f, 3, 1, 0.0f), q, engine), token_of(l, controls(0.0f, 1.0f, 3, 0, 0.0f), q, engine));
    }
}

TEST(SampleControls, HandChecked) {
  // p ≈ [0.5, 0.3, 0.2] in the order 0, 1, 2.
  const std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  for (bool engine : {false, true}) {
    std::vector<int> k2(3, 0), k2p(3, 0), m50(3, 0), m39(3, 0), p60(3, 0);
    for (int64_t q = 0; q < 400; ++q) {
      ++k2[token_of(l, controls(1.0f, 1.0f, 8, 2, 0.0f), q, engine)];
      // top_p of the kept mass: τ = 0.6 · 0.8 = 0.48 ≤ c_1 = 0.5 → only id 0 ...
      ++k2p[token_of(l, controls(1.0f, 0.6f, 8, 2, 0.0f), q, engine)];
      // ... while top_p = 0.6 alone keeps {0, 1} (c_1 = 0.5 < 0.6).
      ++p60[token_of(l, controls(1.0f, 0.6f, 8, 0, 0.0f), q, engine)];
      // min_p 0.5: τ = 0.25 keeps {0, 1}; min_p 0.39: τ = 0.195 keeps all.
      ++m50[token_of(l, controls(1.0f, 1.0f, 8, 0, 0.5f), q, engine)];
      ++m39[token_of(l, controls(1.0f, 1.0f, 8, 0, 0.39f), q, engine)];
    }
    EXPECT_EQ(k2[2], 0);
    EXPECT_GT(k2[1], 100);
    EXPECT_EQ(k2p[0], 400);
    EXPECT_EQ(p60[2], 0);
    EXPECT_GT(p60[1], 100);
    EXPECT_EQ(m50[2], 0);
    EXPECT_GT(m50[1], 100);
    EXPECT_GT(m39[2], 40);
  }
}

TEST(SampleControls, MinPOneKeepsTheTopTies) {
  const std::vector<float> l{5, 5, 1, 5, 4.999f};
  for (bool engine : {false, true}) {
    std::vector<int> seen(5, 0);
    for (int64_t q = 0; q < 300; ++q) ++seen[token_of(l, controls(1.0f, 1.0f, 2, 0, 1.0f), q, engine)];
    EXPECT_EQ(seen[2] + seen[4], 0);
    for (int v : {0, 1, 3}) EXPECT_GT(seen[v], 60) << v;
    // With top_k = 2 as well: the first two of the tie.
    for (int64_t q = 0; q < 100; ++q) {
      const int32_t tok = token_of(l, controls(1.0f, 1.0f, 2, 2, 1.0f), q, engine);
      ASSERT_TRUE(tok == 0 || tok == 1) << tok;
    }
  }
}

TEST(SampleControls, DistributionFollowsTheCut) {
  std::mt19937 rng(31);
  std::normal_distribution<float> n01(0.0f, 2.0f);
  for (int64_t V : {1, 7, 512, 4096}) {
    std::vector<float> l(V);
    for (auto& v : l) v = n01(rng);
    for (const SamplingParams sp : {controls(1.0f, 1.0f, 0, 5, 0.0f), controls(0.7f, 0.9f, 0, 40, 0.0f),
                                    controls(1.0f, 1.0f, 0, 0, 0.1f), controls(1.3f, 0.8f, 0, 0, 0.02f),
                                    controls(1.0f, 0.5f, 0, 20, 0.05f), controls(1.0f, 1.0f, 0, 1, 0.0f),
                                    controls(1.0f, 1.0f, 0, 0, 1.0f), controls(1.0f, 1.0f, 0, 100000, 0.0f)}) {
      std::vector<float> want(V), got(V, -1.0f);
      sample_distribution_ref(l.data(), V, sp, want.data());
      const int64_t bytes = sample_scratch_bytes(V, 1);
      std::vector<uint64_t> scratch(bytes / 8 + 1, ~uint64_t{0});
      sample_distribution(l.data(), V, sp, got.data(), scratch.data(), bytes);
      ASSERT_EQ(want, got) << "V " << V << " top_k " << sp.top_k << " min_p " << sp.min_p;
      double sum = 0;
      int64_t kept = 0;
      float top = 0;
      for (float p : got) {
        sum += p;
        kept += p > 0;
        top = std::max(top, p);
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
      if (sp.top_k > 0) {
        EXPECT_LE(kept, sp.top_k);
      }
      for (float p : got) {
        if (p > 0) {
          EXPECT_GE(p, sp.min_p * top * (1 - 1e-6f));
        }
      }
    }
  }
}

TEST(SampleControls, VerifyMatchesReference) {
  std::mt19937 rng(37);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  const int64_t V = 64;
  const int64_t bytes = rejection_scratch_bytes(V);
  std::vector<uint64_t> scratch(bytes / 8 + 1, ~uint64_t{0});
  for (int i = 0; i < 120; ++i) {
    const int ell = 1 + i % 5;
    std::vector<std::vector<float>> target, draft;
    std::vector<const float*> tp, dp;
    std::vector<int32_t> drafts;
    for (int k = 0; k <= ell; ++k) {
      target.emplace_back(V);
      for (auto& v : target.back()) v = 1.5f * n01(rng);
    }
    for (int k = 0; k < ell; ++k) {
      draft.push_back(target[k]);
      for (auto& v : draft.back()) v += 0.7f * n01(rng);
      drafts.push_back(static_cast<int32_t>(rng() % 8));  // often among the kept ids
    }
    for (auto& r : target) tp.push_back(r.data());
    for (auto& r : draft) dp.push_back(r.data());
    const SamplingParams sp = controls(0.9f, i % 3 ? 0.9f : 1.0f, static_cast<uint64_t>(i), (i % 4) * 6, (i % 5) * 0.05f);
    const RejectionRound rr{tp.data(), dp.data(), drafts.data(), ell, sp, 100 + i};
    std::vector<int32_t> want(ell + 1, -1), got(ell + 1, -1);
    const int32_t n_want = rejection_verify_ref(rr, V, want.data());
    ASSERT_EQ(rejection_verify(rr, V, got.data(), scratch.data(), bytes), n_want) << i;
    ASSERT_EQ(want, got) << i;
  }
}

TEST(SampleControls, ValidationNamesTheField) {
  EXPECT_TRUE(validate_sampling_params(controls(0.7f, 0.5f, 0, 0, 0.0f)).ok());
  EXPECT_TRUE(validate_sampling_params(controls(0.7f, 0.5f, 0, 1, 1.0f)).ok());
  EXPECT_TRUE(validate_sampling_params(controls(0.7f, 0.5f, 0, 1 << 30, 1e-30f)).ok());
  for (int32_t k : {-1, -2, -(1 << 30)}) {
    const Status s = validate_sampling_params(controls(0.7f, 1.0f, 0, k, 0.0f));
    EXPECT_FALSE(s.ok()) << k;
    EXPECT_NE(s.message().find("top_k"), std::string::npos) << s.message();
  }
  for (float m : {-1e-30f, -0.5f, 1.0000001f, 2.0f, NAN, INFINITY}) {
    const Status s = validate_sampling_params(controls(0.7f, 1.0f, 0, 0, m));
    EXPECT_FALSE(s.ok()) << m;
    EXPECT_NE(s.message().find("min_p"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace dsv4::kernels
