// Small integer helpers used by every tiled loop.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsv4 {

template <class T>
constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Contiguous share [begin, end) of n items for worker tid of nthreads.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
constexpr Range split_range(int64_t n, int tid, int nthreads) {
  const int64_t base = n / nthreads, rem = n % nthreads;
  const int64_t begin = tid * base + (tid < rem ? tid : rem);
  return {begin, begin + base + (tid < rem ? 1 : 0)};
}

// split_range over units of `align` items: every boundary but n is a multiple of align.
constexpr Range split_aligned(int64_t n, int64_t align, int tid, int nthreads) {
  const Range u = split_range(ceil_div(n, align), tid, nthreads);
  return {u.begin * align < n ? u.begin * align : n, u.end * align < n ? u.end * align : n};
}

}  // namespace dsv4
