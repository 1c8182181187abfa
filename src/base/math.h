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

// The items [r.begin, r.end) of a [rows, per_row] grid as runs within one row: fn(row, i0, i1)
// for the row's items [i0, i1), rows ascending (e.g. a thread's (row, head) pairs, so that
// per-row work such as RoPE angles is done once per run).
template <class Fn>
constexpr void for_row_runs(Range r, int64_t per_row, Fn&& fn) {
  for (int64_t i = r.begin; i < r.end;) {
    const int64_t row = i / per_row, end = (row + 1) * per_row < r.end ? (row + 1) * per_row : r.end;
    fn(row, i - row * per_row, end - row * per_row);
    i = end;
  }
}

}  // namespace dsv4
