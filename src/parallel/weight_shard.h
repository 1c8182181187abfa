// Shards of a stored linear weight for one rank (runtime.md §6.2): a row shard is a view
// into the checkpoint (mapped in place), a column shard is copied once into owned storage
// (the rows of a column range are not contiguous). Both keep the stored format, so the
// rank's kernels dequantize exactly the values the full weight holds.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "numeric/linear_weight.h"

namespace dsv4 {

// Rows [o0, o1) of w. FP8 needs o0 on a 128-row scale block boundary, an FP4 or BF16 weight in
// tiles (LinearWeight::fp4_dot, bf16_tiles) o0 on a 16-row tile.
Result<LinearWeight> row_shard(const LinearWeight& w, int64_t o0, int64_t o1);

// Columns [k0, k1) of w copied into `storage` (resized; the view points into it). k0 and k1
// must be multiples of 128 (whole FP8 scale blocks, whole FP4 scale groups), or k1 == w.in.
// The copy keeps w's layout (a weight in 16 x 128 tiles copies whole tiles).
Result<LinearWeight> column_shard_copy(const LinearWeight& w, int64_t k0, int64_t k1,
                                       std::vector<uint8_t>& storage);

}  // namespace dsv4
