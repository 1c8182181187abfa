// BPE merges over token ids (text.md §1.7): repeatedly merge the adjacent pair of
// lowest rank, leftmost first among equal ranks. Short pieces use a linear scan, long ones
// per-rank buckets of positions over a linked list (apply_buckets: linear passes, a heap of
// the distinct pending ranks only); apply_heap, the same list with one (rank, position) heap of
// every candidate, is their oracle. All three give the same ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsv4 {

// Work of one apply_buckets call, for tests of its growth: candidate pairs queued, merges
// done, and positions sorted (a bucket refilled out of order; 0 when passes append in order).
struct BpeWork {
  int64_t candidates = 0, merges = 0, sorted = 0;
};

class BpeMerges {
 public:
  // Adds merge (left, right) -> result with the next rank. False if the pair exists.
  bool add(int32_t left, int32_t right, int32_t result);
  size_t size() const { return n_merges_; }

  // Merges the symbols of one piece in place.
  void apply(std::vector<int32_t>& symbols) const;
  // The algorithms, exposed for tests.
  void apply_scan(std::vector<int32_t>& symbols) const;
  void apply_buckets(std::vector<int32_t>& symbols, BpeWork* work = nullptr) const;
  void apply_heap(std::vector<int32_t>& symbols) const;

  // Pieces of at most this many symbols use apply_scan.
  static constexpr size_t kScanMax = 48;

 private:
  struct Entry {
    uint64_t key;  // (left << 32 | right) + 1; 0 = empty slot
    int32_t rank, result;
  };
  const Entry* find(int32_t left, int32_t right) const;
  void grow();
  // The merges over a linked list of the symbols, candidates popped from queue (push(rank,
  // position), pop(rank&, position&): lowest rank, then leftmost, first).
  template <class Queue>
  void merge_linked(std::vector<int32_t>& symbols, Queue& queue, BpeWork* work) const;

  std::vector<Entry> table_;  // open addressing, power-of-two size, load <= 1/2
  size_t n_merges_ = 0;
};

}  // namespace dsv4
