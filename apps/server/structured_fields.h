// vLLM's structured-output request fields, on chat and completions (docs/serving.md "Structured
// output"): `structured_outputs` {json | regex | choice | grammar | json_object} and the older
// top-level guided_json, guided_regex, guided_choice, guided_grammar. Each becomes the request's
// OutputConstraint (a JSON schema or a whole-output text constraint, grammar/text_constraint.h);
// the compile, and its errors naming the field, come later (Engine::prepare).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/ordered_json.h"
#include "protocol.h"

namespace dsv4::server {

// At most one constraint per request: two of these given, or one beside a constraint already in
// `out` (response_format's JSON, a forced tool call), is an error naming both.
std::optional<ApiError> parse_structured_fields(const OrderedJson& obj, OutputConstraint& out);

}  // namespace dsv4::server
