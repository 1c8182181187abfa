// libFuzzer target: parse_npy_f32 on arbitrary bytes. On success the array
// holds exactly prod(shape) values.
#include <cstdint>
#include <cstdlib>

#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = dsv4::parse_npy_f32(data, size, "fuzz.npy");
  if (!r.ok()) return 0;
  uint64_t numel = 1;
  for (const int64_t d : r->shape) numel *= static_cast<uint64_t>(d);
  if (numel != r->data.size()) std::abort();
  return 0;
}
