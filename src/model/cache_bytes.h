// Cache memory per token of context, per cache family (runtime.md §2.2-§2.5): the packed
// storage the engine uses (numeric/cache_rows.h) against plain bf16 rows. Compressed
// families grow with the context; the window KV and the compressor states are rings of a
// fixed number of positions per sequence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace dsv4 {

struct CacheFamilyBytes {
  std::string family;      // "window KV", "CSA KV", "HCA KV", "indexer keys", "compressor states"
  int layers = 0;          // layers holding it (incl. MTP)
  int64_t row_bytes = 0;   // one row, packed (compressor states: one position of all instances)
  int64_t row_bytes_bf16 = 0;
  int ratio = 1;           // positions per row (compressed entries: the compress ratio)
  bool per_token = true;   // grows with the context (false: a per-sequence ring)
  // Bytes per token of context over all its layers (per_token families).
  double packed_per_token() const { return static_cast<double>(row_bytes) * layers / ratio; }
  double bf16_per_token() const { return static_cast<double>(row_bytes_bf16) * layers / ratio; }
};

std::vector<CacheFamilyBytes> cache_bytes_per_token(const ModelConfig& cfg);

// Table lines: family, layers, bytes per row packed / bf16, per token of context packed /
// bf16 / ratio, and the totals; ring families give bytes per ring row instead.
std::string cache_bytes_table(const ModelConfig& cfg);

}  // namespace dsv4
