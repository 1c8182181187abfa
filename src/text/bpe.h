// BPE merges over token ids (text.md §1.7): repeatedly merge the adjacent pair of
// lowest rank, leftmost first among equal ranks. Short pieces use a linear scan,
// long ones a (rank, position) heap over a linked list; both give the same ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsv4 {

class BpeMerges {
 public:
  // Adds merge (left, right) -> result with the next rank. False if the pair exists.
  bool add(int32_t left, int32_t right, int32_t result);
  size_t size() const { return n_merges_; }

  // Merges the symbols of one piece in place.
  void apply(std::vector<int32_t>& symbols) const;
  // The two algorithms, exposed for tests.
  void apply_scan(std::vector<int32_t>& symbols) const;
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

  std::vector<Entry> table_;  // open addressing, power-of-two size, load <= 1/2
  size_t n_merges_ = 0;
};

}  // namespace dsv4
