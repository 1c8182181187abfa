// sparse_attn_tile.h compiled for AVX-512 (CMakeLists.txt: -mavx512f, no contraction).
#include "kernels/sparse_attn/sparse_attn_tile.h"

namespace dsv4::kernels::attn_tile {
Fns fns_avx512() { return Fns{logits_impl, accumulate_pv_impl}; }
}  // namespace dsv4::kernels::attn_tile
