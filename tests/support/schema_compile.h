// Test support for the grammar tests: a schema's text compiled (strict unless asked), and the
// same expected to compile.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "base/ordered_json.h"
#include "grammar/json_schema.h"

namespace dsv4::test {

inline Result<grammar::Grammar> compile_text(const std::string& schema, bool strict = true) {
  grammar::CompileOptions options;
  options.strict = strict;
  return grammar::compile_json_schema(OrderedJson::parse(schema), options);
}

// The grammar of a schema that must compile (an empty grammar, and a failed expectation, if not).
inline grammar::Grammar compile(const std::string& schema) {
  Result<grammar::Grammar> g = compile_text(schema);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.message();
  return g.ok() ? std::move(*g) : grammar::Grammar{};
}

// Whether an error message (or any text) holds part.
inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace dsv4::test
