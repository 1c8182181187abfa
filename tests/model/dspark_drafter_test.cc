// The DSpark drafter (dspark.md §2-§3.8) on tiny-ds, at Level B (oracle/float_forward.h
// float_dspark) and Level A (ReferenceModel::dspark_*, through teacher_forced_logits):
// shapes and the argmax chain, bit-exact prefix consistency (an anchor's output depends on
// tokens 0..a+1 only), the non-causal block (every row depends on γ), the programmed Markov
// chain of dspark.md §6 (U = 0, W1 = identity, W2 a map f: drafts f(x0), f(f(x0)), ...; a tie
// picks the lower id), Level A against Level B, commits row by row, decision replay, input
// errors; and the engine's drafter (ModelRunner::dspark_*) against the reference: every preset
// (tiny-ds-w80: lists over 64 entries, ring-slot order after the wrap), batches of rounds
// equal to rounds alone bit for bit, sentinels past the active rows, no allocation.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/runner.h"
#include "oracle/float_forward.h"
#include "oracle/reference_model.h"
#include "oracle/teacher_forced.h"
#include "support/alloc_counter.h"
#include "support/tiny_model.h"

namespace dsv4 {
namespace {

using test::random_tokens;
using test::tiny_model;

const test::TinyModel& tiny_ds() { return tiny_model("tiny-ds", TinyQuant::kFp8, 3); }

FloatDsparkOutput run(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& t, int gamma) {
  Result<FloatDsparkOutput> r = float_dspark(cfg, w, t, gamma);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? std::move(*r) : FloatDsparkOutput{};
}

TEST(FloatDspark, ShapesFiniteAndDraftsAreTheArgmaxChain) {
  const auto& m = tiny_ds();
  const int64_t V = m.cfg.vocab_size;
  const std::vector<int32_t> t = random_tokens(20, 5, V);
  const FloatDsparkOutput o = run(m.cfg, *m.w, t, 5);
  ASSERT_EQ(o.n_anchors, 19);
  ASSERT_EQ(o.gamma, 5);
  ASSERT_EQ(o.logits.size(), static_cast<size_t>(19 * 5 * V));
  ASSERT_EQ(o.drafts.size(), static_cast<size_t>(19 * 5));
  for (float x : o.logits) ASSERT_TRUE(std::isfinite(x));
  for (int64_t r = 0; r < 19 * 5; ++r) {
    const float* lam = o.logits.data() + r * V;
    int32_t best = 0;
    for (int32_t v = 1; v < V; ++v)
      if (lam[v] > lam[best]) best = v;
    EXPECT_EQ(o.drafts[r], best) << "row " << r;
  }
}

// Anchor a reads positions 0..a and token a+1 only: a shorter call gives the same bits.
TEST(FloatDspark, PrefixConsistentBitExact) {
  const auto& m = tiny_ds();
  const int64_t V = m.cfg.vocab_size, G = 3;
  const std::vector<int32_t> t = random_tokens(24, 9, V);  // W = 8: the context window slides
  const FloatDsparkOutput full = run(m.cfg, *m.w, t, G);
  for (int k : {2, 9, 17}) {
    const std::vector<int32_t> head(t.begin(), t.begin() + k);
    const FloatDsparkOutput part = run(m.cfg, *m.w, head, G);
    ASSERT_EQ(part.n_anchors, k - 1);
    EXPECT_EQ(0, std::memcmp(part.logits.data(), full.logits.data(), part.logits.size() * sizeof(float))) << k;
  }
  // A later token changes only the anchors that read it.
  std::vector<int32_t> t2 = t;
  t2[12] = (t2[12] + 1) % static_cast<int32_t>(V);
  const FloatDsparkOutput changed = run(m.cfg, *m.w, t2, G);
  const size_t row = static_cast<size_t>(G * V);
  EXPECT_EQ(0, std::memcmp(changed.logits.data(), full.logits.data(), 11 * row * sizeof(float)));
  EXPECT_NE(0, std::memcmp(changed.logits.data() + 11 * row, full.logits.data() + 11 * row, row * sizeof(float)));
}

// dspark.md §3.6: no causal mask inside the block, so row i's logits depend on γ.
TEST(FloatDspark, EveryRowDependsOnGamma) {
  const auto& m = tiny_ds();
  const int64_t V = m.cfg.vocab_size;
  const std::vector<int32_t> t = random_tokens(12, 4, V);
  const FloatDsparkOutput g5 = run(m.cfg, *m.w, t, 5), g7 = run(m.cfg, *m.w, t, 7);
  for (int64_t a = 0; a < 11; ++a)
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_NE(0, std::memcmp(g5.logits.data() + (a * 5 + i) * V, g7.logits.data() + (a * 7 + i) * V,
                               V * sizeof(float)))
          << "anchor " << a << " row " << i;
}

// dspark.md §6: Markov chain with programmed transitions. Rm = V, W1 = identity, W2[v][t] = 1
// iff f(t) = v, and the drafter's final norm 0 (y = 0, U = 0 exactly): drafts f(x0), f(f(x0)),
// ...; with a second 1 per column the lower id of the two wins.
TEST(FloatDspark, ProgrammedMarkovChain) {
  const auto& m = tiny_ds();
  const int64_t V = m.cfg.vocab_size, D = m.cfg.hidden_size;
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(m.dir);
  ASSERT_TRUE(files.ok()) << files.message();
  Result<Weights> loaded = load_weights(*files, m.cfg, nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  Weights& w = *loaded;
  ModelConfig cfg = m.cfg;
  cfg.dspark->markov_rank = V;
  auto f = [&](int64_t t) { return static_cast<int32_t>((7 * t + 3) % V); };
  auto g = [&](int64_t t) { return static_cast<int32_t>((11 * t + 5) % V); };
  std::vector<bf16> w1(static_cast<size_t>(V * V), bf16::from_float(0.0f)), w2 = w1, w2_tie = w1;
  const std::vector<bf16> zero_norm(static_cast<size_t>(D), bf16::from_float(0.0f));
  for (int64_t t = 0; t < V; ++t) {
    w1[t * V + t] = bf16::from_float(1.0f);
    w2[f(t) * V + t] = bf16::from_float(1.0f);
    w2_tie[f(t) * V + t] = bf16::from_float(1.0f);
    w2_tie[g(t) * V + t] = bf16::from_float(1.0f);
  }
  w.dspark.markov_w1 = w1.data();
  w.dspark.markov_w2 = w2.data();
  w.dspark.norm = zero_norm.data();
  const std::vector<int32_t> t = random_tokens(10, 8, V);
  constexpr int G = 6;
  auto expect_chain = [&](const std::vector<int32_t>& drafts, auto next, const char* what) {
    ASSERT_EQ(drafts.size(), static_cast<size_t>(9 * G)) << what;
    for (int64_t a = 0; a + 1 < 10; ++a) {
      int32_t prev = t[a + 1];
      for (int64_t i = 0; i < G; ++i) {
        prev = next(prev);
        ASSERT_EQ(drafts[a * G + i], prev) << what << ": anchor " << a << " draft " << i + 1;
      }
    }
  };
  auto lower = [&](int32_t x) { return std::min(f(x), g(x)); };
  TeacherForcedOptions ref;
  ref.numerics = Numerics::kReference;
  ref.dspark_gamma = G;
  expect_chain(run(cfg, w, t, G).drafts, f, "level B");
  expect_chain(teacher_forced_logits(cfg, w, t, ref)->drafts, f, "level A");
  w.dspark.markov_w2 = w2_tie.data();
  expect_chain(run(cfg, w, t, G).drafts, lower, "level B, ties");
  expect_chain(teacher_forced_logits(cfg, w, t, ref)->drafts, lower, "level A, ties");
}

// Level A (the reference drafter) as `dsv4 logits --dspark --numerics reference` runs it.
TeacherForcedOutput run_reference(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& t, int gamma) {
  TeacherForcedOptions opt;
  opt.numerics = Numerics::kReference;
  opt.dspark_gamma = gamma;
  Result<TeacherForcedOutput> r = teacher_forced_logits(cfg, w, t, opt);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? std::move(*r) : TeacherForcedOutput{};
}

TEST(ReferenceDspark, ShapesPrefixConsistencyAndGammaDependence) {
  const auto& m = tiny_ds();
  const int64_t V = m.cfg.vocab_size, G = 5;
  const std::vector<int32_t> t = random_tokens(20, 5, V);
  const TeacherForcedOutput full = run_reference(m.cfg, *m.w, t, G);
  ASSERT_EQ(full.rows, 19);
  ASSERT_EQ(full.gamma, G);
  ASSERT_EQ(full.logits.size(), static_cast<size_t>(19 * G * V));
  for (float x : full.logits) ASSERT_TRUE(std::isfinite(x));
  for (int64_t r = 0; r < 19 * G; ++r) {
    const float* lam = full.logits.data() + r * V;
    EXPECT_EQ(full.drafts[r], std::max_element(lam, lam + V) - lam) << "row " << r;
  }
  // Prompts of at least W tokens: the prompt-row list layout does not depend on the length.
  for (int k : {9, 14}) {
    const TeacherForcedOutput part = run_reference(m.cfg, *m.w, std::vector<int32_t>(t.begin(), t.begin() + k), G);
    ASSERT_EQ(part.rows, k - 1);
    for (int64_t a = 0; a + 1 < k; ++a)
      EXPECT_EQ(0, std::memcmp(part.logits.data() + a * G * V, full.logits.data() + a * G * V, G * V * sizeof(float)))
          << "prefix " << k << " anchor " << a;
  }
  const TeacherForcedOutput g7 = run_reference(m.cfg, *m.w, t, 7);
  for (int64_t a = 0; a < 19; ++a)
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_NE(0, std::memcmp(full.logits.data() + (a * 5 + i) * V, g7.logits.data() + (a * 7 + i) * V,
                               V * sizeof(float)))
          << "anchor " << a << " row " << i;
}

// Level A against Level B on the trained drafter (models/kjv-9m-dspark; tiny's random weights
// put its two levels ~20 % apart already in the main logits): per row the relative distance
// of λ is summation-order and rounding noise (median well under 2 %), the drafts mostly agree.
// A wrong key list, feature or Markov term moves rows by 100 % and more.
TEST(ReferenceDspark, CloseToLevelBOnTheTrainedDrafter) {
  const test::TinyModel& m = test::committed_model("kjv-9m-dspark");
  ASSERT_TRUE(m.w);
  const int64_t V = m.cfg.vocab_size, G = 5, n = 40;
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(300 + 37 * i % 3000);
  const TeacherForcedOutput ref = run_reference(m.cfg, *m.w, t, G);
  const FloatDsparkOutput flt = run(m.cfg, *m.w, t, G);
  ASSERT_EQ(ref.logits.size(), flt.logits.size());
  const int64_t rows = (n - 1) * G;
  std::vector<double> err;
  int same = 0;
  for (int64_t r = 0; r < rows; ++r) {
    same += ref.drafts[r] == flt.drafts[r];
    double num = 0, den = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double d = ref.logits[r * V + v] - flt.logits[r * V + v];
      num += d * d;
      den += static_cast<double>(flt.logits[r * V + v]) * flt.logits[r * V + v];
    }
    err.push_back(std::sqrt(num / den));
  }
  std::sort(err.begin(), err.end());
  EXPECT_LT(err[err.size() / 2], 0.02);
  EXPECT_LT(err[err.size() * 9 / 10], 0.1);
  EXPECT_GE(same, rows * 85 / 100) << same << " of " << rows;
}

// Commits row by row (as decoding does) give the same rounds as one commit of every row; a
// round whose context is not committed is an error naming the position.
TEST(ReferenceDspark, RowByRowCommitsEqualOneCommit) {
  const auto& m = tiny_ds();
  const int64_t V = m.cfg.vocab_size, G = 4, n = 13;
  const std::vector<int32_t> t = random_tokens(static_cast<int>(n), 6, V);
  auto model = ReferenceModel::create(m.cfg, *m.w);
  ASSERT_TRUE(model.ok()) << model.message();
  ReferenceModel& ref = **model;
  ASSERT_TRUE(ref.start_sequence(0).ok());
  ASSERT_TRUE(ref.start_sequence(1).ok());
  std::vector<bf16> f(static_cast<size_t>(n * ref.feature_width()));
  StepRequest q;
  q.seq = 0;
  q.n = static_cast<int32_t>(n);
  q.prompt_len = n;
  q.tokens = t.data();
  ASSERT_TRUE(ref.forward(std::span<const StepRequest>(&q, 1), nullptr, nullptr, {}, f.data()).ok());
  ASSERT_TRUE(ref.dspark_commit(0, 0, n, f.data()).ok());
  std::vector<int32_t> d0(G), d1(G);
  std::vector<float> l0(static_cast<size_t>(G * V)), l1(l0.size());
  for (int64_t p = 0; p < n; ++p) ASSERT_TRUE(ref.dspark_commit(1, p, 1, f.data() + p * ref.feature_width()).ok());
  for (int64_t a = 0; a + 1 < n; ++a) {
    ASSERT_TRUE(ref.dspark_propose(0, a, t[a + 1], G, l0.data(), d0.data()).ok());
    ASSERT_TRUE(ref.dspark_propose(1, a, t[a + 1], G, l1.data(), d1.data()).ok());
    EXPECT_EQ(d0, d1);
    EXPECT_EQ(0, std::memcmp(l0.data(), l1.data(), l0.size() * sizeof(float))) << "anchor " << a;
  }
  ASSERT_TRUE(ref.start_sequence(2).ok());
  ASSERT_TRUE(ref.dspark_commit(2, 1, 3, f.data()).ok());
  const Status st = ref.dspark_propose(2, 3, 7, G, nullptr, d0.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("position 0"), std::string::npos) << st.message();
}

// dspark.md §3.10 decision replay at both levels: the decisions a run reports, forced back,
// reproduce it bit for bit; a forced draft is taken and continues the chain (the next row's
// Markov term follows it).
TEST(ReferenceDspark, DecisionReplay) {
  const auto& m = tiny_ds();
  const int64_t V = m.cfg.vocab_size, G = 4;
  const std::vector<int32_t> t = random_tokens(12, 13, V);
  for (Numerics level : {Numerics::kReference, Numerics::kFloat, Numerics::kDemo}) {
    SCOPED_TRACE(numerics_name(level));
    TeacherForcedOptions opt;
    opt.numerics = level;
    opt.dspark_gamma = static_cast<int32_t>(G);
    opt.collect_decisions = true;
    opt.n_threads = 2;
    Result<TeacherForcedOutput> first = teacher_forced_logits(m.cfg, *m.w, t, opt);
    ASSERT_TRUE(first.ok()) << first.message();
    int n_moe = 0, n_draft = 0;
    for (const Decision& d : first->decisions) {
      n_moe += d.dspark && !d.draft;
      n_draft += d.dspark && d.draft;
    }
    EXPECT_EQ(n_moe, 11 * 3 * G);  // anchors x stages x rows
    EXPECT_EQ(n_draft, 11 * G);
    Result<DecisionTable> table = DecisionTable::create(m.cfg, first->decisions);
    ASSERT_TRUE(table.ok()) << table.message();
    opt.forced = &*table;
    Result<TeacherForcedOutput> again = teacher_forced_logits(m.cfg, *m.w, t, opt);
    ASSERT_TRUE(again.ok()) << again.message();
    EXPECT_EQ(again->drafts, first->drafts);
    EXPECT_EQ(0, std::memcmp(again->logits.data(), first->logits.data(), first->logits.size() * sizeof(float)));
    EXPECT_EQ(decisions_to_json(again->decisions), decisions_to_json(first->decisions));
    // Force d_1 of anchor 5 to another token: taken, row 1's λ changes (its Markov row), row 0's not.
    const int32_t forced_tok = (first->drafts[5 * G] + 1) % static_cast<int32_t>(V);
    Result<DecisionTable> one = DecisionTable::create(m.cfg, {Decision{false, false, 0, 0, 5, {forced_tok}, true, true, 0}});
    ASSERT_TRUE(one.ok()) << one.message();
    opt.forced = &*one;
    Result<TeacherForcedOutput> f = teacher_forced_logits(m.cfg, *m.w, t, opt);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->drafts[5 * G], forced_tok);
    const float* l0 = first->logits.data() + 5 * G * V;
    const float* l1 = f->logits.data() + 5 * G * V;
    EXPECT_EQ(0, std::memcmp(l0, l1, V * sizeof(float)));
    EXPECT_NE(0, std::memcmp(l0 + V, l1 + V, V * sizeof(float)));
  }
}

// ---- the engine's drafter ----

TeacherForcedOutput run_level_a(const test::TinyModel& m, const std::vector<int32_t>& t, int gamma, Numerics level) {
  TeacherForcedOptions opt;
  opt.numerics = level;
  opt.dspark_gamma = gamma;
  opt.n_threads = 2;
  Result<TeacherForcedOutput> r = teacher_forced_logits(m.cfg, *m.w, t, opt);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? std::move(*r) : TeacherForcedOutput{};
}

// Engine vs reference, Level A both: the same roundings, other summation orders.
TEST(EngineDspark, MatchesTheReference) {
  struct Case {
    const char* preset;
    int n, gamma;
  };
  for (const Case& k : {Case{"tiny-ds", 30, 5}, Case{"tiny-ds", 20, 7}, Case{"tiny-ds-w80", 200, 5},
                        Case{"tiny2-ds", 40, 2}}) {
    SCOPED_TRACE(fmt::format("{} n {} gamma {}", k.preset, k.n, k.gamma));
    const auto& m = tiny_model(k.preset, TinyQuant::kFp8, 3);
    const int64_t V = m.cfg.vocab_size;
    const std::vector<int32_t> t = random_tokens(k.n, 17, V);
    const TeacherForcedOutput eng = run_level_a(m, t, k.gamma, Numerics::kDemo);
    const TeacherForcedOutput ref = run_level_a(m, t, k.gamma, Numerics::kReference);
    ASSERT_EQ(eng.logits.size(), ref.logits.size());
    const int64_t rows = static_cast<int64_t>(k.n - 1) * k.gamma;
    int same = 0;
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      same += eng.drafts[r] == ref.drafts[r];
      double num = 0, den = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double d = eng.logits[r * V + v] - ref.logits[r * V + v];
        num += d * d;
        den += static_cast<double>(ref.logits[r * V + v]) * ref.logits[r * V + v];
      }
      worst = std::max(worst, std::sqrt(num / den));
    }
    EXPECT_LT(worst, 2e-3);
    EXPECT_GE(same, rows * 98 / 100) << same << " of " << rows;
  }
}

// The engine's drafter replaying the reference's decisions (the stages' experts and the
// drafts) logs exactly those decisions and moves no row further than the free run does.
TEST(EngineDspark, ReplaysTheReferenceDecisions) {
  const auto& m = tiny_model("tiny-ds-w80", TinyQuant::kFp8, 3);
  const int64_t V = m.cfg.vocab_size, G = 5, n = 120;
  const std::vector<int32_t> t = random_tokens(n, 23, V);
  TeacherForcedOptions opt;
  opt.numerics = Numerics::kReference;
  opt.dspark_gamma = static_cast<int32_t>(G);
  opt.collect_decisions = true;
  Result<TeacherForcedOutput> ref = teacher_forced_logits(m.cfg, *m.w, t, opt);
  ASSERT_TRUE(ref.ok()) << ref.message();
  Result<DecisionTable> table = DecisionTable::create(m.cfg, ref->decisions);
  ASSERT_TRUE(table.ok()) << table.message();
  opt.numerics = Numerics::kDemo;
  opt.n_threads = 2;
  opt.forced = &*table;
  Result<TeacherForcedOutput> eng = teacher_forced_logits(m.cfg, *m.w, t, opt);
  ASSERT_TRUE(eng.ok()) << eng.message();
  EXPECT_EQ(eng->drafts, ref->drafts);
  EXPECT_EQ(decisions_to_json(eng->decisions), decisions_to_json(ref->decisions));
  double worst = 0;
  for (int64_t r = 0; r < (n - 1) * G; ++r) {
    double num = 0, den = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double d = eng->logits[r * V + v] - ref->logits[r * V + v];
      num += d * d;
      den += static_cast<double>(ref->logits[r * V + v]) * ref->logits[r * V + v];
    }
    worst = std::max(worst, std::sqrt(num / den));
  }
  EXPECT_LT(worst, 2e-3);
}

// A batch of rounds (anchors before and after the ring wraps, different slots) equals each
// round alone bit for bit; rows past the active ones keep their sentinel; commits and rounds
// allocate nothing; a round whose context is not committed is an error naming the position.
TEST(EngineDspark, BatchOfRoundsEqualsRoundsAloneAndAllocatesNothing) {
  const auto& m = tiny_model("tiny-ds", TinyQuant::kFp8, 3);
  const int64_t V = m.cfg.vocab_size, G = 4, W = m.cfg.sliding_window;
  Limits lim;
  lim.max_batch = 4;
  lim.max_seqs = 4;
  lim.max_rows = 32;
  lim.max_chunk = 32;
  lim.max_decode_rows = 1;
  lim.max_context = 64;
  lim.n_threads = 2;
  auto created = ModelRunner::create(m.cfg, *m.w, lim);
  ASSERT_TRUE(created.ok()) << created.message();
  ModelRunner& r = **created;
  const int64_t F = 3 * m.cfg.hidden_size;
  const int lens[3] = {3, 13, 25};  // anchors 2 (a + 1 < W), 12 and 24 (wrapped)
  std::vector<std::vector<int32_t>> toks;
  std::vector<std::vector<bf16>> feats;
  for (int i = 0; i < 3; ++i) {
    toks.push_back(random_tokens(lens[i] + 1, 30 + i, V));
    feats.emplace_back(static_cast<size_t>(lens[i] * F));
    ASSERT_TRUE(r.start_sequence(i).ok());
    const StepRequest q{i, 0, lens[i], lens[i], toks[i].data()};
    ASSERT_TRUE(r.forward({&q, 1}, nullptr, nullptr, {}, {}, feats[i].data()).ok());
  }
  // Slot 0 in one commit, the others a few rows at a time.
  std::vector<ModelRunner::DsparkCommit> commits = {{0, 0, lens[0], feats[0].data()}};
  ASSERT_TRUE(r.dspark_commit(commits).ok());
  for (int i = 1; i < 3; ++i)
    for (int p = 0; p < lens[i]; p += 5) {
      const ModelRunner::DsparkCommit c{i, p, std::min(5, lens[i] - p), feats[i].data() + p * F};
      ASSERT_TRUE(r.dspark_commit({&c, 1}).ok());
    }
  std::vector<ModelRunner::DsparkRound> rounds;
  for (int i = 0; i < 3; ++i) rounds.push_back({i, lens[i] - 1, toks[i][lens[i]]});
  const float sentinel = -777.0f;
  std::vector<float> together(static_cast<size_t>(4 * G * V), sentinel), alone(static_cast<size_t>(G * V));
  std::vector<int32_t> d_together(static_cast<size_t>(4 * G), -5), d_alone(static_cast<size_t>(G));
  std::vector<ModelRunner::DsparkRound> sampled = rounds;  // drafts drawn (mode rejection)
  for (auto& q : sampled) q.sample = {0.8f, 0.9f, 3};
  {
    test::AllocCounter count;
    ASSERT_TRUE(r.dspark_propose(sampled, G, together.data(), d_together.data()).ok());
    ASSERT_TRUE(r.dspark_propose(rounds, G, together.data(), d_together.data()).ok());
    // Two slots in one commit, as the engine does after a step.
    const ModelRunner::DsparkCommit again[2] = {{1, lens[1] - 1, 1, feats[1].data() + (lens[1] - 1) * F},
                                                {2, lens[2] - 2, 2, feats[2].data() + (lens[2] - 2) * F}};
    ASSERT_TRUE(r.dspark_commit(again).ok());
    EXPECT_EQ(count.allocations(), 0);
  }
  for (int64_t i = 3 * G * V; i < 4 * G * V; ++i) ASSERT_EQ(together[i], sentinel) << i;
  for (int64_t i = 3 * G; i < 4 * G; ++i) ASSERT_EQ(d_together[i], -5);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(r.dspark_propose({&rounds[i], 1}, G, alone.data(), d_alone.data()).ok());
    EXPECT_EQ(0, std::memcmp(alone.data(), together.data() + i * G * V, alone.size() * sizeof(float))) << "slot " << i;
    EXPECT_EQ(std::vector<int32_t>(d_together.begin() + i * G, d_together.begin() + (i + 1) * G), d_alone);
  }
  // Slot 3: positions 0..2 committed, a round at anchor 5 lacks position 3.
  ASSERT_TRUE(r.start_sequence(3).ok());
  const ModelRunner::DsparkCommit few{3, 0, 3, feats[2].data()};
  ASSERT_TRUE(r.dspark_commit({&few, 1}).ok());
  const ModelRunner::DsparkRound early{3, 5, 1};
  const Status st = r.dspark_propose({&early, 1}, G, alone.data(), d_alone.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("position 3"), std::string::npos) << st.message();
  EXPECT_FALSE(r.dspark_propose({&rounds[0], 1}, 65, alone.data(), d_alone.data()).ok());
  EXPECT_LE(W, 8);
}

// A slot reused after a longer sequence (every ring row written, scratch full of its values)
// drafts exactly what a fresh runner drafts: no stale ring row or scratch value is read.
TEST(EngineDspark, ReusedSlotReadsNothingStale) {
  const auto& m = tiny_model("tiny-ds", TinyQuant::kFp8, 3);
  const int64_t V = m.cfg.vocab_size, G = 5, F = 3 * m.cfg.hidden_size;
  Limits lim;
  lim.max_batch = 2;
  lim.max_seqs = 2;
  lim.max_rows = 48;
  lim.max_chunk = 48;
  lim.max_decode_rows = 1;
  lim.max_context = 64;
  lim.n_threads = 2;
  auto round = [&](ModelRunner& r, const std::vector<int32_t>& t, int64_t len, std::vector<float>& lam,
                   std::vector<int32_t>& d) {
    std::vector<bf16> feat(static_cast<size_t>(len * F));
    ASSERT_TRUE(r.start_sequence(0).ok());
    const StepRequest q{0, 0, static_cast<int32_t>(len), len, t.data()};
    ASSERT_TRUE(r.forward({&q, 1}, nullptr, nullptr, {}, {}, feat.data()).ok());
    const ModelRunner::DsparkCommit c{0, 0, static_cast<int32_t>(len), feat.data()};
    ASSERT_TRUE(r.dspark_commit({&c, 1}).ok());
    const ModelRunner::DsparkRound rd{0, len - 1, t[len]};
    lam.assign(static_cast<size_t>(G * V), 0.0f);
    d.assign(static_cast<size_t>(G), -1);
    ASSERT_TRUE(r.dspark_propose({&rd, 1}, G, lam.data(), d.data()).ok());
    r.end_sequence(0);
  };
  const std::vector<int32_t> longer = random_tokens(41, 5, V), shorter = random_tokens(4, 6, V);
  auto fresh = ModelRunner::create(m.cfg, *m.w, lim);
  auto reused = ModelRunner::create(m.cfg, *m.w, lim);
  ASSERT_TRUE(fresh.ok() && reused.ok());
  std::vector<float> lam_fresh, lam_reused;
  std::vector<int32_t> d_fresh, d_reused;
  round(**reused, longer, 40, lam_reused, d_reused);  // anchor 39: the ring wrapped several times
  for (int64_t len : {1, 3}) {
    round(**fresh, shorter, len, lam_fresh, d_fresh);
    round(**reused, shorter, len, lam_reused, d_reused);
    EXPECT_EQ(0, std::memcmp(lam_fresh.data(), lam_reused.data(), lam_fresh.size() * sizeof(float))) << len;
    EXPECT_EQ(d_fresh, d_reused);
  }
}

// `dsv4 logits --dspark`'s refusals (teacher_forced_logits), each naming the problem.
TEST(EngineDspark, TeacherForcedRefusals) {
  const auto& m = tiny_ds();
  const std::vector<int32_t> t = {5, 6, 7};
  auto refused = [&](TeacherForcedOptions opt, const ModelConfig& cfg, const Weights& w, const char* part) {
    Result<TeacherForcedOutput> r = teacher_forced_logits(cfg, w, t, opt);
    ASSERT_FALSE(r.ok()) << part;
    EXPECT_NE(r.message().find(part), std::string::npos) << r.message();
  };
  TeacherForcedOptions opt;
  opt.dspark_gamma = 5;
  opt.mtp = true;
  refused(opt, m.cfg, *m.w, "mtp requested, but the checkpoint's drafter is DSpark");
  opt.mtp = false;
  opt.dspark_gamma = kMaxDsparkGamma + 1;
  refused(opt, m.cfg, *m.w, "gamma = 65");
  opt.dspark_gamma = 5;
  const auto& plain = tiny_model("tiny", TinyQuant::kFp8, 3);
  refused(opt, plain.cfg, *plain.w, "no DSpark drafter");
  Result<TeacherForcedOutput> one = teacher_forced_logits(m.cfg, *m.w, {5}, opt);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.message().find("at least 2 tokens"), std::string::npos) << one.message();
}

TEST(FloatDspark, InputErrorsNameTheProblem) {
  const auto& m = tiny_ds();
  auto r = float_dspark(m.cfg, *m.w, {5}, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("at least 2 tokens"), std::string::npos) << r.message();
  r = float_dspark(m.cfg, *m.w, {5, 6}, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("gamma = 0"), std::string::npos) << r.message();
  r = float_dspark(m.cfg, *m.w, {5, 512}, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("tokens[1] = 512"), std::string::npos) << r.message();
  const auto& plain = tiny_model("tiny", TinyQuant::kFp8, 3);
  r = float_dspark(plain.cfg, *plain.w, {5, 6}, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("no DSpark drafter"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace dsv4
