#include "cache/cache_group.h"

#include "base/check.h"
#include "base/math.h"

namespace dsv4 {

int32_t ring_pages_for_span(int64_t span, int32_t page_rows) {
  if (span <= 1) return 1;
  return static_cast<int32_t>(ceil_div<int64_t>(span - 1, page_rows) + 1);
}

CacheGroup::CacheGroup(CacheGroupSpec spec, int32_t max_seqs)
    : spec_(std::move(spec)), pool_(spec_.name, spec_.n_pages), tables_(max_seqs), admitted_(max_seqs, 0) {
  DSV4_CHECK(spec_.page_rows > 0);
  const int64_t width = is_ring() ? spec_.ring_pages : ceil_div<int64_t>(spec_.max_rows, spec_.page_rows);
  for (auto& t : tables_) t.reserve(width);
}

Status CacheGroup::admit(int32_t seq) {
  DSV4_CHECK(seq >= 0 && seq < static_cast<int32_t>(tables_.size()) && !admitted_[seq]);
  if (is_ring() && pool_.n_free() < spec_.ring_pages)
    return Status::errorf("cache '{}': a new sequence needs {} pages, {} of {} free", spec_.name,
                          spec_.ring_pages, pool_.n_free(), pool_.n_pages());
  admitted_[seq] = 1;
  if (!is_ring()) return Status();
  for (int32_t i = 0; i < spec_.ring_pages; ++i) tables_[seq].push_back(pool_.alloc().value());
  return Status();
}

int32_t CacheGroup::pages_short(int32_t seq, int64_t n_rows) const {
  if (is_ring()) return 0;
  const int64_t need = ceil_div<int64_t>(n_rows, spec_.page_rows);
  const int64_t have = static_cast<int64_t>(tables_[seq].size());
  return need > have ? static_cast<int32_t>(need - have) : 0;
}

Status CacheGroup::reserve(int32_t seq, int64_t n_rows) {
  DSV4_CHECK(admitted_[seq]);
  if (is_ring()) return Status();
  if (n_rows > spec_.max_rows)
    return Status::errorf("cache '{}': {} rows requested, limit max_rows = {}", spec_.name, n_rows,
                          spec_.max_rows);
  const int32_t short_by = pages_short(seq, n_rows);
  if (short_by > pool_.n_free())
    return Status::errorf("cache '{}' exhausted: needs {} more pages, {} of {} free", spec_.name,
                          short_by, pool_.n_free(), pool_.n_pages());
  for (int32_t i = 0; i < short_by; ++i) tables_[seq].push_back(pool_.alloc().value());
  return Status();
}

void CacheGroup::adopt(int32_t seq, const std::vector<int32_t>& pages) {
  DSV4_CHECK(admitted_[seq] && !is_ring() && tables_[seq].empty(), "cache {}: adopt into seq {}", spec_.name, seq);
  for (int32_t p : pages) {
    pool_.retain(p);
    tables_[seq].push_back(p);
  }
}

void CacheGroup::release(int32_t seq) {
  if (!admitted_[seq]) return;
  for (int32_t p : tables_[seq]) pool_.free(p);
  tables_[seq].clear();
  admitted_[seq] = 0;
}

int64_t CacheGroup::rows_reserved(int32_t seq) const {
  return static_cast<int64_t>(tables_[seq].size()) * spec_.page_rows;
}

int64_t CacheGroup::slot(int32_t seq, int64_t row) const {
  const auto& t = tables_[seq];
  const int64_t P = spec_.page_rows;
  int64_t lp = row / P;
  if (is_ring()) lp %= spec_.ring_pages;
  DSV4_CHECK(row >= 0 && lp < static_cast<int64_t>(t.size()), "cache {}: row {} of seq {} not reserved",
             spec_.name, row, seq);
  return static_cast<int64_t>(t[lp]) * P + row % P;
}

}  // namespace dsv4
