// KV compressor (main and indexer instances, overlap and non-overlap):
// streaming form == prompt form (entries and state) for every prompt length and
// chunking, the first window and the ratio-4 boundary against the spec formula
// in double precision, several sequences in one call, engine vs reference at
// every T with poisoned scratch and sentinel rows, both presets' dims.
#include "kernels/compressor/compressor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/hadamard/hadamard.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"
#include "support/poison.h"
#include "support/tolerance.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;
using test::RowBuffer;

struct Config {
  const char* name;
  CompressorKind kind;
  int hidden, dim, rope_dim, ratio;
};
// tiny (§14.1): D 128, head_dim 80 / rope 16, index_head_dim 32, ratios 4 and 8.
// tiny2 (§14.1a): D 256, head_dim 192 / rope 64, index_head_dim 128, ratios 4 and 128.
constexpr Config kTinyMain4{"tiny.main.r4", CompressorKind::kMain, 128, 80, 16, 4};
constexpr Config kTinyMain8{"tiny.main.r8", CompressorKind::kMain, 128, 80, 16, 8};
constexpr Config kTinyIndex4{"tiny.index.r4", CompressorKind::kIndexer, 128, 32, 16, 4};
constexpr Config kTiny2Main4{"tiny2.main.r4", CompressorKind::kMain, 256, 192, 64, 4};
constexpr Config kTiny2Main128{"tiny2.main.r128", CompressorKind::kMain, 256, 192, 64, 128};
constexpr Config kTiny2Index4{"tiny2.index.r4", CompressorKind::kIndexer, 256, 128, 64, 4};
constexpr Config kConfigs[] = {kTinyMain4,  kTinyMain8,    kTinyIndex4,
                               kTiny2Main4, kTiny2Main128, kTiny2Index4};

std::vector<bf16> normal_bf16(int64_t n, std::mt19937& rng, float mean, float sigma) {
  std::normal_distribution<float> d(mean, sigma);
  std::vector<bf16> v(n);
  for (auto& x : v) x = bf16::from_float(d(rng));
  return v;
}

// Random weights per model.md §14.2 (ape larger than suggested so the position term shows).
struct Model {
  CompressorParams p;
  std::vector<bf16> wkv, wgate, norm;
  std::vector<float> ape, inv;
  CompressorWeights w;

  Model(const Config& cfg, uint32_t seed) {
    p.kind = cfg.kind;
    p.hidden = cfg.hidden;
    p.dim = cfg.dim;
    p.rope_dim = cfg.rope_dim;
    p.ratio = cfg.ratio;
    p.eps = 1e-6f;
    std::mt19937 rng(seed);
    const int kc = p.proj_dim();
    const float sd = 1.0f / std::sqrt(static_cast<float>(p.hidden));
    wkv = normal_bf16(static_cast<int64_t>(kc) * p.hidden, rng, 0.0f, sd);
    wgate = normal_bf16(static_cast<int64_t>(kc) * p.hidden, rng, 0.0f, sd);
    norm = normal_bf16(p.dim, rng, 1.0f, 0.1f);
    std::normal_distribution<float> da(0.0f, 0.5f);
    ape.resize(static_cast<size_t>(p.ratio) * kc);
    for (auto& a : ape) a = da(rng);
    RopeParams rp;
    rp.rope_dim = p.rope_dim;
    rp.theta = 160000.0;
    rp.yarn = true;
    inv = rope_inv_freq(rp);
    w.wkv = LinearWeight{WeightFormat::kBF16, kc, p.hidden, wkv.data(), nullptr};
    w.wgate = LinearWeight{WeightFormat::kBF16, kc, p.hidden, wgate.data(), nullptr};
    w.ape = ape.data();
    w.norm = norm.data();
    w.inv_freq = inv.data();
  }
  Model(const Model&) = delete;
};

// States of n_seq sequences, reset.
struct States {
  int64_t n;
  std::vector<float> kv, score;
  std::vector<CompressorState> views;
  States(const CompressorParams& p, int n_seq)
      : n(compressor_state_floats(p)), kv(n * n_seq), score(n * n_seq), views(n_seq) {
    for (int s = 0; s < n_seq; ++s) {
      views[s] = CompressorState{kv.data() + s * n, score.data() + s * n};
      compressor_state_reset(p, views[s]);
    }
  }
  States(const States&) = delete;
  void copy_from(const States& o) {
    std::copy(o.kv.begin(), o.kv.end(), kv.begin());
    std::copy(o.score.begin(), o.score.end(), score.begin());
  }
};

template <class T>
::testing::AssertionResult same_bits(const T* a, const T* b, int64_t n, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(a + i, b + i, sizeof(T)) != 0)
      return ::testing::AssertionFailure() << what << ": element " << i << " differs";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_state(CompressorState a, CompressorState b, int64_t n) {
  auto r = same_bits(a.kv, b.kv, n, "state kv");
  return r ? same_bits(a.score, b.score, n, "state score") : r;
}

::testing::AssertionResult close_state(CompressorState got, CompressorState want, int64_t n) {
  auto r = test::all_close(got.kv, want.kv, n, test::kF32Sum, "state kv");
  return r ? test::all_close(got.score, want.score, n, test::kF32Sum, "state score") : r;
}

// The engine's three phases (or the prompt form's), each its own ThreadPool::run.
struct Engine {
  ThreadPool& pool;
  const Model& m;
  std::vector<float> scratch;
  Engine(ThreadPool& tp, const Model& model, int64_t capacity)
      : pool(tp), m(model), scratch(compressor_scratch_floats(model.p, capacity)) {}

  int64_t stream(const bf16* x, const CompressorStep& step, const CompressorState* states,
                 CompressorEmit* emits, bf16* entries) {
    std::fill(scratch.begin(), scratch.end(), std::numeric_limits<float>::quiet_NaN());
    const CompressorParams& p = m.p;
    const CompressorWeights& w = m.w;
    float* s = scratch.data();
    pool.run([&](int tid, int nt) { compressor_project(p, w, x, step.T, s, tid, nt); });
    pool.run(
        [&](int tid, int nt) { compressor_emit(p, w, step, states, s, emits, entries, tid, nt); });
    pool.run([&](int tid, int nt) { compressor_commit(p, w, step, states, s, tid, nt); });
    return compressor_count_emits(step.pos, step.T, p.ratio);
  }
  void prompt(const bf16* x, int64_t n, CompressorState state, bf16* entries) {
    std::fill(scratch.begin(), scratch.end(), std::numeric_limits<float>::quiet_NaN());
    const CompressorParams& p = m.p;
    const CompressorWeights& w = m.w;
    float* s = scratch.data();
    pool.run([&](int tid, int nt) { compressor_project(p, w, x, n, s, tid, nt); });
    pool.run([&](int tid, int nt) { compressor_prompt_emit(p, w, n, s, entries, tid, nt); });
    pool.run([&](int tid, int nt) { compressor_prompt_commit(p, w, n, s, state, tid, nt); });
  }
};

// Positions [p0, p0 + n) of sequence 0 as one step.
struct SeqRun {
  std::vector<int32_t> seq;
  std::vector<int64_t> pos;
  SeqRun(int64_t p0, int64_t n) : seq(n, 0), pos(n) {
    for (int64_t k = 0; k < n; ++k) pos[k] = p0 + k;
  }
  CompressorStep step() const { return {static_cast<int64_t>(pos.size()), seq.data(), pos.data()}; }
};

// ---------------------------------------------------------------------------
// Spec formula in double precision (model.md §7.2–§7.3), independent of the
// kernels' code: the pooled vector of entry i from the token rows x [n, D].

std::vector<double> projection(const std::vector<bf16>& wt, const float* ape, const Model& m,
                               const bf16* x) {
  const int kc = m.p.proj_dim(), D = m.p.hidden;
  std::vector<double> y(kc);
  for (int o = 0; o < kc; ++o) {
    double s = 0;
    for (int k = 0; k < D; ++k)
      s += static_cast<double>(wt[o * D + k].to_float()) * x[k].to_float();
    y[o] = s + (ape ? ape[o] : 0.0);
  }
  return y;
}

enum class Variant { kSpec, kPrevAsZeroLogit, kOwnBlockFirstHalf };

std::vector<double> spec_pooled(const Model& m, const bf16* x, int64_t i,
                                Variant v = Variant::kSpec) {
  const int c = m.p.dim, r = m.p.ratio, kc = m.p.proj_dim();
  struct Cand {
    int64_t q;
    int off;
  };
  std::vector<Cand> cands;
  const bool overlap = m.p.overlap();
  if (overlap && i > 0)
    for (int k = 0; k < r; ++k) cands.push_back({(i - 1) * r + k, 0});
  const int own_off = overlap && v != Variant::kOwnBlockFirstHalf ? c : 0;
  for (int k = 0; k < r; ++k) cands.push_back({i * r + k, own_off});
  std::vector<std::vector<double>> A, B;
  for (const Cand& cd : cands) {
    A.push_back(projection(m.wkv, nullptr, m, x + cd.q * m.p.hidden));
    B.push_back(projection(m.wgate, m.ape.data() + (cd.q % r) * kc, m, x + cd.q * m.p.hidden));
  }
  std::vector<double> P(c);
  for (int ch = 0; ch < c; ++ch) {
    double mu = -INFINITY, S = 0, acc = 0;
    const bool zero_prev =
        overlap && i == 0 && v == Variant::kPrevAsZeroLogit;  // r extra (A 0, B 0)
    if (zero_prev) mu = 0;
    for (size_t j = 0; j < cands.size(); ++j) mu = std::max(mu, B[j][cands[j].off + ch]);
    if (zero_prev) S += r * std::exp(-mu);
    for (size_t j = 0; j < cands.size(); ++j) S += std::exp(B[j][cands[j].off + ch] - mu);
    for (size_t j = 0; j < cands.size(); ++j)
      acc += A[j][cands[j].off + ch] * std::exp(B[j][cands[j].off + ch] - mu) / S;
    P[ch] = acc;
  }
  return P;
}

// §7.3 post-processing of a pooled vector with the other operators' references.
std::vector<bf16> spec_entry(const Model& m, const std::vector<double>& P, int64_t i) {
  const int c = m.p.dim;
  std::vector<bf16> x(c), e(c);
  for (int ch = 0; ch < c; ++ch) x[ch] = bf16::from_float(static_cast<float>(P[ch]));
  rmsnorm_ref(x.data(), m.norm.data(), e.data(), 1, c, m.p.eps);
  const int64_t pos = i * m.p.ratio;
  rope_ref(m.inv.data(), m.p.rope_dim, e.data(), 1, 1, c, &pos, false);
  if (m.p.kind == CompressorKind::kMain) {
    fp8sim_row(e.data(), c - m.p.rope_dim);
  } else {
    hadamard_ref(e.data(), e.data(), 1, 1, c);
    fp4sim_row(e.data(), c);
  }
  return e;
}

// ---------------------------------------------------------------------------

TEST(Compressor, CheckParams) {
  for (const Config& cfg : kConfigs) {
    Model m(cfg, 1);
    EXPECT_TRUE(compressor_check_params(m.p).ok())
        << cfg.name << ": " << compressor_check_params(m.p).message();
  }
  CompressorParams bad{CompressorKind::kMain, 128, 96, 16, 4, 1e-6f};  // nope 80: not 64-blocks
  EXPECT_FALSE(compressor_check_params(bad).ok());
  EXPECT_NE(compressor_check_params(bad).message().find("head_dim 96"), std::string::npos);
  bad = CompressorParams{CompressorKind::kIndexer, 128, 96, 16, 4, 1e-6f};  // not a power of two
  EXPECT_FALSE(compressor_check_params(bad).ok());
  bad = CompressorParams{CompressorKind::kMain, 128, 80, 16, 0, 1e-6f};
  EXPECT_FALSE(compressor_check_params(bad).ok());
  bad = CompressorParams{CompressorKind::kMain, 128, 80, 15, 4, 1e-6f};
  EXPECT_FALSE(compressor_check_params(bad).ok());
  bad = CompressorParams{CompressorKind::kMain, 128, 80, 16, 4, 1e-6f, 7};  // ring < κr = 8
  EXPECT_NE(compressor_check_params(bad).message().find("state ring of 7 rows"), std::string::npos);
  bad.ring_rows = 15;  // κr − 1 + S_MAX at S_MAX = 8
  EXPECT_TRUE(compressor_check_params(bad).ok());
  EXPECT_EQ(compressor_state_floats(bad), 15 * 160);
}

TEST(Compressor, CheckStep) {
  const int32_t seq_ok[] = {2, 2, 0, 1, 1, 1};
  const int64_t pos_ok[] = {7, 8, 0, 30, 31, 32};
  EXPECT_TRUE(compressor_check_step({6, seq_ok, pos_ok}, 3).ok());
  EXPECT_FALSE(compressor_check_step({6, seq_ok, pos_ok}, 2).ok());  // seq 2 out of range
  const int32_t seq_split[] = {0, 1, 0};
  const int64_t pos_split[] = {0, 0, 1};
  EXPECT_FALSE(compressor_check_step({3, seq_split, pos_split}, 2).ok());  // two runs of seq 0
  const int32_t seq_gap[] = {0, 0};
  const int64_t pos_gap[] = {3, 5};
  EXPECT_FALSE(compressor_check_step({2, seq_gap, pos_gap}, 1).ok());  // positions not contiguous
  const int64_t pos_neg[] = {-1, 0};
  EXPECT_FALSE(compressor_check_step({2, seq_gap, pos_neg}, 1).ok());
  EXPECT_TRUE(compressor_check_step({0, nullptr, nullptr}, 0).ok());
  EXPECT_EQ(compressor_count_emits(pos_ok, 6, 4), 2);   // 7, 31
  EXPECT_EQ(compressor_count_emits(pos_ok, 6, 16), 1);  // 31
  EXPECT_EQ(compressor_count_emits(pos_ok, 6, 3), 2);   // 8, 32
}

TEST(Compressor, StateReset) {
  Model m(kTinyMain4, 1);
  States st(m.p, 1);
  EXPECT_EQ(st.n, 8 * 160);
  for (int64_t k = 0; k < st.n; ++k) {
    ASSERT_EQ(st.kv[k], 0.0f);
    ASSERT_EQ(st.score[k], -std::numeric_limits<float>::infinity());
  }
}

TEST(Compressor, EmptyStepAndEmptyPrompt) {
  ThreadPool pool(2);
  Model m(kTinyMain4, 1);
  States st(m.p, 1), reset(m.p, 1);
  std::mt19937 rng(2);
  const auto x = normal_bf16(6 * m.p.hidden, rng, 0.0f, 1.0f);
  Engine eng(pool, m, 6);
  std::vector<bf16> sink(m.p.dim);
  eng.prompt(x.data(), 6, st.views[0], sink.data());
  States before(m.p, 1);
  before.copy_from(st);
  RowBuffer<bf16> entries(1, m.p.dim);
  entries.poison(0);
  CompressorEmit emit{test::kSentinelI32, test::kSentinelI32, test::kSentinelI32};
  EXPECT_EQ(eng.stream(x.data(), CompressorStep{0, nullptr, nullptr}, st.views.data(), &emit,
                       entries.data()),
            0);
  EXPECT_TRUE(entries.sentinel_intact(0));
  EXPECT_EQ(emit.row, test::kSentinelI32);
  EXPECT_TRUE(same_state(st.views[0], before.views[0], st.n));
  eng.prompt(x.data(), 0, st.views[0], entries.data());  // an empty prompt leaves a reset state
  EXPECT_TRUE(entries.sentinel_intact(0));
  EXPECT_TRUE(same_state(st.views[0], reset.views[0], st.n));
}

// Entry comparison against the double-precision spec formula (kQuantized: a pooled
// value on a bf16 rounding boundary may flip and move an fp8/fp4 code).
void expect_spec_entries(const Model& m, const bf16* x, const bf16* got, int64_t n_entries,
                         const char* what) {
  for (int64_t i = 0; i < n_entries; ++i) {
    const auto want = spec_entry(m, spec_pooled(m, x, i), i);
    EXPECT_TRUE(test::all_close(got + i * m.p.dim, want.data(), m.p.dim, test::kQuantized, what))
        << "entry " << i;
  }
}

TEST(Compressor, FirstWindowOverlapUsesOwnBlockOnly) {
  ThreadPool pool(2);
  for (const Config& cfg : {kTinyMain4, kTinyIndex4, kTiny2Main4, kTiny2Index4}) {
    Model m(cfg, 3);
    std::mt19937 rng(5);
    const auto x = normal_bf16(4 * m.p.hidden, rng, 0.0f, 1.0f);
    const int c = m.p.dim;
    std::vector<bf16> ref(c), eng(c), prompt(c);
    States s_ref(m.p, 1), s_eng(m.p, 1), s_prompt(m.p, 1);
    CompressorEmit emits[4];
    for (int64_t q = 0; q < 4; ++q) {  // token by token: only position 3 emits
      SeqRun one(q, 1);
      EXPECT_EQ(compressor_ref(m.p, m.w, x.data() + q * m.p.hidden, one.step(), s_ref.views.data(),
                               emits, ref.data()),
                q == 3);
    }
    EXPECT_EQ(emits[0].row, 0);
    EXPECT_EQ(emits[0].index, 0);
    Engine eng_run(pool, m, 4);
    SeqRun all(0, 4);
    EXPECT_EQ(eng_run.stream(x.data(), all.step(), s_eng.views.data(), emits, eng.data()), 1);
    EXPECT_EQ(emits[0].row, 3);
    EXPECT_EQ(emits[0].seq, 0);
    EXPECT_EQ(emits[0].index, 0);
    eng_run.prompt(x.data(), 4, s_prompt.views[0], prompt.data());
    EXPECT_TRUE(same_bits(eng.data(), prompt.data(), c, "engine stream vs prompt"));
    expect_spec_entries(m, x.data(), ref.data(), 1, cfg.name);
    expect_spec_entries(m, x.data(), eng.data(), 1, cfg.name);
    // The test tells the spec from a previous block entered as (A 0, B 0) or from the wrong half.
    for (Variant v : {Variant::kPrevAsZeroLogit, Variant::kOwnBlockFirstHalf}) {
      const auto wrong = spec_entry(m, spec_pooled(m, x.data(), 0, v), 0);
      EXPECT_FALSE(test::all_close(eng.data(), wrong.data(), c, test::kQuantized)) << cfg.name;
    }
  }
}

TEST(Compressor, OverlapBoundaryAtRatio4) {
  // Entry 1 = block 0 first half + block 1 second half; the previous block comes from
  // the state, from this call, or half and half.
  ThreadPool pool(2);
  for (const Config& cfg : {kTinyMain4, kTinyIndex4, kTiny2Main4, kTiny2Index4}) {
    Model m(cfg, 7);
    std::mt19937 rng(9);
    const int64_t n = 12;
    const auto x = normal_bf16(n * m.p.hidden, rng, 0.0f, 1.0f);
    const int c = m.p.dim;
    std::vector<bf16> whole(3 * c);
    CompressorEmit emits[12];
    States s_whole(m.p, 1);
    Engine eng(pool, m, n);
    SeqRun all(0, n);
    ASSERT_EQ(eng.stream(x.data(), all.step(), s_whole.views.data(), emits, whole.data()), 3);
    expect_spec_entries(m, x.data(), whole.data(), 3, cfg.name);
    const auto wrong = spec_entry(m, spec_pooled(m, x.data(), 1, Variant::kOwnBlockFirstHalf), 1);
    EXPECT_FALSE(test::all_close(whole.data() + c, wrong.data(), c, test::kQuantized)) << cfg.name;
    for (int64_t split : {4, 6, 7, 8}) {  // first call positions [0, split), second [split, n)
      States s(m.p, 1);
      std::vector<bf16> got(3 * c);
      SeqRun a(0, split), b(split, n - split);
      const int64_t n0 = eng.stream(x.data(), a.step(), s.views.data(), emits, got.data());
      eng.stream(x.data() + split * m.p.hidden, b.step(), s.views.data(), emits,
                 got.data() + n0 * c);
      EXPECT_TRUE(same_bits(got.data(), whole.data(), 3 * c, "split call"))
          << cfg.name << " split " << split;
      EXPECT_TRUE(same_state(s.views[0], s_whole.views[0], s.n)) << cfg.name << " split " << split;
    }
  }
}

TEST(Compressor, NonOverlapRatio8And128) {
  ThreadPool pool(2);
  for (const Config& cfg : {kTinyMain8, kTiny2Main128}) {
    Model m(cfg, 11);
    std::mt19937 rng(13);
    const int r = m.p.ratio;
    const int64_t n = 2 * r + 3;
    const auto x = normal_bf16(n * m.p.hidden, rng, 0.0f, 1.0f);
    std::vector<bf16> got(2 * m.p.dim), ref(2 * m.p.dim);
    std::vector<CompressorEmit> emits(n);
    States s(m.p, 1), s_ref(m.p, 1);
    Engine eng(pool, m, n);
    SeqRun all(0, n);
    ASSERT_EQ(eng.stream(x.data(), all.step(), s.views.data(), emits.data(), got.data()), 2);
    EXPECT_EQ(emits[0].row, r - 1);
    EXPECT_EQ(emits[1].row, 2 * r - 1);
    EXPECT_EQ(emits[1].index, 1);
    ASSERT_EQ(compressor_ref(m.p, m.w, x.data(), all.step(), s_ref.views.data(), emits.data(),
                             ref.data()),
              2);
    expect_spec_entries(m, x.data(), got.data(), 2, cfg.name);
    expect_spec_entries(m, x.data(), ref.data(), 2, cfg.name);
  }
}

// Streaming == prompt form: entries and final state, prompt lengths 1..41 (and around
// the ratio-128 boundaries), token-by-token and chunked (1, 3, 7, 41) streaming.
TEST(Compressor, StreamingEqualsPromptForm) {
  ThreadPool pool(2);
  for (const Config& cfg : kConfigs) {
    Model m(cfg, 17);
    std::vector<int64_t> lengths;
    for (int64_t n = 1; n <= kCapacity; ++n) lengths.push_back(n);
    if (m.p.ratio > kCapacity)
      for (int64_t n : {127, 128, 129, 256, 257}) lengths.push_back(n);
    const int64_t N = lengths.back();
    const int c = m.p.dim, r = m.p.ratio;
    const int64_t nb_max = N / r;
    std::mt19937 rng(19);
    const auto x = normal_bf16(N * m.p.hidden, rng, 0.0f, 1.0f);
    std::vector<CompressorEmit> emits(N);

    // Engine prompt form of the longest length; every other length's entries are its prefix.
    Engine eng(pool, m, N);
    States s_full(m.p, 1);
    std::vector<bf16> full(std::max<int64_t>(nb_max, 1) * c);
    eng.prompt(x.data(), N, s_full.views[0], full.data());
    std::vector<std::vector<float>> eng_kv(lengths.size()), eng_score(lengths.size());

    // Reference: one stream token by token, compared with the reference prompt form of
    // every length (bit-identical: same projections, same candidate order); the engine
    // prompt form of every length against both.
    States s_ref(m.p, 1);
    std::vector<bf16> ref_entries(std::max<int64_t>(nb_max, 1) * c);
    int64_t n_ref = 0;
    size_t li = 0;
    for (int64_t q = 0; q < N; ++q) {
      SeqRun one(q, 1);
      n_ref += compressor_ref(m.p, m.w, x.data() + q * m.p.hidden, one.step(), s_ref.views.data(),
                              emits.data(), ref_entries.data() + n_ref * c);
      if (q + 1 != lengths[li]) continue;
      const int64_t n = lengths[li];
      ASSERT_EQ(n_ref, n / r);
      States s_prompt(m.p, 1);
      std::vector<bf16> prompt_entries(std::max<int64_t>(n / r, 1) * c);
      compressor_prompt_ref(m.p, m.w, x.data(), n, s_prompt.views[0], prompt_entries.data());
      ASSERT_TRUE(
          same_bits(prompt_entries.data(), ref_entries.data(), (n / r) * c, "ref prompt vs stream"))
          << cfg.name << " n=" << n;
      ASSERT_TRUE(same_state(s_prompt.views[0], s_ref.views[0], s_ref.n)) << cfg.name << " n=" << n;
      // Engine prompt form (on a poisoned state: it defines every row).
      States s_eng(m.p, 1);
      std::fill(s_eng.kv.begin(), s_eng.kv.end(), std::numeric_limits<float>::quiet_NaN());
      std::fill(s_eng.score.begin(), s_eng.score.end(), std::numeric_limits<float>::quiet_NaN());
      RowBuffer<bf16> eng_entries(nb_max + 1, c);
      eng_entries.poison(n / r);
      eng.prompt(x.data(), n, s_eng.views[0], eng_entries.data());
      ASSERT_TRUE(eng_entries.sentinel_intact(n / r)) << cfg.name << " n=" << n;
      ASSERT_TRUE(same_bits(eng_entries.data(), full.data(), (n / r) * c, "prompt prefix"))
          << cfg.name << " n=" << n;
      ASSERT_TRUE(test::all_close(eng_entries.data(), ref_entries.data(), (n / r) * c,
                                  test::kQuantized, cfg.name))
          << "n=" << n;
      ASSERT_TRUE(close_state(s_eng.views[0], s_ref.views[0], s_ref.n)) << cfg.name << " n=" << n;
      eng_kv[li] = s_eng.kv;
      eng_score[li] = s_eng.score;
      ++li;
    }

    // Engine: chunked streams vs the engine prompt form, bit-identical.
    for (int64_t chunk : {1, 3, 7, 41}) {
      States s(m.p, 1);
      std::vector<bf16> got(std::max<int64_t>(nb_max, 1) * c);
      int64_t n_got = 0;
      for (int64_t p0 = 0; p0 < N; p0 += chunk) {
        const int64_t n = std::min(chunk, N - p0);
        SeqRun run(p0, n);
        const int64_t k = eng.stream(x.data() + p0 * m.p.hidden, run.step(), s.views.data(),
                                     emits.data(), got.data() + n_got * c);
        for (int64_t e = 0; e < k; ++e) {  // emitted in position order
          ASSERT_EQ(emits[e].index, n_got + e);
          ASSERT_EQ(run.pos[emits[e].row], (n_got + e) * r + r - 1);
        }
        n_got += k;
        ASSERT_TRUE(same_bits(got.data(), full.data(), n_got * c, "stream vs prompt"))
            << cfg.name << " chunk " << chunk;
        const auto it = std::lower_bound(lengths.begin(), lengths.end(), p0 + n);
        if (it != lengths.end() && *it == p0 + n) {
          const size_t k_len = it - lengths.begin();
          const CompressorState want{eng_kv[k_len].data(), eng_score[k_len].data()};
          ASSERT_TRUE(same_state(s.views[0], want, s.n))
              << cfg.name << " chunk " << chunk << " n=" << p0 + n;
        }
      }
      ASSERT_EQ(n_got, nb_max);
      ASSERT_TRUE(same_state(s.views[0], s_full.views[0], s.n)) << cfg.name << " chunk " << chunk;
    }
  }
}

// Several sequences interleaved in one call at different positions == each one alone.
TEST(Compressor, SequencesInterleavedInOneCall) {
  ThreadPool pool(2);
  for (const Config& cfg : kConfigs) {
    Model m(cfg, 23);
    const int c = m.p.dim, r = m.p.ratio;
    const int n_seq = 4;
    const int64_t hist[n_seq] = {r > 8 ? r - 2 : 13, 5, 0,
                                 r > 8 ? 2 * r - 9 : 29};  // already streamed
    const int64_t rows[n_seq] = {3, 1, 7, 11};             // rows in the shared call
    const int order[n_seq] = {2, 0, 3, 1};                 // order of the runs in it
    int64_t max_len = 0;
    for (int s = 0; s < n_seq; ++s) max_len = std::max(max_len, hist[s] + rows[s]);
    std::mt19937 rng(29);
    std::vector<std::vector<bf16>> xs;
    for (int s = 0; s < n_seq; ++s)
      xs.push_back(normal_bf16(max_len * m.p.hidden, rng, 0.0f, 1.0f));
    Engine eng(pool, m, max_len);
    std::vector<CompressorEmit> emits(max_len);
    States start(m.p, n_seq);
    for (int s = 0; s < n_seq; ++s) {
      std::vector<bf16> sink(std::max<int64_t>(hist[s] / r, 1) * c);
      if (hist[s] > 0) eng.prompt(xs[s].data(), hist[s], start.views[s], sink.data());
    }
    // Each sequence alone.
    States alone(m.p, n_seq);
    alone.copy_from(start);
    std::vector<std::vector<bf16>> alone_entries(n_seq);
    for (int s = 0; s < n_seq; ++s) {
      SeqRun run(hist[s], rows[s]);
      std::vector<int32_t> seq(rows[s], s);
      alone_entries[s].resize((rows[s] + 1) * c);
      eng.stream(xs[s].data() + hist[s] * m.p.hidden, {rows[s], seq.data(), run.pos.data()},
                 alone.views.data(), emits.data(), alone_entries[s].data());
    }
    // All in one call.
    std::vector<int32_t> seq;
    std::vector<int64_t> pos;
    std::vector<bf16> x;
    for (int s : order)
      for (int64_t k = 0; k < rows[s]; ++k) {
        seq.push_back(s);
        pos.push_back(hist[s] + k);
        const bf16* row = xs[s].data() + (hist[s] + k) * m.p.hidden;
        x.insert(x.end(), row, row + m.p.hidden);
      }
    const CompressorStep step{static_cast<int64_t>(seq.size()), seq.data(), pos.data()};
    ASSERT_TRUE(compressor_check_step(step, n_seq).ok());
    States mixed(m.p, n_seq), mixed_ref(m.p, n_seq);
    mixed.copy_from(start);
    mixed_ref.copy_from(start);
    RowBuffer<bf16> entries(step.T, c), entries_ref(step.T, c);
    const int64_t n_emit = compressor_count_emits(pos.data(), step.T, r);
    entries.poison(n_emit);
    std::vector<CompressorEmit> emits_ref(step.T);
    ASSERT_EQ(eng.stream(x.data(), step, mixed.views.data(), emits.data(), entries.data()), n_emit);
    ASSERT_EQ(compressor_ref(m.p, m.w, x.data(), step, mixed_ref.views.data(), emits_ref.data(),
                             entries_ref.data()),
              n_emit);
    EXPECT_TRUE(entries.sentinel_intact(n_emit));
    ASSERT_GE(n_emit, 2) << cfg.name;
    int64_t next[n_seq] = {0, 0, 0, 0};
    for (int64_t k = 0; k < n_emit; ++k) {
      const CompressorEmit e = emits[k];
      EXPECT_EQ(e.row, emits_ref[k].row);
      EXPECT_EQ(e.seq, emits_ref[k].seq);
      EXPECT_EQ(e.index, emits_ref[k].index);
      if (k > 0) {
        EXPECT_LT(emits[k - 1].row, e.row);
      }
      EXPECT_EQ(seq[e.row], e.seq);
      EXPECT_EQ(e.index, pos[e.row] / r);
      EXPECT_EQ((pos[e.row] + 1) % r, 0);
      EXPECT_TRUE(same_bits(entries.row(k), alone_entries[e.seq].data() + next[e.seq]++ * c, c,
                            "mixed vs alone"))
          << cfg.name << " seq " << e.seq << " entry " << e.index;
      EXPECT_TRUE(
          test::all_close(entries.row(k), entries_ref.row(k), c, test::kQuantized, cfg.name));
    }
    for (int s = 0; s < n_seq; ++s) {
      EXPECT_TRUE(same_state(mixed.views[s], alone.views[s], mixed.n)) << cfg.name << " seq " << s;
      EXPECT_TRUE(close_state(mixed.views[s], mixed_ref.views[s], mixed.n))
          << cfg.name << " seq " << s;
    }
  }
}

// Every T in [1, kCapacity], nthreads 1 and 2: rows of up to four sequences with
// histories, engine vs reference; scratch NaN, entry/emit slots >= n_emit sentinel,
// an uninvolved sequence's state untouched; results independent of nthreads.
TEST(Compressor, EngineMatchesRefEveryT) {
  ThreadPool pool1(1), pool2(2);
  for (const Config& cfg : kConfigs) {
    Model m(cfg, 31);
    const int c = m.p.dim, r = m.p.ratio;
    const int n_seq = 5;  // sequence 4 never takes part
    const int64_t hist[n_seq] = {0, 3, r + 1, 2 * r + 2, 5};
    const int64_t max_pos = 2 * r + 2 + kCapacity;
    std::mt19937 rng(37);
    const auto pool_x = normal_bf16((max_pos + 1) * m.p.hidden, rng, 0.0f, 1.0f);
    States start(m.p, n_seq);
    {
      Engine eng(pool2, m, max_pos);
      for (int s = 0; s < n_seq; ++s) {
        std::vector<bf16> sink(std::max<int64_t>(hist[s] / r, 1) * c);
        if (hist[s] > 0)
          eng.prompt(pool_x.data() + s * m.p.hidden, hist[s], start.views[s], sink.data());
      }
    }
    Engine eng1(pool1, m, kCapacity), eng2(pool2, m, kCapacity);
    for (int64_t T = 1; T <= kCapacity; ++T) {
      // Split T rows over sequences 0..3 (some may get none), runs in a rotated order.
      std::mt19937 srng(static_cast<uint32_t>(T));
      int64_t len[4] = {0, 0, 0, 0};
      for (int64_t k = 0; k < T; ++k) ++len[std::uniform_int_distribution<int>(0, 3)(srng)];
      std::vector<int32_t> seq;
      std::vector<int64_t> pos;
      std::vector<bf16> x;
      for (int k = 0; k < 4; ++k) {
        const int s = (k + static_cast<int>(T)) % 4;
        for (int64_t j = 0; j < len[s]; ++j) {
          seq.push_back(s);
          pos.push_back(hist[s] + j);
          const bf16* row = pool_x.data() + (s + hist[s] + j) * m.p.hidden;  // shifted per sequence
          x.insert(x.end(), row, row + m.p.hidden);
        }
      }
      const CompressorStep step{T, seq.data(), pos.data()};
      ASSERT_TRUE(compressor_check_step(step, n_seq).ok());
      const int64_t n_emit = compressor_count_emits(pos.data(), T, r);
      States s_ref(m.p, n_seq);
      s_ref.copy_from(start);
      RowBuffer<bf16> e_ref(kCapacity, c);
      std::vector<CompressorEmit> em_ref(kCapacity);
      ASSERT_EQ(
          compressor_ref(m.p, m.w, x.data(), step, s_ref.views.data(), em_ref.data(), e_ref.data()),
          n_emit);
      RowBuffer<bf16> e_first(kCapacity, c);
      States s_first(m.p, n_seq);
      for (Engine* eng : {&eng1, &eng2}) {
        States s(m.p, n_seq);
        s.copy_from(start);
        RowBuffer<bf16> e(kCapacity, c);
        e.poison(n_emit);
        std::vector<CompressorEmit> em(
            kCapacity, CompressorEmit{test::kSentinelI32, test::kSentinelI32, test::kSentinelI32});
        ASSERT_EQ(eng->stream(x.data(), step, s.views.data(), em.data(), e.data()), n_emit);
        const char* name = cfg.name;
        ASSERT_TRUE(e.sentinel_intact(n_emit)) << name << " T=" << T;
        for (int64_t k = 0; k < kCapacity; ++k) {
          if (k < n_emit) {
            ASSERT_EQ(em[k].row, em_ref[k].row) << name << " T=" << T;
            ASSERT_EQ(em[k].seq, em_ref[k].seq);
            ASSERT_EQ(em[k].index, em_ref[k].index);
          } else {
            ASSERT_EQ(em[k].row, test::kSentinelI32)
                << name << " T=" << T << " emit slot " << k << " written";
          }
        }
        ASSERT_TRUE(test::all_close(e.data(), e_ref.data(), n_emit * c, test::kQuantized, name))
            << "T=" << T;
        for (int sq = 0; sq < n_seq; ++sq)
          ASSERT_TRUE(close_state(s.views[sq], s_ref.views[sq], s.n))
              << name << " T=" << T << " seq " << sq;
        ASSERT_TRUE(same_state(s.views[4], start.views[4], s.n)) << name << " T=" << T;
        if (eng == &eng1) {
          e_first.v = e.v;
          s_first.copy_from(s);
        } else {
          ASSERT_TRUE(same_bits(e.data(), e_first.data(), n_emit * c, "nthreads 2 vs 1"))
              << name << " T=" << T;
          for (int sq = 0; sq < n_seq; ++sq)
            ASSERT_TRUE(same_state(s.views[sq], s_first.views[sq], s.n));
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels
