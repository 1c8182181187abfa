// Level-B forward (oracle/float_forward.h) on the tiny preset (model.md §14.1: W = 8, HCA
// ratio 8, index_topk 4 -> selection prunes from p = 19), in both storage forms: shapes and
// finiteness, causality, bit-exact prefix consistency, hash routing by tid2eid, reach of
// the compressed entries beyond the windows, the MTP row's token dependence, input errors.
#include "oracle/float_forward.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "oracle/tiny_checkpoint.h"

namespace dsv4 {
namespace {

// A tiny checkpoint written once per storage form into a fresh directory under
// $DSV4_TEST_TMP (or /tmp), loaded, and removed at exit.
struct TinyModel {
  std::string dir;
  ModelConfig cfg;
  Weights w;

  ~TinyModel() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

std::string fresh_dir() {
  const char* env = std::getenv("DSV4_TEST_TMP");
  const std::filesystem::path base = env != nullptr && *env != '\0' ? env : "/tmp";
  std::filesystem::create_directories(base);
  std::string pattern = (base / "floatref_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed under " << base;
  return pattern;
}

Weights load(const std::string& dir, const ModelConfig& cfg) {
  auto files = SafetensorsSet::open_dir(dir);
  EXPECT_TRUE(files.ok()) << files.message();
  auto w = load_weights(files.value(), cfg, nullptr);
  EXPECT_TRUE(w.ok()) << w.message();
  return std::move(w).value();
}

const TinyModel& tiny(TinyQuant quant) {
  static std::map<TinyQuant, std::unique_ptr<TinyModel>> models;
  auto& m = models[quant];
  if (!m) {
    m = std::make_unique<TinyModel>();
    m->dir = fresh_dir();
    const Status st = make_tiny_checkpoint(m->dir, "tiny", 7, quant);
    EXPECT_TRUE(st.ok()) << st.message();
    auto cfg = tiny_config("tiny", quant);
    EXPECT_TRUE(cfg.ok()) << cfg.message();
    m->cfg = cfg.value();
    m->w = load(m->dir, m->cfg);
  }
  return *m;
}

// Deterministic pseudo-random tokens in [0, V).
std::vector<int32_t> make_tokens(int64_t n, int64_t V, uint32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 12345u;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(V));
  }
  return t;
}

FloatForwardOutput run(const TinyModel& m, const std::vector<int32_t>& tokens, bool mtp) {
  auto r = float_forward(m.cfg, m.w, tokens, mtp);
  EXPECT_TRUE(r.ok()) << r.message();
  return std::move(r).value();
}

// Rows [r0, r1) of two [*, V] logit arrays are bit-identical.
bool rows_equal(const std::vector<float>& a, const std::vector<float>& b, int64_t V, int64_t r0,
                int64_t r1) {
  if (r1 <= r0) return true;
  return std::memcmp(a.data() + r0 * V, b.data() + r0 * V, sizeof(float) * (r1 - r0) * V) == 0;
}

const Decision* find_decision(const FloatForwardOutput& o, bool mtp, bool idx, int layer,
                                   int64_t pos) {
  for (const auto& d : o.decisions)
    if (d.mtp == mtp && d.idx == idx && d.layer == layer && d.pos == pos) return &d;
  return nullptr;
}

constexpr int64_t kLen = 40;  // > W = 8, several HCA ratios (8), > 4·index_topk + 3 = 19

class FloatForwardTest : public ::testing::TestWithParam<TinyQuant> {};

TEST_P(FloatForwardTest, ShapesFiniteAndDecisions) {
  const TinyModel& m = tiny(GetParam());
  const ModelConfig& c = m.cfg;
  const int64_t V = c.vocab_size;
  const auto tokens = make_tokens(kLen, V, 1);
  const FloatForwardOutput o = run(m, tokens, true);
  EXPECT_EQ(o.n_tokens, kLen);
  EXPECT_EQ(o.vocab, V);
  ASSERT_EQ(o.logits.size(), static_cast<size_t>(kLen * V));
  ASSERT_EQ(o.mtp_logits.size(), static_cast<size_t>((kLen - 1) * V));
  for (float v : o.logits) ASSERT_TRUE(std::isfinite(v));
  for (float v : o.mtp_logits) ASSERT_TRUE(std::isfinite(v));
  // Not degenerate: every row has spread, and neighbouring rows differ.
  for (int64_t p = 0; p < kLen; ++p) {
    const auto [lo, hi] = std::minmax_element(o.logits.begin() + p * V, o.logits.begin() + (p + 1) * V);
    EXPECT_GT(*hi - *lo, 1e-2f) << "row " << p;
    if (p > 0) {
      EXPECT_NE(std::memcmp(&o.logits[(p - 1) * V], &o.logits[p * V], sizeof(float) * V), 0);
    }
  }

  // Decisions: one moe row per layer and position (main and MTP), one idx row per CSA
  // layer and position with min(index_topk, ⌊(p+1)/4⌋) distinct visible entries.
  for (int l = 0; l < c.num_hidden_layers; ++l)
    for (int64_t p = 0; p < kLen; ++p) {
      const Decision* moe = find_decision(o, false, false, l, p);
      ASSERT_NE(moe, nullptr) << "layer " << l << " pos " << p;
      ASSERT_EQ(moe->selected.size(), static_cast<size_t>(c.num_experts_per_tok));
      std::vector<int32_t> s = moe->selected;
      std::sort(s.begin(), s.end());
      EXPECT_TRUE(std::adjacent_find(s.begin(), s.end()) == s.end());
      for (int32_t e : s) EXPECT_TRUE(e >= 0 && e < c.n_routed_experts);
      const Decision* idx = find_decision(o, false, true, l, p);
      if (c.attention_kind(l) != AttentionKind::kCSA) {
        EXPECT_EQ(idx, nullptr);
        continue;
      }
      ASSERT_NE(idx, nullptr) << "layer " << l << " pos " << p;
      const int64_t n_vis = (p + 1) / 4;
      ASSERT_EQ(static_cast<int64_t>(idx->selected.size()), std::min(c.index_topk, n_vis));
      s = idx->selected;
      std::sort(s.begin(), s.end());
      EXPECT_TRUE(std::adjacent_find(s.begin(), s.end()) == s.end());
      for (int32_t i : s) EXPECT_TRUE(i >= 0 && i < n_vis);
    }
  for (int64_t p = 0; p + 1 < kLen; ++p) EXPECT_NE(find_decision(o, true, false, 0, p), nullptr);
  EXPECT_EQ(find_decision(o, true, false, 0, kLen - 1), nullptr);
}

TEST_P(FloatForwardTest, Causal) {
  const TinyModel& m = tiny(GetParam());
  const int64_t V = m.cfg.vocab_size;
  const auto tokens = make_tokens(kLen, V, 2);
  const FloatForwardOutput base = run(m, tokens, true);
  for (int64_t c : {1, 9, 20, 33, 39}) {  // tokens from position c on are changed
    auto t2 = tokens;
    for (int64_t i = c; i < kLen; ++i) t2[i] = static_cast<int32_t>((t2[i] + 1 + i) % V);
    const FloatForwardOutput o = run(m, t2, true);
    EXPECT_TRUE(rows_equal(o.logits, base.logits, V, 0, c)) << "change at " << c;
    EXPECT_FALSE(rows_equal(o.logits, base.logits, V, c, c + 1)) << "change at " << c;
    // MTP row p reads tokens <= p+1.
    EXPECT_TRUE(rows_equal(o.mtp_logits, base.mtp_logits, V, 0, c - 1)) << "change at " << c;
    EXPECT_FALSE(rows_equal(o.mtp_logits, base.mtp_logits, V, c - 1, c)) << "change at " << c;
  }
}

TEST_P(FloatForwardTest, PrefixEqualsFullSequenceBitExact) {
  const TinyModel& m = tiny(GetParam());
  const int64_t V = m.cfg.vocab_size;
  const auto tokens = make_tokens(kLen, V, 3);
  const FloatForwardOutput full = run(m, tokens, true);
  for (int64_t k : {1, 2, 3, 4, 7, 8, 9, 16, 19, 20, 27, 39}) {
    const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + k);
    const FloatForwardOutput o = run(m, prefix, true);
    ASSERT_EQ(o.logits.size(), static_cast<size_t>(k * V));
    EXPECT_TRUE(rows_equal(o.logits, full.logits, V, 0, k)) << "prefix " << k;
    ASSERT_EQ(o.mtp_logits.size(), static_cast<size_t>((k - 1) * V));
    EXPECT_TRUE(rows_equal(o.mtp_logits, full.mtp_logits, V, 0, k - 1)) << "prefix " << k;
  }
}

// With windows of 8 in each of the 4 layers, token 0 reaches row 39 (39 positions later)
// only through compressed entries (HCA layer 2, CSA layers 1 and 3).
TEST_P(FloatForwardTest, CompressedEntriesReachBeyondTheWindows) {
  const TinyModel& m = tiny(GetParam());
  const int64_t V = m.cfg.vocab_size;
  ASSERT_LT(m.cfg.num_hidden_layers * (m.cfg.sliding_window - 1), kLen - 1);
  auto tokens = make_tokens(kLen, V, 4);
  const FloatForwardOutput base = run(m, tokens, false);
  tokens[0] = static_cast<int32_t>((tokens[0] + 5) % V);
  const FloatForwardOutput o = run(m, tokens, false);
  EXPECT_FALSE(rows_equal(o.logits, base.logits, V, kLen - 1, kLen));
}

TEST_P(FloatForwardTest, HashLayersRouteByTid2eid) {
  const TinyModel& m = tiny(GetParam());
  const ModelConfig& c = m.cfg;
  const int64_t V = c.vocab_size, K = c.num_experts_per_tok;
  ASSERT_GE(c.num_hash_layers, 1);
  const auto tokens = make_tokens(kLen, V, 5);
  const FloatForwardOutput base = run(m, tokens, false);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const auto& t2e = m.w.layers[l].ffn.tid2eid;
    ASSERT_EQ(!t2e.empty(), c.is_hash_layer(l)) << "layer " << l;
    if (t2e.empty()) continue;
    for (int64_t p = 0; p < kLen; ++p) {
      const Decision* d = find_decision(base, false, false, l, p);
      ASSERT_NE(d, nullptr);
      const std::vector<int32_t> row(t2e.begin() + tokens[p] * K, t2e.begin() + (tokens[p] + 1) * K);
      EXPECT_EQ(d->selected, row) << "layer " << l << " pos " << p;
    }
  }

  // A private copy of the weights whose tid2eid row of tokens[20] is edited in layer 0.
  Weights w = load(m.dir, c);
  const int32_t tok = tokens[20];
  const int64_t first = std::find(tokens.begin(), tokens.end(), tok) - tokens.begin();
  auto& t2e = w.layers[0].ffn.tid2eid;
  std::vector<int32_t> row(t2e.begin() + tok * K, t2e.begin() + (tok + 1) * K);
  // Reordering the row leaves the result unchanged (K = 2: the normalizing sum commutes).
  ASSERT_EQ(K, 2);
  std::swap(t2e[tok * K], t2e[tok * K + 1]);
  auto r = float_forward(c, w, tokens, false);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(rows_equal(r->logits, base.logits, V, 0, kLen));
  // Another expert set changes the logits from the token's first occurrence on.
  for (int64_t k = 0; k < K; ++k) {
    int32_t e = row[k];
    while (std::find(row.begin(), row.end(), e) != row.end()) e = (e + 1) % c.n_routed_experts;
    row[k] = e;
    t2e[tok * K + k] = e;
  }
  r = float_forward(c, w, tokens, false);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(rows_equal(r->logits, base.logits, V, 0, first));
  EXPECT_FALSE(rows_equal(r->logits, base.logits, V, first, first + 1));
  const Decision* d = find_decision(r.value(), false, false, 0, first);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->selected, row);
}

TEST_P(FloatForwardTest, MtpRowReadsNextTokenOnly) {
  const TinyModel& m = tiny(GetParam());
  const int64_t V = m.cfg.vocab_size;
  const auto tokens = make_tokens(kLen, V, 6);
  const FloatForwardOutput base = run(m, tokens, true);
  for (int64_t p : {0, 5, 18, 30, 38}) {
    auto t2 = tokens;  // only tokens[p+1] changes
    t2[p + 1] = static_cast<int32_t>((t2[p + 1] + 3) % V);
    const FloatForwardOutput o = run(m, t2, true);
    EXPECT_TRUE(rows_equal(o.logits, base.logits, V, 0, p + 1)) << p;
    EXPECT_TRUE(rows_equal(o.mtp_logits, base.mtp_logits, V, 0, p)) << p;
    EXPECT_FALSE(rows_equal(o.mtp_logits, base.mtp_logits, V, p, p + 1)) << p;
  }
  EXPECT_TRUE(run(m, {tokens[0]}, true).mtp_logits.empty());
}

INSTANTIATE_TEST_SUITE_P(Tiny, FloatForwardTest, ::testing::Values(TinyQuant::kFp8, TinyQuant::kNone),
                         [](const auto& info) { return std::string(tiny_quant_name(info.param)); });

// The FP8 / FP4 storage of the same samples (dequantized exactly) gives logits close to
// the BF16 storage: a wrong scale index or nibble order would break the correlation.
TEST(FloatForward, StorageFormsAgree) {
  const TinyModel& q = tiny(TinyQuant::kFp8);
  const TinyModel& b = tiny(TinyQuant::kNone);
  const auto tokens = make_tokens(kLen, q.cfg.vocab_size, 9);
  const FloatForwardOutput oq = run(q, tokens, true), ob = run(b, tokens, true);
  auto corr = [](const std::vector<float>& x, const std::vector<float>& y) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    const double n = static_cast<double>(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      sx += x[i];
      sy += y[i];
      sxx += x[i] * x[i];
      syy += y[i] * y[i];
      sxy += x[i] * y[i];
    }
    return (sxy - sx * sy / n) / std::sqrt((sxx - sx * sx / n) * (syy - sy * sy / n));
  };
  EXPECT_GT(corr(oq.logits, ob.logits), 0.9);  // measured 0.97 (seed 7)
  EXPECT_GT(corr(oq.mtp_logits, ob.mtp_logits), 0.9);
}

TEST(FloatForward, RejectsBadInput) {
  const TinyModel& m = tiny(TinyQuant::kFp8);
  const int64_t V = m.cfg.vocab_size;
  auto r = float_forward(m.cfg, m.w, {}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("empty"), std::string::npos) << r.message();
  r = float_forward(m.cfg, m.w, {1, static_cast<int32_t>(V), 2}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("tokens[1]"), std::string::npos) << r.message();
  r = float_forward(m.cfg, m.w, {-1}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("tokens[0] = -1"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace dsv4
