// Issue 39 item 4: $refs that are local by JSON Schema's rules though not written as "#/...":
// resolved against the root's $id (RFC 3986: a relative file name, a rooted path, the full URI),
// and plain-name fragments ($anchor; up to draft-07, $id "#name"). Refs into other documents
// stay refused (strict) or relaxed to any value (strict: false).
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"
#include "grammar/schema_ref.h"
#include "support/grammar_match.h"

namespace dsv4::grammar::ref_test {
namespace {

using Json = OrderedJson;
using test::match_at;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(LocalRef, RelativeToTheRootId) {
  const Json root = Json::parse(R"({"$id": "https://json.schemastore.org/dir/x.json", "definitions": {"a": {}}})");
  EXPECT_EQ(local_ref(root, "x.json#/definitions/a"), "#/definitions/a");
  EXPECT_EQ(local_ref(root, "./x.json#/definitions/a"), "#/definitions/a");
  EXPECT_EQ(local_ref(root, "/dir/x.json#/definitions/a"), "#/definitions/a");
  EXPECT_EQ(local_ref(root, "//json.schemastore.org/dir/x.json"), "#");
  EXPECT_EQ(local_ref(root, "https://json.schemastore.org/dir/x.json#/definitions/a"), "#/definitions/a");
  EXPECT_EQ(local_ref(root, "y.json#/definitions/a"), "y.json#/definitions/a");  // another document
  EXPECT_EQ(local_ref(root, "/x.json#/definitions/a"), "/x.json#/definitions/a");
  EXPECT_EQ(local_ref(root, "http://json-schema.org/draft-07/schema#"), "http://json-schema.org/draft-07/schema#");
  const Json no_id = Json::parse(R"({"definitions": {"a": {}}})");
  EXPECT_EQ(local_ref(no_id, "x.json#/definitions/a"), "x.json#/definitions/a");
}

TEST(LocalRef, PlainNameFragmentsNameTheirSchema) {
  const Json root = Json::parse(R"({"$defs": {"a": {"$anchor": "item", "type": "integer"}, "b/c": {"$defs":
      {"d": {"$id": "#old", "type": "null"}}}}})");
  EXPECT_EQ(local_ref(root, "#item"), "#/$defs/a");
  EXPECT_EQ(local_ref(root, "#old"), "#/$defs/b~1c/$defs/d");
  EXPECT_EQ(local_ref(root, "#none"), "#none");
}

TEST(LocalRef, CompiledWhereLocalRefusedOrRelaxedWhereNot) {
  Result<Grammar> g = compile_json_schema(Json::parse(R"({"$id": "https://json.schemastore.org/x.json",
      "definitions": {"a": {"$anchor": "n", "type": "integer"}, "s": {"type": "string"}}, "type": "object",
      "properties": {"p": {"$ref": "x.json#/definitions/s"}, "q": {"$ref": "#n"}}, "required": ["p", "q"]})"));
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"p": "s", "q": 1})"), -1);
  EXPECT_EQ(match_at(*g, R"({"p": 1)"), 6);
  const Json remote = Json::parse(R"({"$id": "https://json.schemastore.org/x.json", "type": "object",
      "properties": {"p": {"$ref": "base.json#/definitions/path"}}, "required": ["p"]})");
  const std::string why = compile_json_schema(remote).message();
  EXPECT_TRUE(has(why, "/properties/p") && has(why, "'base.json#/definitions/path' is not local")) << why;
  CompileOptions loose;
  loose.strict = false;
  g = compile_json_schema(remote, loose);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(match_at(*g, R"({"p": [1, {}]})"), -1);
  EXPECT_TRUE(has(compile_json_schema(Json::parse(R"({"$ref": "#missing"})")).message(), "'#missing' is not local"));
}

}  // namespace
}  // namespace dsv4::grammar::ref_test
