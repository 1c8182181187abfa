#include "cache/cache_storage.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace dsv4 {

Result<CacheStorage> CacheStorage::reserve(const std::string& name, size_t bytes) {
  CacheStorage s;
  if (bytes == 0) return s;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return Status::errorf("cache '{}': cannot reserve {} bytes of address space ({}); lower max_context, "
                          "max_seqs or cache_blocks",
                          name, bytes, std::strerror(errno));
  s.data_ = static_cast<uint8_t*>(p);
  s.bytes_ = bytes;
  return s;
}

CacheStorage::CacheStorage(CacheStorage&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

CacheStorage& CacheStorage::operator=(CacheStorage&& o) noexcept {
  if (this != &o) {
    this->~CacheStorage();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

CacheStorage::~CacheStorage() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

size_t CacheStorage::resident_bytes() const {
  if (data_ == nullptr) return 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t n = (bytes_ + page - 1) / page;
  std::vector<unsigned char> v(n);
  if (mincore(data_, bytes_, v.data()) != 0) return 0;
  size_t resident = 0;
  for (unsigned char c : v) resident += (c & 1) ? page : 0;
  return resident;
}

}  // namespace dsv4
