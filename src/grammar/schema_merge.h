// Exact conjunction of two JSON schemas: the schema whose instances are exactly those of both.
// It gives allOf, a $ref beside other keywords (2019-09 on: both apply), and keywords beside
// anyOf/oneOf (pushed into each branch). Merged where the merge is exact; a keyword the merge
// cannot combine is refused by name and path.
//
//   type: the intersection (integer within number); required: the union; enum/const: the
//   common values; min*: the larger, max*: the smaller; uniqueItems: either; items: merged;
//   properties/additionalProperties: per key, (A's property or A's additionalProperties) and
//   (B's or B's), and the additionalProperties of both; anyOf in both: the branch products (at
//   most kMaxAlternatives, and allOf of at most kMaxAlternatives schemas); a keyword in one only is kept.
//
// Bounds, checked before the work: merges nest at most kMaxMergeDepth levels, a compile makes
// at most kMaxNodes merges and copies at most kMaxMergeValues JSON values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "base/status.h"

namespace dsv4::grammar {

constexpr int kMaxMergeDepth = 32;
constexpr int64_t kMaxMergeValues = int64_t{1} << 20;
constexpr int64_t kMaxMergedEnumPairs = int64_t{1} << 16;  // value pairs two merged enums compare

class SchemaMerger {
 public:
  using Reader = std::function<Result<OrderedJson>(const OrderedJson&, const std::string&)>;
  explicit SchemaMerger(const OrderedJson& root) : root_(root) {}
  // How each merged schema's keywords are read first (its draft, what is relaxed); default: as is.
  void set_reader(Reader reader) { reader_ = std::move(reader); }
  // Where a keyword cannot merge exactly and may be relaxed (CompileOptions::strict false): the
  // hook lists it and the merge drops it; unset, the merge is refused.
  using Relax = std::function<Status(const std::string& path, const std::string& keyword)>;
  void set_relax(Relax relax) { relax_ = std::move(relax); }
  // a and b together; $ref and allOf at the top of either are resolved first.
  Result<OrderedJson> merge(const OrderedJson& a, const OrderedJson& b,
                                       const std::string& path);
  // s without allOf and without a $ref beside other keywords: both merged in.
  Result<OrderedJson> flatten(const OrderedJson& s, const std::string& path);

 private:
  Result<OrderedJson> merge_at(const OrderedJson& a, const OrderedJson& b,
                                          const std::string& path, int depth);
  Result<OrderedJson> expand(const OrderedJson& s, const std::string& path, int depth);
  // Nested schemas are joined as {"allOf": [x, y]}: merged when (and if) they are compiled.
  Status merge_keyword(OrderedJson& r, const std::string& key, const OrderedJson& b,
                       const std::string& path);
  Status merge_properties(OrderedJson& r, const OrderedJson& a,
                          const OrderedJson& b, const std::string& path);
  // Counts the values of v against the copy budget.
  Status charge(const OrderedJson& v, const std::string& path);

  const OrderedJson& root_;
  Reader reader_;
  Relax relax_;
  int merges_ = 0;
  int64_t copied_ = 0;
};

}  // namespace dsv4::grammar
