// Token ids as text (io/token_ids.h): the ids of a comma list, and the errors naming the
// item and its index.
#include "io/token_ids.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dsv4 {
namespace {

TEST(TokenIds, ParseTokenIds) {
  EXPECT_EQ(parse_token_ids("5,17,42").value(), (std::vector<int32_t>{5, 17, 42}));
  EXPECT_EQ(parse_token_ids("0").value(), (std::vector<int32_t>{0}));
  EXPECT_EQ(parse_token_ids("2147483647").value(), (std::vector<int32_t>{2147483647}));
  const auto msg = [](const char* s) { return parse_token_ids(s).message(); };
  EXPECT_NE(msg("").find("empty"), std::string::npos);
  EXPECT_NE(msg("1,,2").find("item 1 is empty"), std::string::npos);
  EXPECT_NE(msg("1,2,").find("item 2 is empty"), std::string::npos);
  EXPECT_NE(msg(",1").find("item 0 is empty"), std::string::npos);
  EXPECT_NE(msg("1,x3").find("item 1 'x3'"), std::string::npos);
  EXPECT_NE(msg("1,-3").find("item 1 '-3'"), std::string::npos);
  EXPECT_NE(msg("1, 3").find("item 1 ' 3'"), std::string::npos);
  EXPECT_NE(msg("4,2147483648").find("item 1 '2147483648' exceeds"), std::string::npos);
  EXPECT_NE(msg("99999999999999999999999").find("exceeds"), std::string::npos);
}

}  // namespace
}  // namespace dsv4
