// Replacement global operator new/delete that count allocations while counting
// is on (support/alloc_counter.h). Kept in its own translation unit. DSV4_ALLOC_TRAP set:
// the first counted allocation traps (run under a debugger to see where it comes from).
#include <atomic>
#include <cstdlib>
#include <new>

#include "support/alloc_counter.h"

namespace {
std::atomic<bool> g_on{false};
std::atomic<int64_t> g_count{0};
}  // namespace

namespace dsv4::test {
void alloc_counting(bool on) { g_on.store(on); }
int64_t alloc_count() { return g_count.load(); }
}  // namespace dsv4::test

void* operator new(std::size_t n) {
  if (g_on.load(std::memory_order_relaxed)) {
    g_count.fetch_add(1, std::memory_order_relaxed);
    if (std::getenv("DSV4_ALLOC_TRAP")) __builtin_trap();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_on.load(std::memory_order_relaxed)) g_count.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
