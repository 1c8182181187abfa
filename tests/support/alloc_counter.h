// Counts global operator new calls while an AllocCounter is alive (the test
// binary links tests/model/alloc_counter.cc, which replaces operator new).
#pragma once

#include <cstdint>

namespace dsv4::test {

void alloc_counting(bool on);
int64_t alloc_count();

class AllocCounter {
 public:
  AllocCounter() : start_(alloc_count()) { alloc_counting(true); }
  ~AllocCounter() { alloc_counting(false); }
  int64_t allocations() const { return alloc_count() - start_; }

 private:
  int64_t start_;
};

}  // namespace dsv4::test
