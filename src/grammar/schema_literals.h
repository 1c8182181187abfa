// enum/const beside other keywords (a conjunction): each literal is kept only when it satisfies
// every sibling that applies to its type. Checked here: type, minLength/maxLength (code
// points), minItems/maxItems, required, minimum/maximum/exclusiveMinimum/exclusiveMaximum.
// A sibling that applies to a literal but is not checked here is refused by name.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "base/status.h"

namespace dsv4::grammar {

// Whether `value` (one of the enum/const literals) satisfies the other keywords of `schema`.
Result<bool> literal_satisfies(const OrderedJson& value, const OrderedJson& schema,
                               const std::string& path);

// Equality of JSON values as JSON Schema compares them (1 == 1.0, object members in any order).
bool same_json_value(const OrderedJson& a, const OrderedJson& b);

// Whether the keyword constrains values of this JSON type (as JSON Schema applies keywords by
// type: maxLength says nothing about a number). Unknown keywords apply to every type.
bool keyword_applies(const std::string& keyword, const OrderedJson& value);

}  // namespace dsv4::grammar
