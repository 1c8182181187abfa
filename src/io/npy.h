// NumPy .npy files holding float32 arrays in C order (the format of
// `dsv4 logits --out`, e.g. logits [n, vocab]).
//
// Written layout (format version 1.0): "\x93NUMPY" 0x01 0x00, u16le header
// length H, then H bytes of
//   {'descr': '<f4', 'fortran_order': False, 'shape': (n, v), }
// padded with spaces and ending in '\n' so that 10 + H is a multiple of 64,
// then prod(shape) little-endian float32 values.
// The reader accepts versions 1.0, 2.0 (u32le header length) and 3.0, keys in
// any order, descr '<f4' only, fortran_order False only, and requires the data
// to be exactly prod(shape) * 4 bytes. Errors name the file and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsv4 {

struct NpyF32 {
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<float> data;     // C order, prod(shape) values
};

// Writes atomically (temporary file + rename). data holds prod(shape) floats.
Status write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

Result<NpyF32> read_npy_f32(const std::string& path);
// Parses a complete .npy image in memory (tests, tools).
Result<NpyF32> parse_npy_f32(const uint8_t* bytes, size_t size, const std::string& display_name);

}  // namespace dsv4
