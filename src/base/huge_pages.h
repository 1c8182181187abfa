// Large long-lived buffers on transparent huge pages. huge_map(bytes): an anonymous private
// mapping of at least `bytes`, 2 MiB aligned and advised MADV_HUGEPAGE (the kernel backs it
// with 2 MiB pages at first touch when THP is "madvise" or "always"), zero-filled and not yet
// touched; nullptr if the mapping fails. huge_unmap frees it. advise_willneed starts the
// read-ahead of a file mapping (MADV_WILLNEED; a hint, failures ignored).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsv4 {

constexpr size_t kHugePageBytes = size_t{2} << 20;

void* huge_map(size_t bytes);
void huge_unmap(void* p, size_t bytes);
void advise_willneed(const void* p, size_t bytes);

}  // namespace dsv4
