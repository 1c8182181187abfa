// Issue 39: propertyNames as an anyOf of enum/const branches ($refs followed; lsdlschema's
// attributePhrasing): one enum of their strings, exact. Other anyOf branches stay refused by name.
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"
#include "support/grammar_match.h"
#include "support/grammar_walk.h"
#include "support/schema_compile.h"

namespace dsv4::grammar::property_names_any_of_test {
namespace {

using Json = OrderedJson;
using test::compile;
using test::compile_text;
using test::match_at;
using test::has;

TEST(PropertyNamesAnyOf, EnumBranchesAreOneEnum) {
  const std::string schema = R"({"$defs": {"names": {"enum": ["State", "Weight", 3]}}, "type": "object",
      "allOf": [{"properties": {"Attribute": {"type": "integer"}}, "required": ["Attribute"],
                 "propertyNames": {"anyOf": [{"const": "Attribute"}, {"$ref": "#/$defs/names"}]}},
                {"properties": {"State": {"type": "string"}, "Weight": {"type": "number"}, "Other": {}}}]})";
  const Grammar g = compile(schema);
  EXPECT_EQ(match_at(g, R"({"Attribute": 1, "State": "s", "Weight": 2})"), -1);
  EXPECT_EQ(match_at(g, R"({"Attribute": 1, "O)"), 18);  // "Other" is not a valid name
  test::valid_walks(g, Json::parse(schema), 60, 9);
  // On an object without properties: only those keys.
  const std::string open = R"({"type": "object", "propertyNames": {"anyOf": [{"enum": ["a", "b"]}, {"const": "c"}]}})";
  EXPECT_EQ(match_at(compile(open), R"({"a": [true], "c": 1})"), -1);  // listed in the names' order
  EXPECT_EQ(match_at(compile(open), R"({"d")"), 2);
  test::valid_walks(compile(open), Json::parse(open), 60, 10);
}

TEST(PropertyNamesAnyOf, OtherBranchesStayRefused) {
  EXPECT_TRUE(has(compile_text(R"({"type": "object", "propertyNames": {"anyOf": [{"const": "a"}, {"pattern":
      "^b"}]}})").message(), "keyword 'anyOf' is not supported in propertyNames"));
  EXPECT_TRUE(has(compile_text(R"({"type": "object", "propertyNames": {"anyOf": [{"const": "a"}], "maxLength": 3}})")
                      .message(), "keyword 'anyOf' is not supported in propertyNames"));
  // enum beside const in one branch is their intersection, not read here.
  EXPECT_TRUE(has(compile_text(R"({"type": "object", "propertyNames": {"anyOf": [{"enum": ["a", "b"], "const":
      "a"}]}})").message(), "keyword 'anyOf' is not supported in propertyNames"));
}

}  // namespace
}  // namespace dsv4::grammar::property_names_any_of_test
