// Several ranks share each step (runtime.md §6): the ModelRunner over 1, 2 and 4 processes
// (tests/CMakeLists.txt runs this binary alone and under mpirun) against a one-rank runner
// on the same steps, bit for bit: logits, final streams and MTP logits of every row a rank
// owns. Steps mix prefill chunks and decode rows, batches not divisible by the rank count,
// ranks with no rows, requests joining and leaving; tiny and tiny2, BF16 and FP8 storage,
// every topology the world admits (tp, dp, ep). Rows a rank does not own keep the sentinel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/deploy_plan.h"
#include "model/weights.h"
#include "model/placement.h"
#include "model/runner.h"
#include "parallel/communicator.h"
#include "parallel/rank_groups.h"
#include "support/tiny_model.h"

namespace dsv4 {

Communicator& comm();  // main.cc: MPI under mpirun, else one rank

namespace {

struct Layout {
  int tp, dp, ep;
};

std::vector<Layout> layouts(int world) {
  if (world == 1) return {{1, 1, 1}};
  std::vector<Layout> l = {{world, 1, world}, {world, 1, 1}, {1, world, world}};
  if (world == 4) l.push_back({2, 2, 4});
  if (world == 4) l.push_back({2, 2, 2});
  return l;
}

// One step: (sequence, rows) pairs; a sequence's owner is fixed by owner_of. Sequences in
// `split` are prefilled context-parallel (StepRequest::cp) in this step. Sequence s is slot s
// of the one-rank runner; with ranks it is local slot s of its owner (job slot
// owner · max_seqs + s), and a split chunk's slot on each TP rank is local slot s there.
struct Step {
  std::vector<std::pair<int32_t, int32_t>> rows;
  std::vector<int32_t> start, end;  // slots started before / ended after the step
  std::vector<int32_t> split;
};

std::vector<Step> schedule() {
  return {
      {{{0, 7}, {1, 5}, {2, 3}}, {0, 1, 2}, {}, {0, 2}},   // prefill chunks, two split
      {{{0, 1}, {1, 2}, {2, 1}, {3, 6}}, {3}, {}, {3}},     // decode (one verify pair) + a split join
      {{{1, 1}, {3, 1}}, {}, {}, {3}},                      // a one-row split chunk: idle slices
      {{{0, 2}, {2, 1}, {3, 5}}, {}, {1}, {3}},             // slot 1 leaves after this step
      {{{4, 9}, {0, 1}, {3, 1}}, {4}, {0}, {}},             // slot 3's prompt is done: its owner alone
      {{{2, 2}, {3, 2}, {4, 1}}, {}, {}, {}},
  };
}

int32_t owner_of(int32_t seq, int world) { return (seq * 3 + 1) % world; }

Limits test_limits() {
  Limits l;
  l.max_batch = 8;
  l.max_rows = 32;
  l.max_decode_rows = 2;
  l.max_chunk = 16;
  l.max_seqs = 8;
  l.max_context = 256;
  l.n_threads = 1;
  return l;
}

// The bytes each seam sent in one main forward equal the deployment plan's formulas
// (model/deploy_plan.h) evaluated with the step's row counts and its own routing (the
// one-rank runner's decisions: the same as the ranks').
// World rank computing row i of r: its owner, or for a split chunk the TP rank of the
// owner's group whose share holds i.
int computing_rank(const StepRequest& r, int32_t i, const Topology& t) {
  if (!r.cp) return r.owner;
  for (int j = 0; j < t.tp; ++j) {
    const Share sh = share_of(r.n, j, t.tp);
    if (i >= sh.begin && i < sh.end) return r.owner / t.tp * t.tp + j;
  }
  return -1;
}

void expect_plan_bytes(const ModelConfig& cfg, const Topology& t, const std::vector<StepRequest>& reqs,
                       const std::vector<Decision>& routes, const ModelRunner::SeamBytes& got) {
  std::vector<int64_t> tp_rows(t.tp, 0);
  for (const StepRequest& r : reqs)
    for (int32_t i = 0; i < r.n; ++i) {
      const int w = computing_rank(r, i, t);
      if (w / t.tp == t.dp_group()) ++tp_rows[w % t.tp];
    }
  const int L = cfg.num_hidden_layers, K = cfg.num_experts_per_tok;
  StepCollectiveBytes want;
  if (t.tp > 1) {
    want.attn_a2a = L * attn_a2a_bytes(cfg, tp_rows, t.tp_rank());
    want.o_reduce = L * o_reduce_bytes(cfg, tp_rows, t.tp_rank());
  }
  want.head_gather = head_gather_bytes(cfg, tp_rows, t.tp_rank());
  want.head_logits = head_logits_bytes(cfg, tp_rows, t.tp_rank());
  if (t.ep > 1) {
    want.moe_counts = L * moe_counts_bytes(t.ep);
    for (int l = 0; l < L; ++l) {
      std::vector<MoeRouting> group;
      for (int e = 0; e < t.ep; ++e) {  // EP rank e's rows, in step order
        const int world_rank = t.ep_group() * t.ep + e;
        std::vector<int32_t> ids;
        for (const StepRequest& r : reqs)
          for (const Decision& d : routes)
            if (!d.mtp && !d.idx && d.layer == l && d.seq == r.seq && d.pos >= r.p0 && d.pos < r.p0 + r.n &&
                computing_rank(r, static_cast<int32_t>(d.pos - r.p0), t) == world_rank)
              ids.insert(ids.end(), d.selected.begin(), d.selected.end());
        group.push_back(count_routing(ids, K, static_cast<int>(cfg.n_routed_experts), t.ep));
      }
      want.moe_dispatch += moe_dispatch_bytes(cfg, group[t.ep_rank()], t.ep_rank());
      want.moe_combine += moe_combine_bytes(cfg, group, t.ep_rank());
    }
  }
  EXPECT_EQ(got.attn_a2a, want.attn_a2a);
  EXPECT_EQ(got.o_reduce, want.o_reduce);
  EXPECT_EQ(got.moe_counts, want.moe_counts);
  EXPECT_EQ(got.moe_dispatch, want.moe_dispatch);
  EXPECT_EQ(got.moe_combine, want.moe_combine);
  EXPECT_EQ(got.head_gather, want.head_gather);
  EXPECT_EQ(got.head_logits, want.head_logits);
  // Staging copies (parallel/moe_seam.h, attn_output_seam.h): the MoE packs, exactly the bytes
  // the MoE seam sends; own rows, received rows, head groups and O-B partials are not copied.
  EXPECT_EQ(got.copied, want.moe_dispatch + want.moe_combine);
}

// A runner sharing each step over the world in a layout, with its rank groups and this rank's
// weights kept beside it. The ranks read the data of their share only (wo_a: their output
// groups' rows).
struct RankedRunner {
  std::unique_ptr<Topology> topo;
  std::unique_ptr<RankGroups> groups;
  std::unique_ptr<SafetensorsSet> files;
  std::unique_ptr<Weights> w;
  std::unique_ptr<ModelRunner> runner;
};

void make_ranked_runner(const test::TinyModel& m, const Layout& lay, bool overlap, const Limits& lim,
                        RankedRunner& out) {
  Communicator& world = comm();
  Result<Topology> topo = make_topology(world.size(), world.rank(), lay.tp, lay.dp, lay.ep);
  ASSERT_TRUE(topo.ok()) << topo.message();
  out.topo = std::make_unique<Topology>(*topo);
  Result<std::unique_ptr<RankGroups>> groups = make_rank_groups(world, *topo);
  ASSERT_TRUE(groups.ok()) << groups.message();
  out.groups = std::move(*groups);
  out.groups->overlap = overlap;
  Result<SafetensorsSet> files = SafetensorsSet::open_dir(m.dir);
  ASSERT_TRUE(files.ok()) << files.message();
  out.files = std::make_unique<SafetensorsSet>(std::move(*files));
  LoadOptions share;
  share.reads = [&](const std::string& name) { return rank_reads(name, m.cfg, *out.topo); };
  Result<Weights> shared = load_weights(*out.files, m.cfg, nullptr, share);
  ASSERT_TRUE(shared.ok()) << shared.message();
  out.w = std::make_unique<Weights>(std::move(*shared));
  auto many = ModelRunner::create(m.cfg, *out.w, lim, out.groups.get());
  ASSERT_TRUE(many.ok()) << many.message();
  out.runner = std::move(*many);
}

void run_case(const std::string& preset, TinyQuant quant, const Layout& lay, bool overlap) {
  Communicator& world = comm();
  const test::TinyModel& m = test::tiny_model(preset, quant);
  ASSERT_TRUE(m.w);
  const Limits lim = test_limits();
  auto one = ModelRunner::create(m.cfg, *m.w, lim);
  ASSERT_TRUE(one.ok()) << one.message();
  RankedRunner ranked;
  make_ranked_runner(m, lay, overlap, lim, ranked);
  ASSERT_TRUE(ranked.runner);
  std::unique_ptr<ModelRunner>* many = &ranked.runner;
  const Topology* topo = ranked.topo.get();

  const int64_t V = m.cfg.vocab_size, ND = m.cfg.hc_mult * m.cfg.hidden_size;
  const float sentinel = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(7);
  std::vector<int64_t> length(lim.max_seqs, 0);
  std::vector<int32_t> tokens(lim.max_rows), next(lim.max_rows);
  std::vector<float> ref(lim.max_rows * V), got(lim.max_rows * V), mref(lim.max_rows * V), mgot(lim.max_rows * V);
  std::vector<bf16> xref(lim.max_rows * ND), xgot(lim.max_rows * ND);
  int step_no = 0;
  for (const Step& st : schedule()) {
    SCOPED_TRACE("step " + std::to_string(step_no++));
    for (int32_t s : st.start) {
      ASSERT_TRUE((*one)->start_sequence(s).ok());
      for (int r = 0; r < world.size(); ++r) ASSERT_TRUE((*many)->start_sequence(lim.job_slot(r, s)).ok());
      length[s] = 0;
    }
    std::vector<StepRequest> reqs, reqs_many;
    std::vector<std::vector<int32_t>> cp_slots;
    cp_slots.reserve(st.rows.size());
    int64_t T = 0;
    for (auto [seq, n] : st.rows) {
      for (int32_t i = 0; i < n; ++i) {
        tokens[T + i] = static_cast<int32_t>(rng() % V);
        next[T + i] = static_cast<int32_t>(rng() % V);
      }
      const bool split = std::find(st.split.begin(), st.split.end(), seq) != st.split.end();
      const int32_t owner = owner_of(seq, world.size());
      reqs.push_back(StepRequest{seq, length[seq], n, /*prompt_len=*/1, tokens.data() + T, owner, split});
      std::vector<int32_t>& slots = cp_slots.emplace_back();
      for (int j = 0; j < topo->tp; ++j) slots.push_back(lim.job_slot(owner / topo->tp * topo->tp + j, seq));
      StepRequest q = reqs.back();
      q.seq = lim.job_slot(owner, seq);
      q.cp_slots = split ? slots.data() : nullptr;
      reqs_many.push_back(q);
      T += n;
    }
    std::fill(got.begin(), got.end(), sentinel);
    std::fill(mgot.begin(), mgot.end(), sentinel);
    std::vector<Decision> routes;
    Status s1 = (*one)->forward(reqs, ref.data(), xref.data(), DecisionIO{nullptr, &routes});
    ASSERT_TRUE(s1.ok()) << s1.message();
    (*many)->reset_seam_bytes();
    Status s2 = (*many)->forward(reqs_many, got.data(), xgot.data());
    ASSERT_TRUE(s2.ok()) << s2.message();
    expect_plan_bytes(m.cfg, *topo, reqs, routes, (*many)->seam_bytes());
    // MTP over the same rows, next tokens t_{p+1}.
    std::vector<StepRequest> mreqs = reqs, mreqs_many = reqs_many;
    int64_t row = 0;
    for (size_t i = 0; i < mreqs.size(); ++i) {
      mreqs[i].tokens = mreqs_many[i].tokens = next.data() + row;
      row += mreqs[i].n;
    }
    s1 = (*one)->forward_mtp(mreqs, xref.data(), mref.data());
    ASSERT_TRUE(s1.ok()) << s1.message();
    s2 = (*many)->forward_mtp(mreqs_many, xgot.data(), mgot.data());
    ASSERT_TRUE(s2.ok()) << s2.message();
    row = 0;
    for (const StepRequest& r : reqs) {
      for (int32_t i = 0; i < r.n; ++i, ++row) {
        // A split chunk's row i is computed by TP rank j with i in share_of(n, j, tp).
        const bool mine = computing_rank(r, i, *topo) == world.rank();
        if (mine) {
          EXPECT_EQ(0, std::memcmp(ref.data() + row * V, got.data() + row * V, sizeof(float) * V))
              << "logits of row " << row << " (slot " << r.seq << ")";
          EXPECT_EQ(0, std::memcmp(xref.data() + row * ND, xgot.data() + row * ND, sizeof(bf16) * ND))
              << "Xfinal of row " << row;
          EXPECT_EQ(0, std::memcmp(mref.data() + row * V, mgot.data() + row * V, sizeof(float) * V))
              << "MTP logits of row " << row;
        } else {
          EXPECT_TRUE(std::isnan(got[row * V]) && std::isnan(got[row * V + V - 1]))
              << "row " << row << " of another rank was written";
        }
      }
    }
    for (const StepRequest& r : reqs) length[r.seq] = r.p0 + r.n;
    for (int32_t s : st.end) {
      (*one)->end_sequence(s);
      for (int r = 0; r < world.size(); ++r) (*many)->end_sequence(lim.job_slot(r, s));
    }
  }
}

// Slots are the job's (Limits::job_slot): a request, a fork or a split chunk whose slots do not
// belong where its owner says is refused before any collective, on every rank alike, with an
// error naming the request and the slot.
TEST(Ranks, SlotsOutsideTheirRankAreErrors) {
  Communicator& world = comm();
  if (world.size() < 2) GTEST_SKIP() << "needs 2 ranks or more";
  const test::TinyModel& m = test::tiny_model("tiny", TinyQuant::kFp8);
  const Limits lim = test_limits();
  RankedRunner ranked;
  make_ranked_runner(m, Layout{world.size(), 1, world.size()}, true, lim, ranked);
  ASSERT_TRUE(ranked.runner);
  ModelRunner& r = *ranked.runner;
  const int32_t job_slots = lim.max_seqs * world.size();
  EXPECT_NE(r.start_sequence(job_slots).message().find("outside [0, " + std::to_string(job_slots) + ")"),
            std::string::npos);
  const int32_t mine = 0, theirs = lim.job_slot(1, 0);  // rank 0's slot 0, rank 1's slot 0
  ASSERT_TRUE(r.start_sequence(mine).ok());
  ASSERT_TRUE(r.start_sequence(theirs).ok());
  EXPECT_NE(r.fork_sequence(mine, lim.job_slot(1, 1), 0).message().find("on different ranks"), std::string::npos);
  std::vector<int32_t> tokens(4, 3);
  std::vector<float> logits(static_cast<size_t>(lim.max_rows * m.cfg.vocab_size));
  auto forward_error = [&](StepRequest q) { return r.forward({&q, 1}, logits.data(), nullptr).message(); };
  EXPECT_NE(forward_error(StepRequest{theirs, 0, 4, 4, tokens.data(), 0, false}).find("is rank 1's, not its owner 0's"),
            std::string::npos);
  EXPECT_NE(forward_error(StepRequest{mine, 0, 4, 4, tokens.data(), 0, true}).find("without slots on its TP group"),
            std::string::npos);
  std::vector<int32_t> wrong(static_cast<size_t>(world.size()), mine);  // every TP rank's slot on rank 0
  EXPECT_NE(forward_error(StepRequest{mine, 0, 4, 4, tokens.data(), 0, true, wrong.data()}).find("is not rank 1's"),
            std::string::npos);
  std::vector<int32_t> other(static_cast<size_t>(world.size()));
  for (int j = 0; j < world.size(); ++j) other[j] = lim.job_slot(j, 1);  // the owner's entry is not its slot
  EXPECT_NE(forward_error(StepRequest{mine, 0, 4, 4, tokens.data(), 0, true, other.data()})
                .find("context-parallel slot " + std::to_string(other[0]) + " is not its slot 0"),
            std::string::npos);
}

class RanksTest : public ::testing::TestWithParam<std::tuple<std::string, TinyQuant>> {};

TEST_P(RanksTest, EveryLayoutEqualsOneRank) {
  const auto& [preset, quant] = GetParam();
  bool first = true;
  for (const Layout& l : layouts(comm().size())) {
    SCOPED_TRACE("tp " + std::to_string(l.tp) + " dp " + std::to_string(l.dp) + " ep " + std::to_string(l.ep));
    run_case(preset, quant, l, /*overlap=*/true);
    if (first) {  // the first layout (ep = world) also with the dispatch waited for first
      SCOPED_TRACE("overlap off");
      run_case(preset, quant, l, /*overlap=*/false);
    }
    first = false;
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, RanksTest,
                         ::testing::Combine(::testing::Values("tiny", "tiny2"),
                                            ::testing::Values(TinyQuant::kNone, TinyQuant::kFp8)));

}  // namespace
}  // namespace dsv4
