// indexer_tile.h compiled for AVX-512 (CMakeLists.txt: -mavx512f, no contraction).
#include "kernels/indexer/indexer_tile.h"

namespace dsv4::kernels::indexer_tile {
ScoreTileFn score_tile_avx512() { return score_tile_impl; }
}  // namespace dsv4::kernels::indexer_tile
