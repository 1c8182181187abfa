// CacheStorage: reserved address space is not resident until written; a reservation the
// machine cannot give fails with the cache's name; empty storages and moves.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "cache/cache_storage.h"

namespace dsv4 {
namespace {

TEST(CacheStorage, ResidentFollowsWrites) {
  auto s = CacheStorage::reserve("test cache", size_t{64} << 20);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->bytes(), size_t{64} << 20);
  EXPECT_EQ(s->resident_bytes(), 0u);
  std::memset(s->data() + (size_t{8} << 20), 1, size_t{1} << 20);
  EXPECT_GE(s->resident_bytes(), size_t{1} << 20);
  EXPECT_LT(s->resident_bytes(), size_t{4} << 20);
  CacheStorage moved = std::move(*s);
  EXPECT_EQ(s->data(), nullptr);
  EXPECT_EQ(moved.data()[8 << 20], 1);
}

TEST(CacheStorage, EmptyAndImpossible) {
  auto empty = CacheStorage::reserve("empty", 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
  EXPECT_EQ(empty->resident_bytes(), 0u);
  auto huge = CacheStorage::reserve("layer 3 CSA KV", size_t{1} << 62);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.message().find("cache 'layer 3 CSA KV': cannot reserve 4611686018427387904 bytes"),
            std::string::npos)
      << huge.message();
}

}  // namespace
}  // namespace dsv4
