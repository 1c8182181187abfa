#include "text/stop_prefix.h"

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace dsv4 {
namespace {

// The tail held back is the longest proper prefix of any stop that ends the text.
TEST(StopPrefixTest, LongestProperPrefixAtTheEnd) {
  const std::vector<std::string> stops = {"</think>", "<eos>", ""};
  EXPECT_EQ(stop_prefix_length("abc", stops), 0u);
  EXPECT_EQ(stop_prefix_length("abc<", stops), 1u);
  EXPECT_EQ(stop_prefix_length("abc</thi", stops), 5u);
  EXPECT_EQ(stop_prefix_length("abc<eo", stops), 3u);
  EXPECT_EQ(stop_prefix_length("abc<eos>", stops), 0u);  // a whole stop is a match, not a prefix
  EXPECT_EQ(stop_prefix_length("", stops), 0u);
  // Overlapping candidates: the longest wins, whichever stop it belongs to.
  const std::array<std::string_view, 2> overlap = {"aab", "ab"};
  EXPECT_EQ(stop_prefix_length("xaa", overlap), 2u);
  EXPECT_EQ(stop_prefix_length("xa", overlap), 1u);
}

}  // namespace
}  // namespace dsv4
