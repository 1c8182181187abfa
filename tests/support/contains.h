// EXPECT_TRUE(Contains(text, part)): a substring check whose failure prints both strings.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace dsv4::test {

inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" not in: " << text;
}

}  // namespace dsv4::test
