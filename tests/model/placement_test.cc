// Topology flags and the model's constraints (runtime.md §6.1); weight placement per rank
// (§6.2): every tensor's bytes are held exactly once per TP / EP group, and a rank's bytes
// fall as ranks grow (Flash and tiny).
#include <gtest/gtest.h>

#include <cstdio>

#include "model/checkpoint_table.h"
#include "model/config.h"
#include "model/placement.h"

namespace dsv4 {
namespace {

TEST(Topology, FlagsAndDefaults) {
  auto t = make_topology(4, 3, 2);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->dp, 2);
  EXPECT_EQ(t->ep, 4);
  EXPECT_EQ(t->tp_rank(), 1);
  EXPECT_EQ(t->dp_group(), 1);
  EXPECT_NE(make_topology(4, 0, 3).message().find("--tp 3 does not divide the world of 4 ranks"),
            std::string::npos);
  EXPECT_NE(make_topology(4, 0, 4, 1, 3).message().find("--ep 3 does not divide the world of 4"), std::string::npos);
  EXPECT_NE(make_topology(4, 0, 0).message().find("--tp 0"), std::string::npos);
}

TEST(Placement, ModelConstraintsNameTheField) {
  const Result<ModelConfig> tiny = preset_config("tiny", true);
  ASSERT_TRUE(tiny.ok());
  const Topology t3 = *make_topology(3, 0, 3);
  EXPECT_NE(validate_topology(*tiny, t3).message().find("does not divide o_groups"), std::string::npos);
  const Result<ModelConfig> flash = preset_config("flash", true);
  ASSERT_TRUE(flash.ok());
  for (int tp : {1, 2, 4, 8}) EXPECT_TRUE(validate_topology(*flash, *make_topology(tp, 0, tp)).ok()) << tp;
  const Topology ep3 = *make_topology(3, 0, 1, 3, 3);
  EXPECT_NE(validate_topology(*flash, ep3).message().find("--ep 3 does not divide n_routed_experts = 256"),
            std::string::npos);
}

// Σ over the ranks of one TP group (and one EP group) = the checkpoint, each placement.
TEST(Placement, SharesAddUpAndFallWithRanks) {
  for (const char* preset : {"tiny", "tiny2", "flash"}) {
    const Result<ModelConfig> cfg = preset_config(preset, true);
    ASSERT_TRUE(cfg.ok());
    int64_t all = 0;
    for (const TensorSpec& s : expected_tensors(*cfg)) all += static_cast<int64_t>(s.n_bytes());
    int64_t prev = all + 1;
    for (int n : {1, 2, 4}) {
      const Topology t0 = *make_topology(n, 0, n);
      if (!validate_topology(*cfg, t0).ok()) continue;
      RankWeights sum;
      int64_t max_rank = 0;
      for (int r = 0; r < n; ++r) {
        const RankWeights w = rank_weights(*cfg, *make_topology(n, r, n));
        for (int p = 0; p < 5; ++p) sum.bytes[p] += w.bytes[p];
        max_rank = std::max(max_rank, w.total());
      }
      // Replicated bytes n times, every sharded kind once.
      const RankWeights one = rank_weights(*cfg, *make_topology(1, 0, 1));
      EXPECT_EQ(sum.bytes[0], n * one.bytes[0]) << preset << " " << n;
      for (int p = 1; p < 5; ++p) EXPECT_EQ(sum.bytes[p], one.bytes[p]) << preset << " " << n << " " << p;
      EXPECT_EQ(one.total(), all);
      EXPECT_LT(max_rank, prev) << preset << ": a rank's bytes do not fall from " << n / 2 << " to " << n << " ranks";
      prev = max_rank;
      std::printf("  %s tp=ep=%d: %.3f GiB per rank (of %.3f)\n", preset, n, max_rank / 1073741824.0,
                  all / 1073741824.0);
    }
  }
}

}  // namespace
}  // namespace dsv4
