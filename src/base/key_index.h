// A hash index over a sequence of string keys that the caller holds in insertion order: the
// position of a key in O(1) expected, so building an object of n keys costs O(n) rather than
// the n^2/2 comparisons of a linear search. Keys come from outside (JSON bodies), so the hash is
// SipHash-1-3 under a key drawn once per process: an attacker cannot pick colliding keys.
// Up to kLinearKeys keys are searched linearly with no table (most objects are small).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/check.h"

namespace dsv4 {

// SipHash-1-3 of the bytes under the process key.
uint64_t key_hash(std::string_view key);

class KeyIndex {
 public:
  static constexpr size_t kNotFound = SIZE_MAX;
  static constexpr size_t kLinearKeys = 8;

  // The position of `key` among the n keys key_at(0 .. n-1), or kNotFound.
  template <class KeyAt>
  size_t find(std::string_view key, size_t n, const KeyAt& key_at) const {
    if (slots_.empty()) {
      for (size_t i = 0; i < n; ++i) {
        ++comparisons_;
        if (std::string_view(key_at(i)) == key) return i;
      }
      return kNotFound;
    }
    const size_t mask = slots_.size() - 1;
    for (size_t s = key_hash(key) & mask;; s = (s + 1) & mask) {
      if (slots_[s] == 0) return kNotFound;
      ++comparisons_;
      if (std::string_view(key_at(slots_[s] - 1)) == key) return slots_[s] - 1;
    }
  }

  // Key n-1 was just appended (and was not among the first n-1).
  template <class KeyAt>
  void appended(size_t n, const KeyAt& key_at) {
    if (slots_.empty() ? n > kLinearKeys : 2 * n > slots_.size()) return rebuild(n, key_at);
    if (!slots_.empty()) place(key_hash(key_at(n - 1)), n - 1);
  }

  // Indexes the n keys afresh (after an erase or a bulk change).
  template <class KeyAt>
  void rebuild(size_t n, const KeyAt& key_at) {
    slots_.clear();
    if (n <= kLinearKeys) return;
    DSV4_CHECK(n < UINT32_MAX, "{} keys in one object", n);
    size_t size = 16;
    while (size < 4 * n) size *= 2;  // load <= 1/4 after a rebuild, <= 1/2 before the next
    slots_.assign(size, 0);
    for (size_t i = 0; i < n; ++i) place(key_hash(key_at(i)), i);
  }

  void clear() { slots_.clear(); }

  // Key comparisons made by find() so far: tests assert that building n keys costs O(n).
  uint64_t comparisons() const { return comparisons_; }

 private:
  void place(uint64_t hash, size_t pos) {
    const size_t mask = slots_.size() - 1;
    size_t s = hash & mask;
    while (slots_[s] != 0) s = (s + 1) & mask;
    slots_[s] = static_cast<uint32_t>(pos + 1);
  }

  std::vector<uint32_t> slots_;  // 0: empty; else a key's position + 1. Size a power of two.
  mutable uint64_t comparisons_ = 0;
};

}  // namespace dsv4
