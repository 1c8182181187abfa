// Buffers for the dynamic-T tests: rows [0, capacity) of `width` elements.
// Before a call: everything is NaN (scratch, padding) and rows >= T hold a
// sentinel; after it: rows >= T must still hold the sentinel bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "numeric/bf16.h"

namespace dsv4::test {

// Capacity used by operator tests: >= 40 and not a multiple of any tile.
inline constexpr int kCapacity = 41;

inline constexpr float kSentinelF32 = -12345.678f;
inline constexpr uint16_t kSentinelBf16Bits = 0xC640;  // -12288.0
inline constexpr int32_t kSentinelI32 = -777;

template <class T>
T nan_value() {
  if constexpr (std::is_same_v<T, bf16>) return bf16::from_float(std::numeric_limits<float>::quiet_NaN());
  else if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::quiet_NaN();
  else return static_cast<T>(-1);
}
template <class T>
T sentinel_value() {
  if constexpr (std::is_same_v<T, bf16>) return bf16::from_bits(kSentinelBf16Bits);
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(kSentinelF32);
  else return static_cast<T>(kSentinelI32);
}

template <class E>
struct RowBuffer {
  int64_t width;
  int64_t capacity;
  std::vector<E> v;
  RowBuffer(int64_t capacity_rows, int64_t w) : width(w), capacity(capacity_rows), v(capacity_rows * w) {}
  E* data() { return v.data(); }
  E* row(int64_t r) { return v.data() + r * width; }
  // NaN everywhere, sentinel in rows >= T.
  void poison(int64_t T) {
    for (auto& x : v) x = nan_value<E>();
    for (int64_t i = T * width; i < capacity * width; ++i) v[i] = sentinel_value<E>();
  }
  ::testing::AssertionResult sentinel_intact(int64_t T) const {
    const E s = sentinel_value<E>();
    for (int64_t i = T * width; i < capacity * width; ++i)
      if (std::memcmp(&v[i], &s, sizeof(E)) != 0)
        return ::testing::AssertionFailure() << "row " << i / width << " (>= T=" << T
                                             << ") was written, element " << i % width;
    return ::testing::AssertionSuccess();
  }
};

}  // namespace dsv4::test
