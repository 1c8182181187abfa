// Read view of one sequence's rows in a paged cache pool (runtime.md §2.1):
// logical row e (a position or an entry index) lives at physical row
//   table[(e / page_rows) mod ring_pages]·page_rows + e mod page_rows   (ring)
//   table[e / page_rows]·page_rows + e mod page_rows                    (growing, ring_pages = 0)
// of pool [n_pages·page_rows, width]. Kernels take one view per row of a step.
#pragma once

#include <cstdint>

#include "numeric/bf16.h"

namespace dsv4 {

template <class T>
struct PagedRowsT {
  T* pool = nullptr;
  const int32_t* table = nullptr;
  int32_t page_rows = 1;
  int32_t ring_pages = 0;
  int64_t width = 0;  // elements of T per row

  int64_t physical(int64_t e) const {
    int64_t lp = e / page_rows;
    if (ring_pages > 0) lp %= ring_pages;
    return static_cast<int64_t>(table[lp]) * page_rows + e % page_rows;
  }
  T* row(int64_t e) const { return pool + physical(e) * width; }
};

using PagedRows = PagedRowsT<const bf16>;         // bf16 rows (the reference's plain caches)
using PagedBytes = PagedRowsT<const uint8_t>;     // packed rows (numeric/cache_rows.h), width in bytes

}  // namespace dsv4
