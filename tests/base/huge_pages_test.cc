// Huge-page buffers: 2 MiB aligned, zero-filled, writable end to end, any size (also 0 and
// sizes that are not a multiple of 2 MiB); advise_willneed takes unaligned ranges.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "base/huge_pages.h"

namespace dsv4 {
namespace {

TEST(HugePages, AlignedZeroedWritable) {
  for (size_t bytes : {size_t{0}, size_t{1}, kHugePageBytes - 1, kHugePageBytes, 3 * kHugePageBytes + 12345}) {
    auto* p = static_cast<uint8_t*>(huge_map(bytes));
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u) << bytes;
    for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(p[i], 0) << i;
    if (bytes > 0) {
      std::memset(p, 0x5a, bytes);
      EXPECT_EQ(p[bytes - 1], 0x5a);
    }
    huge_unmap(p, bytes);
  }
  const char text[] = "read-ahead of any range is only a hint";
  advise_willneed(text + 3, sizeof(text) - 3);
  advise_willneed(text, 0);
}

}  // namespace
}  // namespace dsv4
