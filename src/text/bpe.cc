#include "text/bpe.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>

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
    apply_buckets(symbols);
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

}  // namespace dsv4

namespace dsv4 {
namespace {

// Pending merge candidates as positions grouped by rank: the heap holds each distinct rank
// once; a rank's positions sit in a vector appended and read in order, sorted only when a
// later pass appended out of order. pop() gives (rank, position) ascending, as one heap of
// every candidate would.
class RankBuckets {
 public:
  explicit RankBuckets(BpeWork* work) : work_(work), slots_(64, {-1, -1}) {}

  void push(int32_t rank, int32_t pos) {
    Bucket& b = bucket(rank);
    if (b.cursor == b.pos.size()) {  // empty: its rank joins the queue
      b.pos.clear();
      b.cursor = 0;
      b.sorted = true;
      ranks_.push(rank);
    } else if (pos < b.pos.back()) {
      b.sorted = false;
    }
    b.pos.push_back(pos);
    if (work_) ++work_->candidates;
  }

  // The lowest pending (rank, position); false when none is left.
  bool pop(int32_t& rank, int32_t& pos) {
    while (!ranks_.empty()) {
      rank = ranks_.top();
      Bucket& b = bucket(rank);
      if (b.cursor == b.pos.size()) {
        ranks_.pop();
        continue;
      }
      if (!b.sorted) {
        std::sort(b.pos.begin() + static_cast<std::ptrdiff_t>(b.cursor), b.pos.end());
        if (work_) work_->sorted += static_cast<int64_t>(b.pos.size() - b.cursor);
        b.sorted = true;
      }
      pos = b.pos[b.cursor++];
      return true;
    }
    return false;
  }

 private:
  struct Bucket {
    std::vector<int32_t> pos;
    size_t cursor = 0;   // pos[cursor, size) are pending
    bool sorted = true;  // the pending ones ascend
  };

  // rank -> bucket through an open-addressing table of (rank, index), load <= 1/2.
  Bucket& bucket(int32_t rank) {
    if ((buckets_.size() + 1) * 2 > slots_.size()) grow();
    size_t h = find_slot(slots_, rank);
    if (slots_[h].first < 0) {
      slots_[h] = {rank, static_cast<int32_t>(buckets_.size())};
      buckets_.emplace_back();
    }
    return buckets_[static_cast<size_t>(slots_[h].second)];
  }
  static size_t find_slot(const std::vector<std::pair<int32_t, int32_t>>& slots, int32_t rank) {
    const size_t mask = slots.size() - 1;
    size_t h = slot_of(static_cast<uint64_t>(rank) + 1, mask);
    while (slots[h].first >= 0 && slots[h].first != rank) h = (h + 1) & mask;
    return h;
  }
  void grow() {
    std::vector<std::pair<int32_t, int32_t>> old = std::move(slots_);
    slots_.assign(old.size() * 2, {-1, -1});
    for (const auto& e : old)
      if (e.first >= 0) slots_[find_slot(slots_, e.first)] = e;
  }

  BpeWork* work_;
  std::vector<std::pair<int32_t, int32_t>> slots_;
  std::vector<Bucket> buckets_;
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ranks_;  // may repeat a rank
};

// One heap of every (rank, position) candidate: apply_heap, the oracle.
class CandidateHeap {
 public:
  void push(int32_t rank, int32_t pos) { heap_.push({rank, pos}); }
  bool pop(int32_t& rank, int32_t& pos) {
    if (heap_.empty()) return false;
    std::tie(rank, pos) = heap_.top();
    heap_.pop();
    return true;
  }

 private:
  std::priority_queue<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, int32_t>>, std::greater<>> heap_;
};

}  // namespace

// A candidate is stale when its pair changed since it was queued (each pair has one rank).
// prev[i] == -2: symbol i was merged into its left neighbour.
template <class Queue>
void BpeMerges::merge_linked(std::vector<int32_t>& sym, Queue& queue, BpeWork* work) const {
  const size_t n = sym.size();
  if (n < 2) return;
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  auto push = [&](int32_t i) {
    const int32_t j = next[i];
    if (j < 0) return;
    if (const Entry* e = find(sym[i], sym[j])) queue.push(e->rank, i);
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  int32_t rank = 0, i = 0;
  while (queue.pop(rank, i)) {
    const int32_t j = next[i];
    if (j < 0 || prev[i] == -2) continue;
    const Entry* e = find(sym[i], sym[j]);
    if (e == nullptr || e->rank != rank) continue;  // stale
    sym[i] = e->result;
    prev[j] = -2;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (prev[i] >= 0) push(prev[i]);
    push(i);
    if (work) ++work->merges;
  }
  size_t w = 0;
  for (int32_t k = 0; k >= 0; k = next[k]) sym[w++] = sym[k];
  sym.resize(w);
}

// RankBuckets keep apply_heap's order: a pass over one rank walks the symbols left to right (a
// binary heap of every candidate of a multi-MiB piece misses the cache at most of its ~23
// levels per pop).
void BpeMerges::apply_buckets(std::vector<int32_t>& sym, BpeWork* work) const {
  RankBuckets queue(work);
  merge_linked(sym, queue, work);
}

void BpeMerges::apply_heap(std::vector<int32_t>& sym) const {
  CandidateHeap queue;
  merge_linked(sym, queue, nullptr);
}

}  // namespace dsv4
