// linear ISA variants (linear_tile.h): every variant the CPU runs gives the
// scalar engine's bits (memcmp) for bf16 out, fp32 out and fp32 in, on every
// stored format, at every T in [1, kCapacity], with 1 and 2 threads, for the
// tiny/tiny2 shapes plus partial K blocks, ragged output tiles, strided slices
// and the grouped K tree; on realistic weights (where kAvx512Bf16 takes its
// VDPBF16PS path), on every code / scale byte (NaN and subnormal codes, extreme
// and NaN scales, Inf/NaN/subnormal bf16 and fp32 values) and on inputs where a
// bf16 dot instruction would flush subnormals. Variants the CPU lacks are
// skipped by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/cpu.h"
#include "base/math.h"
#include "support/threads.h"
#include "kernels/linear/linear.h"
#include "numeric/quant.h"
#include "linear_shapes.h"
#include "support/poison.h"
#include "support/quant_weights.h"

namespace dsv4::kernels {
namespace {

using test::kCapacity;

using test::run;

// Restores the detected variant when a test ends.
struct IsaScope {
  explicit IsaScope(Isa isa) { set_linear_isa(isa); }
  ~IsaScope() { set_linear_isa(detect_isa()); }
};

using linear_test::Shape;
using linear_test::random_rows;
const std::vector<Shape> kAllShapes = [] {
  std::vector<Shape> v(std::begin(linear_test::kPresetShapes), std::end(linear_test::kPresetShapes));
  v.insert(v.end(), std::begin(linear_test::kRaggedShapes), std::end(linear_test::kRaggedShapes));
  return v;
}();

// Every byte pattern: FP8 codes and scales, FP4 nibbles and scales, bf16 / fp32
// bit patterns (NaN, Inf, subnormal included), drawn uniformly.
test::OwnedWeight wild_weight(WeightFormat f, int64_t out, int64_t in, uint32_t seed) {
  auto w = test::random_weight(f, out, in, seed);
  std::mt19937 rng(seed + 1);
  for (auto& b : w.data) b = static_cast<uint8_t>(rng());
  for (auto& b : w.scale) b = static_cast<uint8_t>(rng());
  return w;
}

// Rows mixing ordinary values with subnormal, huge, zero and (when specials) Inf / NaN bf16.
std::vector<bf16> wild_rows(int64_t n, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  auto x = test::random_bf16(rng, n, 1.0f);
  for (auto& v : x) {
    const uint32_t r = rng() % 16;
    if (r == 0) v = bf16::from_bits(static_cast<uint16_t>(rng() & 0x807f));  // subnormal or zero
    if (r == 1) v = bf16::from_bits(static_cast<uint16_t>(0x7e00 | (rng() & 0x80ff)));  // ~2^125
    if (r == 2 && specials) v = bf16::from_bits(static_cast<uint16_t>(rng()));
  }
  return x;
}

class LinearIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks isa " << isa_name(GetParam());
  }
};

// y of the scalar engine for all kCapacity rows (rows are T-independent), then
// the variant at every T and thread count: the first T rows, memcmp-equal.
template <class XT, class YT>
void expect_same_bits(Isa isa, const LinearWeight& w, const std::vector<XT>& x, const std::string& what) {
  std::vector<YT> want(kCapacity * w.out);
  {
    IsaScope scalar(Isa::kScalar);
    linear_slice(w, LinearSlice{}, x.data(), kCapacity, want.data(), 0, 1);
  }
  IsaScope scope(isa);
  std::vector<YT> got(kCapacity * w.out);
  for (int nthreads : {1, 2})
    for (int T = 1; T <= kCapacity; ++T) {
      std::memset(static_cast<void*>(got.data()), 0xA5, got.size() * sizeof(YT));
      run(nthreads, [&](int tid, int n) { linear_slice(w, LinearSlice{}, x.data(), T, got.data(), tid, n); });
      if (std::memcmp(got.data(), want.data(), T * w.out * sizeof(YT)) != 0) {
        int64_t i = 0;
        while (std::memcmp(&got[i], &want[i], sizeof(YT)) == 0) ++i;
        uint32_t g = 0, e = 0;
        std::memcpy(&g, &got[i], sizeof(YT));
        std::memcpy(&e, &want[i], sizeof(YT));
        FAIL() << what << " T=" << T << " nthreads=" << nthreads << " row " << i / w.out << " output "
               << i % w.out << ": got 0x" << std::hex << g << " want 0x" << e;
      }
      for (int64_t i = T * w.out; i < kCapacity * w.out; ++i) {
        uint8_t b[sizeof(YT)];
        std::memcpy(b, &got[i], sizeof(YT));
        ASSERT_EQ(b[0], 0xA5) << what << " wrote row " << i / w.out << " at T=" << T;
      }
    }
}

void check_all_paths(Isa isa, const LinearWeight& w, const std::vector<bf16>& x, const std::string& what) {
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i) xf[i] = x[i].to_float() * 0.75f;  // not bf16-exact
  expect_same_bits<bf16, bf16>(isa, w, x, what + " bf16 out");
  expect_same_bits<bf16, float>(isa, w, x, what + " f32 out");
  expect_same_bits<float, float>(isa, w, xf, what + " f32 in");
}

TEST_P(LinearIsa, SameBitsAsScalarEveryShapeAndT) {
  for (const Shape& sh : kAllShapes) {
    const auto ow = test::random_weight(sh.format, sh.out, sh.in, 11);
    const LinearWeight w = ow.view();
    auto x = random_rows(kCapacity * sh.in, 12);
    if (w.quantized() && sh.in % 128 == 0) actq_rows(x.data(), kCapacity, sh.in, x.data(), 0, 1);
    check_all_paths(GetParam(), w, x, sh.name);
    if (HasFatalFailure()) return;
  }
}

// Tiles of up to kMaxRowTile (64) rows, past kCapacity: T in 42..64 with ragged row
// groups, every format the GEMM tiles take, 1 and 2 threads.
TEST_P(LinearIsa, SameBitsAsScalarUpTo64Rows) {
  constexpr int kRows = 64;
  const Shape shapes[] = {{"fp8", WeightFormat::kFP8, 256, 512}, {"fp4", WeightFormat::kFP4, 256, 256},
                          {"bf16", WeightFormat::kBF16, 512, 256}, {"fp8.partial", WeightFormat::kFP8, 37, 200}};
  for (const Shape& sh : shapes) {
    const auto ow = test::random_weight(sh.format, sh.out, sh.in, 71);
    const LinearWeight w = ow.view();
    auto x = random_rows(kRows * sh.in, 72);
    if (w.quantized() && sh.in % 128 == 0) actq_rows(x.data(), kRows, sh.in, x.data(), 0, 1);
    std::vector<bf16> want(kRows * w.out), got(kRows * w.out);
    {
      IsaScope scalar(Isa::kScalar);
      linear(w, x.data(), kRows, want.data(), 0, 1);
    }
    IsaScope scope(GetParam());
    for (int nthreads : {1, 2})
      for (int T : {42, 47, 61, 63, 64}) {
        std::fill(got.begin(), got.end(), bf16::from_bits(0x7FC1));
        run(nthreads, [&](int tid, int n) { linear(w, x.data(), T, got.data(), tid, n); });
        ASSERT_EQ(std::memcmp(got.data(), want.data(), T * w.out * sizeof(bf16)), 0)
            << sh.name << " T=" << T << " nthreads=" << nthreads;
        for (int64_t i = T * w.out; i < kRows * w.out; ++i) ASSERT_EQ(got[i].bits, 0x7FC1) << sh.name << " T=" << T;
      }
  }
}

// linear_slice of the variant at every T <= rows and 1 / 2 threads equals the scalar
// variant's first T rows (y rows of y_stride, gaps included); rows from T on keep the
// sentinel -1.
void expect_slice_same_bits(Isa isa, const LinearWeight& w, const LinearSlice& s, const std::vector<bf16>& x,
                            int64_t rows, int64_t y_stride, const std::string& what) {
  std::vector<float> want(rows * y_stride, -1.0f), got(rows * y_stride);
  {
    IsaScope scalar(Isa::kScalar);
    linear_slice(w, s, x.data(), rows, want.data(), 0, 1);
  }
  IsaScope scope(isa);
  for (int nthreads : {1, 2})
    for (int64_t T = 1; T <= rows; ++T) {
      std::fill(got.begin(), got.end(), -1.0f);
      run(nthreads, [&](int tid, int n) { linear_slice(w, s, x.data(), T, got.data(), tid, n); });
      ASSERT_EQ(std::memcmp(got.data(), want.data(), T * y_stride * sizeof(float)), 0)
          << what << " T=" << T << " nthreads=" << nthreads;
      for (int64_t i = T * y_stride; i < rows * y_stride; ++i) ASSERT_EQ(got[i], -1.0f) << what << " T=" << T;
    }
}

// Long K at few rows: the row-tile path (linear_avx512_gemm.cc gemv_tile) walks K in
// spans of 32 / T blocks per 16 outputs; K of 33 blocks (FP4: 32.5, the last one
// partial) crosses a span boundary at every T < 8, plainly and in the grouped tree.
TEST_P(LinearIsa, SameBitsAsScalarAcrossGemvSpans) {
  const Shape shapes[] = {{"fp8.spans", WeightFormat::kFP8, 40, 33 * 128},
                          {"fp4.spans", WeightFormat::kFP4, 36, 32 * 128 + 64},
                          {"bf16.spans", WeightFormat::kBF16, 20, 33 * 128}};
  constexpr int kRows = 8;
  for (const Shape& sh : shapes) {
    const auto ow = test::random_weight(sh.format, sh.out, sh.in, 81);
    const LinearWeight w = ow.view();
    auto x = random_rows(kRows * sh.in, 82);
    if (w.quantized() && sh.in % 128 == 0) actq_rows(x.data(), kRows, sh.in, x.data(), 0, 1);
    for (int64_t k_group : {int64_t{0}, int64_t{11 * 128}}) {
      LinearSlice s;
      if (k_group > 0) s.k1 = 33 * 128, s.k_group = k_group;
      if (s.k1 > sh.in) continue;
      expect_slice_same_bits(GetParam(), w, s, x, kRows, w.out, std::string(sh.name) + " k_group " + std::to_string(k_group));
      if (HasFatalFailure()) return;
    }
  }
}

// A weight packed into a dot layout (wp) against the same weight as stored (w): on `isa`,
// linear_f32 (bf16 x) and linear_f32_in (fp32 x = 0.75·x) of wp at each T in `ts`, 1 and 2
// threads, equal the scalar variant's on w; rows from T on keep the sentinel -1.
void expect_packed_same_bits(Isa isa, const LinearWeight& w, const LinearWeight& wp, const std::vector<bf16>& x,
                             int rows, const std::vector<int>& ts, const std::string& what) {
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i) xf[i] = x[i].to_float() * 0.75f;
  std::vector<float> want(rows * w.out), want_f(rows * w.out), got(rows * w.out);
  {
    IsaScope scalar(Isa::kScalar);
    linear_f32(w, x.data(), rows, want.data(), 0, 1);
    linear_f32_in(w, xf.data(), rows, want_f.data(), 0, 1);
  }
  IsaScope scope(isa);
  for (int nthreads : {1, 2})
    for (int T : ts) {
      std::fill(got.begin(), got.end(), -1.0f);
      run(nthreads, [&](int tid, int n) { linear_f32(wp, x.data(), T, got.data(), tid, n); });
      ASSERT_EQ(std::memcmp(got.data(), want.data(), T * w.out * sizeof(float)), 0)
          << what << " T=" << T << " nthreads=" << nthreads;
      for (int64_t i = T * w.out; i < rows * w.out; ++i) ASSERT_EQ(got[i], -1.0f) << what << " T=" << T;
      run(nthreads, [&](int tid, int n) { linear_f32_in(wp, xf.data(), T, got.data(), tid, n); });
      ASSERT_EQ(std::memcmp(got.data(), want_f.data(), T * w.out * sizeof(float)), 0)
          << what << " f32 in T=" << T << " nthreads=" << nthreads;
    }
}

// The tile layouts' offsets (numeric/linear_weight.h fp8_dot_offset; fp4_tile_offset,
// fp4_tile_byte and fp4_tile_nibble) place the 2048 codes of a tile at 2048 distinct bytes
// (FP8) or nibbles (FP4) of the tile, and the tiles of a matrix at distinct places.
TEST(LinearTiles, OffsetsArePermutation) {
  std::vector<int> seen(kFp8TileBytes, 0);
  for (int j = 0; j < kDotTileRows; ++j)
    for (int c = 0; c < kDotTileCols; ++c) {
      const int at = fp8_dot_offset(j, c);
      ASSERT_TRUE(at >= 0 && at < kFp8TileBytes) << j << ", " << c;
      ++seen[at];
    }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kFp8TileBytes);
  constexpr int64_t out = 48, in = 384;  // 3 x 3 tiles
  std::vector<int> nibbles(out * in, 0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      const int c = static_cast<int>(i % kDotTileCols);
      const int j = static_cast<int>(o % kDotTileRows);
      const int64_t at = 2 * (fp4_tile_offset(in, o, i / kDotTileCols) + fp4_tile_byte(j, c)) + fp4_tile_nibble(c);
      ASSERT_TRUE(at >= 0 && at < out * in) << o << ", " << i;
      const int64_t sat = fp4_tile_scale_offset(in, o, i);  // the scales: a permutation of the groups too
      ASSERT_EQ(sat / 64, (o / kDotTileRows) * (in / kDotTileCols) + i / kDotTileCols) << o << ", " << i;
      ASSERT_EQ(at / (2 * kFp4TileBytes), (o / kDotTileRows) * (in / kDotTileCols) + i / kDotTileCols) << o << ", " << i;
      ++nibbles[at];
    }
  EXPECT_EQ(std::count(nibbles.begin(), nibbles.end(), 1), out * in);
}

// FP4, FP8 and BF16 in the tile layouts (LinearWeight::fp4_dot, fp8_dot, bf16_tiles, packed at
// load on every variant): every variant, at every T up to 64 (fused rows, the decoded
// tile, spans of K), bf16 and fp32 x, 1 and 2 threads, gives the scalar variant's bits on
// the stored layout; weight_at reads both alike; a slice at a tile (o0 = 16: the fast
// path) and off one (o0 = 8: the scalar variant), a K range and the grouped tree too.
// Realistic weights (the VDPBF16PS path), every code / scale byte (NaN codes, scales
// outside the range check: the multiply-add path) and x with huge / subnormal values
// (rows outside it).
TEST_P(LinearIsa, TileLayoutsSameBitsAsStored) {
  const Shape shapes[] = {{"fp8", WeightFormat::kFP8, 256, 256},
                          {"fp8.grid", WeightFormat::kFP8, 144, 384},  // a partial 128-row scale block
                          {"fp8.spans", WeightFormat::kFP8, 32, 33 * 128},
                          {"fp4", WeightFormat::kFP4, 256, 256},
                          {"fp4.rows", WeightFormat::kFP4, 48, 384},
                          {"fp4.spans", WeightFormat::kFP4, 32, 33 * 128},
                          {"bf16", WeightFormat::kBF16, 256, 256},
                          {"bf16.spans", WeightFormat::kBF16, 32, 33 * 128}};
  constexpr int kRows = 64;
  for (const Shape& sh : shapes)
    for (int kind = 0; kind < 3; ++kind) {  // realistic; wild weights; realistic weights, wild x
      const bool wild_w = kind == 1, wild_x = kind >= 1;
      const auto ow = wild_w ? wild_weight(sh.format, sh.out, sh.in, 93) : test::random_weight(sh.format, sh.out, sh.in, 93);
      const LinearWeight w = ow.view();
      std::vector<uint8_t> packed(static_cast<size_t>(packed_bytes(ow.view())));
      const LinearWeight wp = pack_tiles(w, packed.data());
      const std::string what = sh.name + std::string(kind == 0 ? "" : kind == 1 ? " wild" : " wild x");
      ASSERT_NE(packed, ow.data) << what;  // the layout differs
      for (int64_t o = 0; o < sh.out; ++o)
        for (int64_t i = 0; i < sh.in; ++i) {
          const float a = weight_at(w, o, i), b = weight_at(wp, o, i);
          ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << what << " weight_at " << o << ", " << i;
        }
      auto x = wild_x ? wild_rows(kRows * sh.in, 94, false) : random_rows(kRows * sh.in, 94);
      if (!wild_x) actq_rows(x.data(), kRows, sh.in, x.data(), 0, 1);
      std::vector<int> rows;
      for (int T = 1; T <= kRows; T += T < 10 ? 1 : 7) rows.push_back(T);
      expect_packed_same_bits(GetParam(), w, wp, x, kRows, rows, what);
      if (HasFatalFailure()) return;
      if (kind == 1) continue;  // slices: realistic weights
      for (int64_t o0 : {16, 8}) {
        LinearSlice s;
        s.o0 = o0;
        s.o1 = sh.out;
        s.k0 = 128;
        s.k_group = sh.in == 33 * 128 ? 8 * 128 : 0;
        if (s.k_group > 0) s.k1 = 33 * 128;
        std::vector<float> ws(kRows * (s.o1 - s.o0), -1.0f), gs(ws.size());
        {
          IsaScope scalar(Isa::kScalar);
          linear_slice(w, s, x.data(), kRows, ws.data(), 0, 1);
        }
        IsaScope scope(GetParam());
        for (int T : {1, 3, 4, 5, 17, 64}) {
          std::fill(gs.begin(), gs.end(), -1.0f);
          run(2, [&](int tid, int n) { linear_slice(wp, s, x.data(), T, gs.data(), tid, n); });
          ASSERT_EQ(std::memcmp(gs.data(), ws.data(), T * (s.o1 - s.o0) * sizeof(float)), 0)
              << what << " slice o0=" << o0 << " T=" << T;
        }
      }
    }
}

// actq_rows (AVX-512 from kAvx512 on) gives actq_dequant_row's bits: every bf16 bit
// pattern once (NaN / Inf rows take the scalar row), rows of one magnitude band (scale
// exponents from the amax floor up to 2^120, the subnormal grid, ties), in place or not.
TEST_P(LinearIsa, ActqRowsSameBitsAsScalar) {
  constexpr int64_t in = 1024;
  std::mt19937 rng(7);
  std::vector<bf16> x;
  for (uint32_t i = 0; i < 65536; ++i)  // every finite pattern
    if ((i & 0x7F80) != 0x7F80) x.push_back(bf16::from_bits(static_cast<uint16_t>(i)));
  std::shuffle(x.begin(), x.end(), rng);
  x.resize(x.size() / in * in);
  for (int band = -140; band <= 130; band += 3)  // rows of one exponent band each, some zeros
    for (int64_t i = 0; i < in; ++i) {
      const int e = std::clamp(band + 127 + static_cast<int>(rng() % 24) - 12, 0, 254);
      const uint16_t bits = static_cast<uint16_t>((rng() & 0x8000) | e << 7 | (rng() & 0x7F));
      x.push_back(bf16::from_bits(rng() % 8 == 0 ? static_cast<uint16_t>(bits & 0x8000) : bits));
    }
  for (uint16_t special : {0x7F80, 0xFF80, 0x7FC0, 0xFF81}) {  // rows holding an Inf or a NaN
    const size_t at = x.size() - in + rng() % in;
    x.insert(x.end(), x.end() - in, x.end());
    x[at + in] = bf16::from_bits(special);
  }
  const int64_t T = static_cast<int64_t>(x.size()) / in;
  std::vector<bf16> want(x.size());
  for (int64_t t = 0; t < T; ++t) actq_dequant_row(x.data() + t * in, in, want.data() + t * in);
  IsaScope scope(GetParam());
  for (int nthreads : {1, 2}) {
    std::vector<bf16> got(x.size(), bf16::from_bits(0x7FC1));
    run(nthreads, [&](int tid, int n) { actq_rows(x.data(), T, in, got.data(), tid, n); });
    for (int64_t i = 0; i < T * in; ++i)
      ASSERT_EQ(got[i].bits, want[i].bits) << "row " << i / in << " x 0x" << std::hex << x[i].bits;
    std::vector<bf16> inplace = x;
    run(nthreads, [&](int tid, int n) { actq_rows(inplace.data(), T, in, inplace.data(), tid, n); });
    ASSERT_EQ(std::memcmp(inplace.data(), want.data(), want.size() * sizeof(bf16)), 0) << "in place";
  }
}

// wo_a runs its stored FP8 without actq (model.md §0.4.4): raw bf16 rows, K a multiple of
// 128 or not, at the tiny, tiny2 and a wider group width.
TEST_P(LinearIsa, SameBitsAsScalarFp8WithoutActq) {
  for (auto [out, in] : {std::pair<int64_t, int64_t>{512, 80}, {512, 192}, {1024, 512}}) {
    const auto ow = test::random_weight(WeightFormat::kFP8, out, in, 61);
    check_all_paths(GetParam(), ow.view(), random_rows(kCapacity * in, 62),
                    "fp8 wo_a " + std::to_string(out) + "x" + std::to_string(in));
    if (HasFatalFailure()) return;
  }
}

// Every code and scale byte, Inf / NaN / subnormal inputs (NaN results are
// stored canonical, linear.cc), on one shape per format and the ragged ones.
TEST_P(LinearIsa, SameBitsAsScalarOnEveryCodeAndScale) {
  for (const Shape& sh : kAllShapes) {
    if (sh.out * sh.in > 128 * 128 && sh.format != WeightFormat::kF32) continue;
    for (bool specials : {false, true}) {
      const auto ow = wild_weight(sh.format, sh.out, sh.in, specials ? 31 : 21);
      check_all_paths(GetParam(), ow.view(), wild_rows(kCapacity * sh.in, specials ? 32 : 22, specials),
                      std::string(sh.name) + (specials ? " inf/nan x" : ""));
      if (HasFatalFailure()) return;
    }
  }
}

// Inputs where a bf16 dot-product instruction (subnormals read and written as
// zero) would differ from the multiply-add: subnormal products, a partial sum
// cancelling to a subnormal, subnormal x or weights. The engine result is
// non-zero there (a flush would give zero) and equal to the scalar one.
struct DotEdge {
  const char* name;
  test::OwnedWeight w;
  std::vector<bf16> x;  // [4, in]
};

std::vector<DotEdge> dot_edges() {
  constexpr int64_t out = 32, in = 256, T = 4;
  std::mt19937 rng(91);
  std::vector<DotEdge> cases;
  auto rows_at = [&](int e_lo, int e_hi) {  // random mantissas and signs, exponents in [e_lo, e_hi]
    std::vector<bf16> x(T * in);
    for (auto& v : x) {
      const int e = e_lo + static_cast<int>(rng() % (e_hi - e_lo + 1));
      v = bf16::from_float(std::ldexp((rng() & 1 ? -1.0f : 1.0f) * (1.0f + (rng() % 128) / 128.0f), e));
    }
    return x;
  };
  auto fp8 = [&](uint8_t sb, bool all_one) {
    test::OwnedWeight w;
    w.format = WeightFormat::kFP8, w.out = out, w.in = in;
    w.data.resize(out * in);
    for (auto& b : w.data) b = all_one ? 0x38 : static_cast<uint8_t>(rng() % 0x7F) | (rng() & 0x80);
    w.scale.assign(ceil_div<int64_t>(out, 128) * ceil_div<int64_t>(in, 128), sb);
    return w;
  };
  // FP8: every dequantized product subnormal (|x| < 2^-99, |ŵ| <= 448·2^-47); the unscaled
  // products are normal, the block sums times the scale subnormal.
  cases.push_back({"fp8 subnormal products", fp8(80, false), rows_at(-101, -100)});
  // FP8: (1 + 2^-7)·2^-120 - 2^-120 = 2^-127 (codes 1.0, scale 2^-120; the FP8 order sums
  // P = 2^-7 and scales it once).
  {
    std::vector<bf16> x(T * in, bf16::from_float(0.0f));
    for (int64_t t = 0; t < T; ++t) {
      x[t * in + 0] = bf16::from_float(1.0f + 1.0f / 128);
      x[t * in + 16] = bf16::from_float(-1.0f);
    }
    cases.push_back({"fp8 sum cancels to subnormal", fp8(7, true), x});
  }
  // FP8: rows 0 and 2 all subnormal bf16 inputs.
  {
    auto x = rows_at(-2, 2);
    for (int64_t t : {0, 2})
      for (int64_t k = 0; k < in; ++k) x[t * in + k] = bf16::from_bits(static_cast<uint16_t>(1 + rng() % 0x7F));
    cases.push_back({"fp8 subnormal x", fp8(127, false), x});
  }
  // FP4: every product subnormal (|ŵ| <= 6·2^-70, |x| < 2^-59).
  {
    test::OwnedWeight w;
    w.format = WeightFormat::kFP4, w.out = out, w.in = in;
    w.data.resize(out * in / 2);
    for (auto& b : w.data) b = static_cast<uint8_t>(rng());
    w.scale.assign(out * in / 32, 57);
    cases.push_back({"fp4 subnormal products", w, rows_at(-61, -59)});
  }
  // FP4: rows 0 and 2 all subnormal bf16 inputs against large scales (products normal): the
  // range check must not take bf16_range's "subnormal present" mark for an exponent window.
  {
    test::OwnedWeight w;
    w.format = WeightFormat::kFP4, w.out = out, w.in = in;
    w.data.resize(out * in / 2);
    for (auto& b : w.data) b = static_cast<uint8_t>(rng());
    w.scale.assign(out * in / 32, 140);
    auto x = rows_at(-2, 2);
    for (int64_t t : {0, 2})
      for (int64_t k = 0; k < in; ++k) x[t * in + k] = bf16::from_bits(static_cast<uint16_t>(1 + rng() % 0x7F));
    cases.push_back({"fp4 subnormal x", w, x});
  }
  // BF16: every product subnormal (|w| < 2^-69, |x| < 2^-58); then the even
  // outputs' weights all subnormal, with ordinary x.
  for (bool sub_w : {false, true}) {
    test::OwnedWeight w;
    w.format = WeightFormat::kBF16, w.out = out, w.in = in;
    w.data.resize(out * in * 2);
    auto* p = reinterpret_cast<bf16*>(w.data.data());
    for (int64_t i = 0; i < out * in; ++i)
      p[i] = sub_w && (i / in) % 2 == 0 ? bf16::from_bits(static_cast<uint16_t>(1 + rng() % 0x7F))
                                        : bf16::from_float(std::ldexp(1.0f + (rng() % 128) / 128.0f, sub_w ? -3 : -70));
    cases.push_back({sub_w ? "bf16 subnormal weights" : "bf16 subnormal products", w,
                     sub_w ? rows_at(-2, 2) : rows_at(-60, -59)});
  }
  return cases;
}

TEST_P(LinearIsa, SameBitsAsScalarWhereBf16DotWouldFlush) {
  constexpr int64_t T = 4;
  for (const DotEdge& c : dot_edges()) {
    const LinearWeight w = c.w.view();
    std::vector<float> want(T * w.out);
    {
      IsaScope scalar(Isa::kScalar);
      linear_f32(w, c.x.data(), T, want.data(), 0, 1);
    }
    int64_t nonzero = 0;
    for (float v : want) nonzero += v != 0.0f;
    ASSERT_GT(nonzero, 0) << c.name << ": the case must have results a flush would zero";
    IsaScope scope(GetParam());
    std::vector<float> got(T * w.out);
    for (int nthreads : {1, 2}) {
      run(nthreads, [&](int tid, int n) { linear_f32(w, c.x.data(), T, got.data(), tid, n); });
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << c.name;
    }
  }
}

// Slices: output ranges into strided rows, K ranges, the grouped tree.
TEST_P(LinearIsa, SameBitsAsScalarOnSlices) {
  for (WeightFormat f : {WeightFormat::kFP8, WeightFormat::kFP4, WeightFormat::kBF16, WeightFormat::kF32}) {
    const int64_t out = 256, in = 512, xs = in + 40, ys = 300;
    const auto ow = test::random_weight(f, out, in, 41);
    const LinearWeight w = ow.view();
    auto x = random_rows(kCapacity * xs, 42);
    std::vector<LinearSlice> slices(4);
    slices[0].o0 = 100, slices[0].o1 = 230;
    slices[1].k0 = 128, slices[1].k1 = 384, slices[1].o0 = 3, slices[1].o1 = 250;
    slices[2].k_group = 256;
    slices[3].k_group = 128, slices[3].o0 = 17;
    for (size_t si = 0; si < slices.size(); ++si) {
      LinearSlice s = slices[si];
      s.x_stride = xs;
      s.y_stride = ys;
      expect_slice_same_bits(GetParam(), w, s, x, kCapacity, ys,
                             "format " + std::to_string(static_cast<int>(f)) + " slice " + std::to_string(si));
      if (HasFatalFailure()) return;
    }
  }
}

// The FP8 K order (linear_fp8.h) on every variant, both layouts: one pair chain per 128-column
// block, the odd column first, times the block scale. With x1 = 2^24 and x0 = x2 = 1 the
// chain rounds 2^24 + 1 back to 2^24 twice (ties to even): y = 2^24·2. The 16-lane order of
// BF16 weights sums x0 and x2 in one lane first: 2^24 + 2.
TEST_P(LinearIsa, Fp8PairChainOrder) {
  constexpr int64_t out = 16, in = 128, T = 3;
  std::vector<uint8_t> codes(out * in, 0x38), scales = {128};  // e4m3 1.0, scale 2
  const LinearWeight w{WeightFormat::kFP8, out, in, codes.data(), scales.data()};
  std::vector<uint8_t> packed(static_cast<size_t>(packed_bytes(w)));
  const LinearWeight wp = pack_tiles(w, packed.data());
  std::vector<bf16> x(T * in, bf16::from_float(0.0f));
  std::vector<float> xf(in, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    x[t * in + 1] = bf16::from_float(0x1p24f);
    x[t * in + 0] = x[t * in + 2] = bf16::from_float(1.0f);
  }
  xf[1] = 0x1p24f, xf[0] = xf[2] = 1.0f;
  EXPECT_EQ(linear_dot_ref(w, 0, xf.data()), 0x1p25f);
  IsaScope scope(GetParam());
  for (const LinearWeight& v : {w, wp}) {
    std::vector<float> y(T * out, 0.0f);
    linear_slice(v, LinearSlice{}, x.data(), T, y.data(), 0, 1);
    for (int64_t i = 0; i < T * out; ++i) ASSERT_EQ(y[i], 0x1p25f) << "fp8_dot " << v.fp8_dot << " at " << i;
  }
  std::vector<bf16> ones(out * in, bf16::from_float(1.0f));
  const LinearWeight wb{WeightFormat::kBF16, out, in, ones.data(), nullptr};
  std::vector<float> y(T * out, 0.0f);
  linear_slice(wb, LinearSlice{}, x.data(), T, y.data(), 0, 1);
  for (int64_t i = 0; i < T * out; ++i) ASSERT_EQ(y[i], 0x1p24f + 2.0f) << "bf16 at " << i;
}

INSTANTIATE_TEST_SUITE_P(, LinearIsa, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

TEST(LinearIsaSelect, SetAndQuery) {
  EXPECT_EQ(linear_isa(), detect_isa());
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_linear_isa(isa);
    EXPECT_EQ(linear_isa(), isa);
  }
  set_linear_isa(detect_isa());
}

}  // namespace
}  // namespace dsv4::kernels
