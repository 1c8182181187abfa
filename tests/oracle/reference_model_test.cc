// The whole-model Level-A reference (oracle/reference_model.h) against the engine
// (ModelRunner), with decision replay (model/decisions.h): the engine's decisions are
// forced into the reference, every forced decision that differs from the reference's own
// choice must be a near-tie, and every logits row must agree within the summation-order
// bound below. tiny / tiny2 x BF16 / FP8 storage x feedings (whole prompt, chunks of 1, 3
// and 7, token-by-token decode, two-row steps), past the window and across ratio-4 and
// ratio-8/128 boundaries, with MTP, alone and with several requests per step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/decisions.h"
#include "model/runner.h"
#include "oracle/reference_model.h"
#include "support/tiny_model.h"

namespace dsv4 {
namespace {

using Loaded = test::TinyModel;
using test::model;

using test::tokens;

// One teacher-forced sequence of a schedule: its tokens, prompt length, the rows it feeds per
// step while in the prompt (chunk) and after it (rows), and the step it joins at.
struct SeqPlan {
  std::vector<int32_t> toks;
  int64_t prompt_len = 0;
  int chunk = 1;
  int rows = 1;
  int join = 0;
};

struct RunOutput {
  std::vector<std::vector<float>> logits;      // per sequence [n, V]
  std::vector<std::vector<float>> mtp_logits;  // per sequence [n-1, V] (with mtp)
  std::vector<Decision> decisions;             // every decision used
};

// Runs the schedule through `m` (ModelRunner or ReferenceModel): every step takes the next
// rows of every joined, unfinished sequence (sequence i uses slot i); with mtp, the MTP layer
// then runs over the rows whose next token is known, with that step's Xfinal rows.
template <class Model>
RunOutput run_schedule(Model& m, const std::vector<SeqPlan>& plans, bool mtp, const DecisionTable* forced) {
  const int64_t V = m.vocab_size(), ND = m.stream_width();
  const int S = static_cast<int>(plans.size());
  RunOutput out;
  out.logits.resize(S);
  out.mtp_logits.resize(S);
  std::vector<int64_t> done(S, 0);
  for (int i = 0; i < S; ++i) {
    const int64_t n = static_cast<int64_t>(plans[i].toks.size());
    out.logits[i].assign(static_cast<size_t>(n * V), 0.0f);
    if (mtp) out.mtp_logits[i].assign(static_cast<size_t>((n - 1) * V), 0.0f);
  }
  const DecisionIO dec{forced, &out.decisions};
  for (int step = 0;; ++step) {
    std::vector<StepRequest> reqs;
    for (int i = 0; i < S; ++i) {
      const SeqPlan& p = plans[i];
      const int64_t n = static_cast<int64_t>(p.toks.size());
      if (step < p.join || done[i] >= n) continue;
      if (done[i] == 0) {
        EXPECT_TRUE(m.start_sequence(i).ok());
      }
      const int64_t want = done[i] < p.prompt_len ? std::min<int64_t>(p.chunk, p.prompt_len - done[i]) : p.rows;
      const int32_t c = static_cast<int32_t>(std::min<int64_t>(want, n - done[i]));
      reqs.push_back({i, done[i], c, p.prompt_len, p.toks.data() + done[i]});
    }
    if (reqs.empty()) break;
    int64_t T = 0;
    for (const StepRequest& q : reqs) T += q.n;
    std::vector<float> logits(static_cast<size_t>(T * V));
    std::vector<bf16> xfinal(static_cast<size_t>(T * ND));
    Status st = m.forward(reqs, logits.data(), xfinal.data(), dec);
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) return out;
    std::vector<StepRequest> mreqs;
    std::vector<bf16> mx;
    int64_t row = 0;
    for (const StepRequest& q : reqs) {
      std::copy_n(logits.begin() + row * V, q.n * V, out.logits[q.seq].begin() + q.p0 * V);
      const int64_t n = static_cast<int64_t>(plans[q.seq].toks.size());
      const int64_t mn = std::min<int64_t>(q.p0 + q.n, n - 1) - q.p0;
      if (mtp && mn > 0) {
        mreqs.push_back({q.seq, q.p0, static_cast<int32_t>(mn), q.prompt_len, plans[q.seq].toks.data() + q.p0 + 1});
        mx.insert(mx.end(), xfinal.begin() + row * ND, xfinal.begin() + (row + mn) * ND);
      }
      row += q.n;
    }
    if (!mreqs.empty()) {
      std::vector<float> ml(static_cast<size_t>(mx.size() / ND * V));
      st = m.forward_mtp(mreqs, mx.data(), ml.data(), dec);
      EXPECT_TRUE(st.ok()) << st.message();
      if (!st.ok()) return out;
      int64_t mrow = 0;
      for (const StepRequest& q : mreqs) {
        std::copy_n(ml.begin() + mrow * V, q.n * V, out.mtp_logits[q.seq].begin() + q.p0 * V);
        mrow += q.n;
      }
    }
    for (const StepRequest& q : reqs) {
      done[q.seq] += q.n;
      if (done[q.seq] >= static_cast<int64_t>(plans[q.seq].toks.size())) m.end_sequence(q.seq);
    }
  }
  return out;
}

Limits limits_for(const std::vector<SeqPlan>& plans) {
  Limits l;
  l.max_batch = static_cast<int32_t>(plans.size());
  l.max_seqs = l.max_batch;
  l.max_chunk = 1;
  l.max_decode_rows = 1;
  l.max_context = 1;
  for (const SeqPlan& p : plans) {
    l.max_chunk = std::max(l.max_chunk, p.chunk);
    l.max_decode_rows = std::max(l.max_decode_rows, p.rows);
    l.max_context = std::max<int64_t>(l.max_context, static_cast<int64_t>(p.toks.size()));
  }
  l.max_rows = l.max_batch * std::max(l.max_chunk, l.max_decode_rows);
  l.n_threads = 2;
  return l;
}

// A forced decision may differ from the reference's own only at a near-tie: indexer scores
// are bf16 (a tie within two bf16 ulps of the larger score; the reference sums the Hadamard
// transform in another order than the engine), router keys fp32 (within 1e-4 relative).
::testing::AssertionResult near_tie(const ForcedDifference& d) {
  const float tol = d.forced.idx ? d.scale / 64 : d.scale * 1e-4f;
  if (d.gap <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "forced decision is no near-tie (gap " << d.gap << ", scale " << d.scale
                                       << "): engine " << decisions_to_json({d.forced}) << "reference own ids "
                                       << ::testing::PrintToString(d.own);
}

// Rows of a and b [rows, V] equal bit for bit; names the first row that differs.
::testing::AssertionResult rows_equal(const std::vector<float>& a, const std::vector<float>& b, int64_t V) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && !(std::isnan(a[i]) && std::isnan(b[i])))
      return ::testing::AssertionFailure() << "row " << i / V << " column " << i % V << ": engine " << a[i]
                                           << " reference " << b[i];
  return ::testing::AssertionSuccess();
}

struct Case {
  const char* preset;
  TinyQuant quant;
};

const Loaded& model_of(const Case& c) { return model(c.preset, c.quant); }

// Engine, then the reference with the engine's decisions forced: the reference decides at
// the same keys, differs from a forced decision only at a near-tie, and gives the same
// logits (main and MTP) bit for bit. Returns the number of rows compared.
int64_t check_against_reference(const Loaded& m, const std::vector<SeqPlan>& plans, bool mtp) {
  auto runner = ModelRunner::create(m.cfg, *m.w, limits_for(plans));
  EXPECT_TRUE(runner.ok()) << runner.message();
  if (!runner.ok()) return 0;
  const RunOutput eng = run_schedule(**runner, plans, mtp, nullptr);
  auto table = DecisionTable::create(m.cfg, eng.decisions);
  EXPECT_TRUE(table.ok()) << table.message();
  if (!table.ok()) return 0;
  auto ref = ReferenceModel::create(m.cfg, *m.w);
  EXPECT_TRUE(ref.ok()) << ref.message();
  if (!ref.ok()) return 0;
  const RunOutput want = run_schedule(**ref, plans, mtp, &*table);
  std::vector<Decision> a = eng.decisions, b = want.decisions;
  sort_decisions(a);
  sort_decisions(b);
  EXPECT_EQ(decisions_to_json(b), decisions_to_json(a)) << "the reference decides at other keys";
  for (const ForcedDifference& d : (*ref)->forced_differences()) EXPECT_TRUE(near_tie(d));
  const int64_t V = m.cfg.vocab_size;
  int64_t rows = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    EXPECT_TRUE(rows_equal(eng.logits[i], want.logits[i], V)) << "sequence " << i << ", main head";
    rows += static_cast<int64_t>(want.logits[i].size()) / V;
    if (!mtp) continue;
    EXPECT_TRUE(rows_equal(eng.mtp_logits[i], want.mtp_logits[i], V)) << "sequence " << i << ", MTP head";
    rows += static_cast<int64_t>(want.mtp_logits[i].size()) / V;
  }
  std::printf("  %zu sequences, %lld logits rows equal, %zu forced decisions, %zu near-ties\n", plans.size(),
              static_cast<long long>(rows), eng.decisions.size(), (*ref)->forced_differences().size());
  return rows;
}

class ReferenceTest : public ::testing::TestWithParam<Case> {
 protected:
  const Loaded& m() const { return model_of(GetParam()); }
};

// B = 1, every feeding, with MTP: past the window (W = 8 / 16) and across the ratio-4 and
// (tiny) ratio-8 boundaries several times, CSA top-k pruning included (p >= 4·topk + 3).
TEST_P(ReferenceTest, EveryFeedingWithMtp) {
  const int n = m().cfg.sliding_window > 8 ? 60 : 45;
  const auto toks = tokens(n, 5, m().cfg.vocab_size);
  check_against_reference(m(), {{toks, n, n, 1, 0}}, true);                      // whole prompt
  for (int c : {1, 3, 7}) check_against_reference(m(), {{toks, n, c, 1, 0}}, true);  // chunks
  check_against_reference(m(), {{toks, 1, 1, 1, 0}}, true);                      // token by token
  check_against_reference(m(), {{toks, 6, 6, 2, 0}}, true);                      // two-row decode steps
}

// Several requests per step: joining at different steps, prompts of different lengths in
// chunks, one- and two-row decode steps, with MTP.
TEST_P(ReferenceTest, SeveralRequestsPerStep) {
  std::vector<SeqPlan> plans;
  for (int i = 0; i < 4; ++i) plans.push_back({tokens(20 + 7 * i, 40 + i, m().cfg.vocab_size), 3 + 4 * i, 4, 1 + i % 2, i});
  check_against_reference(m(), plans, true);
}

INSTANTIATE_TEST_SUITE_P(Presets, ReferenceTest,
                         ::testing::Values(Case{"tiny", TinyQuant::kFp8}, Case{"tiny", TinyQuant::kNone},
                                           Case{"tiny2", TinyQuant::kFp8}, Case{"tiny2", TinyQuant::kNone}),
                         [](const auto& info) {
                           return std::string(info.param.preset) + "_" + std::string(tiny_quant_name(info.param.quant));
                         });

// Steps the reference cannot take are errors naming the request and the rule.
TEST(Reference, StepErrors) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  auto ref = ReferenceModel::create(m.cfg, *m.w);
  ASSERT_TRUE(ref.ok()) << ref.message();
  ReferenceModel& R = **ref;
  const std::vector<int32_t> toks = tokens(4, 2, m.cfg.vocab_size), bad = {1, 512};
  auto err = [&](std::vector<StepRequest> reqs) { return R.forward(reqs, nullptr, nullptr).message(); };
  EXPECT_NE(err({{0, 0, 2, 2, toks.data()}}).find("sequence slot 0 was not started"), std::string::npos);
  ASSERT_TRUE(R.start_sequence(0).ok());
  EXPECT_NE(R.start_sequence(0).message().find("already in use"), std::string::npos);
  EXPECT_NE(err({{0, 0, 2, 2, toks.data()}, {0, 2, 1, 2, toks.data()}}).find("twice in one step"), std::string::npos);
  EXPECT_NE(err({{0, 1, 2, 2, toks.data()}}).find("p0 = 1 outside [0, 0]"), std::string::npos);
  EXPECT_NE(err({{0, 0, 0, 2, toks.data()}}).find("n = 0"), std::string::npos);
  EXPECT_NE(err({{0, 0, 2, 0, toks.data()}}).find("prompt_len = 0"), std::string::npos);
  EXPECT_NE(err({{0, 0, 2, 2, bad.data()}}).find("512"), std::string::npos);
  std::vector<bf16> X(static_cast<size_t>(2 * R.stream_width()));
  const StepRequest q{0, 0, 2, 2, toks.data()}, mtp_gap{0, 1, 1, 2, toks.data()};
  ASSERT_TRUE(R.forward({&q, 1}, nullptr, nullptr).ok());
  EXPECT_NE(R.forward_mtp({&mtp_gap, 1}, X.data(), nullptr).message().find("p0 = 1 outside [0, 0]"),
            std::string::npos)
      << "the MTP layer's p0 is checked against its own positions";
  EXPECT_TRUE(R.forward_mtp({&q, 1}, X.data(), nullptr).ok());
  // A step may restart at any earlier position (rolled-back rows are recomputed).
  const StepRequest again{0, 1, 3, 2, toks.data()};
  EXPECT_TRUE(R.forward({&again, 1}, nullptr, nullptr).ok());
}

// model.md §14.3: tiny's HCA lists pass one 64-entry attention block from p = 455 on; a
// 480-token prompt in chunks of 48, decoded on to 520.
TEST(Reference, TinyTwoBlockLists) {
  check_against_reference(model("tiny", TinyQuant::kFp8), {{tokens(520, 21, 512), 480, 48, 1, 0}}, false);
}

// tiny2's ratio-128 HCA layer emits at p = 127 and 255: 300 tokens, prompt 200 in chunks of 64.
TEST(Reference, Tiny2PastTwoRatio128Entries) {
  check_against_reference(model("tiny2", TinyQuant::kNone), {{tokens(300, 33, 512), 200, 64, 1, 0}}, false);
}


// Long context (runtime.md §7.2): a 3,000-token prompt in chunks of 509 rows, then decode
// rows, on tiny (ratio 8 HCA: 375 compressed entries; ratio 4 CSA: the streaming indexer over
// 750 keys) and tiny2 (ratio 128: 23 entries), engine == reference bit for bit on every row
// (the plain reference's cost grows with the context; 12K-token prefill == decode is
// tests/model/runner_test.cc). Release pass only (the engine's long context runs under the
// sanitizers there). One test per preset, so that ctest runs them side by side.
void prompt_then_decode(const char* preset) {
  constexpr int kPrompt = 3000;
  const Loaded& m = test::tiny_model(preset, TinyQuant::kFp8, 1, 32768);
  SeqPlan p;
  p.toks = tokens(kPrompt + 12, 91, m.cfg.vocab_size);
  p.prompt_len = kPrompt;
  p.chunk = 509;
  p.rows = 1;
  EXPECT_EQ(check_against_reference(m, {p}, /*mtp=*/false), kPrompt + 12) << preset;
}

TEST(ReferenceLongContext, PromptThenDecodePastManyBlocksTiny) { prompt_then_decode("tiny"); }
TEST(ReferenceLongContext, PromptThenDecodePastManyBlocksTiny2) { prompt_then_decode("tiny2"); }

}  // namespace
}  // namespace dsv4
