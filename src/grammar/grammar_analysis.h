// Facts about a compiled Grammar that the compiler checks and the matcher relies on: the
// containers nested in each node's shortest value (the depth bound is kept by construction),
// and whether two nodes can share a value (oneOf is generated only where its branches cannot).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "grammar/json_schema.h"

namespace dsv4::grammar {

// Per node: the containers nested in its shortest instance, to a fixed point; an error when the
// root has no finite value (a $ref cycle with no way out).
Result<std::vector<int32_t>> min_depth(const Grammar& g);

// Per node, whether a value of `from` may hold it (through properties, open objects' values and
// key labels, items, alternatives and sequences).
std::vector<bool> reachable(const Grammar& g, int32_t from);

// The concrete (non-anyOf) nodes an anyOf stands for, in JsonMatcher::open_value's order;
// false when the expansion visits more than kMaxExpanded nodes (the matcher's bound).
bool expand_alternatives(const Grammar& g, int32_t node, std::vector<int32_t>& concrete);

// Whether the matcher's readings (json_matcher.h: one stack per live branch) always fit in
// kMaxStacks, so that none is ever dropped. Bound per node, to a least fixed point: a concrete
// node's value holds the readings of the one child open in it; an anyOf's, for each first byte,
// the sum over its concrete branches that may begin with it. Errors name `what` and the limit.
Status check_readings(const Grammar& g, const std::string& what);
constexpr int64_t kMaxReadingsWork = int64_t{1} << 28;
// Per node, the readings check_readings bounds (counted up to kMaxCountedReadings).
Result<std::vector<int32_t>> node_readings(const Grammar& g, const std::string& what);
constexpr int32_t kMaxCountedReadings = 8 * kMaxStacks;

// Whether no JSON value matches both nodes, proven from: distinct types, string lengths that
// cannot meet, distinct const/enum values, a property required by two objects whose values
// are disjoint themselves (to a few levels), array item counts that cannot meet, or an array
// position both must fill whose schemas are disjoint. false: not proven (they may overlap).
// budget: the value comparisons and node pairs the proof may still spend (shared by every check
// of a compile); when it runs out the proof fails.
bool provably_disjoint(const Grammar& g, int32_t a, int32_t b, int64_t& budget);
// For a oneOf of objects told apart by required keys ({"required": ["a"]} | {"required": ["b"]}
// beside properties listing both): where a listed object of one branch lists, as optional, a
// key a listed object of the other requires (and so may match it), that
// object stops generating the key (a subset of its values, none of which has the key the other
// branch requires). Whether anything changed; before min_depth and the key orders are taken.
bool separate_objects(Grammar& g, int32_t a, int32_t b, int64_t& budget);
constexpr int64_t kDisjointBudget = int64_t{1} << 20;
// For branches of the oneOf node `one_of` (its alternatives) that overlap (pairs of indices) and
// are each one string with a pattern P (no pattern: any string) or an enum of strings: each
// generates its strings less the others' (a subset of its values, none of which the other branch
// accepts: ti8m-cdk's "\\d+m?" beside "\\$\\{.+\\}"), as a copy of its node in the oneOf's
// alternatives; a branch left with no string is dropped (each of its values matches another
// branch too: dein's "^[nvxsomilct]+$" beside any string, jasonette's builtin names beside any
// string). false (alternatives unchanged): a pair is not of two such branches, a product exceeds
// the automaton's bounds, or no branch would be left.
bool narrow_strings(Grammar& g, int32_t one_of, const std::vector<std::pair<size_t, size_t>>& overlapping,
                    int64_t& budget);

}  // namespace dsv4::grammar
