// Speculative sampling (dspark.md §4.3, mode rejection): π, the residual draw and one round's
// verification, engine against the reference bit for bit (NaN-filled scratch); the round's
// committed tokens are distributed as the target's (the losslessness of the mode) and a
// drafter equal to the target is always accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/sample/sample.h"

namespace dsv4::kernels {
namespace {

std::vector<float> random_logits(int64_t V, std::mt19937& rng, float scale) {
  std::normal_distribution<float> n(0.0f, scale);
  std::vector<float> l(V);
  for (float& x : l) x = n(rng);
  return l;
}

std::vector<uint64_t> nan_scratch(int64_t bytes) { return std::vector<uint64_t>(bytes / 8 + 1, ~uint64_t{0}); }

TEST(SampleRejection, DistributionMatchesReference) {
  std::mt19937 rng(3);
  for (int64_t V : {1, 7, 512, 4096}) {
    for (const SamplingParams sp : {SamplingParams{1.0f, 1.0f, 0}, SamplingParams{0.6f, 0.9f, 0},
                                    SamplingParams{1.5f, 0.3f, 0}, SamplingParams{1e-9f, 1.0f, 0}}) {
      const std::vector<float> l = random_logits(V, rng, 2.0f);
      std::vector<float> want(V), got(V, -1.0f);
      sample_distribution_ref(l.data(), V, sp, want.data());
      auto scratch = nan_scratch(sample_scratch_bytes(V, 1));
      sample_distribution(l.data(), V, sp, got.data(), scratch.data(), sample_scratch_bytes(V, 1));
      ASSERT_EQ(want, got) << "V " << V << " T " << sp.temperature << " top_p " << sp.top_p;
      double sum = 0;
      int64_t kept = 0;
      for (float p : got) {
        sum += p;
        kept += p > 0;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
      if (sp.top_p == 1.0f && sp.temperature >= 1.0f) {
        EXPECT_EQ(kept, V);
      }
      if (sp.temperature < 1e-4f) {
        EXPECT_EQ(kept, 1);  // the floor temperature keeps the argmax only
      }
    }
  }
}

TEST(SampleRejection, ResidualDrawMatchesReference) {
  std::mt19937 rng(5);
  const int64_t V = 300;
  const SamplingParams sp{0.8f, 0.95f, 0};
  std::vector<float> pt(V), pd(V);
  auto scratch = nan_scratch(sample_scratch_bytes(V, 1));
  for (int i = 0; i < 50; ++i) {
    const auto lt = random_logits(V, rng, 1.5f), ld = random_logits(V, rng, 1.5f);
    sample_distribution_ref(lt.data(), V, sp, pt.data());
    sample_distribution_ref(ld.data(), V, sp, pd.data());
    const float u = sample_uniform(9, i, 3);
    const int32_t want = residual_draw_ref(pt.data(), pd.data(), V, u);
    ASSERT_GE(want, 0);
    EXPECT_GT(pt[want], pd[want]) << "a residual id has r > 0";
    EXPECT_EQ(want, residual_draw(pt.data(), pd.data(), V, u, scratch.data(), sample_scratch_bytes(V, 1)));
  }
  // Equal distributions: Z = 0, no residual.
  EXPECT_EQ(residual_draw_ref(pt.data(), pt.data(), V, 0.5f), -1);
  EXPECT_EQ(residual_draw(pt.data(), pt.data(), V, 0.5f, scratch.data(), sample_scratch_bytes(V, 1)), -1);
}

struct Round {
  std::vector<std::vector<float>> target, draft;
  std::vector<const float*> tp, dp;
  std::vector<int32_t> drafts;
  RejectionRound view(SamplingParams sp, int64_t q1) {
    tp.clear();
    dp.clear();
    for (auto& r : target) tp.push_back(r.data());
    for (auto& r : draft) dp.push_back(r.data());
    return RejectionRound{tp.data(), dp.data(), drafts.data(), static_cast<int32_t>(drafts.size()), sp, q1};
  }
};

TEST(SampleRejection, VerifyMatchesReference) {
  std::mt19937 rng(11);
  const int64_t V = 64;
  auto scratch = nan_scratch(rejection_scratch_bytes(V));
  int accepted_any = 0, rejected_any = 0;
  for (int i = 0; i < 200; ++i) {
    const int ell = 1 + i % 7;
    Round r;
    for (int k = 0; k <= ell; ++k) r.target.push_back(random_logits(V, rng, 1.0f));
    for (int k = 0; k < ell; ++k) {
      // Drafter rows near the target's, so that some drafts pass and some fail.
      std::vector<float> d = r.target[k];
      for (float& x : d) x += std::normal_distribution<float>(0.0f, 0.7f)(rng);
      r.draft.push_back(d);
      r.drafts.push_back(static_cast<int32_t>(rng() % V));
    }
    const SamplingParams sp{0.9f, i % 2 ? 0.9f : 1.0f, static_cast<uint64_t>(i)};
    const RejectionRound rr = r.view(sp, 100 + i);
    std::vector<int32_t> want(ell + 1, -1), got(ell + 1, -1);
    const int32_t n_want = rejection_verify_ref(rr, V, want.data());
    const int32_t n_got = rejection_verify(rr, V, got.data(), scratch.data(), rejection_scratch_bytes(V));
    ASSERT_EQ(n_want, n_got) << i;
    ASSERT_EQ(want, got) << i;
    for (int k = 0; k < n_want; ++k) EXPECT_EQ(got[k], r.drafts[k]);
    for (int k = n_want + 1; k <= ell; ++k) EXPECT_EQ(got[k], -1) << "past the bonus nothing is written";
    accepted_any += n_want > 0;
    rejected_any += n_want < ell;
  }
  EXPECT_GT(accepted_any, 10);
  EXPECT_GT(rejected_any, 10);
}

// The first committed token (d_1 if accepted, else the residual draw) is distributed as the
// target's π, whatever the drafter's rows, when d_1 is drawn from the drafter's π (slot 1);
// a drafter equal to the target is always accepted.
TEST(SampleRejection, CommittedTokenFollowsTheTarget) {
  const int64_t V = 6;
  const std::vector<float> target0{0.5f, 1.5f, -0.5f, 1.0f, 0.0f, 2.0f}, draft0{2.0f, 0.0f, 1.0f, -1.0f, 0.5f, 0.2f};
  for (const SamplingParams base : {SamplingParams{1.0f, 1.0f, 0}, SamplingParams{0.7f, 0.8f, 0}}) {
    std::vector<float> pt(V);
    sample_distribution_ref(target0.data(), V, base, pt.data());
    std::vector<int> seen(V, 0);
    int all_accepted_when_equal = 0;
    const int n = 60000;
    auto scratch = nan_scratch(rejection_scratch_bytes(V));
    for (int s = 0; s < n; ++s) {
      SamplingParams sp = base;
      sp.seed = static_cast<uint64_t>(s);
      Round r;
      r.target = {target0, target0};
      r.draft = {draft0};
      const SampleRow row{sp, 40, 1};
      int32_t d = -1;
      sample(draft0.data(), 1, V, &row, &d, scratch.data(), rejection_scratch_bytes(V), 0, 1);
      r.drafts = {d};
      int32_t tok[2] = {-1, -1};
      rejection_verify(r.view(sp, 40), V, tok, scratch.data(), rejection_scratch_bytes(V));
      ++seen[tok[0]];
      // The drafter equal to the target: its own draw is always accepted.
      Round same;
      same.target = {target0, target0};
      same.draft = {target0};
      sample(target0.data(), 1, V, &row, &d, scratch.data(), rejection_scratch_bytes(V), 0, 1);
      same.drafts = {d};
      all_accepted_when_equal += rejection_verify(same.view(sp, 40), V, tok, scratch.data(),
                                                  rejection_scratch_bytes(V)) == 1;
    }
    for (int v = 0; v < V; ++v) EXPECT_NEAR(seen[v] / double(n), pt[v], 0.008) << "id " << v << " top_p " << base.top_p;
    EXPECT_EQ(all_accepted_when_equal, n);
  }
}

}  // namespace
}  // namespace dsv4::kernels
