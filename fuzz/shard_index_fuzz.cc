// libFuzzer target: parse_shard_index (model.safetensors.index.json) on
// arbitrary bytes. Invariants: errors name the source; on success every shard
// is a plain file name (non-empty, no '/', "..", NUL) and every tensor name is
// valid UTF-8 (the JSON was checked strictly).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "io/safetensors.h"

namespace {

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto index = dsv4::parse_shard_index(text, "fuzz.index.json");
  if (!index.ok()) {
    if (index.message().rfind("fuzz.index.json: ", 0) != 0) std::abort();
    return 0;
  }
  for (const auto& [name, file] : *index) {
    if (file.empty() || file.find('/') != std::string::npos || file.find("..") != std::string::npos ||
        file.find('\0') != std::string::npos)
      std::abort();
    if (!valid_utf8(name) || !valid_utf8(file)) std::abort();
  }
  return 0;
}
