// Scheduler as a pure state machine, driven by a fake executor (no model): admission under
// page limits, chunked prefill interleaved with decode, preemption and recompute, cancellation,
// stop rules, starvation-freedom; OutputText's stop strings across token boundaries.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "runtime/scheduler.h"
#include "text/tiny_tokenizer.h"

namespace dsv4 {
namespace {

// Pages of `page` positions, `total` in all (per rank when slots_per_rank > 0: slot s is rank
// s / slots_per_rank's); a sequence holds ceil(end / page) of them.
class FakePages final : public PageBudget {
 public:
  FakePages(int64_t page, int64_t total, int32_t slots_per_rank = 0)
      : page_(page), total_(total), slots_per_rank_(slots_per_rank) {}
  int64_t pages_short(int32_t seq, int64_t end) const override {
    const int64_t need = (end + page_ - 1) / page_;
    const int64_t have = seq >= 0 && held_.count(seq) ? held_.at(seq) : 0;
    return std::max<int64_t>(0, need - have);
  }
  int64_t free_pages(int32_t rank = 0) const override {
    int64_t used = 0;
    for (const auto& [s, n] : held_) used += slots_per_rank_ == 0 || s / slots_per_rank_ == rank ? n : 0;
    return total_ - used;
  }
  int64_t total_pages() const override { return total_; }
  Result<int64_t> start(int32_t seq, const std::vector<int32_t>&, int64_t, bool, const std::string& salt) override {
    EXPECT_EQ(held_.count(seq), 0u) << "slot " << seq << " started twice";
    held_[seq] = 0;
    started_salt[seq] = salt;
    return int64_t{0};
  }
  int64_t cached_prefix(int32_t owner, const std::vector<int32_t>&, int64_t, const std::string& salt) const override {
    const auto it = cached.find({owner, salt});
    return it == cached.end() ? 0 : it->second;
  }
  Status reserve(int32_t seq, int64_t end) override {
    const int64_t more = pages_short(seq, end);
    if (more > free_pages(slots_per_rank_ > 0 ? seq / slots_per_rank_ : 0)) return Status::error("no pages");
    held_[seq] += more;
    return Status();
  }
  void register_prefix(int32_t, const std::vector<int32_t>&, int64_t) override {}
  void end(int32_t seq) override { held_.erase(seq); }
  int64_t in_use() const { return total_ - free_pages(); }

  std::map<std::pair<int32_t, std::string>, int64_t> cached;  // (rank, salt) -> cached prompt positions
  std::map<int32_t, std::string> started_salt;                 // slot -> the salt it started with

 private:
  int64_t page_, total_;
  int32_t slots_per_rank_;
  std::map<int32_t, int64_t> held_;
};

// The token a fake model "samples" at position q for request id: deterministic, never EOS (1).
int32_t fake_token(int64_t id, int64_t q) { return static_cast<int32_t>(10 + (id * 31 + q * 7) % 200); }

struct Log {
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, RequestUpdate> finals;
  std::vector<std::vector<PlannedRows>> plans;
};

// One step of the fake executor: reserves the step's pages (as the runner does), samples
// fake_token at the predicted positions, accepts drafts while they equal it.
void step(Scheduler& s, FakePages& pages, Log& log, int S = 2) {
  const std::vector<PlannedRows>& plan = s.plan();
  log.plans.push_back(plan);
  std::vector<int32_t> tok(S * plan.size(), -1);
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRows& p = plan[i];
    ASSERT_TRUE(pages.reserve(p.seq, p.p0 + p.n).ok()) << "the plan does not fit the pages";
    if (p.split && p.cp_slots) {  // a split chunk's caches on its TP group (tp 2)
      EXPECT_EQ(p.cp_slots[p.owner % 2], p.seq);
      EXPECT_NE(p.cp_slots[1 - p.owner % 2], -1) << "no slot on the group's other rank";
      for (int j = 0; j < 2; ++j)
        ASSERT_TRUE(pages.reserve(p.cp_slots[j], p.p0 + p.n).ok()) << "the split chunk does not fit its group";
    }
    const int32_t real = p.n - p.n_drafts;
    const TokenSeq seq = s.tokens(i);  // the rows' tokens: the shared prompt, then the outputs
    for (int32_t k = 0; k < real; ++k) ASSERT_EQ(p.tokens[k], seq[static_cast<size_t>(p.p0 + k)]) << "row " << k;
    if (!p.samples) continue;
    tok[S * i] = fake_token(p.id, p.p0 + real);
    for (int32_t k = 1; k <= p.n_drafts && p.tokens[k] == tok[S * i + k - 1]; ++k)
      tok[S * i + k] = fake_token(p.id, p.p0 + real + k);
  }
  s.update(tok.data(), nullptr, nullptr);
  for (RequestUpdate& u : s.updates()) {
    EXPECT_EQ(log.finals.count(u.id), 0u) << "request " << u.id << " updated after its last update";
    auto& o = log.out[u.id];
    o.insert(o.end(), u.tokens.begin(), u.tokens.end());
    if (u.finished) log.finals[u.id] = u;
  }
}

void run_to_idle(Scheduler& s, FakePages& pages, Log& log, int max_steps = 1000) {
  for (int i = 0; i < max_steps && !s.idle(); ++i) step(s, pages, log);
  EXPECT_TRUE(s.idle());
}

SchedulerOptions options(int batch, int rows, int chunk, int seqs) {
  SchedulerOptions o;
  o.limits.max_batch = batch;
  o.limits.max_rows = rows;
  o.limits.max_chunk = chunk;
  o.limits.max_seqs = seqs;
  o.limits.max_context = 4096;
  o.limits.page_tokens = 16;
  return o;
}

GenerationRequest request(int prompt_len, int max_tokens, int32_t first = 20) {
  GenerationRequest g;
  for (int i = 0; i < prompt_len; ++i) g.prompt.push_back(first + i % 100);
  g.max_tokens = max_tokens;
  return g;
}

// The tokens a request gets when it runs alone with unlimited pages.
std::vector<int32_t> alone(const GenerationRequest& g, int64_t id) {
  std::vector<int32_t> t;
  for (int k = 0; k < g.max_tokens; ++k) t.push_back(fake_token(id, static_cast<int64_t>(g.prompt.size()) + k));
  return t;
}

// The choices of a request share it: n = 8 choices of a request holding a 1 MiB schema and four
// 4 KiB stop strings hold one copy of them, not eight (mallinfo2: bytes allocated and in use).
TEST(Scheduler, ChoicesShareTheirRequest) {
  FakePages pages(16, 1000);
  Scheduler s(options(8, 64, 32, 8), pages);
  GenerationRequest g = request(20, 4);
  g.n = 8;
  g.constraint.json_schema = std::string(1 << 20, ' ');  // text only: the scheduler compiles nothing
  for (int i = 0; i < 4; ++i) g.stop_strings.push_back(std::string(4096, static_cast<char>('a' + i)));
  auto bytes_in_use = [] {  // the arenas' and the chunks malloc maps on their own
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const size_t before = bytes_in_use();
  s.add(0, std::move(g));
  Log log;
  std::set<int64_t> planned;
  for (int i = 0; i < 12 && planned.size() < 8; ++i) {
    step(s, pages, log);
    for (const PlannedRows& p : log.plans.back()) planned.insert(p.id);
  }
  const auto held = static_cast<int64_t>(bytes_in_use() - before);
  EXPECT_EQ(planned.size(), 8u) << "every choice runs";
  EXPECT_LT(held, 256 << 10) << "the choices copied their request";
  run_to_idle(s, pages, log);
}

// The n choices of a request share one prompt-id array: n = 8 over a 64k-token prompt hold about
// one copy of it (the request's own), not n + 1 (each choice copied it into its tokens before).
TEST(Scheduler, ChoicesShareOnePromptIdArray) {
  FakePages pages(16, 100000);
  SchedulerOptions o = options(8, 8192, 8192, 8);
  o.limits.max_context = 1 << 20;
  Scheduler s(o, pages);
  auto bytes_in_use = [] {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const GenerationRequest copy = request(65536, 4);  // to check the outputs against
  const size_t before = bytes_in_use();
  GenerationRequest g = copy;
  g.n = 8;
  const auto one_copy = static_cast<int64_t>(g.prompt.capacity() * sizeof(int32_t));
  s.add(0, std::move(g));
  Log log;
  std::set<int64_t> planned;
  for (int i = 0; i < 32 && planned.size() < 8; ++i) {
    step(s, pages, log);
    for (const PlannedRows& p : log.plans.back()) planned.insert(p.id);
  }
  const auto held = static_cast<int64_t>(bytes_in_use() - before);
  EXPECT_EQ(planned.size(), 8u) << "every choice runs";
  EXPECT_LT(held, one_copy + (64 << 10)) << "one copy " << one_copy;
  run_to_idle(s, pages, log);
  for (int64_t k = 0; k < 8; ++k) EXPECT_EQ(log.out[k], alone(copy, k)) << "choice " << k;
}

TEST(Scheduler, AdmissionWaitsForPages) {
  FakePages pages(16, 4);
  Scheduler s(options(4, 64, 32, 4), pages);
  for (int64_t id = 0; id < 3; ++id) s.add(id, request(30, 1));  // 2 pages each
  Log log;
  step(s, pages, log);
  EXPECT_EQ(log.plans[0].size(), 2u) << "the third request must wait for pages";
  EXPECT_EQ(s.queued(), 1);
  run_to_idle(s, pages, log);
  for (int64_t id = 0; id < 3; ++id) {
    EXPECT_EQ(log.out[id], alone(request(30, 1), id));
    EXPECT_EQ(log.finals[id].reason, FinishReason::kLength);
  }
  EXPECT_EQ(pages.in_use(), 0);
}

TEST(Scheduler, ChunkedPrefillInterleavesWithDecode) {
  FakePages pages(16, 100);
  Scheduler s(options(4, 10, 8, 4), pages);
  s.add(0, request(3, 20));
  Log log;
  step(s, pages, log);  // request 0 prefills and starts decoding
  s.add(1, request(30, 2));
  std::vector<int32_t> chunks;
  for (int i = 0; i < 5; ++i) {
    step(s, pages, log);
    const auto& plan = log.plans.back();
    ASSERT_GE(plan.size(), 1u);
    bool decoded = false;
    for (const PlannedRows& p : plan) {
      if (p.id == 0) decoded = p.n == 1 && p.samples;
      if (p.id == 1 && p.p0 < 30) chunks.push_back(p.n);
    }
    EXPECT_TRUE(decoded) << "step " << i << ": the decoding request got no row";
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{8, 8, 8, 6}));
  run_to_idle(s, pages, log);
  EXPECT_EQ(log.out[0], alone(request(3, 20), 0));
  EXPECT_EQ(log.out[1], alone(request(30, 2), 1));
}

// Pages run out in decode: the newest request is preempted, re-enters with its tokens so far
// and its original prompt_len, recomputes them, and ends with the tokens of an uninterrupted run.
TEST(Scheduler, PreemptionRecomputesWithTheOriginalPromptLength) {
  FakePages pages(16, 3);
  Scheduler s(options(4, 64, 16, 4), pages);
  const GenerationRequest a = request(5, 30), b = request(20, 14, 60);
  s.add(0, a);
  s.add(1, b);
  Log log;
  run_to_idle(s, pages, log);
  int preempted_steps = 0, starts = 0;
  for (const auto& plan : log.plans)
    for (const PlannedRows& p : plan) {
      EXPECT_EQ(p.prompt_len, p.id == 0 ? 5 : 20);
      starts += p.id == 1 && p.p0 == 0;
    }
  for (size_t k = 1; k < log.plans.size(); ++k) {
    bool had = false, has = false;
    for (const PlannedRows& p : log.plans[k - 1]) had |= p.id == 1;
    for (const PlannedRows& p : log.plans[k]) has |= p.id == 1;
    preempted_steps += had && !has;
  }
  EXPECT_GE(preempted_steps, 1) << "request 1 was never preempted";
  EXPECT_EQ(starts, 2) << "request 1 recomputes from position 0 once";
  EXPECT_EQ(log.out[0], alone(a, 0));
  EXPECT_EQ(log.out[1], alone(b, 1));
  EXPECT_EQ(pages.in_use(), 0);
}

TEST(Scheduler, RequestThatNeverFitsFailsAlone) {
  FakePages pages(16, 2);
  Scheduler s(options(4, 64, 16, 4), pages);
  s.add(0, request(10, 40));  // needs 4 pages at its end
  Log log;
  run_to_idle(s, pages, log);
  EXPECT_EQ(log.finals[0].reason, FinishReason::kError);
  EXPECT_NE(log.finals[0].error.find("cache_blocks = 2"), std::string::npos) << log.finals[0].error;
  EXPECT_EQ(pages.in_use(), 0);
  // On ranks a request has its owner's pages only, and the error names the rank.
  SchedulerOptions o = options(4, 64, 16, 4);
  o.world = 2;
  FakePages per_rank(16, 2, 4);
  Scheduler r(o, per_rank);
  r.add(0, request(10, 40));
  Log ranks_log;
  run_to_idle(r, per_rank, ranks_log);
  EXPECT_EQ(ranks_log.finals[0].reason, FinishReason::kError);
  EXPECT_NE(ranks_log.finals[0].error.find("cache_blocks = 2 pages of 16 positions on rank 0"), std::string::npos)
      << ranks_log.finals[0].error;
}

TEST(Scheduler, CancelWaitingAndRunning) {
  FakePages pages(16, 100);
  Scheduler s(options(1, 64, 16, 1), pages);
  s.add(0, request(4, 50));
  s.add(1, request(4, 50));  // waits: one slot
  Log log;
  step(s, pages, log);
  step(s, pages, log);
  s.cancel(1, FinishReason::kCancelled);
  s.cancel(0, FinishReason::kTimeout);
  step(s, pages, log);
  EXPECT_TRUE(log.plans.back().empty());
  EXPECT_EQ(log.finals[0].reason, FinishReason::kTimeout);
  EXPECT_EQ(log.finals[1].reason, FinishReason::kCancelled);
  EXPECT_EQ(log.out[0].size(), 2u);
  EXPECT_EQ(log.finals[0].completion_tokens, 2);
  EXPECT_TRUE(log.out[1].empty());
  s.cancel(0, FinishReason::kCancelled);  // already finished: nothing more is reported
  step(s, pages, log);
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(pages.in_use(), 0);
}

// Ranks: each holds max_seqs slots and its own pages. Two ranks of 2 slots run 4 requests at
// once; a context-parallel prompt (tp 2) also holds a slot and its prompt's pages on the
// other rank while it prefills. When that rank's own request then needs a page, the newest
// request holding pages there waits (here the split prompt) instead of the grower failing
// alone; every request gets the tokens it gets alone.
TEST(Scheduler, RanksHoldTheirOwnSlotsAndPages) {
  {
    SchedulerOptions o = options(4, 16, 4, 2);
    o.world = 2;
    FakePages pages(16, 3, 2);
    Scheduler s(o, pages);
    for (int i = 0; i < 4; ++i) s.add(i, request(4, 8));
    Log log;
    step(s, pages, log);
    ASSERT_EQ(log.plans[0].size(), 4u) << "two slots on each rank";
    for (const PlannedRows& p : log.plans[0]) EXPECT_EQ(p.seq / 2, p.owner) << "request " << p.id;
    run_to_idle(s, pages, log);
    for (int64_t id = 0; id < 4; ++id) EXPECT_EQ(log.out[id], alone(request(4, 8), id));
  }
  SchedulerOptions o = options(4, 8, 2, 2);
  o.world = 2;
  o.tp = 2;
  o.cp_prefill_tokens = 8;
  FakePages pages(16, 6, 2);
  Scheduler s(o, pages);
  const GenerationRequest grower = request(4, 60), split = request(64, 10, 30);
  s.add(0, grower);  // rank 0: 1 page, then 4
  s.add(1, split);   // rank 1, and 4 pages of rank 0 while its prompt is split (2 rows a step)
  Log log;
  run_to_idle(s, pages, log);
  bool split_seen = false;  // (step() checks each split chunk's slots while they are valid)
  for (const auto& plan : log.plans)
    for (const PlannedRows& p : plan) split_seen |= p.split;
  EXPECT_TRUE(split_seen);
  for (const auto& [id, u] : log.finals)
    EXPECT_EQ(u.reason, FinishReason::kLength) << "request " << id << ": " << u.error;
  EXPECT_EQ(log.out[0], alone(grower, 0));
  EXPECT_EQ(log.out[1], alone(split, 1));
  EXPECT_EQ(pages.free_pages(0), 6);
  EXPECT_EQ(pages.free_pages(1), 6);
}

// A request goes to the rank holding its prefix in its own salt's namespace only, and its slot
// starts in that namespace (so its blocks register there).
TEST(Scheduler, RoutingFollowsThePrefixOfTheRequestsSalt) {
  SchedulerOptions o = options(4, 64, 16, 2);
  o.world = 2;
  FakePages pages(16, 8, 2);
  pages.cached[{1, "tenant a"}] = 32;
  Scheduler s(o, pages);
  GenerationRequest a = request(40, 2), b = request(40, 2), none = request(40, 2);
  a.cache_salt = "tenant a";
  b.cache_salt = "tenant b";
  s.add(0, b);
  s.add(1, a);
  s.add(2, none);
  Log log;
  step(s, pages, log);
  ASSERT_EQ(log.plans[0].size(), 3u);
  std::map<int64_t, int32_t> owner;
  for (const PlannedRows& p : log.plans[0]) {
    owner[p.id] = p.owner;
    EXPECT_EQ(pages.started_salt[p.seq], p.request->cache_salt) << "request " << p.id;
  }
  EXPECT_EQ(owner[1], 1) << "tenant a's prefix is on rank 1";
  EXPECT_EQ(owner[0], 0) << "tenant b has no prefix anywhere: the roomiest rank";
}

TEST(Scheduler, StopRules) {
  FakePages pages(16, 100);
  Scheduler s(options(4, 64, 16, 4), pages);
  GenerationRequest by_id = request(4, 50);
  by_id.stop_ids = {fake_token(0, 4 + 3)};  // the 4th output
  GenerationRequest eos = request(4, 50);
  SchedulerOptions o = options(4, 64, 16, 4);
  s.add(0, by_id);
  Log log;
  run_to_idle(s, pages, log);
  EXPECT_EQ(log.out[0].size(), 4u);
  EXPECT_EQ(log.finals[0].reason, FinishReason::kStop);
  EXPECT_EQ(log.finals[0].stop_id, fake_token(0, 4 + 3));  // the stop id that matched
  EXPECT_EQ(log.finals[0].stop_string, "");

  o.eos_token_id = fake_token(0, 4 + 1);  // the 2nd output is EOS
  Scheduler s2(o, pages);
  s2.add(0, eos);
  Log log2;
  run_to_idle(s2, pages, log2);
  EXPECT_EQ(log2.out[0].size(), 2u);
  EXPECT_EQ(log2.finals[0].reason, FinishReason::kStop);
  EXPECT_EQ(log2.finals[0].stop_id, -1);  // EOS: neither a stop id nor a stop string

  o.eos_token_id = 1;
  o.limits.max_context = 10;  // positions 0..9: 5 outputs fit after 4 prompt tokens
  Scheduler s3(o, pages);
  s3.add(0, request(4, 50));
  Log log3;
  run_to_idle(s3, pages, log3);
  EXPECT_EQ(log3.finals[0].reason, FinishReason::kContext);
  EXPECT_EQ(log3.finals[0].stop_id, -1);
  EXPECT_EQ(log3.out[0].size(), 5u);
}

// B_MAX = 2 of 5 running requests: each is served at least every 3 steps.
TEST(Scheduler, NoRequestStarves) {
  FakePages pages(16, 100);
  Scheduler s(options(2, 64, 16, 5), pages);
  for (int64_t id = 0; id < 5; ++id) s.add(id, request(2, 30));
  Log log;
  run_to_idle(s, pages, log);
  std::map<int64_t, int64_t> last;
  for (size_t k = 0; k < log.plans.size(); ++k)
    for (const PlannedRows& p : log.plans[k]) {
      if (last.count(p.id)) {
        EXPECT_LE(static_cast<int64_t>(k) - last[p.id], 3) << "request " << p.id;
      }
      last[p.id] = static_cast<int64_t>(k);
    }
  for (int64_t id = 0; id < 5; ++id) EXPECT_EQ(log.out[id], alone(request(2, 30), id));
}

// Drafts: accepted ones commit two tokens in a step, rejected ones one; tokens are unchanged.
TEST(Scheduler, DraftsVerifyByExactMatch) {
  FakePages pages(16, 100);
  SchedulerOptions o = options(4, 64, 16, 4);
  o.mtp = true;
  Scheduler s(o, pages);
  s.add(0, request(3, 12));
  Log log;
  bool good = true;
  for (int k = 0; k < 100 && !s.idle(); ++k) {
    step(s, pages, log);
    const auto& plan = log.plans.back();
    if (!plan.empty() && s.live(0)) {
      const int64_t len = static_cast<int64_t>(s.tokens(0).size());
      const int32_t d = good ? fake_token(0, len) : 5;  // alternately right and wrong
      s.set_drafts(0, &d, 1);
      good = !good;
    }
  }
  EXPECT_EQ(log.out[0], alone(request(3, 12), 0));
  int drafted = 0;
  for (const auto& plan : log.plans)
    for (const PlannedRows& p : plan) drafted += p.n_drafts > 0;
  EXPECT_GT(drafted, 2);
}

// γ drafts per step (DSpark): the first error at every place 0..γ (and none), so each step
// commits 1 + n_acc tokens; the output is unchanged, the counters count rounds by n_acc, and a
// stop at max_tokens inside an accepted run ends the request there.
TEST(Scheduler, MultiDraftRoundsCommitTheAcceptedPrefix) {
  constexpr int G = 4, S = G + 1;
  FakePages pages(16, 100);
  SchedulerOptions o = options(4, 64, 16, 4);
  o.limits.max_decode_rows = S;
  Scheduler s(o, pages);
  s.add(0, request(3, 40));
  Log log;
  int wrong_at = 0;  // the first wrong draft: 1..G, or G + 1 = none
  int64_t rounds = 0, accepted = 0;
  std::vector<int64_t> by_n_acc(G + 1, 0);
  for (int k = 0; k < 200 && !s.idle(); ++k) {
    step(s, pages, log, S);
    const Scheduler::Counters& c = s.counters();
    rounds += c.rounds;
    accepted += c.accepted;
    for (int a = 0; a <= G; ++a) by_n_acc[a] += c.accepted_at[a];
    if (!log.plans.back().empty() && s.live(0)) {
      const int64_t len = static_cast<int64_t>(s.tokens(0).size());
      int32_t d[G];
      for (int j = 0; j < G; ++j) d[j] = j + 1 == wrong_at + 1 ? 5 : fake_token(0, len + j);
      wrong_at = (wrong_at + 1) % (G + 1);
      s.set_drafts(0, d, G);
    }
  }
  EXPECT_EQ(log.out[0], alone(request(3, 40), 0));
  EXPECT_GT(rounds, 5);
  for (int a = 0; a <= G; ++a) EXPECT_GT(by_n_acc[a], 0) << "n_acc " << a;
  int64_t sum = 0;
  for (int a = 0; a <= G; ++a) sum += a * by_n_acc[a];
  EXPECT_EQ(sum, accepted);
  int max_rows = 0;
  for (const auto& plan : log.plans)
    for (const PlannedRows& p : plan) max_rows = std::max(max_rows, p.n_drafts > 0 ? p.n : 0);
  EXPECT_EQ(max_rows, S);
}

// Stop strings on the detokenized text: a match across token boundaries ends the text before
// it; text that could begin a stop string is held back until it is decided.
TEST(OutputText, StopStringAcrossTokens) {
  auto files = make_tiny_tokenizer();
  ASSERT_TRUE(files.ok()) << files.message();
  auto tok = Tokenizer::from_json(files->tokenizer_json, "tiny");
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::string text = "hello world, the stop is here and more";
  const std::vector<int32_t> ids = tok->encode(text, false);
  ASSERT_GT(ids.size(), 6u);
  // Every stop string that begins at each offset: the released text is the text before it.
  for (size_t at = 1; at + 4 <= text.size(); at += 3) {
    const std::string stop = text.substr(at, 4);
    OutputText out(*tok, {stop, "never-seen"});
    std::string released;
    bool stopped = false;
    size_t used = 0;
    for (int32_t id : ids) {
      ++used;
      if ((stopped = out.push(id, released))) break;
      EXPECT_EQ(text.compare(0, released.size(), released), 0) << "released text is not a prefix";
    }
    EXPECT_TRUE(stopped) << stop;
    EXPECT_EQ(released, text.substr(0, text.find(stop))) << stop;
    EXPECT_EQ(out.matched(), stop);
  }
  // Two stop strings: the one that matched is named.
  for (const auto& [stops, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"here", "stop"}, "stop"}, {{"stop", "the"}, "the"}}) {
    OutputText out(*tok, stops);
    std::string released;
    for (int32_t id : ids)
      if (out.push(id, released)) break;
    EXPECT_EQ(out.matched(), want);
    EXPECT_EQ(released, text.substr(0, text.find(want)));
  }
  // No stop: the whole text, and held-back text released at the finish.
  OutputText plain(*tok, {"re!"});
  std::string all;
  for (int32_t id : ids) EXPECT_FALSE(plain.push(id, all));
  EXPECT_EQ(all, text.substr(0, text.size() - 2)) << "the suffix 're' may begin the stop string";
  plain.finish(all);
  EXPECT_EQ(all, text);
  EXPECT_EQ(plain.matched(), "");
}

}  // namespace
}  // namespace dsv4
