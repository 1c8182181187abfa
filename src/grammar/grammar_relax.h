// strict: false over values the matcher cannot follow (read more ways at once than kMaxStacks):
// an anyOf's listed-object branches joined into one object, a superset the matcher reads once.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/json_schema.h"

namespace dsv4::grammar {

// Replaces the alternatives of anyOf node `at` by its concrete branches that are not objects and
// one object whose keys are the union of its objects' keys, in order of first appearance: each
// key's value the anyOf of the objects' values for it (one node where they share it), required
// where every object requires it. Every value a branch allows is allowed, and more. Nothing
// changes (false) when fewer than two branches are objects, or one of them is open, has
// minProperties/maxProperties or dependentRequired (the join would drop them unnamed).
// joined_values: the anyOf nodes made for keys, with their keys (sites a later round may relax).
bool join_object_branches(Grammar& g, int32_t at, std::vector<std::pair<int32_t, std::string>>& joined_values);

}  // namespace dsv4::grammar
