// indexer_tile.h compiled for AVX2 (CMakeLists.txt: -mavx2, no contraction).
#include "kernels/indexer/indexer_tile.h"

namespace dsv4::kernels::indexer_tile {
ScoreTileFn score_tile_avx2() { return score_tile_impl; }
}  // namespace dsv4::kernels::indexer_tile
