// FP8 tiles for AVX-512 BF16 with VBMI (linear_fp8_avx512.h): VDPBF16PS on the rows of
// Tile::dot_rows, a multiply and an add on the others.
#include "kernels/linear/linear_fp8_avx512.h"

namespace dsv4::kernels::linear_tile {

void avx512_bf16_fp8_tile(const Tile& tl) { split_rows<Step::kDot>(tl); }

}  // namespace dsv4::kernels::linear_tile
