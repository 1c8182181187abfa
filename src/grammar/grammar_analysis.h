// Facts about a compiled Grammar that the compiler checks and the matcher relies on: the
// containers nested in each node's shortest value (the depth bound is kept by construction),
// and whether two nodes can share a value (oneOf is generated only where its branches cannot).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "grammar/json_schema.h"

namespace dsv4::grammar {

// Per node: the containers nested in its shortest instance, to a fixed point; an error when the
// root has no finite value (a $ref cycle with no way out).
Result<std::vector<int32_t>> min_depth(const Grammar& g);

// Whether no JSON value matches both nodes, proven from: distinct types, string lengths that
// cannot meet, distinct const/enum values, or a property required by two objects whose values
// are disjoint themselves (to a few levels). false: not proven (they may overlap).
// budget: the value comparisons and node pairs the proof may still spend (shared by every check
// of a compile); when it runs out the proof fails.
// The first anyOf node whose value opens more readings than the matcher follows at once
// (kMaxStacks concrete branches, or more than kMaxExpanded nodes on the way: json_matcher.h's
// open_value), or −1. Such a grammar is refused: a reading beyond the bound would be dropped.
int32_t too_many_readings(const Grammar& g, int32_t& readings);

bool provably_disjoint(const Grammar& g, int32_t a, int32_t b, int64_t& budget);
constexpr int64_t kDisjointBudget = int64_t{1} << 20;

}  // namespace dsv4::grammar
