// Speculative-shaped steps of S = 2..8 rows per request (runtime.md §2.5, §3.1): each
// step verifies an anchor and S − 1 drafts whose accepted prefix is forced (none, all,
// every partial length), the rejected suffix is rolled back by position-addressed
// overwrite, and every accepted row's logits equal plain decoding bit for bit, across
// ratio-4 and ratio-8/128 boundaries, with requests of different S in one step.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "model/runner.h"
#include "support/tiny_model.h"

namespace dsv4 {
namespace {

constexpr int kMinS = 2, kMaxS = 8;

// Logits of every position of `toks` fed as one prompt in chunks of `chunk`.
std::vector<float> plain_logits(ModelRunner& r, const std::vector<int32_t>& toks, int chunk) {
  const int64_t V = r.vocab_size(), n = static_cast<int64_t>(toks.size());
  std::vector<float> out(static_cast<size_t>(n * V)), step(static_cast<size_t>(r.limits().max_rows * V));
  EXPECT_TRUE(r.start_sequence(0).ok());
  for (int64_t p0 = 0; p0 < n; p0 += chunk) {
    const int32_t c = static_cast<int32_t>(std::min<int64_t>(chunk, n - p0));
    const StepRequest q{0, p0, c, n, toks.data() + p0};
    const Status st = r.forward({&q, 1}, step.data(), nullptr);
    EXPECT_TRUE(st.ok()) << st.message();
    std::copy_n(step.begin(), c * V, out.begin() + p0 * V);
  }
  r.end_sequence(0);
  return out;
}

void check_preset(const char* preset, int n_tokens) {
  const test::TinyModel& m = test::tiny_model(preset, TinyQuant::kFp8);
  const int64_t V = m.cfg.vocab_size;
  const int n_seqs = kMaxS - kMinS + 1;
  Limits l;
  l.max_batch = n_seqs;
  l.max_seqs = n_seqs;
  l.max_decode_rows = kMaxS;
  l.max_chunk = 16;
  l.max_rows = n_seqs * l.max_chunk;
  l.max_context = n_tokens;
  l.n_threads = 2;
  auto made = ModelRunner::create(m.cfg, *m.w, l);
  ASSERT_TRUE(made.ok()) << made.message();
  ModelRunner& r = **made;
  const auto toks = test::random_tokens(n_tokens, 77, V);
  // The prompt is the whole sequence (prompt rows use Wc = min(n, W) at every position).
  const auto want = plain_logits(r, toks, l.max_chunk);

  // Sequence i verifies S = kMinS + i rows per step after a prompt of 3 + i tokens. Rows
  // [0, k) carry the true tokens, rows [k, S) a wrong draft; k cycles through 1..S.
  std::vector<int64_t> p0(n_seqs, 0);
  std::vector<int> step_no(n_seqs, 0);
  std::vector<std::vector<int>> seen(n_seqs, std::vector<int>(kMaxS + 1, 0));
  std::vector<std::vector<int32_t>> rows_tok(n_seqs, std::vector<int32_t>(kMaxS));
  std::vector<float> logits(static_cast<size_t>(l.max_rows * V));
  for (int i = 0; i < n_seqs; ++i) ASSERT_TRUE(r.start_sequence(i).ok());
  int64_t compared = 0;
  for (;;) {
    std::vector<StepRequest> reqs;
    std::vector<int> keep;
    for (int i = 0; i < n_seqs; ++i) {
      const int S = kMinS + i;
      const int64_t prompt = 3 + i;
      if (p0[i] >= n_tokens) continue;
      if (p0[i] < prompt) {  // the prompt first, in one chunk
        reqs.push_back({i, 0, static_cast<int32_t>(prompt), n_tokens, toks.data()});
        keep.push_back(static_cast<int>(prompt));
        continue;
      }
      const int rows = static_cast<int>(std::min<int64_t>(S, n_tokens - p0[i]));
      const int k = std::min(rows, 1 + (step_no[i]++ * 11 + i) % S);
      for (int s = 0; s < rows; ++s) {
        const int32_t t = toks[p0[i] + s];
        rows_tok[i][s] = s < k ? t : static_cast<int32_t>((t + 1 + s) % V);
      }
      reqs.push_back({i, p0[i], rows, n_tokens, rows_tok[i].data()});
      keep.push_back(k);
      ++seen[i][k];
    }
    if (reqs.empty()) break;
    const Status st = r.forward(reqs, logits.data(), nullptr);
    ASSERT_TRUE(st.ok()) << st.message();
    int64_t row = 0;
    for (size_t j = 0; j < reqs.size(); ++j) {
      const StepRequest& q = reqs[j];
      for (int s = 0; s < keep[j]; ++s, ++compared)
        ASSERT_TRUE(std::equal(logits.begin() + (row + s) * V, logits.begin() + (row + s + 1) * V,
                               want.begin() + (q.p0 + s) * V))
            << preset << ": S = " << kMinS + q.seq << ", position " << q.p0 + s << " (row " << s << " of "
            << q.n << ", " << keep[j] << " accepted)";
      p0[q.seq] = q.p0 + keep[j];
      row += q.n;
    }
  }
  for (int i = 0; i < n_seqs; ++i)
    for (int k = 1; k <= kMinS + i; ++k)
      EXPECT_GT(seen[i][k], 0) << preset << ": S = " << kMinS + i << " never accepted exactly " << k << " rows";
  std::printf("  %s: %lld accepted rows equal plain decoding\n", preset, static_cast<long long>(compared));
}

TEST(SpeculativeRows, ForcedPatternsEqualPlainDecodeTiny) { check_preset("tiny", 150); }
TEST(SpeculativeRows, ForcedPatternsEqualPlainDecodeTiny2) { check_preset("tiny2", 280); }

}  // namespace
}  // namespace dsv4
