// Model forward with paged caches (issue 4): prefill == token-by-token decode,
// chunked prefill, batch invariance (bit-exact), capacity errors, B = 0. The check
// against the whole-model Level-A reference is tests/oracle/reference_model_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <new>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include "base/cpu.h"
#include "io/safetensors.h"
#include "kernels/hc/hc.h"
#include "kernels/linear/linear.h"
#include "model/config.h"
#include "model/isa_self_test.h"
#include "model/runner.h"
#include "model/weights.h"
#include "oracle/reference_model.h"
#include "oracle/tiny_checkpoint.h"
#include "support/tiny_model.h"
#include "support/alloc_counter.h"

namespace dsv4 {
namespace {

using Loaded = test::TinyModel;

using test::model;

Limits limits(int max_chunk, int threads = 2) {
  Limits l;
  l.max_batch = 8;
  l.max_rows = std::max(64, max_chunk * 2);
  l.max_decode_rows = 2;
  l.max_chunk = max_chunk;
  l.max_seqs = 8;
  l.max_context = 640;
  l.n_threads = threads;
  return l;
}

using test::tokens;

// Teacher-forced logits of one sequence fed in chunks of `chunk` rows.
std::vector<float> run_chunked(ModelRunner& r, const std::vector<int32_t>& toks, int chunk, int64_t prompt_len) {
  const int64_t V = r.vocab_size();
  const int n = static_cast<int>(toks.size());
  std::vector<float> out(static_cast<size_t>(n) * V), step(static_cast<size_t>(r.limits().max_rows) * V);
  EXPECT_TRUE(r.start_sequence(0).ok());
  for (int p0 = 0; p0 < n; p0 += chunk) {
    const int c = std::min(chunk, n - p0);
    const StepRequest q{0, p0, c, prompt_len, toks.data() + p0};
    Status st = r.forward({&q, 1}, step.data(), nullptr);
    EXPECT_TRUE(st.ok()) << st.message();
    std::copy(step.begin(), step.begin() + static_cast<int64_t>(c) * V, out.begin() + static_cast<int64_t>(p0) * V);
  }
  r.end_sequence(0);
  return out;
}

struct Case {
  const char* preset;
  TinyQuant quant;
};
class RunnerTest : public ::testing::TestWithParam<Case> {};

TEST_P(RunnerTest, PrefillEqualsDecodeAndChunks) {
  const Loaded& m = model(GetParam().preset, GetParam().quant);
  const int n = m.cfg.sliding_window > 8 ? 60 : 45;  // > W, > several HCA ratios (tiny), > 4·topk + 3
  const auto toks = tokens(n, 5, m.cfg.vocab_size);
  auto r = ModelRunner::create(m.cfg, *m.w, limits(n));
  ASSERT_TRUE(r.ok()) << r.message();
  const auto whole = run_chunked(**r, toks, n, n);
  for (float v : whole) ASSERT_TRUE(std::isfinite(v));
  for (int chunk : {1, 3, 7}) {
    const auto got = run_chunked(**r, toks, chunk, n);
    ASSERT_EQ(got, whole) << "chunk " << chunk;  // every kernel is row-invariant: bit-exact
  }
  // Decode: the first token is a one-token prompt; later rows use the decode list layout,
  // which equals the prompt layout while lists fit one 64-entry block.
  const auto dec = run_chunked(**r, toks, 1, 1);
  ASSERT_EQ(dec, whole);
}

TEST_P(RunnerTest, BatchInvariance) {
  const Loaded& m = model(GetParam().preset, GetParam().quant);
  const int64_t V = m.cfg.vocab_size;
  auto r = ModelRunner::create(m.cfg, *m.w, limits(8));
  ASSERT_TRUE(r.ok()) << r.message();
  ModelRunner& R = **r;
  // Reference: each request alone, prompt in one chunk of up to 8, then decode steps.
  const int n_req = 5, steps = 12;
  std::vector<std::vector<int32_t>> seqs;
  for (int i = 0; i < n_req; ++i) seqs.push_back(tokens(3 + 2 * i + steps, 100 + i, V));
  auto alone = [&](int i) {
    std::vector<float> out;
    std::vector<float> buf(static_cast<size_t>(R.limits().max_rows) * V);
    EXPECT_TRUE(R.start_sequence(7).ok());
    const int plen = 3 + 2 * i;
    int p = 0;
    while (p < static_cast<int>(seqs[i].size())) {
      const int c = p < plen ? std::min(8, plen - p) : 1;
      const StepRequest q{7, p, c, plen, seqs[i].data() + p};
      EXPECT_TRUE(R.forward({&q, 1}, buf.data(), nullptr).ok());
      out.insert(out.end(), buf.begin(), buf.begin() + static_cast<int64_t>(c) * V);
      p += c;
    }
    R.end_sequence(7);
    return out;
  };
  std::vector<std::vector<float>> want;
  for (int i = 0; i < n_req; ++i) want.push_back(alone(i));
  // Together: requests join at different steps and leave when done; B varies 1..5.
  std::vector<std::vector<float>> got(n_req);
  std::vector<int> p(n_req, 0);
  std::vector<float> buf(static_cast<size_t>(R.limits().max_rows) * V);
  for (int step = 0;; ++step) {
    std::vector<StepRequest> reqs;
    for (int i = 0; i < n_req; ++i) {
      if (step < i || p[i] >= static_cast<int>(seqs[i].size())) continue;  // joins at step i
      if (p[i] == 0) {
        EXPECT_TRUE(R.start_sequence(i).ok());
      }
      const int plen = 3 + 2 * i;
      const int c = p[i] < plen ? std::min(8, plen - p[i]) : 1;
      reqs.push_back({i, p[i], c, plen, seqs[i].data() + p[i]});
    }
    if (reqs.empty()) break;
    ASSERT_TRUE(R.forward(reqs, buf.data(), nullptr).ok());
    int64_t row = 0;
    for (const StepRequest& q : reqs) {
      got[q.seq].insert(got[q.seq].end(), buf.begin() + row * V, buf.begin() + (row + q.n) * V);
      row += q.n;
      p[q.seq] += q.n;
      if (p[q.seq] >= static_cast<int>(seqs[q.seq].size())) R.end_sequence(q.seq);
    }
  }
  for (int i = 0; i < n_req; ++i) ASSERT_EQ(got[i], want[i]) << "request " << i;
}

// HeadRows: the head on listed rows only gives those rows' logits of the all-rows call bit for
// bit — prompt chunks, decode rows, several requests per step, the MTP layer — and a decode
// step with listed rows allocates nothing; rows out of order or outside the step are errors.
TEST_P(RunnerTest, HeadOnListedRowsEqualsAllRows) {
  const Loaded& m = model(GetParam().preset, GetParam().quant);
  const int64_t V = m.cfg.vocab_size, ND = m.cfg.hc_mult * m.cfg.hidden_size;
  const bool mtp = !m.w->mtp.empty();
  auto r = ModelRunner::create(m.cfg, *m.w, limits(8));
  ASSERT_TRUE(r.ok()) << r.message();
  ModelRunner& R = **r;
  const int n_req = 3;
  std::vector<std::vector<int32_t>> seqs;
  for (int i = 0; i < n_req; ++i) seqs.push_back(tokens(14 + 5 * i + 1, 300 + i, V));  // + the MTP's next token
  const int64_t T_MAX = R.limits().max_rows;
  std::vector<float> buf(static_cast<size_t>(T_MAX) * V), mbuf(buf.size());
  std::vector<bf16> xf(static_cast<size_t>(T_MAX * ND));
  // Returns the listed rows' logits of every step (main, then MTP), in step order.
  auto run = [&](bool listed, std::vector<float>& main_out, std::vector<float>& mtp_out) {
    std::vector<int> p(n_req, 0);
    for (int step = 0;; ++step) {
      std::vector<StepRequest> reqs, mreqs;
      std::vector<int32_t> rows;
      int32_t row = 0;
      for (int i = 0; i < n_req; ++i) {
        const int len = static_cast<int>(seqs[i].size()) - 1, plen = 7 + 5 * i;
        if (p[i] >= len) continue;
        if (p[i] == 0) {
          EXPECT_TRUE(R.start_sequence(i).ok());
        }
        const int c = p[i] < plen ? std::min(8, plen - p[i]) : 1;
        reqs.push_back({i, p[i], c, plen, seqs[i].data() + p[i]});
        mreqs.push_back({i, p[i], c, plen, seqs[i].data() + p[i] + 1});
        if (c > 2) rows.push_back(row);
        rows.push_back(row + c - 1);
        row += c;
      }
      if (reqs.empty()) break;
      const HeadRows head = listed ? HeadRows{rows.data(), static_cast<int64_t>(rows.size())} : HeadRows{};
      if (listed && step > 3) {  // decode steps
        test::AllocCounter count;
        ASSERT_TRUE(R.forward(reqs, buf.data(), xf.data(), {}, head).ok());
        EXPECT_EQ(count.allocations(), 0) << "step " << step;
      } else {
        ASSERT_TRUE(R.forward(reqs, buf.data(), xf.data(), {}, head).ok());
      }
      for (size_t k = 0; k < rows.size(); ++k) {
        const float* src = buf.data() + (listed ? static_cast<int64_t>(k) : rows[k]) * V;
        main_out.insert(main_out.end(), src, src + V);
      }
      if (mtp) {
        ASSERT_TRUE(R.forward_mtp(mreqs, xf.data(), mbuf.data(), {}, head).ok());
        for (size_t k = 0; k < rows.size(); ++k) {
          const float* src = mbuf.data() + (listed ? static_cast<int64_t>(k) : rows[k]) * V;
          mtp_out.insert(mtp_out.end(), src, src + V);
        }
      }
      for (const StepRequest& q : reqs) {
        p[q.seq] += q.n;
        if (p[q.seq] >= static_cast<int>(seqs[q.seq].size()) - 1) R.end_sequence(q.seq);
      }
    }
  };
  std::vector<float> all_main, all_mtp, some_main, some_mtp;
  run(false, all_main, all_mtp);
  run(true, some_main, some_mtp);
  ASSERT_FALSE(all_main.empty());
  ASSERT_EQ(some_main, all_main);
  ASSERT_EQ(some_mtp, all_mtp);
  // Errors name the rows; nothing of the slot changes.
  ASSERT_TRUE(R.start_sequence(0).ok());
  const StepRequest q{0, 0, 4, 4, seqs[0].data()};
  const int32_t descending[] = {2, 1}, outside[] = {1, 4};
  EXPECT_NE(R.forward({&q, 1}, buf.data(), nullptr, {}, HeadRows{descending, 2}).message().find("head rows"),
            std::string::npos);
  EXPECT_NE(R.forward({&q, 1}, buf.data(), nullptr, {}, HeadRows{outside, 2}).message().find("head rows"),
            std::string::npos);
  EXPECT_TRUE(R.forward({&q, 1}, buf.data(), nullptr, {}, HeadRows{outside, 1}).ok());
  R.end_sequence(0);
}

INSTANTIATE_TEST_SUITE_P(Presets, RunnerTest,
                         ::testing::Values(Case{"tiny", TinyQuant::kFp8}, Case{"tiny", TinyQuant::kNone},
                                           Case{"tiny2", TinyQuant::kFp8}, Case{"tiny2", TinyQuant::kNone}),
                         [](const auto& info) {
                           return std::string(info.param.preset) + "_" + std::string(tiny_quant_name(info.param.quant));
                         });

// Teacher-forced logits: prompt of plen tokens in chunks of `chunk`, then one row per step.
std::vector<float> prompt_then_decode(ModelRunner& r, const std::vector<int32_t>& toks, int plen, int chunk) {
  const int64_t V = r.vocab_size();
  const int n = static_cast<int>(toks.size());
  std::vector<float> out(static_cast<size_t>(n) * V), step(static_cast<size_t>(r.limits().max_rows) * V);
  EXPECT_TRUE(r.start_sequence(2).ok());
  for (int p0 = 0; p0 < n;) {
    const int c = p0 < plen ? std::min(chunk, plen - p0) : 1;
    const StepRequest q{2, p0, c, plen, toks.data() + p0};
    Status st = r.forward({&q, 1}, step.data(), nullptr);
    EXPECT_TRUE(st.ok()) << st.message();
    std::copy(step.begin(), step.begin() + static_cast<int64_t>(c) * V, out.begin() + static_cast<int64_t>(p0) * V);
    p0 += c;
  }
  r.end_sequence(2);
  return out;
}

// model.md §14.3: on tiny the HCA list passes 64 entries from p = 455 on, so prompt
// rows and decode rows carry two-block lists; a 480-token prompt decoded on to 520
// equals pure token-by-token decoding.
// DSpark target features (dspark.md §2, A17): the stream means of the target layers' output
// stacks. The last target layer of tiny-ds is the last layer, so its slice is the mean of
// Xfinal bit for bit; prefill equals decode bit for bit (batch and row invariance); the whole
// row is close to the Level-A reference's (summation order); every row is written, the rows
// past T keep their sentinel.
TEST(Runner, DsparkTargetFeatures) {
  const Loaded& m = test::tiny_model("tiny-ds", TinyQuant::kFp8, 1);
  const int64_t D = m.cfg.hidden_size, N = m.cfg.hc_mult, F = 3 * D;
  auto r = ModelRunner::create(m.cfg, *m.w, limits(16));
  ASSERT_TRUE(r.ok()) << r.message();
  ModelRunner& R = **r;
  const int n = 14;
  const std::vector<int32_t> t = tokens(n, 77, m.cfg.vocab_size);
  const bf16 sentinel = bf16::from_float(-3.0f);
  std::vector<bf16> feat(static_cast<size_t>(R.limits().max_rows * F), sentinel), xf(static_cast<size_t>(n * N * D));
  ASSERT_TRUE(R.start_sequence(0).ok());
  const StepRequest q{0, 0, n, n, t.data()};
  ASSERT_TRUE(R.forward({&q, 1}, nullptr, xf.data(), {}, {}, feat.data()).ok());
  R.end_sequence(0);
  for (int64_t i = n * F; i < static_cast<int64_t>(feat.size()); ++i) ASSERT_EQ(feat[i].bits, sentinel.bits) << i;
  const kernels::HcParams hp{m.cfg.hc_mult, D, m.cfg.hc_sinkhorn_iters, 1e-6f, 1e-6f};
  std::vector<bf16> last(static_cast<size_t>(n * F));
  kernels::hc_stream_mean_ref(xf.data(), hp, n, last.data() + 2 * D, F);
  for (int64_t row = 0; row < n; ++row)
    for (int64_t d = 2 * D; d < F; ++d) ASSERT_EQ(feat[row * F + d].bits, last[row * F + d].bits) << row << " " << d;
  // Prompt of 1, then one row per step: the same features (the prompt-row list layout only
  // differs below W for prompts shorter than W, so compare from a prompt of W = 8 rows).
  std::vector<bf16> step_feat(static_cast<size_t>(F)), dec(static_cast<size_t>(n * F));
  ASSERT_TRUE(R.start_sequence(1).ok());
  const StepRequest head{1, 0, 8, 8, t.data()};
  ASSERT_TRUE(R.forward({&head, 1}, nullptr, nullptr, {}, {}, dec.data()).ok());
  for (int p = 8; p < n; ++p) {
    const StepRequest one{1, p, 1, 8, t.data() + p};
    ASSERT_TRUE(R.forward({&one, 1}, nullptr, nullptr, {}, {}, dec.data() + p * F).ok());
  }
  R.end_sequence(1);
  for (int64_t i = 0; i < n * F; ++i) ASSERT_EQ(dec[i].bits, feat[i].bits) << "row " << i / F;
  // Against the Level-A reference.
  auto ref = ReferenceModel::create(m.cfg, *m.w);
  ASSERT_TRUE(ref.ok()) << ref.message();
  ASSERT_TRUE((*ref)->start_sequence(0).ok());
  std::vector<bf16> rf(static_cast<size_t>(n * F));
  ASSERT_TRUE((*ref)->forward({&q, 1}, nullptr, nullptr, {}, rf.data()).ok());
  double num = 0, den = 0;
  for (int64_t i = 0; i < n * F; ++i) {
    const double d = feat[i].to_float() - rf[i].to_float();
    num += d * d;
    den += static_cast<double>(rf[i].to_float()) * rf[i].to_float();
  }
  EXPECT_LT(std::sqrt(num / den), 0.02);
  // A checkpoint without a drafter has no features.
  const Loaded& plain = model("tiny", TinyQuant::kFp8);
  auto r2 = ModelRunner::create(plain.cfg, *plain.w, limits(16));
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE((*r2)->start_sequence(0).ok());
  EXPECT_FALSE((*r2)->forward({&q, 1}, nullptr, nullptr, {}, {}, feat.data()).ok());
}

TEST(Runner, LongSequenceWithTwoBlockLists) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  const auto toks = tokens(520, 21, m.cfg.vocab_size);
  auto r = ModelRunner::create(m.cfg, *m.w, limits(48));
  ASSERT_TRUE(r.ok()) << r.message();
  const auto chunked = prompt_then_decode(**r, toks, 480, 48);
  const auto decoded = prompt_then_decode(**r, toks, 1, 1);
  ASSERT_EQ(chunked, decoded);
}

// Decoding that starts at p mod 4 != 0 after a prompt shorter than 4 (and after 6).
TEST(Runner, ShortPromptsThenDecode) {
  for (const char* preset : {"tiny", "tiny2"}) {
    const Loaded& m = model(preset, TinyQuant::kFp8);
    auto r = ModelRunner::create(m.cfg, *m.w, limits(8));
    ASSERT_TRUE(r.ok()) << r.message();
    const auto toks = tokens(30, 4, m.cfg.vocab_size);
    const auto decoded = prompt_then_decode(**r, toks, 1, 1);
    for (int plen : {2, 3, 6}) ASSERT_EQ(prompt_then_decode(**r, toks, plen, 8), decoded) << preset << " " << plen;
  }
}

// Every B from 1 to B_MAX: B decode requests at different positions in one step give
// each request's logits of the step run alone, bit for bit; B decreasing after a large
// B (stale scratch) included. The steady-state decode step allocates nothing.
TEST(Runner, EveryBatchSizeAndNoAllocation) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  const int64_t V = m.cfg.vocab_size;
  Limits l = limits(16);
  auto r = ModelRunner::create(m.cfg, *m.w, l);
  ASSERT_TRUE(r.ok()) << r.message();
  ModelRunner& R = **r;
  const int B_MAX = l.max_batch;
  // Request i: prompt of 5 + 3i tokens, then decode steps with token 7 + i.
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < B_MAX; ++i) prompts.push_back(tokens(5 + 3 * i, 50 + i, V));
  std::vector<float> buf(static_cast<size_t>(l.max_rows) * V);
  auto prefill = [&](int i) {
    ASSERT_TRUE(R.start_sequence(i).ok());
    const int n = static_cast<int>(prompts[i].size());
    for (int p0 = 0; p0 < n; p0 += 16) {
      const StepRequest q{i, p0, std::min(16, n - p0), n, prompts[i].data() + p0};
      ASSERT_TRUE(R.forward({&q, 1}, buf.data(), nullptr).ok());
    }
  };
  std::vector<int32_t> dec_tok(B_MAX);
  for (int i = 0; i < B_MAX; ++i) dec_tok[i] = 7 + i;
  // Alone: each request's first decode step.
  std::vector<std::vector<float>> alone(B_MAX);
  for (int i = 0; i < B_MAX; ++i) {
    prefill(i);
    const int n = static_cast<int>(prompts[i].size());
    const StepRequest q{i, n, 1, n, &dec_tok[i]};
    ASSERT_TRUE(R.forward({&q, 1}, buf.data(), nullptr).ok());
    alone[i].assign(buf.begin(), buf.begin() + V);
    R.end_sequence(i);
  }
  {
    test::AllocCounter probe;  // the counter sees allocations at all
    std::vector<int> v(10);
    EXPECT_EQ(probe.allocations(), 1);
  }
  for (int B : {1, 2, 3, 4, 5, 6, 7, 8, 3, 1}) {
    for (int i = 0; i < B; ++i) prefill(i);
    std::vector<StepRequest> reqs;
    for (int i = 0; i < B; ++i) {
      const int n = static_cast<int>(prompts[i].size());
      reqs.push_back({i, n, 1, n, &dec_tok[i]});
    }
    test::AllocCounter count;
    const Status st = R.forward(reqs, buf.data(), nullptr);
    const int64_t allocs = count.allocations();
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(allocs, 0) << "the decode step allocated (B = " << B << ")";
    for (int i = 0; i < B; ++i)
      ASSERT_TRUE(std::equal(alone[i].begin(), alone[i].end(), buf.begin() + static_cast<int64_t>(i) * V))
          << "B = " << B << ", request " << i;
    for (int i = 0; i < B; ++i) R.end_sequence(i);
  }
}

// tiny2 passes several HCA ratios (128) too: a 300-token prompt in chunks of 64 equals
// token-by-token decoding.
TEST(Runner, Tiny2PastSeveralHcaRatios) {
  const Loaded& m = model("tiny2", TinyQuant::kFp8);
  const auto toks = tokens(300, 33, m.cfg.vocab_size);
  auto r = ModelRunner::create(m.cfg, *m.w, limits(64));
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(prompt_then_decode(**r, toks, 300, 64), prompt_then_decode(**r, toks, 1, 1));
}

// FP4 experts, FP8 matrices and the compressors' BF16 projections rewritten into the linear
// kernels' tile layouts at load (LinearWeight::fp4_dot, fp8_dot, bf16_tiles; every variant
// reads them) give the stored layouts' logits, bit for bit.
TEST(Runner, DotLayoutsGiveTheStoredLayoutsLogits) {
  const Loaded& m = model("tiny2", TinyQuant::kFp8);
  const LinearWeight& w1 = m.w->layers[0].ffn.experts[0].w1.w;
  ASSERT_EQ(w1.format, WeightFormat::kFP4);
  ASSERT_TRUE(w1.fp4_dot);
  const LinearWeight& wq_a = m.w->layers[0].attn.wq_a.w;
  ASSERT_EQ(wq_a.format, WeightFormat::kFP8);
  ASSERT_TRUE(wq_a.fp8_dot);
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(m.dir);
  ASSERT_TRUE(files.ok()) << files.message();
  LoadOptions as_stored;
  as_stored.dot_layouts = false;
  Result<Weights> stored = load_weights(*files, m.cfg, nullptr, as_stored);
  ASSERT_TRUE(stored.ok()) << stored.message();
  ASSERT_FALSE(stored->layers[0].ffn.experts[0].w1.w.fp4_dot);
  ASSERT_FALSE(stored->layers[0].attn.wq_a.w.fp8_dot);
  // The compressors' BF16 projections in tiles where the variant reads them faster.
  for (size_t l = 0; l < m.w->layers.size(); ++l) {
    if (m.w->layers[l].ratio == 0) continue;
    EXPECT_EQ(m.w->layers[l].attn.compressor.wkv.w.bf16_tiles, kernels::linear_prefers_bf16_tiles()) << l;
    EXPECT_FALSE(stored->layers[l].attn.compressor.wkv.w.bf16_tiles) << l;
  }
  const auto toks = tokens(24, 9, m.cfg.vocab_size);
  auto packed_runner = ModelRunner::create(m.cfg, *m.w, limits(24));
  auto stored_runner = ModelRunner::create(m.cfg, *stored, limits(24));
  ASSERT_TRUE(packed_runner.ok() && stored_runner.ok());
  EXPECT_EQ(run_chunked(**packed_runner, toks, 24, 24), run_chunked(**stored_runner, toks, 24, 24));
  EXPECT_EQ(run_chunked(**packed_runner, toks, 24, 1), run_chunked(**stored_runner, toks, 24, 1));
}

// Every SIMD variant of the kernels gives the same logits, bit for bit.
TEST(Runner, EverySimdVariantGivesTheSameLogits) {
  for (const char* preset : {"tiny", "tiny2"}) {
    const Loaded& m = model(preset, TinyQuant::kFp8);
    const auto toks = tokens(24, 8, m.cfg.vocab_size);
    auto r = ModelRunner::create(m.cfg, *m.w, limits(24));
    ASSERT_TRUE(r.ok()) << r.message();
    set_kernel_isa(Isa::kScalar);
    const auto want = run_chunked(**r, toks, 24, 24);
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      set_kernel_isa(isa);
      EXPECT_EQ(run_chunked(**r, toks, 24, 24), want) << preset << " " << isa_name(isa);
    }
    set_kernel_isa(detect_isa());
  }
}

TEST(Runner, EmptyStepAndCapacityErrors) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  auto r = ModelRunner::create(m.cfg, *m.w, limits(8));
  ASSERT_TRUE(r.ok()) << r.message();
  ModelRunner& R = **r;
  EXPECT_TRUE(R.forward({}, nullptr, nullptr).ok());  // B = 0
  const auto toks = tokens(9, 1, m.cfg.vocab_size);
  ASSERT_TRUE(R.start_sequence(0).ok());
  StepRequest q{0, 0, 9, 9, toks.data()};
  EXPECT_NE(R.forward({&q, 1}, nullptr, nullptr).message().find("R_MAX = 8"), std::string::npos);
  q.n = 1;
  q.seq = 3;
  EXPECT_NE(R.forward({&q, 1}, nullptr, nullptr).message().find("not started"), std::string::npos);
  Limits bad = limits(8);
  bad.max_decode_rows = 65;
  EXPECT_NE(ModelRunner::create(m.cfg, *m.w, bad).message().find("max_decode_rows = 65 exceeds max_rows = 64"),
            std::string::npos);
  // A step takes slots on every rank: B_MAX up to max_seqs per rank times the ranks.
  Limits wide = limits(8);
  wide.max_batch = 2 * wide.max_seqs;
  EXPECT_NE(validate_limits(wide).message().find("exceeds max_seqs = " + std::to_string(wide.max_seqs) +
                                                 " slots on each of 1 ranks"),
            std::string::npos);
  EXPECT_TRUE(validate_limits(wide, 2).ok());
  // Rows must continue the slot's sequence: 9 positions cached, S_MAX = 2.
  q = StepRequest{0, 0, 8, 9, toks.data()};
  ASSERT_TRUE(R.forward({&q, 1}, nullptr, nullptr).ok());
  q = StepRequest{0, 8, 1, 9, toks.data() + 8};
  ASSERT_TRUE(R.forward({&q, 1}, nullptr, nullptr).ok());
  for (int64_t p0 : {0, 7, 10}) {
    q = StepRequest{0, p0, 1, 9, toks.data()};
    EXPECT_NE(R.forward({&q, 1}, nullptr, nullptr).message().find("p0 must be in [8, 9]"), std::string::npos)
        << p0;
  }
  q = StepRequest{0, 8, 1, 9, toks.data() + 8};  // a rollback of one row is allowed
  EXPECT_TRUE(R.forward({&q, 1}, nullptr, nullptr).ok());
  // Rollbacks cannot drift: after rows up to 9 were written, 8 is the lowest start even
  // once a step rolled back to 8.
  q = StepRequest{0, 8, 1, 9, toks.data() + 8};
  EXPECT_TRUE(R.forward({&q, 1}, nullptr, nullptr).ok());
  q = StepRequest{0, 7, 1, 9, toks.data() + 7};
  EXPECT_NE(R.forward({&q, 1}, nullptr, nullptr).message().find("p0 must be in [8, 9]"), std::string::npos);
}

TEST(Runner, CompressedPoolExhaustionIsReported) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  Limits l = limits(32);
  l.cache_blocks = 2;  // 2 blocks of 64 positions
  l.page_tokens = 64;
  auto r = ModelRunner::create(m.cfg, *m.w, l);
  ASSERT_TRUE(r.ok()) << r.message();
  ModelRunner& R = **r;
  const auto toks = tokens(200, 3, m.cfg.vocab_size);
  ASSERT_TRUE(R.start_sequence(0).ok());
  Status st;
  int p = 0;
  for (; p < 200 && st.ok(); p += 32) {
    const StepRequest q{0, p, 32, 200, toks.data() + p};
    st = R.forward({&q, 1}, nullptr, nullptr);
  }
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(p, 160) << "positions [128, 160) need a third block";
  EXPECT_NE(st.message().find("compressed cache exhausted: the step needs 1 more blocks of 64 positions, 0 of "
                              "cache_blocks = 2 free"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(R.free_blocks(), 0);
  EXPECT_EQ(R.blocks_short(0, 200), 2);
  R.end_sequence(0);
  EXPECT_EQ(R.free_blocks(), 2);  // blocks came back
  EXPECT_EQ(R.blocks_short(-1, 129), 3);
  ASSERT_TRUE(R.start_sequence(1).ok());
}

// Limits the model constrains, and memory that follows use: reserved storage is not
// resident until sequences write it.
TEST(Runner, LimitsAgainstTheModelAndResidentMemory) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  Limits l = limits(32);
  l.max_context = m.cfg.max_position_embeddings + 1;
  EXPECT_NE(ModelRunner::create(m.cfg, *m.w, l).message().find("limit max_context = " +
                                                               std::to_string(l.max_context) +
                                                               " exceeds the model's max_position_embeddings"),
            std::string::npos);
  l = limits(32);
  l.page_tokens = 6;  // tiny has ratio 4 and 8 layers
  EXPECT_NE(ModelRunner::create(m.cfg, *m.w, l).message().find("page_tokens = 6 must be a multiple of every compress ratio"),
            std::string::npos);
  l = limits(32);
  l.prefix_blocks = 4;
  l.page_tokens = 2;  // tiny's ratios make it a multiple of 8 anyway; the prefix rule comes first
  EXPECT_NE(ModelRunner::create(m.cfg, *m.w, l).message().find("page_tokens = 2 must be at least 4 with the prefix "
                                                               "cache"),
            std::string::npos);
  l = limits(32);
  l.prefix_blocks = -1;
  EXPECT_NE(ModelRunner::create(m.cfg, *m.w, l).message().find("prefix_blocks = -1 must not be negative"),
            std::string::npos);
  l = limits(32);
  l.cache_blocks = int64_t{1} << 40;
  EXPECT_NE(ModelRunner::create(m.cfg, *m.w, l).message().find("cache_blocks = 1099511627776 exceeds"),
            std::string::npos);
  l = limits(32);
  l.max_seqs = 1 << 30;  // compressor states alone: far beyond any machine here
  EXPECT_NE(ModelRunner::create(m.cfg, *m.w, l).message().find("more than this machine's"), std::string::npos);
  l = limits(32);
  l.max_seqs = 64;
  l.max_batch = 8;
  l.max_context = m.cfg.max_position_embeddings;
  auto r = ModelRunner::create(m.cfg, *m.w, l);
  ASSERT_TRUE(r.ok()) << r.message();
  const ModelRunner::CacheMemory before = (*r)->cache_memory();
  EXPECT_GT(before.reserved, 0);
  EXPECT_LT(before.resident, before.reserved / 20) << "reserved cache storage is touched at start-up";
  const auto toks = tokens(64, 5, m.cfg.vocab_size);
  ASSERT_TRUE((*r)->start_sequence(0).ok());
  const StepRequest q{0, 0, 32, 64, toks.data()};
  ASSERT_TRUE((*r)->forward({&q, 1}, nullptr, nullptr).ok());
  EXPECT_GT((*r)->cache_memory().resident, before.resident);
  // Reserving blocks: a started slot only, within max_context.
  EXPECT_NE((*r)->reserve_blocks(5, 10).message().find("sequence slot 5 was not started"), std::string::npos);
  EXPECT_NE((*r)->reserve_blocks(0, l.max_context + 1).message().find("exceed max_context"), std::string::npos);
  EXPECT_TRUE((*r)->reserve_blocks(0, 200).ok());
  EXPECT_EQ((*r)->blocks_short(0, 200), 0);
}

// A 12,000-token context (max_position_embeddings 32768; thousands of CSA entries for the
// indexer to select from, ~94 HCA entries): the prompt in chunks of 509 rows equals a prompt
// prefilled to 11,700 in chunks of 2,048 and then fed token by token (decode-shaped steps), bit
// for bit on the last 300 positions; resident cache memory stays within what the positions
// written need.
void long_context_prefill_equals_decode(const char* preset) {
#if defined(DSV4_SANITIZE)
  constexpr int64_t kLen = 3000;
#else
  constexpr int64_t kLen = 12000;
#endif
  constexpr int64_t kTail = 300;
  {
    const Loaded& m = test::tiny_model(preset, TinyQuant::kFp8, 1, 32768);
    const int64_t V = m.cfg.vocab_size;
    Limits l = limits(2048);
    l.max_rows = 2048;
    l.max_seqs = 2;
    l.max_batch = 2;
    l.max_context = 32768;
    auto r = ModelRunner::create(m.cfg, *m.w, l);
    ASSERT_TRUE(r.ok()) << r.message();
    const auto toks = tokens(static_cast<int>(kLen), 17, V);
    std::vector<float> step(static_cast<size_t>(2048 * V)), a(static_cast<size_t>(kTail * V)), b(a.size());
    auto feed = [&](int32_t seq, int64_t from, int64_t to, int chunk, std::vector<float>* out) {
      for (int64_t p0 = from; p0 < to; p0 += chunk) {
        const int32_t c = static_cast<int32_t>(std::min<int64_t>(chunk, to - p0));
        const StepRequest q{seq, p0, c, kLen, toks.data() + p0};
        const Status st = (*r)->forward({&q, 1}, step.data(), nullptr);
        ASSERT_TRUE(st.ok()) << st.message();
        if (out)
          for (int32_t i = 0; i < c; ++i)
            if (p0 + i >= kLen - kTail)
              std::copy_n(step.begin() + i * V, V, out->begin() + (p0 + i - (kLen - kTail)) * V);
      }
    };
    ASSERT_TRUE((*r)->start_sequence(0).ok());
    feed(0, 0, kLen, 509, &a);
    ASSERT_TRUE((*r)->start_sequence(1).ok());
    feed(1, 0, kLen - kTail, 2048, nullptr);
    feed(1, kLen - kTail, kLen, 1, &b);
    EXPECT_EQ(a, b) << preset;
    // Memory follows use: two sequences of kLen positions touch at most their blocks
    // (+ one OS page per layer family of slack) of storage reserved for 32768 positions each.
    const ModelRunner::CacheMemory mem = (*r)->cache_memory();
    EXPECT_LT(mem.resident, mem.reserved * 3 / 4) << preset;
    std::printf("  %s: %lld positions, cache resident %.1f MiB of %.1f MiB reserved\n", preset,
                static_cast<long long>(kLen), mem.resident / 1048576.0, mem.reserved / 1048576.0);
  }
}

TEST(Runner, LongContextPrefillEqualsDecodeTiny) { long_context_prefill_equals_decode("tiny"); }
TEST(Runner, LongContextPrefillEqualsDecodeTiny2) { long_context_prefill_equals_decode("tiny2"); }

}  // namespace
}  // namespace dsv4
