// One cache group (runtime.md §2.1): a page pool plus one block table per
// sequence, shared by every layer of the group (each layer owns its own
// physical tensor [n_pages, page_rows, width], see LayerCaches). Rows are
// logical: a position (window KV, compressor states) or an entry index
// (compressed KV, indexer keys).
//   ring group   : a sequence holds a fixed ring of `ring_pages` pages,
//                  slot(row) = table[(row / P) mod ring_pages]·P + row mod P
//   growing group: pages are added as rows are reserved,
//                  slot(row) = table[row / P]·P + row mod P
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/page_pool.h"

namespace dsv4 {

struct CacheGroupSpec {
  std::string name;
  int32_t page_rows = 0;     // P
  int32_t ring_pages = 0;    // > 0: ring of this many pages per sequence; 0: growing
  int32_t n_pages = 0;       // physical pages in the pool
  int64_t max_rows = 0;      // growing: most logical rows one sequence may hold
};

// Ring pages needed so that any `span` consecutive rows map to distinct
// physical rows: ceil((span - 1) / P) + 1 (runtime.md §2.1).
int32_t ring_pages_for_span(int64_t span, int32_t page_rows);

class CacheGroup {
 public:
  CacheGroup(CacheGroupSpec spec, int32_t max_seqs);

  const CacheGroupSpec& spec() const { return spec_; }
  bool is_ring() const { return spec_.ring_pages > 0; }
  int64_t physical_rows() const { return static_cast<int64_t>(spec_.n_pages) * spec_.page_rows; }

  // Ring: allocates the ring. Growing: nothing yet. Fails when the pool is short.
  Status admit(int32_t seq);
  // Growing groups: makes rows [0, n_rows) addressable. No-op for rings.
  Status reserve(int32_t seq, int64_t n_rows);
  // Pages a growing sequence would need in addition to hold n_rows rows.
  int32_t pages_short(int32_t seq, int64_t n_rows) const;
  // Growing groups: appends pages held elsewhere (a prefix-cache hit) to an admitted
  // sequence's empty table, one more reference each.
  void adopt(int32_t seq, const std::vector<int32_t>& pages);
  // One more / one fewer holder of a page in use outside the tables (the prefix cache).
  void retain_page(int32_t page) { pool_.retain(page); }
  void free_page(int32_t page) { pool_.free(page); }
  void release(int32_t seq);
  bool admitted(int32_t seq) const { return admitted_[seq] != 0; }

  // Physical row of logical row `row` of sequence `seq` (must be addressable).
  int64_t slot(int32_t seq, int64_t row) const;
  int64_t rows_reserved(int32_t seq) const;
  const std::vector<int32_t>& table(int32_t seq) const { return tables_[seq]; }
  const PagePool& pool() const { return pool_; }
  int32_t page_refs(int32_t page) const { return pool_.refs(page); }

 private:
  CacheGroupSpec spec_;
  PagePool pool_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<uint8_t> admitted_;
};

}  // namespace dsv4
