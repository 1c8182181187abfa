// MaskCache: token masks of string bodies (string_body.h) by StringMaskKey, least recently used
// out first. Bounded in bytes: at most max_bytes / (words * 8) masks, each allocated the first
// time its slot is used and then reused, so that once full it allocates nothing. An entry keeps
// the regex or key automaton its key names alive (the key holds its address: a new one can never
// take the address of one a live entry names).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/string_body.h"

namespace dsv4::grammar {

class MaskCache {
 public:
  static constexpr int64_t kDefaultBytes = int64_t{16} << 20;
  static constexpr int64_t kMaxEntries = 4096;  // whatever the bytes allow (small vocabularies)

  // words: the words of one mask (ceil(V / 64)); max_bytes below one mask: no room (insert fails).
  MaskCache(int64_t words, int64_t max_bytes = kDefaultBytes);
  // The mask stored for key (now the most recent), nullptr if none.
  const uint64_t* find(const StringMaskKey& key);
  // Whether key is stored (not counted as a hit or miss; the order unchanged).
  bool contains(const StringMaskKey& key) const { return capacity_ > 0 && table_[slot_of(key, key.hash())] >= 0; }
  // A mask for key, for the caller to fill (the least recent entry goes when full). pin: the
  // regex or key automaton the key names (nullptr for none).
  uint64_t* insert(const StringMaskKey& key, std::shared_ptr<const void> pin);

  int64_t capacity() const { return capacity_; }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  int64_t bytes() const { return size() * words_ * static_cast<int64_t>(sizeof(uint64_t)); }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  struct Entry {
    StringMaskKey key;
    uint64_t hash = 0;
    std::shared_ptr<const void> pin;
    std::vector<uint64_t> bits;  // [words_]
    int32_t newer = -1, older = -1;
  };
  // The slot of table_ holding key, or the empty slot where it would go.
  size_t slot_of(const StringMaskKey& key, uint64_t hash) const;
  void erase_slot(size_t slot);
  void unlink(int32_t e);
  void push_newest(int32_t e);

  int64_t words_, capacity_;
  std::vector<Entry> entries_;  // reserved to the capacity once
  std::vector<int32_t> table_;  // open addressing, linear probing; −1: empty; [power of 2 >= 2 x capacity]
  int32_t newest_ = -1, oldest_ = -1;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace dsv4::grammar
