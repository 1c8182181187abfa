// base/math.h: thread splits cover every item once, and for_row_runs cuts them at row ends.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "base/math.h"

namespace dsv4 {
namespace {

TEST(Math, SplitRangeCoversEveryItemOnce) {
  for (int64_t n : {0, 1, 2, 7, 64, 65})
    for (int threads : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int t = 0; t < threads; ++t) {
        const Range r = split_range(n, t, threads);
        EXPECT_EQ(r.begin, next) << n << " " << threads;
        EXPECT_LE(r.size(), n / threads + 1);
        next = r.end;
      }
      EXPECT_EQ(next, n);
    }
}

TEST(Math, RowRunsCutAtRowEnds) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> runs;
  auto collect = [&](int64_t row, int64_t i0, int64_t i1) { runs.emplace_back(row, i0, i1); };
  for_row_runs(Range{10, 23}, 8, collect);  // items 10..22 of rows of 8
  EXPECT_EQ(runs, (std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 2, 8}, {2, 0, 7}}));
  runs.clear();
  for_row_runs(Range{0, 64}, 64, collect);  // one whole row
  EXPECT_EQ(runs, (std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 0, 64}}));
  runs.clear();
  for_row_runs(Range{5, 5}, 4, collect);  // nothing
  EXPECT_TRUE(runs.empty());
  for_row_runs(Range{3, 4}, 1, collect);  // one item per row
  EXPECT_EQ(runs, (std::vector<std::tuple<int64_t, int64_t, int64_t>>{{3, 0, 1}}));
}

}  // namespace
}  // namespace dsv4
