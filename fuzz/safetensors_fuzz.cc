// libFuzzer target: SafetensorsFile::parse on arbitrary bytes. Besides the
// sanitizers, it checks the parser's promise on success: every view lies
// inside the input, holds numel x dtype size bytes, and no two non-empty views
// overlap.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = dsv4::SafetensorsFile::parse(data, size, "fuzz.safetensors");
  if (!f.ok()) {
    if (f.message().rfind("fuzz.safetensors: ", 0) != 0) std::abort();
    return 0;
  }
  std::vector<std::pair<const uint8_t*, const uint8_t*>> ranges;
  for (const auto& [name, v] : (*f)->tensors()) {
    if (v.data < data || v.n_bytes > size || v.data + v.n_bytes > data + size) std::abort();
    if (static_cast<size_t>(v.numel()) * dsv4::dtype_size(v.dtype) != v.n_bytes) std::abort();
    if (v.n_bytes > 0) ranges.emplace_back(v.data, v.data + v.n_bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i - 1].second > ranges[i].first) std::abort();
  return 0;
}
