// Compiled grammars of structured output (OutputConstraint), each compiled once per distinct
// constraint text and shared by every request that carries it. Bounded in bytes: the entries'
// constraint text (a grammar's nodes are linear in it: grammar/json_schema.h) stays within
// max_text_bytes, least recently used out first; a grammar in use lives on with its requests.
// Thread-safe: the server's parse threads compile here, off the engine thread.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "grammar/json_schema.h"
#include "runtime/request.h"

namespace dsv4 {

// The grammar of a request's constraint (json_schema, tool_calls or the whole-output text);
// errors name its field, else response_format or tool_choice. Compiles every time (GrammarCache
// keeps the results).
Result<grammar::Grammar> compile_constraint(const OutputConstraint& c);

class GrammarCache {
 public:
  static constexpr int64_t kDefaultTextBytes = int64_t{16} << 20;

  explicit GrammarCache(int64_t max_text_bytes = kDefaultTextBytes) : max_text_bytes_(max_text_bytes) {}

  // The grammar of c (compiled now or found); errors as compile_constraint.
  Result<std::shared_ptr<const grammar::Grammar>> get(const OutputConstraint& c);

  int64_t text_bytes() const;
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<const grammar::Grammar> grammar;
    std::list<const std::string*>::iterator recent;  // its place in recent_
  };
  void evict_to(int64_t bytes);  // under mu_

  const int64_t max_text_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // by options, kind and constraint text
  std::list<const std::string*> recent_;            // entries_' keys, most recently used first
  int64_t text_bytes_ = 0;
};

}  // namespace dsv4
