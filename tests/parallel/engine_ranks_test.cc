// The Engine on several ranks (runtime.md §6): what rank 0 reports — tokens, logprobs, prompt
// logprobs, finish reasons after stop ids, a cancel and preemption — equals a one-rank engine
// on the same requests, for every layout the world admits, plain, with MTP and with DSpark
// (the same drafts: the same drafts accepted per round), and with every rank full. The other
// ranks follow rank 0's steps until it stops. Slots and pages are per rank, so with the same
// limits ranks admit more than one rank does and schedule differently: a request's tokens are
// its own (seed and position), a cancel's cut and the step counters are the schedule's.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/placement.h"
#include "model/weights.h"
#include "parallel/communicator.h"
#include "parallel/rank_groups.h"
#include "runtime/engine.h"
#include "support/tiny_model.h"
#include "text/tiny_tokenizer.h"

namespace dsv4 {

Communicator& comm();  // main.cc

namespace {

struct Report {
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, std::vector<TokenLogprob>> logprobs, prompt_logprobs;
  std::map<int64_t, FinishReason> reason;
  int64_t drafts = 0, accepted = 0, rounds = 0;
  std::vector<int64_t> accepted_at = std::vector<int64_t>(StepReport::kMaxAcceptedAt, 0);
  int64_t preempted = 0;
  int32_t most_running = 0, most_queued = 0;  // after any step
};

void record(Report& r, const StepReport& rep, std::vector<RequestUpdate>& updates) {
  r.drafts += rep.drafts;
  r.accepted += rep.accepted;
  r.rounds += rep.rounds;
  r.preempted += rep.preempted;
  for (int k = 0; k < StepReport::kMaxAcceptedAt; ++k) r.accepted_at[k] += rep.accepted_at[k];
  for (RequestUpdate& u : updates) {
    auto& t = r.tokens[u.id];
    t.insert(t.end(), u.tokens.begin(), u.tokens.end());
    auto& l = r.logprobs[u.id];
    l.insert(l.end(), u.logprobs.begin(), u.logprobs.end());
    auto& p = r.prompt_logprobs[u.id];
    p.insert(p.end(), u.prompt_logprobs.begin(), u.prompt_logprobs.end());
    if (u.finished) r.reason[u.id] = u.reason;
  }
}

Limits engine_limits() {
  Limits l;
  l.max_batch = 3;
  l.max_seqs = 3;
  l.max_rows = 24;
  l.max_chunk = 8;
  l.max_context = 256;
  l.page_tokens = 16;
  l.cache_blocks = 4;  // small enough that decode preempts
  l.n_threads = 1;
  return l;
}

std::vector<GenerationRequest> requests(int64_t vocab) {
  std::vector<GenerationRequest> v;
  for (int i = 0; i < 5; ++i) {
    GenerationRequest g;
    g.prompt = test::random_tokens(4 + 5 * i, 300 + i, vocab);
    g.max_tokens = std::min(30 + 3 * i, 38);  // with DSpark's 3 draft rows at most 64 positions: 4 pages
    g.stop_at_eos = false;
    g.sampling = {i % 2 ? 0.8f : 0.0f, 0.9f, static_cast<uint64_t>(11 + i)};
    g.logprobs = i % 3 == 0 ? 3 : -1;
    if (i == 2)  // a quarter of the vocabulary: met within a few tokens
      for (int32_t t = 0; t < vocab / 4; ++t) g.stop_ids.push_back(t);
    v.push_back(g);
  }
  GenerationRequest score;  // prompt logprobs only
  score.prompt = test::random_tokens(19, 400, vocab);
  score.max_tokens = 0;
  score.prompt_logprobs = true;
  score.logprobs = 2;
  v.push_back(score);
  return v;
}

// A rank other than 0: steps until rank 0 stops the engine.
void follow(Engine& e) {
  while (!e.stopped()) {
    auto rep = e.step();
    EXPECT_TRUE(rep.ok()) << rep.message();
    if (!rep.ok()) break;
  }
}

// Steps wave after wave (rank 0 adds a wave once the engine is idle, so that later waves can
// hit the prefixes earlier ones cached); cancel_step >= 0 cancels request 1 before that step.
// Rank 0 records the updates and the most requests running and queued; the other ranks follow.
Report run_waves(Engine& e, const std::vector<std::vector<GenerationRequest>>& waves, int cancel_step = -1) {
  Report r;
  if (e.rank() != 0) {
    follow(e);
    return r;
  }
  int step = 0;
  for (const auto& wave : waves) {
    for (const auto& g : wave) EXPECT_TRUE(e.add_request(g).ok());
    for (; !e.idle(); ++step) {
      if (step == cancel_step) e.cancel(1);
      auto rep = e.step();
      EXPECT_TRUE(rep.ok()) << rep.message();
      if (!rep.ok()) break;
      record(r, *rep, e.updates());
      r.most_running = std::max(r.most_running, e.running());
      r.most_queued = std::max(r.most_queued, e.queued());
    }
  }
  EXPECT_TRUE(e.stop().ok());
  return r;
}

// Steps until idle; cancels request 1 before step 4.
Report run(Engine& e, const std::vector<GenerationRequest>& reqs) { return run_waves(e, {reqs}, 4); }

void expect_same(const std::vector<TokenLogprob>& a, const std::vector<TokenLogprob>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].token, b[k].token) << what << " " << k;
    EXPECT_EQ(a[k].logprob, b[k].logprob) << what << " " << k;
    EXPECT_EQ(a[k].top, b[k].top) << what << " " << k;
  }
}

// An engine sharing each step over the world at this TP size (DP the rest, EP the world),
// with the rank groups and this rank's weights (rank_reads) kept beside it.
struct RankedEngine {
  std::unique_ptr<RankGroups> groups;
  std::unique_ptr<SafetensorsSet> files;
  std::unique_ptr<Weights> w;
  std::unique_ptr<Engine> engine;
};
void make_ranked_engine(Communicator& world, const ModelConfig& cfg, const std::string& dir, int tp,
                        const Limits& limits, EngineOptions opt, RankedEngine& out) {
  Result<Topology> topo = make_topology(world.size(), world.rank(), tp, world.size() / tp, world.size());
  ASSERT_TRUE(topo.ok()) << topo.message();
  auto groups = make_rank_groups(world, *topo);
  ASSERT_TRUE(groups.ok()) << groups.message();
  out.groups = std::move(*groups);
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(dir);
  ASSERT_TRUE(files.ok()) << files.message();
  out.files = std::make_unique<SafetensorsSet>(std::move(*files));
  LoadOptions lo;
  lo.reads = [&](const std::string& name) { return rank_reads(name, cfg, *topo); };
  Result<Weights> w = load_weights(*out.files, cfg, nullptr, lo);
  ASSERT_TRUE(w.ok()) << w.message();
  out.w = std::make_unique<Weights>(std::move(*w));
  opt.ranks = out.groups.get();
  opt.cp_prefill_tokens = 6;
  auto e = Engine::create(cfg, *out.w, limits, opt);
  ASSERT_TRUE(e.ok()) << e.message();
  out.engine = std::move(*e);
}

enum class Spec { kNone, kMtp, kDspark };

TEST(EngineRanks, RankZeroReportsWhatOneRankDoes) {
  Communicator& world = comm();
  for (Spec spec : {Spec::kNone, Spec::kMtp, Spec::kDspark}) {
    const bool mtp = spec == Spec::kMtp;
    const test::TinyModel& m = test::tiny_model(spec == Spec::kDspark ? "tiny-ds" : "tiny", TinyQuant::kFp8);
    const auto reqs = requests(m.cfg.vocab_size);
    EngineOptions one_opt;
    one_opt.mtp = mtp;
    one_opt.dspark_gamma = spec == Spec::kDspark ? 3 : 0;
    auto one = Engine::create(m.cfg, *m.w, engine_limits(), one_opt);
    ASSERT_TRUE(one.ok()) << one.message();
    // Every rank runs the one-rank engine alone (no collectives): rank 0 keeps its report.
    Report want = run(**one, reqs);
    EXPECT_GT(want.preempted, 0) << "the cache limits should make decode preempt";
    if (spec != Spec::kNone) {
      EXPECT_GT(want.drafts, 0);
    }
    ASSERT_EQ(want.reason.at(1), FinishReason::kCancelled);
    ASSERT_EQ(want.reason.at(2), FinishReason::kStop) << "pick stop ids the request meets";
    ASSERT_EQ(want.prompt_logprobs.at(5).size(), 18u);
    for (int tp : {world.size(), 1}) {
      SCOPED_TRACE("spec " + std::to_string(static_cast<int>(spec)) + " tp " + std::to_string(tp));
      RankedEngine many;
      make_ranked_engine(world, m.cfg, m.dir, tp, engine_limits(), one_opt, many);
      ASSERT_TRUE(many.engine);
      const Report got = run(*many.engine, reqs);
      if (world.rank() != 0) continue;
      EXPECT_EQ(got.reason, want.reason);
      for (const auto& [id, t] : want.tokens) {
        SCOPED_TRACE("request " + std::to_string(id));
        if (id != 1) {
          EXPECT_EQ(got.tokens.at(id), t);
          expect_same(got.logprobs.at(id), want.logprobs.at(id), "logprobs");
        } else {  // cancelled after a number of steps: both cut one stream
          const size_t n = std::min(t.size(), got.tokens.at(id).size());
          EXPECT_GT(n, 0u);
          EXPECT_TRUE(std::equal(t.begin(), t.begin() + n, got.tokens.at(id).begin()));
        }
      }
      if (spec != Spec::kNone) {
        EXPECT_GT(got.drafts, 0);
        EXPECT_LE(got.accepted, got.drafts);
      }
      for (const auto& [id, l] : want.prompt_logprobs) expect_same(got.prompt_logprobs.at(id), l, "prompt logprobs");
    }
  }
}

// Capacity per rank (Limits::max_seqs and cache_blocks): with one rank's limits, N ranks hold
// N times its sequences and its cached context at once, in the same cache memory per rank,
// and every request completes with one rank's tokens. Each request fills half a rank: 62
// positions in 4 of its 8 blocks of 16, so the ranks run full without preempting.
TEST(EngineRanks, CapacityGrowsWithRanks) {
  Communicator& world = comm();
  const int n = world.size();
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  Limits per_rank;
  per_rank.max_seqs = 2;
  per_rank.cache_blocks = 8;
  per_rank.page_tokens = 16;
  per_rank.max_context = 128;
  per_rank.max_chunk = 8;
  per_rank.n_threads = 1;
  per_rank.max_batch = per_rank.max_seqs;  // a step holds every rank's sequences
  per_rank.max_rows = 8;
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < per_rank.max_seqs * n; ++i) {
    GenerationRequest g;
    g.prompt = test::random_tokens(4, 500 + i, m.cfg.vocab_size);  // below cp_prefill_tokens: each on its owner
    g.max_tokens = 58;
    g.stop_at_eos = false;
    g.sampling = {i % 2 ? 0.8f : 0.0f, 0.9f, static_cast<uint64_t>(60 + i)};
    reqs.push_back(g);
  }
  auto one = Engine::create(m.cfg, *m.w, per_rank, EngineOptions{});
  ASSERT_TRUE(one.ok()) << one.message();
  const Report want = run_waves(**one, {reqs});
  Limits step = per_rank;
  step.max_batch *= n;
  step.max_rows *= n;
  for (int tp : {n, 1}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    RankedEngine many;
    make_ranked_engine(world, m.cfg, m.dir, tp, step, EngineOptions{}, many);
    ASSERT_TRUE(many.engine);
    const Report got = run_waves(*many.engine, {reqs});
    if (world.rank() != 0) continue;
    EXPECT_EQ(want.most_running, per_rank.max_seqs);
    if (n > 1) {
      EXPECT_GT(want.most_queued, 0);
    }
    EXPECT_EQ(got.most_running, per_rank.max_seqs * n) << "every rank full at once";
    EXPECT_EQ(got.preempted, 0) << "each rank holds its sequences' cached context";
    EXPECT_EQ(got.tokens, want.tokens);
    for (const auto& [id, why] : got.reason) EXPECT_EQ(why, FinishReason::kLength) << "request " << id;
    EXPECT_EQ(got.tokens.size(), reqs.size());
  }
  // Context-parallel prompts (8 positions, cp_prefill_tokens 6) on full ranks: each takes a
  // slot and a block on every rank of the TP group while it prefills, or, when one has no
  // room, is prefilled by its owner alone; the tokens stay one rank's.
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt = test::random_tokens(8, 600 + static_cast<int>(i), m.cfg.vocab_size);
    reqs[i].max_tokens = 54;
  }
  auto one_cp = Engine::create(m.cfg, *m.w, per_rank, EngineOptions{});
  ASSERT_TRUE(one_cp.ok()) << one_cp.message();
  const Report want_cp = run_waves(**one_cp, {reqs});
  RankedEngine many;
  make_ranked_engine(world, m.cfg, m.dir, n, step, EngineOptions{}, many);
  ASSERT_TRUE(many.engine);
  const Report got_cp = run_waves(*many.engine, {reqs});
  if (world.rank() != 0) return;
  EXPECT_EQ(got_cp.tokens, want_cp.tokens);
  EXPECT_EQ(got_cp.tokens.size(), reqs.size());
  for (const auto& [id, why] : got_cp.reason) EXPECT_EQ(why, FinishReason::kLength) << "request " << id;
}

// Several choices (GenerationRequest::n) on ranks: each choice forks on its parent's owner,
// every rank forking alike, so rank 0 reports the tokens and logprobs of one rank, with
// context-parallel prefill (prompts of 6 positions or more) and without.
TEST(EngineRanks, ChoicesAsOneRankDoes) {
  Communicator& world = comm();
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest g;
    g.prompt = test::random_tokens(3 + 7 * i, 600 + i, m.cfg.vocab_size);
    g.max_tokens = 9 + i;
    g.stop_at_eos = false;
    g.sampling = {0.9f, 0.95f, static_cast<uint64_t>(21 + i)};
    g.logprobs = i == 1 ? 2 : -1;
    g.n = 2 + i;
    reqs.push_back(g);
  }
  Limits l = engine_limits();
  l.max_batch = l.max_seqs = 6;
  l.cache_blocks = 0;  // as many as needed
  auto one = Engine::create(m.cfg, *m.w, l, EngineOptions{});
  ASSERT_TRUE(one.ok()) << one.message();
  const Report want = run(**one, reqs);
  ASSERT_EQ(want.tokens.size(), 2u + 3u + 4u) << "every choice reports";
  for (int tp : {world.size(), 1}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    RankedEngine many;
    make_ranked_engine(world, m.cfg, m.dir, tp, l, EngineOptions{}, many);
    ASSERT_TRUE(many.engine);
    const Report got = run(*many.engine, reqs);
    if (world.rank() != 0) continue;
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.reason, want.reason);
    for (const auto& [id, lp] : want.logprobs) expect_same(got.logprobs.at(id), lp, "logprobs");
  }
}

// Structured output on ranks: rank 0 compiles each schema before the request enters (prepare);
// the other ranks get the text on the wire and compile it once as it arrives (sync_ranks), so
// the rank that samples a row, whichever it is, holds the grammar and the constrained tokens
// equal one rank's (a follower without it stopped at a CHECK).
TEST(EngineRanks, StructuredOutputAsOneRankDoes) {
  Communicator& world = comm();
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  Result<TinyTokenizerFiles> files = make_tiny_tokenizer();
  ASSERT_TRUE(files.ok());
  Result<Tokenizer> tok = Tokenizer::from_json(files->tokenizer_json, "tiny");
  ASSERT_TRUE(tok.ok()) << tok.message();
  EngineOptions opt;
  opt.tokenizer = &*tok;
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest g;
    g.prompt = test::random_tokens(3 + 7 * i, 700 + i, m.cfg.vocab_size);
    g.max_tokens = 20;
    g.sampling = {0.9f, 0.95f, static_cast<uint64_t>(31 + i)};
    g.constraint.json_schema = i == 2 ? R"({"type": "array", "items": {"type": "integer"}})"
                                      : R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
    reqs.push_back(g);
  }
  Limits l = engine_limits();
  l.cache_blocks = 0;  // as many as needed
  auto one = Engine::create(m.cfg, *m.w, l, opt);
  ASSERT_TRUE(one.ok()) << one.message();
  const Report want = run_waves(**one, {reqs});
  for (int tp : {world.size(), 1}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    RankedEngine many;
    make_ranked_engine(world, m.cfg, m.dir, tp, l, opt, many);
    ASSERT_TRUE(many.engine);
    const Report got = run_waves(*many.engine, {reqs});
    if (world.rank() != 0) continue;
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.reason, want.reason);
  }
}

// Prefix caching on ranks: a request goes to the rank holding its cached prefix, and every
// request's tokens and logprobs equal a cold one-rank run and a one-rank run with the cache,
// plain and with MTP, with context-parallel prefill of the first prompt (6 positions or more).
TEST(EngineRanks, PrefixHitsAsOneRankDoes) {
  Communicator& world = comm();
  for (bool mtp : {false, true}) {
    SCOPED_TRACE(mtp ? "mtp" : "plain");
    const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
    const std::vector<int32_t> shared = test::random_tokens(45, 700, m.cfg.vocab_size);
    std::vector<std::vector<GenerationRequest>> waves(3);
    for (int i = 0; i < 5; ++i) {
      GenerationRequest g;
      g.prompt = shared;
      const std::vector<int32_t> tail = test::random_tokens(3 + 4 * i, 710 + i, m.cfg.vocab_size);
      g.prompt.insert(g.prompt.end(), tail.begin(), tail.end());
      g.max_tokens = 6 + i;
      g.stop_at_eos = false;
      g.sampling = {i % 2 ? 0.8f : 0.0f, 0.9f, static_cast<uint64_t>(31 + i)};
      g.logprobs = i == 2 ? 2 : -1;
      waves[i == 0 ? 0 : i < 3 ? 1 : 2].push_back(g);
    }
    Limits l = engine_limits();
    l.cache_blocks = 0;  // as many as needed
    EngineOptions opt;
    opt.mtp = mtp;
    auto cold = Engine::create(m.cfg, *m.w, l, opt);
    ASSERT_TRUE(cold.ok()) << cold.message();
    const Report want = run_waves(**cold, waves);
    l.prefix_blocks = 12;
    auto one = Engine::create(m.cfg, *m.w, l, opt);
    ASSERT_TRUE(one.ok()) << one.message();
    const Report one_hit = run_waves(**one, waves);
    int64_t one_hits = 0;
    for (const auto& t : (*one)->prefix_by_rank()) one_hits += t.hit_tokens;
    // Waves 1 and 2 hit the shared prefix's 2 whole blocks of 16, less the 4 recomputed positions.
    EXPECT_EQ(one_hits, 4 * (32 - 4));
    EXPECT_EQ(one_hit.tokens, want.tokens);
    for (int tp : {world.size(), 1}) {
      SCOPED_TRACE("tp " + std::to_string(tp));
      RankedEngine many;
      make_ranked_engine(world, m.cfg, m.dir, tp, l, opt, many);
      ASSERT_TRUE(many.engine);
      const Report got = run_waves(*many.engine, waves);
      if (world.rank() != 0) continue;
      EXPECT_EQ(got.tokens, want.tokens);
      EXPECT_EQ(got.reason, want.reason);
      for (const auto& [id, lp] : want.logprobs) expect_same(got.logprobs.at(id), lp, "logprobs");
      int64_t hits = 0;
      for (const auto& t : many.engine->prefix_by_rank()) hits += t.hit_tokens;
      EXPECT_EQ(hits, one_hits) << "every hit of one rank happens on ranks too";
    }
  }
}

// One message per step (runtime.md §6): rank 0 sends one step header per step that has news or
// rows and one to stop, none while it idles, and no broadcast; each follower's step takes one.
TEST(EngineRanks, OneHeaderPerStep) {
  Communicator& world = comm();
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  RankedEngine many;
  make_ranked_engine(world, m.cfg, m.dir, 1, engine_limits(), EngineOptions{}, many);
  ASSERT_TRUE(many.engine);
  Engine& e = *many.engine;
  auto calls = [&](Collective c) { return world.bytes().calls[static_cast<int>(c)]; };
  const int64_t headers0 = calls(Collective::kHeader), broadcasts0 = calls(Collective::kBroadcast);
  int64_t steps = 0;  // rank 0: steps with work, then the stop; others: steps taken
  if (e.rank() == 0) {
    ASSERT_TRUE(e.step().ok());  // idle, no news: nothing sent
    EXPECT_EQ(calls(Collective::kHeader), headers0);
    auto reqs = requests(m.cfg.vocab_size);
    reqs.resize(2);
    for (const auto& g : reqs) ASSERT_TRUE(e.add_request(g).ok());
    for (; !e.idle(); ++steps) ASSERT_TRUE(e.step().ok());
    ASSERT_TRUE(e.step().ok());  // idle again
    ASSERT_TRUE(e.stop().ok());
    ++steps;
  } else {
    for (; !e.stopped(); ++steps) ASSERT_TRUE(e.step().ok());
  }
  EXPECT_GT(steps, 10);
  EXPECT_EQ(calls(Collective::kHeader) - headers0, steps);
  EXPECT_EQ(calls(Collective::kBroadcast) - broadcasts0, 0);
  std::vector<int64_t> all(static_cast<size_t>(world.size()));
  ASSERT_TRUE(world.all_gather_rows(&steps, std::vector<int64_t>(all.size(), 1), sizeof(steps), all.data()).ok());
  for (int64_t s : all) {
    EXPECT_EQ(s, all[0]) << "every rank takes rank 0's headers";
  }
}

// DSpark on the trained drafter (models/kjv-9m-dspark), whose drafts are often accepted:
// several ranks draft exactly what one rank drafts — the same drafts accepted at every
// position of every round — and emit the same tokens, with context-parallel prefill, requests
// joining and leaving, greedy and sampled.
TEST(EngineRanks, DsparkDraftsWhatOneRankDrafts) {
  Communicator& world = comm();
  const test::TinyModel& m = test::committed_model("kjv-9m-dspark");
  ASSERT_TRUE(m.w);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    GenerationRequest g;
    g.prompt = test::random_tokens(9 + 4 * i, 500 + i, m.cfg.vocab_size);
    g.max_tokens = 20 + 4 * i;
    g.stop_at_eos = false;
    g.sampling = {i == 3 ? 0.8f : 0.0f, 1.0f, static_cast<uint64_t>(7 + i)};
    g.logprobs = i == 1 ? 2 : -1;
    reqs.push_back(g);
  }
  Limits l = engine_limits();
  l.cache_blocks = 0;  // as many as needed
  std::vector<int> tps{1};
  if (world.size() % 2 == 0 && m.cfg.o_groups % 2 == 0) tps.push_back(2);
  for (bool rejection : {false, true}) {  // mode rejection: drafts drawn on the owners, verified on the samplers
    EngineOptions one_opt;
    one_opt.dspark_gamma = 5;
    one_opt.dspark_rejection = rejection;
    auto one = Engine::create(m.cfg, *m.w, l, one_opt);
    ASSERT_TRUE(one.ok()) << one.message();
    const Report want = run(**one, reqs);
    EXPECT_GT(want.accepted, want.rounds / 2) << "the trained drafter should be accepted about once per round";
    for (int tp : tps) {
      SCOPED_TRACE("tp " + std::to_string(tp) + " rejection " + std::to_string(rejection));
      RankedEngine many;
      make_ranked_engine(world, m.cfg, m.dir, tp, l, one_opt, many);
      ASSERT_TRUE(many.engine);
      const Report got = run(*many.engine, reqs);
      if (world.rank() != 0) continue;
      EXPECT_EQ(got.tokens, want.tokens);
      EXPECT_EQ(got.rounds, want.rounds);
      EXPECT_EQ(got.accepted_at, want.accepted_at);
      for (const auto& [id, lp] : want.logprobs) expect_same(got.logprobs.at(id), lp, "logprobs");
    }
  }
}

}  // namespace
}  // namespace dsv4
