// sparse_attn_tile.h compiled for AVX-512 (CMakeLists.txt: -mavx512f, no contraction); four heads
// a pass (16 of the 32 zmm registers hold the logits' accumulators).
#include "kernels/sparse_attn/sparse_attn_tile.h"

namespace dsv4::kernels::attn_tile {
Fns fns_avx512() { return fp32_fns<kMaxHeads>(); }
}  // namespace dsv4::kernels::attn_tile
