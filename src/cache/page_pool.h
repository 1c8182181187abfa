// Fixed pool of physical page ids [0, n_pages) for one cache group, with a
// LIFO free list and a reference count per page: a page shared by several
// sequences and the prefix cache (runtime.md §7.1) returns to the free list
// when its last holder lets go. Allocation failure is an outside-world error
// (too many or too long requests for the configured pool), reported with the
// pool's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsv4 {

class PagePool {
 public:
  PagePool(std::string name, int32_t n_pages);
  Result<int32_t> alloc();          // a free page, reference count 1
  void retain(int32_t page);         // one more holder of a page in use
  void free(int32_t page);           // one holder less; the page is free at 0
  int32_t refs(int32_t page) const { return refs_[page]; }
  int32_t n_pages() const { return n_pages_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int32_t n_pages_;
  std::vector<int32_t> free_;
  std::vector<int32_t> refs_;
};

}  // namespace dsv4
