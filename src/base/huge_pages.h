// Large long-lived buffers on transparent huge pages. huge_map(bytes): an anonymous private
// mapping of at least `bytes`, 2 MiB aligned and advised MADV_HUGEPAGE (the kernel backs it
// with 2 MiB pages at first touch when THP is "madvise" or "always"), zero-filled and not yet
// touched; nullptr if the mapping fails. huge_unmap frees it. advise_willneed starts the
// read-ahead of a file mapping (MADV_WILLNEED; a hint, failures ignored).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsv4 {

constexpr size_t kHugePageBytes = size_t{2} << 20;

void* huge_map(size_t bytes);
void huge_unmap(void* p, size_t bytes);
void advise_willneed(const void* p, size_t bytes);
// Lets the kernel reclaim the whole pages inside [p, p + bytes) now (MADV_PAGEOUT; a hint:
// the contents stay as they are, a later read brings them back).
void advise_pageout(const void* p, size_t bytes);

// huge_map'd bytes owned by one object (move-only); throws std::bad_alloc if the map fails.
class HugeBytes {
 public:
  HugeBytes() = default;
  explicit HugeBytes(size_t bytes);
  HugeBytes(HugeBytes&& o) noexcept;
  HugeBytes& operator=(HugeBytes&& o) noexcept;
  HugeBytes(const HugeBytes&) = delete;
  HugeBytes& operator=(const HugeBytes&) = delete;
  ~HugeBytes() { huge_unmap(p_, n_); }
  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace dsv4
