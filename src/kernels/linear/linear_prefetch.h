// Software prefetch of the linear tiles' weights: whole lines of a span (prefetch_lines, the BF16
// and F32 decoders), and the FP4 and FP8 tiles' streams (linear_fp4.h, linear_fp8.h), each line
// into L1 a near distance ahead and into L2 a far distance ahead. The L2 prefetch keeps enough
// lines in flight from DRAM at 1-2 rows, where the L1's misses alone did not (docs/benchmarks.md,
// Zen 4). Only intrinsics and linear_tile.h here (see linear_tile.h).
#pragma once

#include <cstdint>

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear_tile.h"

// A function whose body is only prefetches must be inlined into its caller: GCC's IPA takes such
// a function for `const` (it tracks no side effect of a prefetch) and deletes every call of it
// that it did not inline (it did so to d66b0e3's BF16 L2 prefetch: no prefetcht1 was emitted).
#define DSV4_PREFETCH_FN [[gnu::always_inline]] inline

namespace dsv4::kernels::linear_tile {
namespace {

enum class Cache { kL1, kL2 };

// Every line of [p, p + bytes) into L1 or L2.
template <Cache kTo = Cache::kL1>
DSV4_PREFETCH_FN void prefetch_lines(const void* p, int bytes) {
  for (int i = 0; i < bytes; i += 64) {
    const char* line = static_cast<const char*>(p) + i;
    if constexpr (kTo == Cache::kL2) _mm_prefetch(line, _MM_HINT_T1);
    else _mm_prefetch(line, _MM_HINT_T0);
  }
}

struct Ahead {
  int64_t near, far;  // bytes ahead of the current block
};

// Bytes `n` blocks of `block_bytes` ahead of block b of a tile's n_blk; near the end, into the
// first blocks of the next register block's tile (`next` bytes on from this tile's start: tiles
// are contiguous), so a tile's stream runs on into the next one's. Prefetch never faults: past
// the matrix or the thread's slice it only reads ahead. Branch-free, so the hot loop stays one
// straight run (scripts/isa_budget.py).
inline int64_t bytes_ahead(int64_t n, int64_t b, int64_t n_blk, int64_t block_bytes, int64_t next) {
  return n * block_bytes + (b + n < n_blk ? 0 : next - n_blk * block_bytes);
}
inline Ahead stream_ahead(int near_blocks, int far_blocks, int64_t b, int64_t n_blk, int64_t block_bytes,
                          int64_t next) {
  return Ahead{bytes_ahead(near_blocks, b, n_blk, block_bytes, next),
               bytes_ahead(far_blocks, b, n_blk, block_bytes, next)};
}

// The line at p + a.near into L1, the one at p + a.far into L2 (`scale`: a stream of 1/scale
// the bytes per block, as the FP4 scales beside their codes).
DSV4_PREFETCH_FN void prefetch_ahead(const uint8_t* p, const Ahead& a, int64_t scale = 1) {
  _mm_prefetch(reinterpret_cast<const char*>(p + a.near / scale), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(p + a.far / scale), _MM_HINT_T1);
}
// Only the L1 line: for the instruction-bound paths the extra prefetch slows (docs/benchmarks.md).
DSV4_PREFETCH_FN void prefetch_near(const uint8_t* p, const Ahead& a) {
  _mm_prefetch(reinterpret_cast<const char*>(p + a.near), _MM_HINT_T0);
}

}  // namespace
}  // namespace dsv4::kernels::linear_tile
