// Issue 39: oneOf over arrays, proven disjoint by item counts that cannot meet or by a position
// both must fill whose schemas are disjoint (putout.json's rule tuples); a uniqueItems array's
// generation bound and items prove nothing.
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/schema_compile.h"

namespace dsv4::grammar::one_of_arrays_test {
namespace {

using Json = OrderedJson;
using test::compile;
using test::compile_text;
using test::match_at;
using test::has;

TEST(OneOfArrays, TuplesToldApartByLengthOrByAPosition) {
  const std::string rule = R"({"$schema": "http://json-schema.org/draft-07/schema#", "oneOf": [
      {"enum": ["on", "off"]},
      {"type": "array", "items": [{"enum": ["on", "off"]}, {"type": "object"}], "minItems": 2, "additionalItems": false},
      {"type": "array", "items": [{"enum": ["on", "off"]}, {"type": "string"}, {"type": "object"}], "minItems": 3,
       "additionalItems": false},
      {"type": "array", "items": [{"enum": ["on", "off"]}, {"type": "string"}], "minItems": 2,
       "additionalItems": false}]})";
  const Grammar g = compile(rule);
  EXPECT_EQ(match_at(g, R"(["on", {}])"), -1);
  EXPECT_EQ(match_at(g, R"(["off", "x", {}])"), -1);
  EXPECT_EQ(match_at(g, R"(["off", "x"])"), -1);
  EXPECT_EQ(match_at(g, R"(["off", 1])"), 8);
  // The same in 2020-12 words, for the test's validator (it reads prefixItems, not tuple items).
  const std::string prefix = R"({"oneOf": [{"enum": ["on", "off"]},
      {"type": "array", "prefixItems": [{"enum": ["on", "off"]}, {"type": "object"}], "minItems": 2, "items": false},
      {"type": "array", "prefixItems": [{"enum": ["on", "off"]}, {"type": "string"}, {"type": "object"}],
       "minItems": 3, "items": false},
      {"type": "array", "prefixItems": [{"enum": ["on", "off"]}, {"type": "string"}], "minItems": 2, "items": false}]})";
  test::valid_walks(compile(prefix), Json::parse(prefix), 120, 3);
  const std::string lengths = R"({"oneOf": [{"type": "array", "maxItems": 1}, {"type": "array", "minItems": 2}]})";
  test::valid_walks(compile(lengths), Json::parse(lengths), 60, 4);
}

TEST(OneOfArrays, OverlapsStayRefused) {
  // Counts that meet, and positions not both filled (the second may be absent).
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "array", "maxItems": 2}, {"type": "array", "minItems": 2}]})")
                      .message(), "may match the same value"));
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "array", "prefixItems": [{}, {"type": "string"}]},
      {"type": "array", "prefixItems": [{}, {"type": "integer"}]}]})").message(), "may match the same value"));
  // uniqueItems: 33 distinct strings match both, though at most 32 are generated.
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "array", "uniqueItems": true, "items": {"type": "string"}},
      {"type": "array", "minItems": 33}]})").message(), "may match the same value"));
  // Nor do a uniqueItems array's items, which may be a generated subset (any value as distinct strings).
  EXPECT_TRUE(has(compile_text(R"({"oneOf": [{"type": "array", "uniqueItems": true, "minItems": 1},
      {"type": "array", "minItems": 1, "items": {"type": "integer"}}]})").message(), "may match the same value"));
}

}  // namespace
}  // namespace dsv4::grammar::one_of_arrays_test
