// sparse_attn_tile.h compiled for AVX2 (CMakeLists.txt: -mavx2, no contraction); two heads a pass
// (16 ymm registers: more would spill the logits' accumulators).
#include "kernels/sparse_attn/sparse_attn_tile.h"

namespace dsv4::kernels::attn_tile {
Fns fns_avx2() { return fp32_fns<2>(); }
}  // namespace dsv4::kernels::attn_tile
