// The engine's decode step allocates nothing once requests are running (metadata -> forward ->
// sampling -> verification -> commit -> drafting), plain, with MTP and with DSpark (exact and
// rejection), greedy and sampled requests, with penalties, logit_bias and a JSON schema, in one batch — but for the streaming work: each
// request's RequestUpdate of the step (its token list, handed to the caller) is one allocation,
// and with logprobs one more for the list and one per token's top list (copies the caller
// keeps; the executor computes them into its own buffers). Admission and text are streaming
// work too and are not measured here.
// (DSV4_ALLOC_TRAP=1 traps at the first counted allocation, for a debugger.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runtime/engine.h"
#include "support/alloc_counter.h"
#include "support/tiny_model.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"

namespace dsv4 {
namespace {

TEST(EngineAlloc, DecodeStepsAllocateNothing) {
  auto files = make_tiny_tokenizer();
  ASSERT_TRUE(files.ok());
  auto tok = Tokenizer::from_json(files->tokenizer_json, "tiny");
  ASSERT_TRUE(tok.ok());
  const Tokenizer& tokenizer = *tok;
  struct Mode {
    const char* name;
    const char* preset;
    bool mtp;
    int gamma;
    bool rejection;
  };
  for (const Mode& mode : {Mode{"plain", "tiny", false, 0, false}, Mode{"mtp", "tiny", true, 0, false},
                           Mode{"dspark", "tiny-ds", false, 3, false}, Mode{"dspark rejection", "tiny-ds", false, 3, true}}) {
    SCOPED_TRACE(mode.name);
    const test::TinyModel& m = test::tiny_model(mode.preset, TinyQuant::kFp8, 2);
    Limits l;
    l.max_batch = 3;
    l.max_seqs = 3;
    l.max_rows = 32;
    l.max_chunk = 16;
    l.max_context = 256;
    l.n_threads = 2;
    EngineOptions o;
    o.tokenizer = &tokenizer;
    o.mtp = mode.mtp;
    o.dspark_gamma = mode.gamma;
    o.dspark_rejection = mode.rejection;
    auto e = Engine::create(m.cfg, *m.w, l, o);
    ASSERT_TRUE(e.ok()) << e.message();
    for (int i = 0; i < 3; ++i) {
      GenerationRequest g;
      g.prompt = test::random_tokens(5 + 4 * i, 3 + i, m.cfg.vocab_size);
      g.max_tokens = 80;
      g.stop_at_eos = false;
      g.sampling = {i == 1 ? 0.8f : 0.0f, i == 2 ? 0.9f : 1.0f, 5};
      g.logprobs = i == 0 ? 3 : i == 1 ? 0 : -1;  // top 3, the token's own only, none
      if (i == 0) g.adjust = {0.5f, 0.25f, 1.2f, {{3, 2.0f}}};  // counts sized at its first row
      if (i == 1) g.adjust.logit_bias = {{5, -INFINITY}};
      if (i == 2) {  // a value of at least 60 tokens: the mask runs in every measured step
        g.constraint.json_schema = R"({"type": "array", "items": {"type": "integer"}, "minItems": 60})";
        g.stop_at_eos = true;
      }
      ASSERT_TRUE((*e)->add_request(g).ok());
    }
    for (int s = 0; s < 4; ++s) ASSERT_TRUE((*e)->step().ok());  // admission and prefill
    int64_t rows = 0, top_lists = 0;
    for (int s = 0; s < 10; ++s) {
      test::AllocCounter count;
      auto rep = (*e)->step();
      ASSERT_TRUE(rep.ok()) << rep.message();
      const int64_t allocations = count.allocations();
      int64_t streaming = 0;
      for (const RequestUpdate& u : (*e)->updates()) {
        streaming += 1;
        if (!u.logprobs.empty()) streaming += 1;
        for (const TokenLogprob& lp : u.logprobs) streaming += lp.top.empty() ? 0 : 1;
        for (const TokenLogprob& lp : u.logprobs) top_lists += lp.top.size() == 3 ? 1 : 0;
      }
      EXPECT_EQ(allocations, streaming) << "step " << s;
      ASSERT_FALSE((*e)->idle());
      rows += rep->rows;
    }
    EXPECT_GE(rows, 30) << "every step decodes the three requests";
    EXPECT_GE(top_lists, 10) << "request 0's top-3 logprobs came with every step";
  }
}

}  // namespace
}  // namespace dsv4
