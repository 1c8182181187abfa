// Several choices of one request (GenerationRequest::n; runtime/scheduler.h: forks): each
// choice's tokens and logprobs equal a lone request's with its seed (choice_seed), the
// prompt's positions 0 .. L − 2 are computed once, a choice that cannot fork waits and
// recomputes, a parent that ends before the fork ends its choices.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/engine.h"
#include "support/tiny_model.h"

namespace dsv4 {
namespace {
namespace choices {  // apart from the other tests of the unity build

Limits limits(int seqs) {
  Limits l;
  l.max_batch = seqs;
  l.max_seqs = seqs;
  l.max_rows = 32;
  l.max_chunk = 16;
  l.max_decode_rows = 2;
  l.max_context = 512;
  l.page_tokens = 32;
  l.n_threads = 2;
  return l;
}

struct Outcome {
  std::vector<std::vector<int32_t>> out;             // by id
  std::vector<std::vector<TokenLogprob>> logprobs;   // by id
  std::vector<RequestUpdate> finals;                 // by id
  int64_t rows = 0, forked = 0, drafts = 0;
};

Outcome drain(Engine& e) {
  Outcome s;
  while (!e.idle()) {
    auto rep = e.step();
    EXPECT_TRUE(rep.ok()) << rep.message();
    if (!rep.ok()) break;
    s.rows += rep->rows;
    s.forked += rep->forked;
    s.drafts += rep->drafts;
    for (RequestUpdate& u : e.updates()) {
      const size_t id = static_cast<size_t>(u.id);
      s.out.resize(std::max(s.out.size(), id + 1));
      s.logprobs.resize(s.out.size());
      s.finals.resize(s.out.size());
      s.out[id].insert(s.out[id].end(), u.tokens.begin(), u.tokens.end());
      s.logprobs[id].insert(s.logprobs[id].end(), u.logprobs.begin(), u.logprobs.end());
      EXPECT_FALSE(s.finals[id].finished) << "choice " << id << " updated after its last update";
      if (u.finished) s.finals[id] = u;
    }
  }
  return s;
}

Outcome run(const test::TinyModel& m, const Limits& l, const EngineOptions& opt,
            const std::vector<GenerationRequest>& reqs) {
  auto e = Engine::create(m.cfg, *m.w, l, opt);
  EXPECT_TRUE(e.ok()) << e.message();
  if (!e.ok()) return {};
  for (const auto& r : reqs) EXPECT_TRUE((*e)->add_request(r).ok());
  return drain(**e);
}

Outcome run(const test::TinyModel& m, const Limits& l, bool mtp, const std::vector<GenerationRequest>& reqs) {
  EngineOptions opt;
  opt.mtp = mtp;
  return run(m, l, opt, reqs);
}

bool same(const std::vector<TokenLogprob>& a, const std::vector<TokenLogprob>& b) {
  if (a.size() != b.size()) return false;
  for (size_t j = 0; j < a.size(); ++j)
    if (a[j].token != b[j].token || a[j].logprob != b[j].logprob || a[j].top != b[j].top) return false;
  return true;
}

GenerationRequest request(const test::TinyModel& m, int prompt_len, int32_t n) {
  GenerationRequest g;
  g.prompt = test::random_tokens(prompt_len, 7 + prompt_len, m.cfg.vocab_size);
  g.max_tokens = 12;
  g.stop_at_eos = false;
  g.sampling = {0.9f, 0.95f, 4242};
  g.logprobs = 2;
  g.n = n;
  return g;
}

// n = 4 equals 4 lone requests with the derived seeds, token for token and logprob for
// logprob, for prompts ending inside a block, at a block's start (L − 1 = 64) and of one
// token; with and without MTP. Rows: the prompt's L − 1 once, then each choice's own.
TEST(Choices, EqualLoneRequestsWithTheirSeeds) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  for (bool mtp : {false, true})
    for (int len : {1, 5, 47, 65}) {
      const int32_t n = 4;
      const GenerationRequest g = request(m, len, n);
      const Outcome many = run(m, limits(n), mtp, {g});
      std::vector<GenerationRequest> lone(n, g);
      for (int32_t k = 0; k < n; ++k) {
        lone[k].n = 1;
        lone[k].sampling.seed = choice_seed(g.sampling.seed, k);
      }
      const Outcome ones = run(m, limits(n), mtp, lone);
      ASSERT_EQ(many.out.size(), static_cast<size_t>(n));
      EXPECT_EQ(many.forked, n - 1);
      int64_t generated = 0;
      for (int32_t k = 0; k < n; ++k) {
        EXPECT_EQ(many.out[k], ones.out[k]) << "mtp " << mtp << " len " << len << " choice " << k;
        EXPECT_TRUE(same(many.logprobs[k], ones.logprobs[k])) << "mtp " << mtp << " len " << len << " choice " << k;
        EXPECT_EQ(many.finals[k].reason, FinishReason::kLength);
        EXPECT_EQ(many.finals[k].prompt_tokens, len);
        EXPECT_EQ(many.finals[k].completion_tokens, g.max_tokens);
        generated += static_cast<int64_t>(many.out[k].size());
      }
      EXPECT_NE(many.out[0], many.out[1]) << "the choices sample with different seeds";
      if (!mtp) {  // each choice feeds its sampled rows: L − 1 + its own tokens' rows
        EXPECT_EQ(many.rows, (len - 1) + generated) << "len " << len;
        EXPECT_EQ(ones.rows, n * (len - 1) + generated) << "len " << len;
      }
    }
}

// The lone requests of g's choices: n = 1, seed choice_seed(seed, k).
std::vector<GenerationRequest> lone_choices(const GenerationRequest& g) {
  std::vector<GenerationRequest> lone(static_cast<size_t>(g.n), g);
  for (int32_t k = 0; k < g.n; ++k) {
    lone[k].n = 1;
    lone[k].sampling.seed = choice_seed(g.sampling.seed, k);
  }
  return lone;
}

// DSpark (the drafter's rings are copied at the fork) and a parent that starts from a
// prefix-cache hit (its shared blocks stay shared, the fork copies the begun one): the same
// tokens as lone requests.
TEST(Choices, WithDsparkAndAPrefixHit) {
  {
    const test::TinyModel& m = test::tiny_model("tiny-ds", TinyQuant::kFp8, 2);
    EngineOptions opt;
    opt.dspark_gamma = 3;
    Limits l = limits(3);
    l.max_rows = 64;
    GenerationRequest g = request(m, 40, 3);
    g.max_tokens = 20;
    const Outcome many = run(m, l, opt, {g});
    const Outcome ones = run(m, l, opt, lone_choices(g));
    EXPECT_EQ(many.forked, 2);
    EXPECT_GT(many.drafts, 0);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(many.out[k], ones.out[k]) << "dspark choice " << k;
  }
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  Limits l = limits(3);
  l.prefix_blocks = 8;
  GenerationRequest first = request(m, 80, 1);  // caches blocks 0 and 1 of the prompt
  first.max_tokens = 2;
  GenerationRequest g = request(m, 80, 3);      // the same 80 tokens: a hit, then the fork
  auto e = Engine::create(m.cfg, *m.w, l, EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_TRUE((*e)->add_request(first).ok());
  drain(**e);
  ASSERT_TRUE((*e)->add_request(g).ok());
  const Outcome many = drain(**e);
  EXPECT_EQ(many.forked, 2);
  EXPECT_GT(many.finals[1].cached_tokens, 0) << "the parent started from the prefix cache";
  const Outcome ones = run(m, l, false, lone_choices(g));
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(many.out[1 + k], ones.out[k]) << "prefix hit, choice " << k;
    EXPECT_TRUE(same(many.logprobs[1 + k], ones.logprobs[k])) << "prefix hit, choice " << k;
  }
}

// Penalties and logit_bias (counts per slot, rebuilt for each choice's id from its tokens):
// the same tokens and logprobs as lone requests, with and without MTP.
TEST(Choices, WithPenalties) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  for (bool mtp : {false, true}) {
    GenerationRequest g = request(m, 21, 3);
    g.max_tokens = 24;
    g.adjust.presence_penalty = 0.5f;
    g.adjust.frequency_penalty = 0.75f;
    g.adjust.repetition_penalty = 1.3f;
    g.adjust.logit_bias = {{3, -5.0f}, {40, 2.0f}};
    const Outcome many = run(m, limits(3), mtp, {g});
    const Outcome ones = run(m, limits(3), mtp, lone_choices(g));
    EXPECT_EQ(many.forked, 2);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(many.out[k], ones.out[k]) << "mtp " << mtp << " choice " << k;
      EXPECT_TRUE(same(many.logprobs[k], ones.logprobs[k])) << "mtp " << mtp << " choice " << k;
    }
  }
}

// Choice 0 keeps the request's seed: n = 1 is unchanged.
TEST(Choices, ChoiceZeroKeepsTheSeed) {
  EXPECT_EQ(choice_seed(4242, 0), 4242u);
  EXPECT_NE(choice_seed(4242, 1), choice_seed(4242, 2));
  EXPECT_EQ(choice_seed(0, 1), 0xE220A8397B1DCDAFull);  // SplitMix64's first output from state 0
}

// Two slots for four choices: one forks, two wait as lone requests and recompute the prompt;
// the tokens are the same.
TEST(Choices, ChoicesThatDoNotFitWaitAndRecompute) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  const GenerationRequest g = request(m, 40, 4);
  const Outcome four = run(m, limits(4), false, {g});
  const Outcome two = run(m, limits(2), false, {g});
  EXPECT_EQ(two.forked, 1);
  ASSERT_EQ(two.out.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(two.out[k], four.out[k]) << "choice " << k;
}

// A parent cancelled while it fills its prompt ends every choice.
TEST(Choices, CancelBeforeTheForkEndsEveryChoice) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  auto e = Engine::create(m.cfg, *m.w, limits(4), EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  auto id = (*e)->add_request(request(m, 60, 3));  // 4 chunks of 16
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE((*e)->step().ok());
  (*e)->cancel(*id);
  const Outcome s = drain(**e);
  ASSERT_EQ(s.finals.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(s.finals[k].finished);
    EXPECT_EQ(s.finals[k].reason, FinishReason::kCancelled) << "choice " << k;
  }
  auto next = (*e)->add_request(request(m, 5, 1));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 3) << "a request of n choices takes n ids";
}

TEST(Choices, RefusesBadN) {
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8, 2);
  auto e = Engine::create(m.cfg, *m.w, limits(4), EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  for (int32_t n : {0, kMaxChoices + 1}) {
    Status st = (*e)->validate(request(m, 5, n));
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("n:"), std::string::npos) << st.message();
  }
}

}  // namespace choices
}  // namespace
}  // namespace dsv4
