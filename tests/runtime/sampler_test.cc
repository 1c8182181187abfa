// The sampler stage (runtime/sampler.h) without a model: logprobs are the log-softmax in double
// with the top ids (ties: lower id); rows sampled over the pool equal sample_ref's one by one;
// over a real scheduler's plan it reads the head rows only (the prompt-logprob rows and the last
// row while prefilling, anchor and draft rows in decode) and keeps a draft's token while the
// drafts match the target's tokens (exact match).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "base/thread_pool.h"
#include "runtime/proposer.h"
#include "runtime/sampler.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 40;

std::vector<float> random_logits(int64_t rows, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> l(static_cast<size_t>(rows * kVocab));
  for (float& x : l) x = std::round(d(gen) * 4.0f) / 4.0f;  // quarter steps: ties occur
  return l;
}

ModelConfig config() {
  ModelConfig cfg;
  cfg.vocab_size = kVocab;
  return cfg;
}

TEST(Sampler, LogprobsAreTheLogSoftmaxWithTheTopIds) {
  const std::vector<float> row = random_logits(1, 7);
  double sum = 0;
  const float mx = *std::max_element(row.begin(), row.end());
  for (float x : row) sum += std::exp(static_cast<double>(x) - mx);
  const double lse = mx + std::log(sum);
  std::vector<int32_t> order(kVocab);
  for (int32_t v = 0; v < kVocab; ++v) order[v] = v;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  for (int32_t top : {0, 1, 5, kMaxTopLogprobs}) {
    TokenLogprob lp;
    lp.top.reserve(kMaxTopLogprobs);
    const auto* before = lp.top.data();
    Sampler::logprobs_of(row.data(), kVocab, 3, top, lp);
    EXPECT_EQ(lp.top.data(), before) << "no allocation";
    EXPECT_EQ(lp.token, 3);
    EXPECT_EQ(lp.logprob, static_cast<float>(row[3] - lse));
    ASSERT_EQ(lp.top.size(), static_cast<size_t>(top));
    for (int32_t k = 0; k < top; ++k) {
      EXPECT_EQ(lp.top[k].first, order[k]) << "top " << top << " rank " << k;
      EXPECT_EQ(lp.top[k].second, static_cast<float>(row[order[k]] - lse));
    }
  }
}

TEST(Sampler, PoolRowsEqualTheSerialOnes) {
  Limits l;
  l.max_batch = 4;
  l.max_rows = 8;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    Sampler s(config(), l, pool, 0, false, nullptr);
    const std::vector<float> logits = random_logits(7, 11);
    std::vector<int32_t> got(7, -1);
    std::vector<TokenLogprob> lps(7);
    std::vector<kernels::SampleRow> rows(7);
    for (int64_t r = 0; r < 7; ++r) {
      rows[r] = kernels::SampleRow{{r % 2 ? 0.9f : 0.0f, r % 3 ? 1.0f : 0.8f, 100 + static_cast<uint64_t>(r)}, 5 + r,
                                   static_cast<int>(r % 2)};
      s.add_sample(logits.data() + r * kVocab, rows[r].params, rows[r].position, rows[r].draft_slot, &got[r]);
      s.add_logprobs(logits.data() + r * kVocab, static_cast<int32_t>(r), 4, &lps[r]);
    }
    s.run_sample_tasks();
    s.run_logprob_tasks();
    for (int64_t r = 0; r < 7; ++r) {
      int32_t want = -1;
      kernels::sample_ref(logits.data() + r * kVocab, 1, kVocab, &rows[r], &want);
      EXPECT_EQ(got[r], want) << threads << " threads, row " << r;
      TokenLogprob one;
      Sampler::logprobs_of(logits.data() + r * kVocab, kVocab, static_cast<int32_t>(r), 4, one);
      EXPECT_EQ(lps[r].logprob, one.logprob);
      EXPECT_EQ(lps[r].top, one.top);
    }
  }
}

// Every page free: the scheduler's plans only.
class AmplePages final : public PageBudget {
 public:
  int64_t pages_short(int32_t, int64_t) const override { return 0; }
  int64_t free_pages(int32_t) const override { return 1000; }
  int64_t total_pages() const override { return 1000; }
  Result<int64_t> start(int32_t, const std::vector<int32_t>&, int64_t, bool, const std::string&) override {
    return int64_t{0};
  }
  Status reserve(int32_t, int64_t) override { return Status(); }
  void register_prefix(int32_t, const std::vector<int32_t>&, int64_t) override {}
  void end(int32_t) override {}
};

// A greedy request's row whose argmax is `token`.
void set_argmax(float* row, int32_t token) {
  std::fill_n(row, kVocab, 0.0f);
  row[token] = 5.0f;
}

TEST(Sampler, HeadRowsAndExactMatchOverAPlan) {
  SchedulerOptions o;
  o.limits.max_batch = 2;
  o.limits.max_rows = 16;
  o.limits.max_chunk = 8;
  o.limits.max_seqs = 2;
  o.limits.max_context = 64;
  o.mtp = true;
  AmplePages pages;
  Scheduler sched(o, pages);
  GenerationRequest scored;  // greedy, prompt logprobs with top 2
  scored.prompt = {2, 3, 4, 5, 6};
  scored.max_tokens = 4;
  scored.stop_at_eos = false;
  scored.logprobs = 2;
  scored.prompt_logprobs = true;
  GenerationRequest plain = scored;
  plain.logprobs = -1;
  plain.prompt_logprobs = false;
  sched.add(0, scored);
  sched.add(1, plain);
  ThreadPool pool(2);
  Sampler s(config(), o.limits, pool, 0, false, nullptr);
  const int32_t S = s.entries_per_request();
  std::vector<int64_t> row_begin(2);

  // Prefill: both prompts in one step (rows 0-4 and 5-9).
  const std::vector<PlannedRows>& plan = sched.plan();
  ASSERT_EQ(plan.size(), 2u);
  row_begin = {0, plan[0].n};
  s.plan_head_rows(plan, row_begin.data(), sched);
  const HeadRows head = s.head_rows();
  // Request 0: rows 0..3 score prompt tokens 1..4, row 4 samples; request 1: its last row only.
  EXPECT_EQ(std::vector<int32_t>(head.rows, head.rows + head.n), (std::vector<int32_t>{0, 1, 2, 3, 4, 9}));
  const HeadRows one = s.head_rows_of(1, row_begin[1]);
  EXPECT_EQ(std::vector<int32_t>(one.rows, one.rows + one.n), std::vector<int32_t>{4});
  std::vector<float> logits = random_logits(head.n, 3);
  set_argmax(logits.data() + 4 * kVocab, 17);
  set_argmax(logits.data() + 5 * kVocab, 23);
  std::copy(logits.begin(), logits.end(), s.logits());
  EXPECT_TRUE(s.sample(plan, row_begin.data(), sched, nullptr)) << "request 0 asked for prompt logprobs";
  EXPECT_EQ(s.tokens()[0], 17);
  EXPECT_EQ(s.tokens()[S], 23);
  ASSERT_EQ(s.prompt_logprobs()[0].size(), 4u);
  for (int j = 0; j < 4; ++j) {
    TokenLogprob want;
    Sampler::logprobs_of(logits.data() + j * kVocab, kVocab, scored.prompt[j + 1], 2, want);
    EXPECT_EQ(s.prompt_logprobs()[0][j].logprob, want.logprob) << j;
    EXPECT_EQ(s.prompt_logprobs()[0][j].top, want.top) << j;
  }
  EXPECT_EQ(s.logprobs()[0].token, 17);
  sched.update(s.tokens(), s.logprobs(), s.prompt_logprobs());
  const int32_t d0 = 30, d1 = 31;  // request 0's draft will match, request 1's not
  sched.set_drafts(0, &d0, 1);
  sched.set_drafts(1, &d1, 1);

  // Decode: anchor and draft row each.
  const std::vector<PlannedRows>& next = sched.plan();
  ASSERT_EQ(next.size(), 2u);
  ASSERT_EQ(next[0].n_drafts, 1);
  row_begin = {0, next[0].n};
  s.plan_head_rows(next, row_begin.data(), sched);
  EXPECT_EQ(s.head_rows().n, 4);
  std::fill_n(s.logits(), 4 * kVocab, 0.0f);
  set_argmax(s.logits() + 0 * kVocab, 30);  // request 0: anchor -> 30 (= its draft), draft -> 12
  set_argmax(s.logits() + 1 * kVocab, 12);
  set_argmax(s.logits() + 2 * kVocab, 14);  // request 1: anchor -> 14 (not 31)
  set_argmax(s.logits() + 3 * kVocab, 15);
  EXPECT_TRUE(s.sample(next, row_begin.data(), sched, nullptr)) << "asked (no prompt rows left)";
  EXPECT_TRUE(s.prompt_logprobs()[0].empty());
  EXPECT_EQ(std::vector<int32_t>(s.tokens(), s.tokens() + 2 * S), (std::vector<int32_t>{30, 12, 14, -1}));
  EXPECT_EQ(s.logprobs()[0].token, 30);
  EXPECT_EQ(s.logprobs()[1].token, 12);
}

}  // namespace
}  // namespace dsv4
