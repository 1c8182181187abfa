#include "text/bpe.h"

#include <limits>
#include <queue>

namespace dsv4 {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return ((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
          static_cast<uint32_t>(right)) + 1;
}

size_t slot_of(uint64_t key, size_t mask) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(h >> 32) & mask;
}

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

}  // namespace

void BpeMerges::grow() {
  std::vector<Entry> old = std::move(table_);
  table_.assign(old.empty() ? 1024 : old.size() * 2, Entry{0, 0, 0});
  const size_t mask = table_.size() - 1;
  for (const Entry& e : old) {
    if (e.key == 0) continue;
    size_t s = slot_of(e.key, mask);
    while (table_[s].key != 0) s = (s + 1) & mask;
    table_[s] = e;
  }
}

bool BpeMerges::add(int32_t left, int32_t right, int32_t result) {
  if ((n_merges_ + 1) * 2 > table_.size()) grow();
  const uint64_t key = pair_key(left, right);
  const size_t mask = table_.size() - 1;
  size_t s = slot_of(key, mask);
  while (table_[s].key != 0) {
    if (table_[s].key == key) return false;
    s = (s + 1) & mask;
  }
  table_[s] = Entry{key, static_cast<int32_t>(n_merges_), result};
  ++n_merges_;
  return true;
}

const BpeMerges::Entry* BpeMerges::find(int32_t left, int32_t right) const {
  if (table_.empty()) return nullptr;
  const uint64_t key = pair_key(left, right);
  const size_t mask = table_.size() - 1;
  size_t s = slot_of(key, mask);
  while (table_[s].key != 0) {
    if (table_[s].key == key) return &table_[s];
    s = (s + 1) & mask;
  }
  return nullptr;
}

void BpeMerges::apply(std::vector<int32_t>& symbols) const {
  if (symbols.size() <= kScanMax) {
    apply_scan(symbols);
  } else {
    apply_heap(symbols);
  }
}

void BpeMerges::apply_scan(std::vector<int32_t>& sym) const {
  const size_t n0 = sym.size();
  if (n0 < 2) return;
  // rank[i]: rank of the pair (sym[i], sym[i+1]).
  int32_t rank[kScanMax];
  int32_t result[kScanMax];
  std::vector<int32_t> big_rank, big_result;  // only for pieces longer than kScanMax
  int32_t* r = rank;
  int32_t* res = result;
  if (n0 > kScanMax) {
    big_rank.resize(n0);
    big_result.resize(n0);
    r = big_rank.data();
    res = big_result.data();
  }
  auto look = [&](size_t i) {
    const Entry* e = find(sym[i], sym[i + 1]);
    r[i] = e ? e->rank : kNoRank;
    res[i] = e ? e->result : -1;
  };
  size_t n = n0;
  for (size_t i = 0; i + 1 < n; ++i) look(i);
  while (n >= 2) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (r[i] < r[best]) best = i;
    if (r[best] == kNoRank) break;
    sym[best] = res[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      r[i] = r[i + 1];
      res[i] = res[i + 1];
    }
    --n;
    if (best + 1 < n) look(best);
    else { r[best] = kNoRank; }
    if (best > 0) look(best - 1);
  }
  sym.resize(n);
}

void BpeMerges::apply_heap(std::vector<int32_t>& sym) const {
  const size_t n = sym.size();
  if (n < 2) return;
  std::vector<int32_t> prev(n), next(n);
  std::vector<uint8_t> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  // (rank, position of left symbol, left id, right id): stale entries are skipped on pop.
  struct Cand {
    int32_t rank, pos, left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t i) {
    const int32_t j = next[i];
    if (j < 0) return;
    if (const Entry* e = find(sym[i], sym[j])) heap.push({e->rank, i, sym[i], sym[j]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int32_t i = c.pos;
    const int32_t j = next[i];
    if (!alive[i] || j < 0 || sym[i] != c.left || sym[j] != c.right) continue;
    sym[i] = find(c.left, c.right)->result;
    alive[j] = 0;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (prev[i] >= 0) push(prev[i]);
    push(i);
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) sym[w++] = sym[i];
  sym.resize(w);
}

}  // namespace dsv4
