// sparse_attn_tile.h compiled for AVX2 (CMakeLists.txt: -mavx2, no contraction).
#include "kernels/sparse_attn/sparse_attn_tile.h"

namespace dsv4::kernels::attn_tile {
Fns fns_avx2() { return Fns{logits_impl, accumulate_pv_impl}; }
}  // namespace dsv4::kernels::attn_tile
