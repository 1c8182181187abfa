#include "parallel/weight_shard.h"

#include <cstring>

#include "base/math.h"

namespace dsv4 {
namespace {

// Stored bytes of `n` consecutive elements of one row (FP4: two per byte; n even).
int64_t row_bytes(WeightFormat f, int64_t n) {
  switch (f) {
    case WeightFormat::kBF16: return 2 * n;
    case WeightFormat::kF32: return 4 * n;
    case WeightFormat::kFP8: return n;
    case WeightFormat::kFP4: return n / 2;
  }
  return 0;
}

}  // namespace

Result<LinearWeight> row_shard(const LinearWeight& w, int64_t o0, int64_t o1) {
  if (o0 < 0 || o1 > w.out || o0 >= o1)
    return Status::errorf("row shard [{}, {}) of a weight with {} rows", o0, o1, w.out);
  if (w.format == WeightFormat::kFP8 && o0 % 128 != 0)
    return Status::errorf("row shard at row {} splits an FP8 128-row scale block", o0);
  if ((w.fp4_dot || w.bf16_tiles) && o0 % kDotTileRows != 0)
    return Status::errorf("row shard at row {} splits a 16-row {} tile", o0, w.fp4_dot ? "FP4" : "BF16");
  LinearWeight s = w;
  s.out = o1 - o0;
  s.data = static_cast<const uint8_t*>(w.data) + row_bytes(w.format, w.in) * o0;
  if (w.format == WeightFormat::kFP8) s.scale = w.scale + (o0 / 128) * ceil_div<int64_t>(w.in, 128);
  if (w.format == WeightFormat::kFP4) s.scale = w.scale + o0 * (w.in / 32);
  return s;
}

Result<LinearWeight> column_shard_copy(const LinearWeight& w, int64_t k0, int64_t k1, std::vector<uint8_t>& storage) {
  if (k0 < 0 || k1 > w.in || k0 >= k1 || k0 % 128 != 0 || (k1 % 128 != 0 && k1 != w.in))
    return Status::errorf("column shard [{}, {}) of a weight with {} columns (need 128-column blocks)", k0, k1, w.in);
  const int64_t n = k1 - k0, data_row = row_bytes(w.format, n);
  int64_t scale_rows = 0, scale_cols = 0, scale_k0 = 0, scale_in = 0;
  if (w.format == WeightFormat::kFP8) {
    scale_rows = ceil_div<int64_t>(w.out, 128);
    scale_in = ceil_div<int64_t>(w.in, 128);
    scale_k0 = k0 / 128;
    scale_cols = ceil_div<int64_t>(n, 128);
  } else if (w.format == WeightFormat::kFP4) {
    scale_rows = w.out;
    scale_in = w.in / 32;
    scale_k0 = k0 / 32;
    scale_cols = n / 32;
  }
  const int64_t data_bytes = data_row * w.out;
  storage.assign(static_cast<size_t>(data_bytes + scale_rows * scale_cols), 0);
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  if (w.fp8_dot || w.fp4_dot || w.bf16_tiles) {  // tiles of 16 rows x 128 columns: the shard's are whole tiles of w
    for (int64_t o = 0; o < w.out; o += kDotTileRows)
      std::memcpy(storage.data() + o * data_row, src + o * row_bytes(w.format, w.in) + row_bytes(w.format, k0) * kDotTileRows,
                  static_cast<size_t>(data_row * kDotTileRows));
  } else {
    for (int64_t o = 0; o < w.out; ++o)
      std::memcpy(storage.data() + o * data_row, src + o * row_bytes(w.format, w.in) + row_bytes(w.format, k0),
                  static_cast<size_t>(data_row));
  }
  if (w.fp4_dot) {  // scales in the same tiles: 16 rows' scales of a block are 64 bytes
    for (int64_t o = 0; o < w.out; o += kDotTileRows)
      std::memcpy(storage.data() + data_bytes + o * scale_cols, w.scale + o * scale_in + scale_k0 * kDotTileRows,
                  static_cast<size_t>(scale_cols * kDotTileRows));
  } else {
    for (int64_t r = 0; r < scale_rows; ++r)
      std::memcpy(storage.data() + data_bytes + r * scale_cols, w.scale + r * scale_in + scale_k0,
                  static_cast<size_t>(scale_cols));
  }
  LinearWeight s = w;
  s.in = n;
  s.data = storage.data();
  s.scale = scale_rows > 0 ? storage.data() + data_bytes : nullptr;
  return s;
}

}  // namespace dsv4
