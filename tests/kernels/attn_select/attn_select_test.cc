// attn_select: engine vs reference at every T, hand-computed lists (window part
// with empty slots, prompt Wc, HCA visibility i·r + r − 1 ≤ p, CSA pick order).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attn_select/attn_select.h"
#include "support/poison.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

struct Preset {
  const char* name;
  int window, hca_ratio, topk;
};
constexpr Preset kTiny{"tiny", 8, 8, 4};     // model.md §14.1
constexpr Preset kTiny2{"tiny2", 16, 128, 8};  // model.md §14.1a

constexpr int32_t kUntouched = 0x12345;

// One step's inputs for kCapacity rows: positions, Wc, CSA picks.
struct StepInputs {
  std::vector<int64_t> pos;
  std::vector<int32_t> wc;
  RowBuffer<int32_t> picks;
  std::vector<int32_t> n_picks;
  int64_t max_pos;
  StepInputs(const Preset& pr, uint32_t seed, int64_t max_pos_)
      : pos(kCapacity), wc(kCapacity), picks(kCapacity, pr.topk), n_picks(kCapacity), max_pos(max_pos_) {
    std::mt19937 rng(seed);
    for (int t = 0; t < kCapacity; ++t) {
      pos[t] = std::uniform_int_distribution<int64_t>(0, max_pos)(rng);
      const int64_t prompt_len = std::uniform_int_distribution<int64_t>(1, max_pos + 1)(rng);
      wc[t] = pos[t] < prompt_len ? static_cast<int32_t>(std::min<int64_t>(prompt_len, pr.window))
                                  : pr.window;
      const int64_t n = visible_entries(pos[t], 4);
      std::vector<int32_t> all(n);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      n_picks[t] = static_cast<int32_t>(std::min<int64_t>(n, pr.topk));
      for (int k = 0; k < pr.topk; ++k) picks.row(t)[k] = k < n_picks[t] ? all[k] : -1;
    }
  }
};

AttnSelectParams params_for(const Preset& pr, AttnKind kind, int64_t max_pos) {
  AttnSelectParams p;
  p.kind = kind;
  p.window = pr.window;
  p.ratio = kind == AttnKind::kHCA ? pr.hca_ratio : 4;
  p.stride = pr.window + (kind == AttnKind::kHCA ? visible_entries(max_pos, pr.hca_ratio) : pr.topk);
  return p;
}

void run_engine(ThreadPool* pool, const AttnSelectParams& p, int64_t T, StepInputs& in,
                int32_t* list, int32_t* len) {
  auto fn = [&](int tid, int n) {
    attn_select(p, T, in.pos.data(), in.wc.data(), in.picks.v.data(), in.picks.width,
                in.n_picks.data(), list, len, tid, n);
  };
  if (pool) pool->run([&](int tid, int n) { fn(tid, n); });
  else fn(0, 1);
}

class AttnSelectTest : public ::testing::TestWithParam<std::tuple<Preset, AttnKind>> {};

TEST_P(AttnSelectTest, EngineMatchesRefEveryT) {
  const auto [pr, kind] = GetParam();
  const int64_t max_pos = 3 * pr.hca_ratio + 5;
  StepInputs in(pr, 7u + static_cast<uint32_t>(kind), max_pos);
  const AttnSelectParams p = params_for(pr, kind, max_pos);
  ThreadPool pool(2);
  RowBuffer<int32_t> want(kCapacity, p.stride), got(kCapacity, p.stride);
  RowBuffer<int32_t> want_len(kCapacity, 1), got_len(kCapacity, 1);
  for (int64_t T = 0; T <= kCapacity; ++T) {
    want.poison(T);
    want_len.poison(T);
    attn_select_ref(p, T, in.pos.data(), in.wc.data(), in.picks.v.data(), in.picks.width,
                    in.n_picks.data(), want.data(), want_len.data());
    for (ThreadPool* pl : {static_cast<ThreadPool*>(nullptr), &pool}) {
      got.poison(T);
      got_len.poison(T);
      std::fill(got.v.begin(), got.v.begin() + T * p.stride, kUntouched);
      run_engine(pl, p, T, in, got.data(), got_len.data());
      ASSERT_TRUE(got.sentinel_intact(T));
      ASSERT_TRUE(got_len.sentinel_intact(T));
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(got_len.row(t)[0], want_len.row(t)[0]) << "T=" << T << " row " << t;
        const int32_t n = want_len.row(t)[0];
        for (int j = 0; j < n; ++j) ASSERT_EQ(got.row(t)[j], want.row(t)[j]) << "row " << t << " j " << j;
        for (int64_t j = n; j < p.stride; ++j) ASSERT_EQ(got.row(t)[j], kUntouched) << "row " << t;
      }
    }
  }
}

TEST_P(AttnSelectTest, RowIndependence) {
  const auto [pr, kind] = GetParam();
  const int64_t max_pos = 2 * pr.hca_ratio + 3;
  StepInputs in(pr, 99u, max_pos);
  const AttnSelectParams p = params_for(pr, kind, max_pos);
  ThreadPool pool(2);
  RowBuffer<int32_t> all(kCapacity, p.stride), all_len(kCapacity, 1);
  all.poison(kCapacity);
  run_engine(&pool, p, kCapacity, in, all.data(), all_len.data());
  for (int t = 0; t < kCapacity; ++t) {
    std::vector<int32_t> one(p.stride), one_len(1);
    AttnSelectParams q = p;
    attn_select(q, 1, &in.pos[t], &in.wc[t], in.picks.row(t), in.picks.width, &in.n_picks[t],
                one.data(), one_len.data(), 0, 1);
    ASSERT_EQ(one_len[0], all_len.row(t)[0]);
    for (int j = 0; j < one_len[0]; ++j) ASSERT_EQ(one[j], all.row(t)[j]);
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Preset, AttnKind>>& info) {
  static const char* const kinds[] = {"swa", "hca", "csa"};
  return std::string(std::get<0>(info.param).name) + "_" + kinds[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(Presets, AttnSelectTest,
                         ::testing::Combine(::testing::Values(kTiny, kTiny2),
                                            ::testing::Values(AttnKind::kSWA, AttnKind::kHCA,
                                                              AttnKind::kCSA)),
                         param_name);

// One row through both implementations; returns the list.
std::vector<int32_t> select_one(const AttnSelectParams& p, int64_t pos, int32_t wc,
                                std::vector<int32_t> picks = {}) {
  const int32_t n_picks = static_cast<int32_t>(picks.size());
  if (picks.empty()) picks.push_back(-1);
  std::vector<int32_t> want(p.stride, kUntouched), got(p.stride, kUntouched);
  int32_t want_len = -5, got_len = -5;
  attn_select_ref(p, 1, &pos, &wc, picks.data(), n_picks, &n_picks, want.data(), &want_len);
  attn_select(p, 1, &pos, &wc, picks.data(), n_picks, &n_picks, got.data(), &got_len, 0, 1);
  EXPECT_EQ(got_len, want_len);
  EXPECT_EQ(got, want);
  want.resize(want_len);
  return want;
}

TEST(AttnSelectHand, SwaWindow) {
  AttnSelectParams p{AttnKind::kSWA, 8, 0, 8};
  // Decode row, Wc = W, window full.
  EXPECT_EQ(select_one(p, 20, 8), (std::vector<int32_t>{13, 14, 15, 16, 17, 18, 19, 20}));
  // Decode row early in the sequence: empty slots after the keys.
  EXPECT_EQ(select_one(p, 2, 8), (std::vector<int32_t>{0, 1, 2, -1, -1, -1, -1, -1}));
  // Prompt of 5 tokens: Wc = 5.
  EXPECT_EQ(select_one(p, 2, 5), (std::vector<int32_t>{0, 1, 2, -1, -1}));
  EXPECT_EQ(select_one(p, 4, 5), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(select_one(p, 7, 8), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(select_one(p, 8, 8), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(AttnSelectHand, HcaVisibility) {
  // r = 8: entry i visible iff 8i + 7 <= p; entries ascending after the Wc window entries.
  AttnSelectParams p{AttnKind::kHCA, 8, 8, 8 + 16};
  EXPECT_EQ(select_one(p, 6, 8), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, -1}));
  EXPECT_EQ(select_one(p, 7, 8), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 0}));
  EXPECT_EQ(select_one(p, 14, 8), (std::vector<int32_t>{7, 8, 9, 10, 11, 12, 13, 14, 0}));
  EXPECT_EQ(select_one(p, 15, 8), (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15, 0, 1}));
  EXPECT_EQ(select_one(p, 31, 8),
            (std::vector<int32_t>{24, 25, 26, 27, 28, 29, 30, 31, 0, 1, 2, 3}));
  // Prompt of 11 tokens (Wc = 8 = W): row p = 10 sees entry 0 only.
  EXPECT_EQ(select_one(p, 10, 8), (std::vector<int32_t>{3, 4, 5, 6, 7, 8, 9, 10, 0}));
  // tiny2-like: W = 16 but a prompt of 130 tokens, r = 128.
  AttnSelectParams p2{AttnKind::kHCA, 16, 128, 16 + 2};
  std::vector<int32_t> want;
  for (int k = 0; k < 16; ++k) want.push_back(127 - 15 + k);
  want.push_back(0);
  EXPECT_EQ(select_one(p2, 127, 16), want);
  EXPECT_EQ(select_one(p2, 126, 16).size(), 16u);
  // Prompt of 6 tokens (Wc = 6) with r = 4 (compressed entries start at offset 6).
  AttnSelectParams p4{AttnKind::kHCA, 8, 4, 8 + 4};
  EXPECT_EQ(select_one(p4, 5, 6), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 0}));
  EXPECT_EQ(select_one(p4, 3, 6), (std::vector<int32_t>{0, 1, 2, 3, -1, -1, 0}));
  EXPECT_EQ(select_one(p4, 2, 6), (std::vector<int32_t>{0, 1, 2, -1, -1, -1}));
}

TEST(AttnSelectHand, CsaPicksInOrder) {
  AttnSelectParams p{AttnKind::kCSA, 8, 4, 8 + 4};
  EXPECT_EQ(select_one(p, 30, 8, {5, 2, 7, 0}),
            (std::vector<int32_t>{23, 24, 25, 26, 27, 28, 29, 30, 5, 2, 7, 0}));
  // Fewer visible entries than k; prompt Wc = 5.
  EXPECT_EQ(select_one(p, 4, 5, {0}), (std::vector<int32_t>{0, 1, 2, 3, 4, 0}));
  // No compressed entry yet (p < 3): empty selection.
  EXPECT_EQ(select_one(p, 2, 5, {}), (std::vector<int32_t>{0, 1, 2, -1, -1}));
}

}  // namespace
}  // namespace dsv4::kernels
