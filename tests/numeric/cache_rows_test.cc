// Packed cache rows (numeric/cache_rows.h): every fp8sim_64 / fp4sim_32 image packs
// to codes + scale bytes that decode to the same bits, for every block, over values
// from tiny to huge, blocks of zeros, block maxima at scale boundaries and NaN blocks;
// row sizes for Flash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "numeric/cache_rows.h"
#include "numeric/quant.h"

namespace dsv4 {
namespace {

// Rows whose blocks span many magnitudes: block b has sigma 2^(b·7 − 30).
std::vector<bf16> varied_row(std::mt19937& rng, int n, int block, int row) {
  std::vector<bf16> v(n);
  for (int b = 0; b < n / block; ++b) {
    const int kind = (row + b) % 9;
    const float sigma = std::ldexp(1.0f, (row * 5 + b * 7) % 70 - 40);
    std::normal_distribution<float> d(0.0f, sigma);
    for (int i = 0; i < block; ++i) {
      float x = d(rng);
      if (kind == 0) x = 0.0f;                                  // all zeros
      if (kind == 1 && i == 3) x = 448.0f * std::ldexp(1.0f, (row % 9) - 4);  // amax on a boundary
      if (kind == 2) x = std::ldexp(1.0f, -30) * static_cast<float>(i % 3);  // below the floors
      v[b * block + i] = bf16::from_float(x);
    }
  }
  return v;
}

TEST(CacheRows, FlashSizes) {
  EXPECT_EQ((KvRowFormat{512, 64}.bytes()), 584);     // 1024 bytes as bf16
  EXPECT_EQ((IndexKeyFormat{128}.bytes()), 68);       // 256 bytes as bf16
  EXPECT_EQ((KvRowFormat{80, 16}.bytes()), 104);      // tiny
  EXPECT_EQ((KvRowFormat{64, 64}.bytes()), 128);      // no FP8 dims: plain bf16
}

TEST(CacheRows, KvImagesRoundTripExactly) {
  std::mt19937 rng(5);
  for (const KvRowFormat f : {KvRowFormat{512, 64}, KvRowFormat{80, 16}, KvRowFormat{192, 64}}) {
    std::vector<uint8_t> row(f.bytes());
    std::vector<float> outf(f.dim);
    for (int r = 0; r < 200; ++r) {
      std::vector<bf16> v = varied_row(rng, f.dim, 64, r);
      fp8sim_row(v.data(), f.nope());
      kv_pack_row(f, v.data(), row.data());
      kv_unpack_row(f, row.data(), outf.data());
      for (int i = 0; i < f.dim; ++i)  // bit for bit: -0 stays -0
        ASSERT_EQ(bf16::from_float(outf[i]).bits, v[i].bits)
            << "format " << f.dim << "/" << f.rope_dim << " row " << r << " dim " << i;
    }
  }
}

TEST(CacheRows, IndexKeyImagesRoundTripExactly) {
  std::mt19937 rng(6);
  for (const IndexKeyFormat f : {IndexKeyFormat{128}, IndexKeyFormat{32}, IndexKeyFormat{64}}) {
    std::vector<uint8_t> row(f.bytes());
    std::vector<float> outf(f.dim);
    for (int r = 0; r < 300; ++r) {
      std::vector<bf16> v = varied_row(rng, f.dim, 32, r);
      fp4sim_row(v.data(), f.dim);
      index_key_pack(f, v.data(), row.data());
      index_key_unpack(f, row.data(), outf.data());
      for (int i = 0; i < f.dim; ++i)
        ASSERT_EQ(bf16::from_float(outf[i]).bits, v[i].bits) << "row " << r << " dim " << i;
    }
  }
}

TEST(CacheRows, NanBlocksStayNan) {
  const KvRowFormat f{192, 64};
  std::vector<bf16> v(192, bf16::from_float(1.0f));
  v[70] = bf16::from_bits(0x7fc0);  // block 1 poisoned
  std::vector<uint8_t> row(f.bytes());
  kv_pack_row(f, v.data(), row.data());
  std::vector<float> out(192);
  kv_unpack_row(f, row.data(), out.data());
  for (int i = 0; i < 192; ++i) EXPECT_EQ(std::isnan(out[i]), i >= 64 && i < 128) << i;
  const IndexKeyFormat g{64};
  std::vector<bf16> k(64, bf16::from_float(0.5f));
  k[40] = bf16::from_bits(0x7fc0);
  std::vector<uint8_t> krow(g.bytes());
  index_key_pack(g, k.data(), krow.data());
  std::vector<float> kout(64);
  index_key_unpack(g, krow.data(), kout.data());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(std::isnan(kout[i]), i >= 32) << i;
}

}  // namespace
}  // namespace dsv4
