// Fixed pool of physical page ids [0, n_pages) for one cache group, with a
// LIFO free list. Allocation failure is an outside-world error (too many or
// too long requests for the configured pool), reported with the pool's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsv4 {

class PagePool {
 public:
  PagePool(std::string name, int32_t n_pages);
  Result<int32_t> alloc();
  void free(int32_t page);
  int32_t n_pages() const { return n_pages_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int32_t n_pages_;
  std::vector<int32_t> free_;
  std::vector<uint8_t> in_use_;
};

}  // namespace dsv4
