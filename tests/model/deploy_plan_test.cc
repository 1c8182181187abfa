// Deployment on paper (model/deploy_plan.h): the per-seam collective byte formulas at
// hand-computed counts, routing counts from expert ids, the uniform-routing expectation
// against sampled routing, one rank sending nothing, and Flash per-rank figures as tp grows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "model/bench_fractions.h"
#include "model/cache_bytes.h"
#include "model/checkpoint_table.h"
#include "model/config.h"
#include "model/deploy_plan.h"

namespace dsv4 {
namespace {

ModelConfig preset(const char* name) {
  Result<ModelConfig> c = preset_config(name, true);
  EXPECT_TRUE(c.ok()) << c.message();
  return *c;
}

// tiny: H 4, Dh 80, G_o 4, D 128, V 512, K 2, E 8. G = 2 with t = (3, 1), group_t = 4.
TEST(DeployPlan, SeamsAtHandComputedCounts) {
  const ModelConfig c = preset("tiny");
  const std::vector<int64_t> t = {3, 1};
  // attn_a2a = t_r · (G−1)/G · H · Dh · 2 = t_r · 1/2 · 640
  EXPECT_EQ(attn_a2a_bytes(c, t, 0), 960);
  EXPECT_EQ(attn_a2a_bytes(c, t, 1), 320);
  // o_reduce = (group_t − t_r) · (G_o/G) · D · 4 = (4 − t_r) · 2 · 512
  EXPECT_EQ(o_reduce_bytes(c, t, 0), 1024);
  EXPECT_EQ(o_reduce_bytes(c, t, 1), 3072);
  // head_gather = t_r · D · 2 · (G−1) = t_r · 256
  EXPECT_EQ(head_gather_bytes(c, t, 0), 768);
  EXPECT_EQ(head_gather_bytes(c, t, 1), 256);
  // head_logits = (group_t − t_r) · (V/G) · 4 = (4 − t_r) · 1024
  EXPECT_EQ(head_logits_bytes(c, t, 0), 1024);
  EXPECT_EQ(head_logits_bytes(c, t, 1), 3072);
  EXPECT_EQ(moe_counts_bytes(4), 48);
  EXPECT_EQ(moe_counts_bytes(1), 0);
}

// tiny over P = 2: experts 0-3 on rank 0, 4-7 on rank 1; a dispatched row is
// D·2 + K·8 = 272 bytes, a combined one D·2 = 256.
TEST(DeployPlan, RoutingCountsAndMoeSeams) {
  const ModelConfig c = preset("tiny");
  // Rank 0's rows: both local; one each; both remote; a hash row repeating an id.
  const std::vector<int32_t> ids0 = {0, 1, 0, 5, 4, 6, 5, 5};
  const MoeRouting r0 = count_routing(ids0, 2, 8, 2);
  EXPECT_EQ(r0.rows_to, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r0.routes_to, (std::vector<int64_t>{3, 4}));
  // Rank 1's rows: one local, one split.
  const std::vector<int32_t> ids1 = {7, 6, 2, 7};
  const MoeRouting r1 = count_routing(ids1, 2, 8, 2);
  EXPECT_EQ(r1.rows_to, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r1.routes_to, (std::vector<int64_t>{1, 3}));

  EXPECT_EQ(moe_dispatch_bytes(c, r0, 0), 3 * 272);
  EXPECT_EQ(moe_dispatch_bytes(c, r1, 1), 1 * 272);
  const std::vector<MoeRouting> group = {r0, r1};
  EXPECT_EQ(moe_combine_bytes(c, group, 0), 1 * 256);  // rank 1's route to expert 2
  EXPECT_EQ(moe_combine_bytes(c, group, 1), 4 * 256);  // rank 0's routes to 5, 4, 6, 5
}

// Σ_r combine(r) = every remote route once; Σ_r dispatch(r) = every remote (row, rank) once.
TEST(DeployPlan, MoeSeamsConserveRoutes) {
  const ModelConfig c = preset("flash");
  const int p = 8, k = c.num_experts_per_tok, e = c.n_routed_experts;
  std::mt19937 rng(7);
  std::vector<MoeRouting> group;
  int64_t remote_routes = 0, remote_rows = 0;
  for (int r = 0; r < p; ++r) {
    std::vector<int32_t> ids;
    for (int row = 0; row < 5 + r; ++row)
      for (int j = 0; j < k; ++j) ids.push_back(static_cast<int32_t>(rng() % e));  // repeats allowed (hash rows)
    group.push_back(count_routing(ids, k, e, p));
    for (int d = 0; d < p; ++d) {
      if (d == r) continue;
      remote_routes += group[r].routes_to[d];
      remote_rows += group[r].rows_to[d];
    }
  }
  int64_t combine = 0, dispatch = 0;
  for (int r = 0; r < p; ++r) {
    combine += moe_combine_bytes(c, group, r);
    dispatch += moe_dispatch_bytes(c, group[r], r);
  }
  EXPECT_EQ(combine, remote_routes * c.hidden_size * 2);
  EXPECT_EQ(dispatch, remote_rows * (c.hidden_size * 2 + k * 8));
}

// The uniform expectation is what sampled uniform routing measures (within 2 %).
TEST(DeployPlan, UniformExpectationMatchesSampledRouting) {
  const ModelConfig c = preset("flash");
  const int p = 8, k = c.num_experts_per_tok, e = c.n_routed_experts;
  const int64_t rows = 20000;
  std::mt19937 rng(11);
  std::vector<int32_t> experts(e);
  std::iota(experts.begin(), experts.end(), 0);
  std::vector<int32_t> ids;
  for (int64_t row = 0; row < rows; ++row) {
    for (int j = 0; j < k; ++j) std::swap(experts[j], experts[j + rng() % (e - j)]);  // K distinct
    ids.insert(ids.end(), experts.begin(), experts.begin() + k);
  }
  const MoeRouting m = count_routing(ids, k, e, p);
  std::vector<MoeRouting> group(p, MoeRouting{std::vector<int64_t>(p, 0), std::vector<int64_t>(p, 0)});
  group[0] = m;  // rank 0 sends; combine of rank 1 is what rank 0's rows get back from it
  const std::vector<int64_t> ep_rows = {rows, 0, 0, 0, 0, 0, 0, 0};
  const double dispatch = static_cast<double>(moe_dispatch_bytes(c, m, 0));
  const double combine = static_cast<double>(moe_combine_bytes(c, group, 1));
  EXPECT_NEAR(dispatch / static_cast<double>(moe_dispatch_bytes(c, ep_rows, 0, RoutingCase::kUniform)), 1.0, 0.02);
  EXPECT_NEAR(combine / static_cast<double>(moe_combine_bytes(c, ep_rows, 1, RoutingCase::kUniform)), 1.0, 0.02);
  EXPECT_NEAR(touch_probability(e, p, k), 1 - 224.0 / 256 * 223 / 255 * 222 / 254 * 221 / 253 * 220 / 252 * 219 / 251,
              1e-12);
}

TEST(DeployPlan, UniformLiesBetweenZeroAndWorst) {
  for (const char* name : {"tiny", "tiny2", "flash"}) {
    const ModelConfig c = preset(name);
    for (int p : {2, 4, 8}) {
      if (c.n_routed_experts % p != 0) continue;
      const std::vector<int64_t> rows(p, 3);
      for (int r = 0; r < p; ++r) {
        const int64_t du = moe_dispatch_bytes(c, rows, r, RoutingCase::kUniform);
        const int64_t dw = moe_dispatch_bytes(c, rows, r, RoutingCase::kWorst);
        const int64_t cu = moe_combine_bytes(c, rows, r, RoutingCase::kUniform);
        const int64_t cw = moe_combine_bytes(c, rows, r, RoutingCase::kWorst);
        EXPECT_GT(du, 0) << name << " " << p;
        EXPECT_LE(du, dw) << name << " " << p;
        EXPECT_GT(cu, 0) << name << " " << p;
        EXPECT_LE(cu, cw) << name << " " << p;
      }
    }
  }
}

TEST(DeployPlan, OneRankSendsNothing) {
  const ModelConfig c = preset("flash");
  PlanOptions opt;
  opt.batch = 16;
  opt.context = 4096;
  opt.mtp = true;
  const Result<DeployPlan> plan = plan_deployment(c, opt);
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_EQ(plan->ranks.size(), 1u);
  EXPECT_EQ(plan->ranks[0].uniform.total(), 0);
  EXPECT_EQ(plan->ranks[0].worst.total(), 0);
  EXPECT_EQ(plan->ranks[0].rows, 32);
  // tp 1 over 4 DP groups, ep 4: only MoE terms.
  opt.dp = 4;
  const Result<DeployPlan> dp4 = plan_deployment(c, opt);
  ASSERT_TRUE(dp4.ok()) << dp4.message();
  for (const RankPlan& r : dp4->ranks) {
    EXPECT_EQ(r.worst.attn_a2a + r.worst.o_reduce + r.worst.head_gather + r.worst.head_logits, 0);
    EXPECT_GT(r.uniform.moe_dispatch, 0);
  }
  // tp 4, ep 1: only attention and head terms.
  opt.dp = 1;
  opt.tp = 4;
  opt.ep = 1;
  const Result<DeployPlan> tp4 = plan_deployment(c, opt);
  ASSERT_TRUE(tp4.ok()) << tp4.message();
  for (const RankPlan& r : tp4->ranks) {
    EXPECT_EQ(r.worst.moe_counts + r.worst.moe_dispatch + r.worst.moe_combine, 0);
    EXPECT_GT(r.worst.attn_a2a, 0);
  }
}

// A plan's step adds up its seams: main layers on 2 rows per request, the MTP block and
// head on 1; uneven requests (B = 3 over G = 2: ranks own 1 and 2).
TEST(DeployPlan, StepSumsTheSeams) {
  const ModelConfig c = preset("tiny");
  PlanOptions opt;
  opt.tp = 2;
  opt.ep = 2;
  opt.batch = 3;
  opt.context = 64;
  opt.mtp = true;
  const Result<DeployPlan> plan = plan_deployment(c, opt);
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_EQ(plan->ranks.size(), 2u);
  const std::vector<int64_t> main_rows = {2, 4}, mtp_rows = {1, 2};
  for (int r = 0; r < 2; ++r) {
    const RankPlan& rp = plan->ranks[r];
    EXPECT_EQ(rp.requests, mtp_rows[r]);
    EXPECT_EQ(rp.rows, main_rows[r]);
    const int64_t l = c.num_hidden_layers;
    EXPECT_EQ(rp.worst.attn_a2a, l * attn_a2a_bytes(c, main_rows, r) + attn_a2a_bytes(c, mtp_rows, r));
    EXPECT_EQ(rp.worst.o_reduce, l * o_reduce_bytes(c, main_rows, r) + o_reduce_bytes(c, mtp_rows, r));
    EXPECT_EQ(rp.worst.moe_counts, (l + 1) * moe_counts_bytes(2));
    EXPECT_EQ(rp.worst.moe_dispatch, l * moe_dispatch_bytes(c, main_rows, r, RoutingCase::kWorst) +
                                         moe_dispatch_bytes(c, mtp_rows, r, RoutingCase::kWorst));
    EXPECT_EQ(rp.uniform.moe_combine, l * moe_combine_bytes(c, main_rows, r, RoutingCase::kUniform) +
                                          moe_combine_bytes(c, mtp_rows, r, RoutingCase::kUniform));
    EXPECT_EQ(rp.worst.head_gather, head_gather_bytes(c, main_rows, r) + head_gather_bytes(c, mtp_rows, r));
    EXPECT_EQ(rp.worst.head_logits, head_logits_bytes(c, main_rows, r) + head_logits_bytes(c, mtp_rows, r));
    EXPECT_EQ(rp.cache_bytes, mtp_rows[r] * plan->sequence.total());
  }
  const std::string text = deploy_plan_text(c, *plan);
  EXPECT_NE(text.find("rank 0: 1 request, 2 rows"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1: 2 requests, 4 rows"), std::string::npos) << text;
}

// Growing families: floor(C / ratio) rows per layer; rings: sliding_window rows.
TEST(DeployPlan, SequenceCache) {
  const ModelConfig c = preset("flash");
  const SequenceCacheBytes s = sequence_cache_bytes(c, 65536 + 3);
  int64_t growing = 0, ring = 0;
  for (const CacheFamilyBytes& f : cache_bytes_per_token(c)) {
    if (f.per_token)
      growing += f.row_bytes * f.layers * (65536 / f.ratio);
    else
      ring += f.row_bytes * f.layers * 128;
  }
  EXPECT_EQ(s.growing, growing);
  EXPECT_EQ(s.ring, ring);
  EXPECT_EQ(s.growing, (584 + 68) * 21 * 16384 + 584 * 20 * 512);
}

TEST(DeployPlan, ErrorsNameTheField) {
  const ModelConfig c = preset("flash");
  PlanOptions opt;
  opt.context = 65536;
  opt.tp = 3;
  EXPECT_NE(plan_deployment(c, opt).message().find("does not divide o_groups = 8"), std::string::npos);
  opt.tp = 2;
  opt.ep = 3;
  EXPECT_NE(plan_deployment(c, opt).message().find("--ep 3 does not divide the world of 2"), std::string::npos);
  opt.ep = 0;
  opt.context = c.max_position_embeddings + 1;
  EXPECT_NE(plan_deployment(c, opt).message().find("max_position_embeddings"), std::string::npos);
  opt.context = 1;
  opt.batch = 0;
  EXPECT_NE(plan_deployment(c, opt).message().find("--batch 0"), std::string::npos);
  opt.batch = 1;
  opt.mem_per_host_gib = 0;
  EXPECT_NE(plan_deployment(c, opt).message().find("--mem-per-host 0 must be a positive number of GiB"),
            std::string::npos);
  opt.mem_per_host_gib = 2e6;
  EXPECT_NE(
      plan_deployment(c, opt).message().find("--mem-per-host 2000000 must be a positive number of GiB up to 1048576"),
      std::string::npos);
  opt.mem_per_host_gib = 256;
  opt.bandwidth_gbps = -1;
  EXPECT_NE(plan_deployment(c, opt).message().find("--bandwidth-per-host -1 must be a positive number of GB/s"),
            std::string::npos);
  opt.bandwidth_gbps = 200;
  opt.interconnect_gbps = std::numeric_limits<double>::infinity();
  EXPECT_NE(plan_deployment(c, opt).message().find("--interconnect inf must be a positive"), std::string::npos);
  opt.interconnect_gbps = 25;
  opt.hosts = 3;
  EXPECT_NE(plan_deployment(c, opt).message().find("--hosts 3 must divide the world of 2 ranks (--dp 1 x --tp 2)"),
            std::string::npos);
  opt.hosts = 0;
  EXPECT_NE(plan_deployment(c, opt).message().find("--hosts 0 must divide"), std::string::npos);
}

// Flash, 8 ranks with the experts over all 8, 16 requests per DP group at 65536 positions:
// a rank's resident bytes fall from tp 1 (dp 8) to tp 4 (dp 2) to tp 8 (dp 1).
TEST(DeployPlan, FlashRankBytesFallWithTp) {
  const ModelConfig c = preset("flash");
  int64_t prev_weights = std::numeric_limits<int64_t>::max(), prev_resident = prev_weights;
  for (int tp : {1, 4, 8}) {
    PlanOptions opt;
    opt.tp = tp;
    opt.dp = 8 / tp;
    opt.ep = 8;
    opt.batch = 16;
    opt.context = 65536;
    const Result<DeployPlan> plan = plan_deployment(c, opt);
    ASSERT_TRUE(plan.ok()) << plan.message();
    ASSERT_EQ(plan->ranks.size(), 8u);
    int64_t weights = 0, resident = 0;
    for (const RankPlan& r : plan->ranks) {
      weights = std::max(weights, r.weights.total());
      resident = std::max(resident, r.resident());
      EXPECT_EQ(r.uniform.total(), plan->ranks[0].uniform.total());  // even split: equal ranks
    }
    EXPECT_LT(weights, prev_weights) << "tp " << tp;
    EXPECT_LT(resident, prev_resident) << "tp " << tp;
    prev_weights = weights;
    prev_resident = resident;
    const std::string text = deploy_plan_text(c, *plan);
    EXPECT_NE(text.find("ranks 0-7: "), std::string::npos) << text;
    std::printf("  flash tp %d dp %d ep 8: weights %.3f GiB, resident %.3f GiB, step %.2f / %.2f MiB sent\n", tp,
                8 / tp, weights / 1073741824.0, resident / 1073741824.0, plan->ranks[0].uniform.total() / 1048576.0,
                plan->ranks[0].worst.total() / 1048576.0);
  }
}

// Ranks fill hosts in rank order; a host holds the sum of its ranks (tiny: 8 experts, one per
// rank of the EP group).
TEST(DeployPlan, HostsTakeRanksInOrder) {
  const ModelConfig c = preset("tiny");
  PlanOptions opt;
  opt.tp = 4;
  opt.dp = 2;
  opt.ep = 8;
  opt.batch = 16;
  opt.context = 1024;
  opt.hosts = 2;
  const Result<DeployPlan> plan = plan_deployment(c, opt);
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_EQ(plan->hosts.size(), 2u);
  for (int h = 0; h < 2; ++h) {
    const HostPlan& host = plan->hosts[h];
    EXPECT_EQ(host.first_rank, 4 * h);
    EXPECT_EQ(host.n_ranks, 4);
    int64_t weights = 0, caches = 0;
    for (int r = 4 * h; r < 4 * h + 4; ++r) {
      weights += plan->ranks[r].weights.total();
      caches += plan->ranks[r].cache_bytes;
    }
    EXPECT_EQ(host.weights, weights);
    EXPECT_EQ(host.caches, caches);
    // A DP group is one host: only the MoE seams leave it, to the 4 peers of 7 on the other host.
    double moe = 0;
    for (int r = 4 * h; r < 4 * h + 4; ++r)
      moe += 4.0 / 7 * static_cast<double>(plan->ranks[r].uniform.moe_counts + plan->ranks[r].uniform.moe_dispatch +
                                           plan->ranks[r].uniform.moe_combine);
    EXPECT_NEAR(host.sent_uniform, moe, 1e-6 * moe);
  }
  const std::string text = deploy_plan_text(c, *plan);
  EXPECT_NE(text.find("hosts 0-1, each: weights"), std::string::npos) << text;
  opt.hosts = 1;
  const Result<DeployPlan> one = plan_deployment(c, opt);
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ(one->hosts[0].weights, plan->hosts[0].weights + plan->hosts[1].weights);
  EXPECT_EQ(one->hosts[0].sent_uniform, 0);
  for (const DecodeProjection& p : one->projections) EXPECT_EQ(p.network_s, 0);
}

// tiny over tp 4 (ep 4), 2 ranks per host, 6 requests (ranks own 1, 2, 1, 2): a seam sized by
// the sender reaches the other host in proportion to peers, one sized by the receiver in
// proportion to the peers' rows.
TEST(DeployPlan, SentToOtherHostsByHand) {
  const ModelConfig c = preset("tiny");
  PlanOptions opt;
  opt.tp = 4;
  opt.batch = 6;
  opt.context = 64;
  opt.hosts = 2;
  const Result<DeployPlan> plan = plan_deployment(c, opt);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const auto sender = [](const StepCollectiveBytes& b) {
    return static_cast<double>(b.attn_a2a + b.head_gather + b.moe_counts + b.moe_dispatch);
  };
  const auto receiver = [](const StepCollectiveBytes& b) {
    return static_cast<double>(b.o_reduce + b.head_logits + b.moe_combine);
  };
  const std::vector<RankPlan>& r = plan->ranks;
  // Rank 0: peers 1, 2, 3 with 2, 1, 2 rows, remote 2, 3; rank 1: peers 0, 2, 3 with 1, 1, 2 rows.
  const double host0 = 2.0 / 3 * sender(r[0].uniform) + 3.0 / 5 * receiver(r[0].uniform) +
                       2.0 / 3 * sender(r[1].uniform) + 3.0 / 4 * receiver(r[1].uniform);
  EXPECT_NEAR(plan->hosts[0].sent_uniform, host0, 1e-9 * host0);
  // Rank 2: peers 0, 1, 3 with 1, 2, 2 rows, remote 0, 1; rank 3: peers 0, 1, 2 with 1, 2, 1 rows.
  const double host1 = 2.0 / 3 * sender(r[2].uniform) + 3.0 / 5 * receiver(r[2].uniform) +
                       2.0 / 3 * sender(r[3].uniform) + 3.0 / 4 * receiver(r[3].uniform);
  EXPECT_NEAR(plan->hosts[1].sent_uniform, host1, 1e-9 * host1);
}

// Largest batch at the context and largest context at the batch, against direct arithmetic.
TEST(DeployPlan, LargestBatchAndContextThatFit) {
  const ModelConfig c = preset("tiny");
  PlanOptions opt;
  opt.batch = 8;
  opt.context = 512;
  const Result<DeployPlan> probe = plan_deployment(c, opt);
  ASSERT_TRUE(probe.ok()) << probe.message();
  const int64_t weights = probe->ranks[0].weights.total();
  const int64_t sequence = sequence_cache_bytes(c, 512).total();
  // Room for 10.5 sequences of 512 positions beside the weights.
  const int64_t memory = weights + 21 * sequence / 2;
  opt.mem_per_host_gib = static_cast<double>(memory) / 1073741824.0;
  const Result<DeployPlan> plan = plan_deployment(c, opt);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->max_batch, 10);
  // 8 sequences: the largest C with 8 · sequence(C) <= memory − weights.
  const int64_t room = memory - weights;
  EXPECT_GT(plan->max_context, 512);
  EXPECT_LT(plan->max_context, c.max_position_embeddings);
  EXPECT_LE(8 * sequence_cache_bytes(c, plan->max_context).total(), room);
  EXPECT_GT(8 * sequence_cache_bytes(c, plan->max_context + 1).total(), room);

  // tp 2 over 2 hosts: rank 1 (one per host) owns ceil(B / 2) requests; room for 10 each.
  opt.tp = 2;
  opt.hosts = 2;
  const Result<DeployPlan> two = plan_deployment(c, opt);
  ASSERT_TRUE(two.ok()) << two.message();
  const int64_t room1 = memory - two->ranks[1].weights.total();
  EXPECT_EQ(two->max_batch, 2 * (room1 / sequence));
  // Not even the weights: 0.
  opt.mem_per_host_gib = 1e-6;
  const Result<DeployPlan> none = plan_deployment(c, opt);
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_EQ(none->max_batch, 0);
  EXPECT_EQ(none->max_context, 0);
}

// What a decode step reads on tiny: the weights split by how they scale, the experts hit,
// the caches read at C = 100 (window 8, CSA layers 1 and 3 with index_topk 4, HCA layer 2
// at ratio 8).
TEST(DeployPlan, StepReadsByHand) {
  const ModelConfig c = preset("tiny");
  const Topology t = *make_topology(1, 0, 1);
  const RankReadWeights r = rank_read_weights(c, t);
  EXPECT_EQ(r.embed_row, c.hidden_size * 2);
  EXPECT_EQ(r.owned + r.sharded + r.embed_row * c.vocab_size + r.experts + r.draft_owned + r.draft_sharded +
                r.draft_experts,
            rank_weights(c, t).total());
  const RankWeights w = rank_weights(c, t);
  EXPECT_EQ(r.sharded + r.draft_sharded, w.bytes[1] + w.bytes[2] + w.bytes[4]);  // wo_a, wo_b, head
  EXPECT_EQ(r.experts, r.draft_experts * c.num_hidden_layers);  // every layer has the same experts
  EXPECT_DOUBLE_EQ(experts_hit_fraction(c, 1), 0.25);          // K / E = 2 / 8
  EXPECT_DOUBLE_EQ(experts_hit_fraction(c, 8), 1 - std::pow(0.75, 8));
  int64_t kv = 0, key = 0;
  for (const CacheFamilyBytes& f : cache_bytes_per_token(c)) {
    if (f.family == "window KV") kv = f.row_bytes;
    if (f.family == "indexer keys") key = f.row_bytes;
  }
  // window 8 rows x 4 layers (+ 1 MTP layer with mtp), CSA 4 x 2, HCA 12 x 1; keys 25 x 2.
  EXPECT_EQ(cache_read_bytes(c, 100, false), kv * (32 + 8 + 12) + key * 50);
  EXPECT_EQ(cache_read_bytes(c, 100, true), kv * (40 + 8 + 12) + key * 50);
  EXPECT_EQ(cache_read_bytes(c, 3, false), kv * (3 * 4) + 0);  // nothing compressed yet
}

// The projection at B = 1, 8, 64 on one tiny rank: read / bandwidth, no network; tokens/s per
// request 1 / t, in all dp · B / t.
TEST(DeployPlan, ProjectionByHand) {
  const ModelConfig c = preset("tiny");
  PlanOptions opt;
  opt.batch = 4;
  opt.context = 100;
  opt.bandwidth_gbps = 0.5;
  const Result<DeployPlan> plan = plan_deployment(c, opt);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const RankReadWeights r = rank_read_weights(c, plan->topology);
  const int64_t cache = cache_read_bytes(c, 100, false);
  ASSERT_EQ(plan->projections.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const DecodeProjection& p = plan->projections[i];
    const int64_t b = kProjectedBatches[i];
    EXPECT_EQ(p.batch, b);
    const double read = static_cast<double>(r.owned + r.sharded + r.embed_row * b + b * cache) +
                        static_cast<double>(r.experts) * (1 - std::pow(0.75, static_cast<double>(b)));
    EXPECT_NEAR(p.read_bytes, read, 1e-9 * read) << b;
    EXPECT_NEAR(p.memory_s, read / 0.5e9, 1e-9 * read / 0.5e9) << b;
    EXPECT_EQ(p.network_s, 0);
    EXPECT_EQ(p.fraction, 1);
    EXPECT_EQ(p.step_s(), p.memory_s);
  }
  // tp 2 over 2 hosts, a fast interconnect. B = 1: rank 0 (host 0) has no rows (share_of gives
  // the request to rank 1) and reads only its shards and the experts hit; host 1 is the slower.
  opt.tp = 2;
  opt.hosts = 2;
  opt.interconnect_gbps = 1e9;
  const Result<DeployPlan> two = plan_deployment(c, opt);
  ASSERT_TRUE(two.ok()) << two.message();
  const DecodeProjection& p1 = two->projections[0];
  const RankReadWeights r1 = rank_read_weights(c, *make_topology(2, 1, 2));
  const double read1 = static_cast<double>(r1.owned + r1.sharded + r1.embed_row + cache) +
                       static_cast<double>(r1.experts) * 0.25;
  EXPECT_EQ(p1.host, 1);
  EXPECT_NEAR(p1.read_bytes, read1, 1e-9 * read1);
  // A slow interconnect at B = 8: the slower host adds its bytes to the other host / interconnect.
  opt.interconnect_gbps = 0.25;
  const Result<DeployPlan> slow = plan_deployment(c, opt);
  ASSERT_TRUE(slow.ok()) << slow.message();
  const DecodeProjection& p8 = slow->projections[1];
  EXPECT_GT(p8.network_s, 0);
  EXPECT_NEAR(p8.network_s, p8.sent_bytes / 0.25e9, 1e-12);
  EXPECT_EQ(p8.step_s(), p8.memory_s + p8.network_s);
  const std::string text = deploy_plan_text(c, *two);
  EXPECT_NE(text.find("t_step = max over hosts [ read / (bandwidth x f) + sent to other hosts / interconnect ]"),
            std::string::npos) << text;
  EXPECT_NE(text.find("f = 1 (no --bench)"), std::string::npos) << text;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// A bench file: B 1 from two layer records (time-weighted), B 8 and 32 from one each; other
// thread counts, prefill, S = 2 and other cases are not read.
TEST(DeployPlan, BenchFractionsApplyAtTheNearestB) {
  const std::string json = R"({"machine": {}, "cases": [
    {"case": "layer-csa", "phase": "decode", "B": 1, "S": 1, "threads": 2, "step_ms": 3, "bandwidth_fraction": 0.5},
    {"case": "head", "phase": "decode", "B": 1, "S": 1, "threads": 2, "step_ms": 1, "bandwidth_fraction": 0.9},
    {"case": "layer-hca", "phase": "decode", "B": 8, "S": 1, "threads": 2, "step_ms": 2, "bandwidth_fraction": 0.4},
    {"case": "layer-hca", "phase": "decode", "B": 32, "S": 1, "threads": 2, "step_ms": 2, "bandwidth_fraction": 0.2},
    {"case": "layer-hca", "phase": "decode", "B": 64, "S": 1, "threads": 1, "step_ms": 2, "bandwidth_fraction": 0.9},
    {"case": "layer-hca", "phase": "prefill", "B": 64, "S": 64, "threads": 2, "step_ms": 2, "bandwidth_fraction": 0.9},
    {"case": "layer-csa", "phase": "decode", "B": 64, "S": 2, "threads": 2, "step_ms": 2, "bandwidth_fraction": 0.9},
    {"case": "tiny-e2e", "phase": "decode", "B": 64, "S": 1, "threads": 2, "step_ms": 2, "bandwidth_fraction": 0.9}
  ]})";
  const Result<BenchFractions> f = read_bench_fractions(write_file("bench_ok.json", json));
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->threads, 2);
  ASSERT_EQ(f->by_batch.size(), 3u);
  EXPECT_DOUBLE_EQ(f->by_batch[0].fraction, (0.5 * 3 + 0.9 * 1) / 4);  // 0.6
  EXPECT_EQ(f->nearest(1).batch, 1);
  EXPECT_EQ(f->nearest(3).batch, 8);  // log distance 0.98 against 1.10
  EXPECT_EQ(f->nearest(8).batch, 8);
  EXPECT_EQ(f->nearest(64).batch, 32);

  const ModelConfig c = preset("tiny");
  PlanOptions opt;
  opt.tp = 2;
  opt.hosts = 2;
  opt.context = 100;
  opt.bench = *f;
  const Result<DeployPlan> plan = plan_deployment(c, opt);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const double expected[] = {0.6, 0.4, 0.2};
  const int64_t at[] = {1, 8, 32};
  for (int i = 0; i < 3; ++i) {
    const DecodeProjection& p = plan->projections[i];
    EXPECT_DOUBLE_EQ(p.fraction, expected[i]);
    EXPECT_EQ(p.bench_batch, at[i]);
    EXPECT_DOUBLE_EQ(p.step_s(), p.memory_s / expected[i] + p.network_s);
  }
  const std::string text = deploy_plan_text(c, *plan);
  EXPECT_NE(text.find("0.200 (32)"), std::string::npos) << text;
}

TEST(DeployPlan, BenchFileErrorsNameTheFlag) {
  const auto error = [](const std::string& path) { return read_bench_fractions(path).message(); };
  EXPECT_NE(error(::testing::TempDir() + "no_such_bench.json").find("cannot open"), std::string::npos);
  const std::string bad = write_file("bench_bad.json", "{\"cases\": [");
  EXPECT_NE(error(bad).find("--bench " + bad + ": not JSON"), std::string::npos);
  EXPECT_NE(error(write_file("bench_nocases.json", "{}")).find("no \"cases\" list"), std::string::npos);
  EXPECT_NE(error(write_file("bench_empty.json", R"({"cases": [{"case": "gemm-fp8", "phase": "gemm"}]})"))
                .find("no decode records at S = 1"),
            std::string::npos);
  const std::string no_fraction = R"({"cases": [{"case": "head", "phase": "decode", "B": 1, "S": 1, "threads": 1,
                                      "step_ms": 1}]})";
  EXPECT_NE(error(write_file("bench_nofrac.json", no_fraction))
                .find("cases[0] (head) has no number \"bandwidth_fraction\""),
            std::string::npos);
  const std::string zero = R"({"cases": [{"case": "head", "phase": "decode", "B": 1, "S": 1, "threads": 1,
                               "step_ms": 1, "bandwidth_fraction": 0}]})";
  const char* limits = "cases[0] (head) needs B and threads integers in [1, 1048576], step_ms in (0, 1e9] and "
                       "bandwidth_fraction in (0, 100]";
  EXPECT_NE(error(write_file("bench_zero.json", zero)).find(limits), std::string::npos);
  const std::string half = R"({"cases": [{"case": "head", "phase": "decode", "B": 1.5, "S": 1, "threads": 1,
                               "step_ms": 1, "bandwidth_fraction": 0.5}]})";
  EXPECT_NE(error(write_file("bench_half.json", half)).find(limits), std::string::npos);
  // Fields of other types are not this record's: not read, no exception.
  const std::string odd = R"({"cases": [{"case": 7, "phase": "decode", "S": "1"}]})";
  EXPECT_NE(error(write_file("bench_odd.json", odd)).find("no decode records"), std::string::npos);
}

}  // namespace
}  // namespace dsv4
