// bench/run_breakdown.h: the per-run table's means over steps, and the runs a full profile dropped.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_breakdown.h"

namespace dsv4::bench {
namespace {

TEST(RunBreakdown, MeansPerStepAndDroppedRuns) {
  ModelConfig cfg;
  cfg.compress_ratios = {0};  // one SWA layer: the named run below reads no weights
  const std::vector<RequestRows> rows{{0, 1}};
  RunBreakdown b(cfg);
  // Two steps of one named run each: 1 ms and 3 ms wall, so 2 ms per step.
  const RunRecord r1{"attn.G select", nullptr, 0, 1'000'000, 900'000, 800'000, 1'000};
  const RunRecord r2{"attn.G select", nullptr, 0, 3'000'000, 2'900'000, 2'800'000, 3'000};
  b.add_step(std::span(&r1, 1), rows, 0, 4.0);
  b.add_step(std::span(&r2, 1), rows, 0, 4.0);
  std::string t = b.table("runs", 10.0);
  EXPECT_NE(t.find("mean of 2 steps"), std::string::npos) << t;
  EXPECT_NE(t.find("attn.G select"), std::string::npos) << t;
  EXPECT_NE(t.find("2.000"), std::string::npos) << t;  // the run's mean wall ms
  EXPECT_EQ(t.find("past the profile's capacity"), std::string::npos) << t;
  b.add_step(std::span(&r1, 1), rows, 0, 4.0, 3);  // a step whose profile overflowed by 3 runs
  t = b.table("runs", 10.0);
  EXPECT_NE(t.find("(3 runs past the profile's capacity are not listed"), std::string::npos) << t;
}

}  // namespace
}  // namespace dsv4::bench
