// Deployment on paper (model/deploy_plan.h): the per-seam collective byte formulas at
// hand-computed counts, routing counts from expert ids, the uniform-routing expectation
// against sampled routing, one rank sending nothing, and Flash per-rank figures as tp grows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "model/cache_bytes.h"
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
  opt.host_memory_gib = 0;
  EXPECT_NE(plan_deployment(c, opt).message().find("--host-memory"), std::string::npos);
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

}  // namespace
}  // namespace dsv4
