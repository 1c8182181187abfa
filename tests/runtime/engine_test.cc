// Engine: continuous batching with sampling and MTP speculative decode.
// Greedy and seeded sampling give the same tokens with and without MTP, and
// the same tokens whatever the batch; request validation errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/tiny_checkpoint.h"
#include "model/weights.h"
#include "support/tiny_model.h"
#include "runtime/engine.h"

namespace dsv4 {
namespace {

using Loaded = test::TinyModel;

const Loaded& model(const std::string& preset, TinyQuant q) { return test::tiny_model(preset, q, 2); }

Limits limits(int batch) {
  Limits l;
  l.max_batch = batch;
  l.max_seqs = batch;
  l.max_rows = 32;
  l.max_chunk = 16;
  l.max_decode_rows = 2;
  l.max_context = 512;
  l.n_threads = 2;
  return l;
}

struct RunStats {
  std::vector<std::vector<int32_t>> out;
  int drafts = 0, accepted = 0;
  std::vector<int> batches;
};

RunStats run(const Loaded& m, int batch, bool mtp, const std::vector<GenerationRequest>& reqs,
            std::function<int32_t(int, int64_t)> force = {}) {
  auto e = Engine::create(m.cfg, *m.w, limits(batch), EngineOptions{mtp, force});
  EXPECT_TRUE(e.ok()) << e.message();
  for (const auto& r : reqs) EXPECT_TRUE((*e)->add_request(r).ok());
  RunStats s;
  while (!(*e)->idle()) {
    auto rep = (*e)->step();
    EXPECT_TRUE(rep.ok()) << rep.message();
    if (!rep.ok()) break;
    s.drafts += rep->drafts;
    s.accepted += rep->accepted;
    s.batches.push_back(rep->batch);
  }
  for (int i = 0; i < (*e)->n_requests(); ++i) s.out.push_back((*e)->result(i).output);
  return s;
}

std::vector<GenerationRequest> requests(float temperature, float top_p) {
  std::vector<GenerationRequest> v;
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 17, 42}, {1}, {300, 12, 77, 9, 18, 400, 31, 2, 2, 7, 61, 99, 100, 101, 102, 103, 104, 105, 106, 13},
      {8, 8, 8, 8, 8}, {444, 3}};
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest g;
    g.prompt = prompts[i];
    g.max_tokens = 20 + 3 * static_cast<int>(i);
    g.stop_at_eos = false;
    g.sampling = {temperature, top_p, 1000 + i};
    v.push_back(g);
  }
  return v;
}

TEST(Engine, MtpGivesTheSameTokensGreedy) {
  for (TinyQuant q : {TinyQuant::kFp8, TinyQuant::kNone}) {
    const Loaded& m = model("tiny", q);
    const auto reqs = requests(0.0f, 1.0f);
    const RunStats plain = run(m, 3, false, reqs);
    const RunStats spec = run(m, 3, true, reqs);
    ASSERT_EQ(plain.out, spec.out);
    EXPECT_GT(spec.drafts, 0);
    std::printf("tiny %s greedy: MTP acceptance %d/%d = %.2f\n", std::string(tiny_quant_name(q)).c_str(),
                spec.accepted, spec.drafts, spec.drafts ? double(spec.accepted) / spec.drafts : 0.0);
  }
}

// Forced accept patterns (runtime.md §8): drafts taken from the plain run are
// accepted, wrong ones rejected; either way the committed tokens are those of
// plain decoding, including drafts that cross CSA (4) and HCA (8) boundaries.
TEST(Engine, ForcedAcceptAndRejectPatterns) {
  for (const char* preset : {"tiny", "tiny2"}) {
    const Loaded& m = model(preset, TinyQuant::kFp8);
    for (float temp : {0.0f, 0.7f}) {
      const auto reqs = requests(temp, 1.0f);
      const RunStats plain = run(m, 3, false, reqs);
      // Position q's true token is output[q - prompt_len].
      auto truth = [&](int id, int64_t q) -> int32_t {
        const int64_t i = q - static_cast<int64_t>(reqs[id].prompt.size());
        return i >= 0 && i < static_cast<int64_t>(plain.out[id].size()) ? plain.out[id][i] : -1;
      };
      const int V = static_cast<int>(m.cfg.vocab_size);
      const RunStats all = run(m, 3, true, reqs, truth);
      ASSERT_EQ(all.out, plain.out) << preset;
      EXPECT_GT(all.accepted, all.drafts / 2) << preset;
      const RunStats none = run(m, 3, true, reqs, [&](int id, int64_t q) {
        const int32_t t = truth(id, q);
        return t < 0 ? -1 : (t + 1) % V;
      });
      ASSERT_EQ(none.out, plain.out) << preset;
      EXPECT_EQ(none.accepted, 0);
      const RunStats mixed = run(m, 3, true, reqs, [&](int id, int64_t q) {
        const int32_t t = truth(id, q);
        return t < 0 ? -1 : (q % 3 == 0 ? (t + 7) % V : t);
      });
      ASSERT_EQ(mixed.out, plain.out) << preset;
      EXPECT_GT(mixed.accepted, 0);
      EXPECT_LT(mixed.accepted, mixed.drafts);
    }
  }
}

TEST(Engine, MtpGivesTheSameTokensSampled) {
  const Loaded& m = model("tiny2", TinyQuant::kFp8);
  const auto reqs = requests(0.8f, 0.9f);
  const RunStats plain = run(m, 2, false, reqs);
  const RunStats spec = run(m, 2, true, reqs);
  ASSERT_EQ(plain.out, spec.out);
  std::printf("tiny2 sampled: MTP acceptance %d/%d\n", spec.accepted, spec.drafts);
}

TEST(Engine, TokensDoNotDependOnTheBatch) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  const auto reqs = requests(1.0f, 0.95f);
  const RunStats together = run(m, 4, true, reqs);
  bool varied = false;
  for (size_t i = 1; i < together.batches.size(); ++i) varied |= together.batches[i] != together.batches[0];
  EXPECT_TRUE(varied) << "the batch size should change as requests join and leave";
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RunStats alone = run(m, 1, false, {reqs[i]});
    ASSERT_EQ(alone.out[0], together.out[i]) << "request " << i;
    EXPECT_EQ(static_cast<int>(alone.out[0].size()), reqs[i].max_tokens);
  }
}

// Decode growth past the blocks: the step fails before the forward (on ranks, every rank at
// the same point: last_error_uniform), naming the cache; a stopped engine takes no step.
TEST(Engine, CacheExhaustionAndStop) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  Limits l = limits(1);
  l.page_tokens = 16;
  l.cache_blocks = 1;
  auto e = Engine::create(m.cfg, *m.w, l, EngineOptions{false, {}});
  ASSERT_TRUE(e.ok()) << e.message();
  GenerationRequest g;
  g.prompt = {1, 2, 3};
  g.max_tokens = 40;
  g.stop_at_eos = false;
  ASSERT_TRUE((*e)->add_request(g).ok());
  Status failed;
  for (int i = 0; i < 40 && failed.ok(); ++i) failed = (*e)->step().status();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("compressed cache exhausted"), std::string::npos) << failed.message();
  EXPECT_TRUE((*e)->last_error_uniform());
  ASSERT_TRUE((*e)->stop().ok());
  EXPECT_NE((*e)->step().status().message().find("stopped"), std::string::npos);
}

TEST(Engine, RejectsBadRequests) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  auto e = Engine::create(m.cfg, *m.w, limits(2), EngineOptions{false, {}});
  ASSERT_TRUE(e.ok());
  GenerationRequest g;
  EXPECT_NE((*e)->add_request(g).message().find("prompt is empty"), std::string::npos);
  g.prompt = {1, 512};
  EXPECT_NE((*e)->add_request(g).message().find("token 512 at index 1 outside the vocabulary [0, 512)"),
            std::string::npos);
  g.prompt = {1};
  g.sampling.temperature = -1;
  EXPECT_NE((*e)->add_request(g).message().find("temperature"), std::string::npos);
  g.sampling.temperature = 0;
  g.sampling.top_p = 0;
  EXPECT_NE((*e)->add_request(g).message().find("top_p"), std::string::npos);
  g.sampling.top_p = 1;
  g.max_tokens = 0;
  EXPECT_NE((*e)->add_request(g).message().find("max_tokens = 0"), std::string::npos);
  g.max_tokens = 4;
  g.stop_at_eos = false;
  EXPECT_TRUE((*e)->add_request(g).ok());
}

// Admission follows the compressed-cache pool: a prompt that can never fit is rejected,
// one that does not fit now waits until blocks come back, and its tokens are the same.
TEST(Engine, AdmissionWaitsForCacheBlocks) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  Limits l = limits(2);
  l.page_tokens = 32;
  l.cache_blocks = 3;  // 96 positions in all
  auto e = Engine::create(m.cfg, *m.w, l, EngineOptions{false, {}});
  ASSERT_TRUE(e.ok()) << e.message();
  GenerationRequest g;
  g.prompt = test::random_tokens(100, 9, m.cfg.vocab_size);
  g.stop_at_eos = false;
  EXPECT_NE((*e)->add_request(g).message().find("prompt of 100 tokens needs 4 compressed-cache blocks, cache_blocks = 3"),
            std::string::npos);
  // Two prompts of 40 tokens, 8 tokens each: 2 blocks apiece, so the second waits.
  std::vector<GenerationRequest> two(2, g);
  two[0].prompt = test::random_tokens(40, 10, m.cfg.vocab_size);
  two[1].prompt = test::random_tokens(40, 11, m.cfg.vocab_size);
  for (auto& r : two) r.max_tokens = 8;
  for (const auto& r : two) ASSERT_TRUE((*e)->add_request(r).ok());
  int max_batch = 0;
  while (!(*e)->idle()) {
    auto rep = (*e)->step();
    ASSERT_TRUE(rep.ok()) << rep.message();
    max_batch = std::max(max_batch, rep->batch);
  }
  EXPECT_EQ(max_batch, 1) << "the second request was admitted before blocks were free";
  const RunStats alone0 = run(m, 2, false, {two[0]}), alone1 = run(m, 2, false, {two[1]});
  EXPECT_EQ((*e)->result(0).output, alone0.out[0]);
  EXPECT_EQ((*e)->result(1).output, alone1.out[0]);
}

}  // namespace
}  // namespace dsv4

namespace dsv4 {
namespace {

// Prefix caching through the engine (with and without MTP): requests that repeat a long
// system prompt skip its cached blocks and produce the tokens of a run without the cache.
TEST(Engine, PrefixCacheHitsGiveTheSameTokens) {
  const Loaded& m = model("tiny", TinyQuant::kFp8);
  const auto system = test::random_tokens(100, 21, m.cfg.vocab_size);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest g;
    g.prompt = system;
    const auto user = test::random_tokens(5 + 7 * i, 30 + i, m.cfg.vocab_size);
    g.prompt.insert(g.prompt.end(), user.begin(), user.end());
    g.max_tokens = 12;
    g.stop_at_eos = false;
    g.sampling = {0.7f, 0.9f, 500u + i};
    reqs.push_back(g);
  }
  for (bool mtp : {false, true}) {
    Limits l = limits(1);  // one at a time: each request finds the previous ones' blocks
    l.page_tokens = 32;
    l.prefix_blocks = 8;
    auto e = Engine::create(m.cfg, *m.w, l, EngineOptions{mtp, {}});
    ASSERT_TRUE(e.ok()) << e.message();
    for (const auto& r : reqs) ASSERT_TRUE((*e)->add_request(r).ok());
    int64_t hit = 0;
    while (!(*e)->idle()) {
      auto rep = (*e)->step();
      ASSERT_TRUE(rep.ok()) << rep.message();
      hit += rep->prefix_hit_tokens;
    }
    EXPECT_EQ(hit, 2 * (96 - 4)) << "mtp " << mtp;  // requests 2 and 3 start at 92
    const RunStats plain = run(m, 1, mtp, reqs);
    for (int i = 0; i < 3; ++i) EXPECT_EQ((*e)->result(i).output, plain.out[i]) << "mtp " << mtp << " request " << i;
  }
}

}  // namespace
}  // namespace dsv4
