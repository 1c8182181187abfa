// minProperties on objects without listed properties (open objects, and open objects under
// patternProperties): the matcher counts their keys, closes only at minProperties, and keeps a
// key slot for every key such an object still needs, so that no walk ends in a dead end however
// many keys the objects around it took. Hand cases refused at the right byte, random walks that
// end in valid values, the limit named when exceeded, and the JSON Schema Test Suite's
// minProperties / maxProperties cases (Debian json-schema-test-suite; skipped when absent).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/json_schema_check.h"
#include "support/schema_compile.h"

namespace dsv4::grammar {
namespace open_min_properties_test {  // named: the grammar tests build as one unity translation unit

using Json = OrderedJson;
using test::match_at;

using test::compile;
using test::compile_text;

// Random walks end in values the independent validator accepts, never in a dead end.
void walks_validate(const std::string& schema, int n_walks = 60) {
  test::valid_walks(compile(schema), Json::parse(schema), n_walks, 11);
}

TEST(OpenMinProperties, ClosesOnlyWithEnoughKeys) {
  const std::string schema = R"({"type": "object", "minProperties": 1, "additionalProperties": {"type": "integer"}})";
  const Grammar g = compile(schema);
  EXPECT_TRUE(g.relaxed.empty());
  EXPECT_EQ(match_at(g, "{}"), 1);
  EXPECT_EQ(match_at(g, R"({"a": 1})"), -1);
  EXPECT_EQ(match_at(g, R"({"a": 1, "b": 2})"), -1);
  walks_validate(schema);
  const std::string two = R"({"type": "object", "minProperties": 2, "maxProperties": 2})";
  const Grammar t = compile(two);
  EXPECT_EQ(match_at(t, R"({"a": 1})"), 7);
  EXPECT_EQ(match_at(t, R"({"a": 1, "b": 2})"), -1);
  EXPECT_EQ(match_at(t, R"({"a": 1, "b": 2, "c": 3})"), 15);
  EXPECT_EQ(match_at(t, R"({"a": 1, "a": 2})"), 11);  // never a repeated key
  walks_validate(two);
}

TEST(OpenMinProperties, PatternKeys) {
  const std::string schema = R"({"type": "object", "patternProperties": {"^[0-9]+$": {"type": "string"}},
      "additionalProperties": false, "minProperties": 1})";
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, "{}"), 1);
  EXPECT_EQ(match_at(g, R"({"12": "x"})"), -1);
  walks_validate(schema);
  // Where an object value no longer fits the depth bound, a key whose value is a string still may.
  const std::string nested = R"({"type": "object", "patternProperties": {"^o": {"$ref": "#"}, "^s": {"type":
      "string"}}, "additionalProperties": false, "minProperties": 1})";
  walks_validate(nested, 30);
  const Grammar n = compile(nested);
  std::string deep;
  for (int i = 0; i < kMaxDepth - 2; ++i) deep += R"({"o": )";
  EXPECT_EQ(match_at(n, deep + R"({"s": "x"})" + std::string(kMaxDepth - 2, '}')), -1);
  EXPECT_EQ(match_at(n, deep + "{}"), static_cast<int64_t>(deep.size()) + 1);
}

// Recursion: every object needs two keys, each value may be such an object again. The keys the
// open objects on a stack still need always have a slot (json_matcher.h: open_key_room).
TEST(OpenMinProperties, NestedObjectsNeverRunOutOfKeySlots) {
  const std::string schema = R"({"type": "object", "minProperties": 2, "additionalProperties": {"anyOf":
      [{"$ref": "#"}, {"type": "null"}]}})";
  walks_validate(schema, 40);
  // An outer object with many keys, each value an object that needs two: the outer one stops
  // taking keys (',' refused) before the inner ones could be left without room.
  const std::string wide = R"({"type": "object", "additionalProperties": {"type": "object", "minProperties": 2,
      "additionalProperties": {"type": "null"}}})";
  const Grammar g = compile(wide);
  std::string text = "{";
  int64_t refused = -1;
  for (int k = 0; k < kMaxOpenKeys + kMaxReservedKeys && refused < 0; ++k) {
    const std::string item = (k ? ", " : "") + std::string("\"k") + std::to_string(k) + R"(": {"a": null, "b": null})";
    refused = match_at(g, text + item);
    if (refused == static_cast<int64_t>((text + item).size())) refused = -1;  // a prefix: taken
    if (refused < 0) text += item;
  }
  ASSERT_GE(refused, 0) << "the outer object took every key";
  EXPECT_EQ(refused, static_cast<int64_t>(text.size())) << "refused inside an inner object, not at the ','";
  EXPECT_GE(text.size(), 64u * 20u);  // at least 64 keys, as without minProperties
  EXPECT_EQ(match_at(g, text + "}"), -1);
}

TEST(OpenMinProperties, AboveTheLimitIsNamed) {
  const std::string three = R"({"type": "object", "minProperties": 3})";
  EXPECT_NE(compile_text(three).message().find("keyword 'minProperties' is not supported (above 2 on objects without "
                                                "listed properties)"),
            std::string::npos)
      << compile_text(three).message();
  Result<Grammar> relaxed = compile_text(three, false);
  ASSERT_TRUE(relaxed.ok()) << relaxed.message();
  EXPECT_EQ(relaxed->relaxed, std::vector<std::string>{"/: minProperties"});
  EXPECT_EQ(match_at(*relaxed, "{}"), -1);
}

// Every case the engine compiles: invalid instances refused, valid ones accepted (each is an
// object of distinct keys or no object at all, which an untyped schema also allows).
TEST(OpenMinProperties, JsonSchemaTestSuite) {
  const std::string root = "/usr/share/json-schema-test-suite/tests/";
  if (!std::ifstream(root + "draft7/minProperties.json"))
    GTEST_SKIP() << root << " not installed (scripts/setup.sh installs json-schema-test-suite)";
  CompileOptions options;
  options.layout.item_separator = ",";
  options.layout.key_separator = ":";
  int compiled = 0, checked = 0;
  for (const char* draft : {"draft2020-12", "draft7", "draft4"})
    for (const char* k : {"minProperties", "maxProperties"}) {
      std::ifstream in(root + draft + "/" + k + ".json");
      if (!in) continue;
      for (const auto& group : Json::parse(in)) {
        Result<Grammar> g = compile_json_schema(group["schema"], options);
        ASSERT_TRUE(g.ok()) << draft << "/" << k << ": " << group["description"] << ": " << g.message();
        ++compiled;
        for (const auto& test : group["tests"]) {
          const std::string data = test["data"].dump();
          EXPECT_EQ(match_at(*g, data) == -1, test["valid"].get<bool>())
              << draft << "/" << k << ": " << group["description"] << " / " << test["description"] << ": " << data;
          ++checked;
        }
      }
    }
  EXPECT_GE(compiled, 4);
  EXPECT_GT(checked, 20);
}

}  // namespace open_min_properties_test
}  // namespace dsv4::grammar
