#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>
#include <utility>

namespace dsv4 {

namespace {
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

void* huge_map(size_t bytes) {
  const size_t size = round_up(bytes == 0 ? 1 : bytes, kHugePageBytes);
  // Map one huge page more and trim both ends to a 2 MiB boundary.
  const size_t span = size + kHugePageBytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(base, kHugePageBytes);
  if (aligned > base) ::munmap(raw, aligned - base);
  const size_t tail = span - (aligned - base) - size;
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
#ifdef MADV_HUGEPAGE
  ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // a hint: no huge pages is fine
#endif
  return reinterpret_cast<void*>(aligned);
}

void huge_unmap(void* p, size_t bytes) {
  if (p != nullptr) ::munmap(p, round_up(bytes == 0 ? 1 : bytes, kHugePageBytes));
}

void advise_willneed(const void* p, size_t bytes) {
  const uintptr_t page = 4096;
  const uintptr_t b = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t e = reinterpret_cast<uintptr_t>(p) + bytes;
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_WILLNEED);
}

void advise_pageout(const void* p, size_t bytes) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = 4096;
  const uintptr_t b = round_up(reinterpret_cast<uintptr_t>(p), page);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_PAGEOUT);
#else
  (void)p, (void)bytes;
#endif
}

HugeBytes::HugeBytes(size_t bytes) : p_(static_cast<uint8_t*>(huge_map(bytes))), n_(bytes) {
  if (p_ == nullptr) throw std::bad_alloc();
}
HugeBytes::HugeBytes(HugeBytes&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
HugeBytes& HugeBytes::operator=(HugeBytes&& o) noexcept {
  if (this != &o) {
    huge_unmap(p_, n_);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}

}  // namespace dsv4
