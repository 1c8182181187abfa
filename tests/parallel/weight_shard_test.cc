// A rank's shards of a linear weight (parallel/weight_shard.h) hold the full weight's codes and
// scales at their rows / columns, in the stored layout and in the kernels' tile layouts
// (LinearWeight::fp4_dot, fp8_dot, bf16_tiles), and a row shard that would split a block or tile is an error.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "numeric/linear_weight.h"
#include "parallel/weight_shard.h"
#include "support/quant_weights.h"

namespace dsv4 {
namespace {

// The stored element's bits (BF16: the value's 16 bits).
uint16_t code(const LinearWeight& w, int64_t o, int64_t i) {
  if (w.format == WeightFormat::kBF16) return static_cast<const uint16_t*>(w.data)[bf16_offset(w, o, i)];
  return w.format == WeightFormat::kFP4 ? fp4_code(w, o, i) : fp8_code(w, o, i);
}
uint8_t scale_byte(const LinearWeight& w, int64_t o, int64_t i) {
  if (w.format == WeightFormat::kBF16) return 0;
  if (w.format == WeightFormat::kFP4) return fp4_scale(w, o, i);
  return w.scale[(o / 128) * ((w.in + 127) / 128) + i / 128];
}

// Shard s equals w shifted by (o_at, i_at), element by element.
void expect_same(const LinearWeight& s, const LinearWeight& w, int64_t o_at, int64_t i_at, const char* what) {
  for (int64_t o = 0; o < s.out; ++o)
    for (int64_t i = 0; i < s.in; ++i) {
      ASSERT_EQ(code(s, o, i), code(w, o + o_at, i + i_at)) << what << " code " << o << ", " << i;
      ASSERT_EQ(scale_byte(s, o, i), scale_byte(w, o + o_at, i + i_at)) << what << " scale " << o << ", " << i;
    }
}

TEST(WeightShard, ShardsHoldTheFullWeightsCodesInEveryLayout) {
  for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kFP4, WeightFormat::kBF16})
    for (bool tiles : {false, true}) {
      const test::OwnedWeight ow = test::random_weight(f, 256, 384, 5);
      std::vector<uint8_t> packed(static_cast<size_t>(packed_bytes(ow.view())));
      const LinearWeight w = tiles ? pack_tiles(ow.view(), packed.data()) : ow.view();
      const char* what = tiles ? "tiles" : "stored";
      Result<LinearWeight> rows = row_shard(w, 128, 256);
      ASSERT_TRUE(rows.ok()) << rows.message();
      expect_same(*rows, w, 128, 0, what);
      std::vector<uint8_t> storage;
      Result<LinearWeight> cols = column_shard_copy(w, 128, 384, storage);
      ASSERT_TRUE(cols.ok()) << cols.message();
      EXPECT_EQ(cols->fp4_dot, w.fp4_dot);
      EXPECT_EQ(cols->fp8_dot, w.fp8_dot);
      EXPECT_EQ(cols->bf16_tiles, w.bf16_tiles);
      expect_same(*cols, w, 0, 128, what);
      // Off a 128-row FP8 scale block, or inside a 16-row FP4 / BF16 tile: refused.
      const bool splits = f == WeightFormat::kFP8 || tiles;
      EXPECT_EQ(row_shard(w, 8, 256).ok(), !splits) << what;
    }
}

}  // namespace
}  // namespace dsv4
