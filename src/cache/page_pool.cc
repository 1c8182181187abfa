#include "cache/page_pool.h"

#include "base/check.h"

namespace dsv4 {

PagePool::PagePool(std::string name, int32_t n_pages)
    : name_(std::move(name)), n_pages_(n_pages), refs_(n_pages, 0) {
  free_.reserve(n_pages);
  for (int32_t p = n_pages - 1; p >= 0; --p) free_.push_back(p);  // hands out 0, 1, 2, ...
}

Result<int32_t> PagePool::alloc() {
  if (free_.empty())
    return Status::errorf("page pool '{}' exhausted: all {} pages in use (raise the pool size)",
                          name_, n_pages_);
  const int32_t p = free_.back();
  free_.pop_back();
  refs_[p] = 1;
  return p;
}

void PagePool::retain(int32_t page) {
  DSV4_CHECK(page >= 0 && page < n_pages_ && refs_[page] > 0, "pool {}: retain of free page {}", name_, page);
  ++refs_[page];
}

void PagePool::free(int32_t page) {
  DSV4_CHECK(page >= 0 && page < n_pages_ && refs_[page] > 0, "pool {}: bad free of page {}", name_, page);
  if (--refs_[page] == 0) free_.push_back(page);
}

}  // namespace dsv4
