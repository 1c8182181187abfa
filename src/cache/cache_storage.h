// Byte storage of one cache family of one layer: an anonymous private mapping
// reserved at start-up (MAP_NORESERVE) and never touched by the engine before a
// row is written, so resident memory follows the pages sequences actually use,
// whatever the pool's capacity (runtime.md §7.2). Move-only; unmaps on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace dsv4 {

class CacheStorage {
 public:
  CacheStorage() = default;
  // bytes == 0 gives an empty storage. Fails (naming `name` and the size) when the
  // address space cannot be reserved.
  static Result<CacheStorage> reserve(const std::string& name, size_t bytes);
  CacheStorage(CacheStorage&& o) noexcept;
  CacheStorage& operator=(CacheStorage&& o) noexcept;
  CacheStorage(const CacheStorage&) = delete;
  CacheStorage& operator=(const CacheStorage&) = delete;
  ~CacheStorage();

  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Bytes of this storage resident in memory now (mincore; page granular).
  size_t resident_bytes() const;

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dsv4
