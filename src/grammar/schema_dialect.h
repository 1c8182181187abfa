// The JSON Schema draft of a document ($schema; 2020-12 when absent) and the keywords of one
// schema object read in it (issue 39 item 4): what a keyword means depends on the draft.
//
//   Ignored: annotations and core keywords that constrain nothing ($schema, $id, draft-04's id,
//     $anchor, $comment, title, description, default, examples, deprecated, readOnly,
//     writeOnly, content*), and every keyword that is not JSON Schema's (x-*, markdownDescription,
//     errorMessage, ...).
//   Rewritten to 2020-12: $ref beside other keywords up to draft-07 (the others are ignored);
//     items as an array (tuples) -> prefixItems, and then additionalItems -> items (any draft:
//     an array `items` has no other reading); `dependencies` -> dependentRequired (arrays) and
//     dependentSchemas (schemas); draft-04's boolean exclusiveMinimum/exclusiveMaximum -> the
//     number form; then/else without if (ignored).
//   Kept: every standard assertion or applicator keyword, for the compiler to enforce or refuse
//     by name; $defs/definitions (kept for $refs).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "base/status.h"

namespace dsv4::grammar {

enum class Draft { k04, k06, k07, k2019_09, k2020_12 };

// The draft a root schema declares; errors name a `$schema` that is not a string.
Result<Draft> draft_of(const OrderedJson& root);

// Whether `key` is a JSON Schema keyword that constrains values (any draft).
bool standard_assertion(const std::string& key);

// The schema object s as 2020-12 keywords with the ignored ones removed (s itself when it is a
// boolean). Subschemas are copied as they are (each is read when it is compiled).
Result<OrderedJson> read_in_draft(const OrderedJson& s, Draft draft, const std::string& path);

}  // namespace dsv4::grammar
