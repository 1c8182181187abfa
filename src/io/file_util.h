// Whole-file helpers shared by the io/ readers and writers: an atomic replace
// (temporary file in the same directory, fsync, rename) and a bounded read.
// Errors are Statuses naming the path and the system error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsv4 {

// Writes the concatenation of `parts` to `path`: readers see either the old
// file or the complete new one, never a partial write.
Status write_file_atomic(const std::string& path, const std::vector<std::span<const uint8_t>>& parts);

// Reads a whole regular file; files larger than max_bytes are an error.
Result<std::vector<uint8_t>> read_file(const std::string& path, uint64_t max_bytes);

}  // namespace dsv4
