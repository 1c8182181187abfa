// Cache groups: ring sizing rule, slot arithmetic for rings and growing
// tables with permuted pages, pool exhaustion reported as an error.
#include <gtest/gtest.h>

#include <set>

#include "cache/cache_group.h"

namespace dsv4 {
namespace {

TEST(RingPages, SpanRule) {
  EXPECT_EQ(ring_pages_for_span(135, 32), 6);   // runtime.md §2.2 example
  EXPECT_EQ(ring_pages_for_span(639, 32), 21);
  EXPECT_EQ(ring_pages_for_span(15, 2), 8);     // CSA state span 7 + 8
  EXPECT_EQ(ring_pages_for_span(135, 8), 18);   // HCA state
  EXPECT_EQ(ring_pages_for_span(1, 8), 1);
}

TEST(CacheGroup, RingSlotsAreDistinctOverTheSpan) {
  const int64_t span = 8 - 1 + 5;  // W - 1 + R_MAX
  const int32_t P = 4;
  CacheGroup g({"ori", P, ring_pages_for_span(span, P), 64, 0}, 3);
  ASSERT_TRUE(g.admit(0).ok());
  ASSERT_TRUE(g.admit(2).ok());
  for (int64_t start = 0; start < 40; ++start) {
    std::set<int64_t> seen;
    for (int64_t p = start; p < start + span; ++p) {
      const int64_t s = g.slot(2, p);
      EXPECT_TRUE(seen.insert(s).second) << "position " << p << " aliases inside span at start " << start;
      EXPECT_GE(s, 0);
      EXPECT_LT(s, g.physical_rows());
    }
  }
  // Two sequences never share a physical row.
  std::set<int64_t> a, b;
  for (int64_t p = 0; p < 16; ++p) {
    a.insert(g.slot(0, p));
    b.insert(g.slot(2, p));
  }
  for (int64_t s : a) EXPECT_EQ(b.count(s), 0u);
}

TEST(CacheGroup, GrowingReserveAndExhaustion) {
  CacheGroup g({"cmp", 4, 0, 5, 64}, 2);
  ASSERT_TRUE(g.admit(0).ok());
  ASSERT_TRUE(g.admit(1).ok());
  ASSERT_TRUE(g.reserve(0, 9).ok());   // 3 pages
  EXPECT_EQ(g.rows_reserved(0), 12);
  EXPECT_EQ(g.slot(0, 8), g.table(0)[2] * 4 + 0);
  ASSERT_TRUE(g.reserve(1, 8).ok());   // 2 pages: pool now empty
  const Status st = g.reserve(1, 9);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cache 'cmp' exhausted"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("0 of 5 free"), std::string::npos) << st.message();
  const Status over = g.reserve(0, 65);
  EXPECT_NE(over.message().find("max_rows = 64"), std::string::npos) << over.message();
  g.release(0);
  EXPECT_EQ(g.pool().n_free(), 3);
  ASSERT_TRUE(g.reserve(1, 9).ok());
}

TEST(CacheGroup, RingAdmissionFailsCleanlyWhenPoolShort) {
  CacheGroup g({"hca_state", 8, 3, 5, 0}, 2);
  ASSERT_TRUE(g.admit(0).ok());
  const Status st = g.admit(1);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("needs 3 pages, 2 of 5 free"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace dsv4
