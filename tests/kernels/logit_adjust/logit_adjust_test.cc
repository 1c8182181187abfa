// Penalties and logit_bias (docs/numerics.md "Penalties and logit_bias"): a hand-computed row;
// the engine (incremental TokenCounts, drafts added and rolled back) against the reference over
// random histories and adjustments, bit for bit, for every row count up to kCapacity; ids
// neither seen nor biased keep their bits; validation names the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/logit_adjust/logit_adjust.h"
#include "support/poison.h"

namespace dsv4::kernels {
namespace {

constexpr int64_t kAdjustVocab = 300;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(LogitAdjust, HandComputedRow) {
  // prompt {0}, generated {1, 1, 2}; f = 0.5, p = 0.25, r = 2; bias +1 on id 3.
  LogitAdjustments a{0.25f, 0.5f, 2.0f, {{3, 1.0f}}};
  const std::vector<int32_t> history = {0, 1, 1, 2};
  const std::vector<float> want = {0.5f, -4.5f, 0.625f, 1.5f, 7.0f};  // id 4: untouched
  std::vector<float> ref = {1.0f, -1.0f, 2.0f, 0.5f, 7.0f};
  std::vector<float> eng = ref;
  logit_adjust_ref(ref.data(), 5, a, history.data(), 4, 1);
  TokenCounts c;
  c.resize(5);
  c.add_prompt(0);
  for (int i = 1; i < 4; ++i) c.add_output(history[i]);
  logit_adjust(eng.data(), a, &c);
  EXPECT_EQ(ref, want);
  EXPECT_EQ(eng, want);
  EXPECT_EQ(c.distinct(), 3);
}

LogitAdjustments random_adjustments(std::mt19937& rng) {
  std::uniform_real_distribution<float> pen(-2.0f, 2.0f), bias(-100.0f, 100.0f);
  LogitAdjustments a;
  const int kind = static_cast<int>(rng() % 6);  // each control alone, all, bias only, off
  if (kind == 0 || kind == 4) a.frequency_penalty = pen(rng);
  if (kind == 1 || kind == 4) a.presence_penalty = pen(rng);
  if (kind == 2 || kind == 4) a.repetition_penalty = std::exp(pen(rng));
  if (kind >= 3 && kind <= 4) {
    for (int32_t v = 0; v < kAdjustVocab; ++v)
      if (rng() % 20 == 0) a.logit_bias.emplace_back(v, rng() % 7 == 0 ? -INFINITY : bias(rng));
  }
  return a;
}

// Rows of T requests, each with its own history (a prompt of repeated ids so counts exceed 1)
// and up to 3 drafts after it: row t's history is the committed tokens plus its drafts.
TEST(LogitAdjust, EngineEqualsReferenceAtEveryRowCount) {
  std::mt19937 rng(7);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  for (int64_t T = 1; T <= test::kCapacity; ++T) {
    for (int64_t t = 0; t < T; ++t) {
      const LogitAdjustments a = random_adjustments(rng);
      std::vector<int32_t> history(1 + rng() % 60);
      for (int32_t& id : history) id = static_cast<int32_t>(rng() % 40);  // few ids: repeats
      const int64_t prompt_len = 1 + static_cast<int64_t>(rng() % history.size());
      std::vector<int32_t> drafts(rng() % 4);
      for (int32_t& id : drafts) id = static_cast<int32_t>(rng() % 40);
      TokenCounts c;
      c.resize(kAdjustVocab);
      for (size_t i = 0; i < history.size(); ++i)
        (static_cast<int64_t>(i) < prompt_len) ? c.add_prompt(history[i]) : c.add_output(history[i]);
      const int64_t distinct_before = c.distinct();
      for (size_t k = 0; k <= drafts.size(); ++k) {  // the verify rows of one round
        if (k > 0) c.add_output(drafts[k - 1]);
        std::vector<int32_t> h = history;
        h.insert(h.end(), drafts.begin(), drafts.begin() + static_cast<std::ptrdiff_t>(k));
        std::vector<float> ref(kAdjustVocab);
        for (float& x : ref) x = logit(rng);
        if (rng() % 5 == 0) ref[rng() % kAdjustVocab] = 0.0f;
        const std::vector<float> raw = ref;
        std::vector<float> eng = ref;
        logit_adjust_ref(ref.data(), kAdjustVocab, a, h.data(), static_cast<int64_t>(h.size()), prompt_len);
        logit_adjust(eng.data(), a, &c);
        for (int64_t v = 0; v < kAdjustVocab; ++v)
          ASSERT_TRUE(same_bits(ref[v], eng[v])) << "T " << T << " row " << t << " draft " << k << " id " << v;
        if (!a.any()) {
          EXPECT_EQ(0, std::memcmp(raw.data(), eng.data(), raw.size() * sizeof(float)));
        }
      }
      for (size_t k = drafts.size(); k > 0; --k) c.remove_output(drafts[k - 1]);
      EXPECT_EQ(c.distinct(), distinct_before) << "drafts roll back";
      c.clear();
      EXPECT_EQ(c.distinct(), 0);
    }
  }
}

TEST(LogitAdjust, UnseenUnbiasedIdsKeepTheirBits) {
  LogitAdjustments a{1.5f, -0.5f, 1.7f, {{9, 2.0f}}};
  std::vector<float> l(16, -0.0f);
  l[3] = NAN;  // never read: id 3 is neither seen nor biased
  TokenCounts c;
  c.resize(16);
  c.add_prompt(5);
  c.add_output(6);
  logit_adjust(l.data(), a, &c);
  EXPECT_TRUE(std::isnan(l[3]));
  for (int v : {0, 1, 2, 4, 7, 8, 10, 15}) EXPECT_TRUE(same_bits(l[v], -0.0f)) << v;
}

TEST(LogitAdjust, ValidationNamesTheField) {
  auto message = [](float presence, float frequency = 0.0f, float repetition = 1.0f,
                    std::vector<std::pair<int32_t, float>> bias = {}) {
    return validate_logit_adjustments(LogitAdjustments{presence, frequency, repetition, std::move(bias)}, 100).message();
  };
  EXPECT_TRUE(validate_logit_adjustments(LogitAdjustments{}, 100).ok());
  EXPECT_TRUE(validate_logit_adjustments(LogitAdjustments{2.0f, -2.0f, 0.01f, {{0, -100.0f}, {99, -INFINITY}}}, 100).ok());
  EXPECT_NE(message(2.5f).find("presence_penalty"), std::string::npos);
  EXPECT_NE(message(0.0f, NAN).find("frequency_penalty"), std::string::npos);
  EXPECT_NE(message(0.0f, 0.0f, 0.0f).find("repetition_penalty"), std::string::npos);
  EXPECT_NE(message(0.0f, 0.0f, INFINITY).find("repetition_penalty"), std::string::npos);
  EXPECT_NE(message(0.0f, 0.0f, 1.0f, {{100, 1.0f}}).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(message(0.0f, 0.0f, 1.0f, {{-1, 1.0f}}).find("logit_bias"), std::string::npos);
  EXPECT_NE(message(0.0f, 0.0f, 1.0f, {{4, 1.0f}, {4, 2.0f}}).find("ascend"), std::string::npos);
  EXPECT_NE(message(0.0f, 0.0f, 1.0f, {{4, 100.5f}}).find("[-100, 100]"), std::string::npos);
  EXPECT_NE(message(0.0f, 0.0f, 1.0f, {{4, INFINITY}}).find("[-100, 100]"), std::string::npos);
  LogitAdjustments many;
  for (int32_t v = 0; v < kMaxLogitBias + 1; ++v) many.logit_bias.emplace_back(v, 1.0f);
  EXPECT_NE(validate_logit_adjustments(many, 1000).message().find("at most 300"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::kernels
