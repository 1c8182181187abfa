// The emulated linear engine (dsv4_linear_emulated: the linear kernel built again against
// kernels/linear/isa_emulation.h, tests/CMakeLists.txt) against the native engine and the
// hardware, on the variants this CPU runs (test_kernel_linear_emulated runs every variant on
// any host; this checks that its emulation is the hardware's):
//   - linear_slice of both engines, same variant: the same bits on FP4 (tile layout), FP8
//     (stored and tile layout), BF16 and F32 weights at every T in [1, 64], bf16 x (fp32 and
//     bf16 out) and fp32 x, on realistic inputs and on inputs outside the dot's range check;
//     actq_rows likewise;
//   - the emulated VDPBF16PS against the instruction (AVX512_BF16) on random lanes (every
//     class of value: zero, subnormal, normal, huge, Inf, NaN) and on lanes whose sums fall
//     at the flush boundary 2^-126.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cpu.h"
#include "kernels/linear/emulated/linear_emulated.h"
#include "kernels/linear/linear.h"
#include "numeric/linear_weight.h"
#include "support/quant_weights.h"

namespace dsv4::kernels::emulated_test {
namespace {

constexpr int kRows = 64;  // T runs over [1, kRows]

dsv4_emu_bridge::Weight bridge(const LinearWeight& w) {
  return {static_cast<int>(w.format), w.out, w.in, w.data, w.scale, w.fp4_dot, w.fp8_dot, w.bf16_tiles};
}
dsv4_emu_bridge::Slice bridge(const LinearSlice& s) { return {s.o0, s.o1, s.k0, s.k1, s.x_stride, s.y_stride, s.k_group}; }
const uint16_t* bits(const bf16* p) { return reinterpret_cast<const uint16_t*>(p); }
uint16_t* bits(bf16* p) { return reinterpret_cast<uint16_t*>(p); }

// The native engine on `isa` for one call; the detected variant restored after it.
struct NativeIsa {
  explicit NativeIsa(Isa isa) { set_linear_isa(isa); }
  ~NativeIsa() { set_linear_isa(detect_isa()); }
};

// Rows with subnormal, huge, zero and (specials) Inf / NaN bf16 among N(0, 1) values: outside
// the range check of the dot paths, so every variant's other path runs too.
std::vector<bf16> rows_outside_window(int64_t n, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  auto x = test::random_bf16(rng, n, 1.0f);
  for (auto& v : x) {
    const uint32_t r = rng() % 16;
    if (r == 0) v = bf16::from_bits(static_cast<uint16_t>(rng() & 0x807f));
    if (r == 1) v = bf16::from_bits(static_cast<uint16_t>(0x7e00 | (rng() & 0x80ff)));
    if (r == 2 && specials) v = bf16::from_bits(static_cast<uint16_t>(rng()));
  }
  return x;
}

// y of both engines on `isa` at every T in [1, kRows], compared bit for bit (row stride
// s.y_stride, or the slice's width).
template <class XT, class YT>
void expect_same_bits(Isa isa, const LinearWeight& w, const LinearSlice& s, const std::vector<XT>& x,
                      const std::string& what) {
  const int64_t width = (s.o1 < 0 ? w.out : s.o1) - s.o0;
  const int64_t ys = s.y_stride < 0 ? width : s.y_stride;
  std::vector<YT> native(kRows * ys), emulated(kRows * ys);
  const dsv4_emu_bridge::Weight bw = bridge(w);
  const dsv4_emu_bridge::Slice bs = bridge(s);
  for (int T = 1; T <= kRows; ++T) {
    std::memset(static_cast<void*>(native.data()), 0, native.size() * sizeof(YT));
    std::memset(static_cast<void*>(emulated.data()), 0, emulated.size() * sizeof(YT));
    {
      NativeIsa scope(isa);
      linear_slice(w, s, x.data(), T, native.data(), 0, 1);
    }
    if constexpr (std::is_same_v<XT, bf16> && std::is_same_v<YT, bf16>)
      dsv4_emu_bridge::linear_slice(static_cast<int>(isa), bw, bs, bits(x.data()), T, bits(emulated.data()));
    else if constexpr (std::is_same_v<XT, bf16>)
      dsv4_emu_bridge::linear_slice(static_cast<int>(isa), bw, bs, bits(x.data()), T, emulated.data());
    else
      dsv4_emu_bridge::linear_slice(static_cast<int>(isa), bw, bs, x.data(), T, emulated.data());
    for (int64_t i = 0; i < T * ys; ++i) {
      uint32_t n = 0, e = 0;
      std::memcpy(&n, &native[i], sizeof(YT));
      std::memcpy(&e, &emulated[i], sizeof(YT));
      ASSERT_EQ(n, e) << what << " T=" << T << " row " << i / ys << " output " << i % ys << std::hex
                      << ": native 0x" << n << " emulated 0x" << e;
    }
  }
}

class LinearEmulated : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks isa " << isa_name(GetParam());
  }
};

struct EmuShape {
  const char* name;
  WeightFormat format;
  int64_t out, in;
  bool packed;  // the tile layout (pack_tiles)
};

TEST_P(LinearEmulated, SameBitsAsNativeEveryT) {
  const EmuShape shapes[] = {{"fp4 tiles", WeightFormat::kFP4, 128, 512, true},
                             {"fp8", WeightFormat::kFP8, 144, 384, false},
                             {"fp8 tiles", WeightFormat::kFP8, 144, 384, true},
                             {"fp8.partial", WeightFormat::kFP8, 37, 200, false},
                             {"bf16", WeightFormat::kBF16, 160, 384, false},
                             {"bf16 tiles", WeightFormat::kBF16, 160, 384, true},
                             {"bf16.partial", WeightFormat::kBF16, 45, 89, false},
                             {"f32", WeightFormat::kF32, 40, 300, false}};
  const Isa isa = GetParam();
  for (const EmuShape& sh : shapes) {
    const auto ow = test::random_weight(sh.format, sh.out, sh.in, 51);
    std::vector<uint8_t> packed(sh.packed ? static_cast<size_t>(packed_bytes(ow.view())) : 0);
    const LinearWeight w = sh.packed ? pack_tiles(ow.view(), packed.data()) : ow.view();
    for (bool outside : {false, true}) {
      std::mt19937 rng(52);
      auto x = outside ? rows_outside_window(kRows * sh.in, 53, sh.format != WeightFormat::kFP4)
                       : test::random_bf16(rng, kRows * sh.in, 1.0f);
      if (!outside && w.quantized() && sh.in % 128 == 0) actq_rows(x.data(), kRows, sh.in, x.data(), 0, 1);
      const std::string what = std::string(sh.name) + (outside ? " outside the window" : "");
      expect_same_bits<bf16, float>(isa, w, LinearSlice{}, x, what + " f32 out");
      if (HasFatalFailure()) return;
      if (outside) continue;
      expect_same_bits<bf16, bf16>(isa, w, LinearSlice{}, x, what + " bf16 out");
      if (HasFatalFailure()) return;
      std::vector<float> xf(x.size());
      for (size_t i = 0; i < x.size(); ++i) xf[i] = x[i].to_float() * 0.75f;
      expect_same_bits<float, float>(isa, w, LinearSlice{}, xf, what + " f32 in");
      if (HasFatalFailure()) return;
    }
  }
}

// A slice at a tile (o0 = 16) with a K range and the grouped tree, into strided rows.
TEST_P(LinearEmulated, SameBitsAsNativeOnSlices) {
  const std::pair<WeightFormat, bool> kinds[] = {  // format, in the tile layout
      {WeightFormat::kFP4, true}, {WeightFormat::kFP8, true},
      {WeightFormat::kBF16, false}, {WeightFormat::kBF16, true}};
  for (const auto& [f, tiles] : kinds) {
    const auto ow = test::random_weight(f, 96, 768, 61);
    std::vector<uint8_t> packed(tiles ? static_cast<size_t>(packed_bytes(ow.view())) : 0);
    const LinearWeight w = tiles ? pack_tiles(ow.view(), packed.data()) : ow.view();
    std::mt19937 rng(62);
    auto x = test::random_bf16(rng, kRows * 800, 1.0f);
    LinearSlice s;
    s.o0 = 16, s.o1 = 96, s.k0 = 128, s.k1 = 640, s.k_group = 256, s.x_stride = 800, s.y_stride = 90;
    expect_same_bits<bf16, float>(GetParam(), w, s, x,
                                  "format " + std::to_string(static_cast<int>(f)) + (tiles ? " tiles" : "") + " slice");
    if (HasFatalFailure()) return;
  }
}

TEST_P(LinearEmulated, ActqRowsSameBitsAsNative) {
  constexpr int64_t in = 512;
  for (bool specials : {false, true}) {
    const auto x = rows_outside_window(kRows * in, 71, specials);
    std::vector<bf16> native(x.size()), emulated(x.size());
    {
      NativeIsa scope(GetParam());
      actq_rows(x.data(), kRows, in, native.data(), 0, 1);
    }
    dsv4_emu_bridge::actq_rows(static_cast<int>(GetParam()), bits(x.data()), kRows, in, bits(emulated.data()));
    ASSERT_EQ(std::memcmp(native.data(), emulated.data(), x.size() * sizeof(bf16)), 0) << "specials " << specials;
  }
}

INSTANTIATE_TEST_SUITE_P(, LinearEmulated, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

// --- VDPBF16PS: the emulation's model against the instruction ---

// One VDPBF16PS of 16 lanes: acc[16] fp32, a[32] and b[32] bf16 bits. Only on a CPU with
// AVX512_BF16 (the target attribute compiles this function alone for it).
__attribute__((target("avx512f,avx512bf16"))) void hardware_dpbf16(const float* acc, const uint16_t* a,
                                                                      const uint16_t* b, float* out) {
  _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a),
                                         (__m512bh)_mm512_loadu_si512(b)));
}

// Lanes of one instruction: acc[i], and the pairs (a[2i+1], b[2i+1]) added first, (a[2i], b[2i]).
struct DotLanes {
  std::vector<float> acc;
  std::vector<uint16_t> a, b;
  void add(uint32_t acc_bits, uint16_t a_odd, uint16_t b_odd, uint16_t a_even, uint16_t b_even) {
    float f;
    std::memcpy(&f, &acc_bits, 4);
    acc.push_back(f);
    a.insert(a.end(), {a_even, a_odd});
    b.insert(b.end(), {b_even, b_odd});
  }
};

// A bf16 of every class: zero, subnormal, Inf / NaN, tiny and huge normals, products near the
// subnormal range (exponents about -63), ordinary values.
uint16_t random_bf16_bits(std::mt19937& rng) {
  const uint16_t sign = static_cast<uint16_t>((rng() & 1) << 15), man = static_cast<uint16_t>(rng() & 0x7F);
  auto normal = [&](uint32_t lo, uint32_t n) { return static_cast<uint16_t>(sign | (lo + rng() % n) << 7 | man); };
  switch (rng() % 16) {
    case 0: return static_cast<uint16_t>(sign | man);  // subnormal or zero
    case 1: return sign;
    case 2: return static_cast<uint16_t>(sign | 0x7F80 | (rng() % 3 == 0 ? man : 0));  // Inf or NaN
    case 3: return normal(1, 16);
    case 4: return normal(240, 15);
    case 5: return static_cast<uint16_t>(rng());
    case 6: case 7: case 8: case 9: return normal(54, 20);
    default: return normal(110, 35);
  }
}
uint32_t random_f32_bits(std::mt19937& rng) {
  const uint32_t sign = (rng() & 1) << 31, man = rng() & 0x7FFFFF;
  switch (rng() % 12) {
    case 0: return sign | man;  // subnormal or zero
    case 1: return sign;
    case 2: return sign | 0x7F800000 | (rng() % 3 == 0 ? man : 0);
    case 3: return sign | (1 + rng() % 8) << 23 | man;
    case 4: return sign | (240 + rng() % 15) << 23 | man;
    case 5: return static_cast<uint32_t>(rng());
    default: return sign | (1 + rng() % 254) << 23 | man;
  }
}

TEST(EmulatedDpbf16, MatchesTheInstruction) {
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "CPU lacks AVX512_BF16";
  DotLanes l;
  std::mt19937 rng(81);
  for (int i = 0; i < 320000; ++i)
    l.add(random_f32_bits(rng), random_bf16_bits(rng), random_bf16_bits(rng), random_bf16_bits(rng),
          random_bf16_bits(rng));
  // At the flush boundary: acc = ±2^-126·(1 + k·2^-23) plus a product of the other sign just
  // below or above 2^-150 (the sum rounds to 2^-126 or below it: kept or flushed), then a
  // zero of either sign (the flushed zero's sign).
  for (uint32_t sign : {0u, 1u})
    for (uint32_t k = 0; k < 3; ++k)
      for (int e = -160; e <= -140; ++e)
        for (uint32_t m = 0; m < 128; m += 3)
          for (uint32_t m2 : {0u, 1u, 64u, 127u}) {
            const uint16_t a = static_cast<uint16_t>(sign << 15 | (e + 187) << 7 | m);  // 2^(e+60)·(1 + m/128)
            const uint16_t b = static_cast<uint16_t>(0x8000 | 67 << 7 | m2);             // -2^-60·(1 + m2/128)
            l.add(sign << 31 | 0x00800000 | k, a, b, static_cast<uint16_t>(m % 2 << 15), 0x3F80);
          }
  // Products alone around 2^-126 (exponents about -63 each), on zero or the smallest normal.
  for (int e = -66; e <= -60; ++e)
    for (uint32_t m = 0; m < 128; ++m)
      for (uint32_t acc : {0x00000000u, 0x80000000u, 0x00000001u, 0x00800000u, 0x80800000u}) {
        const uint16_t a = static_cast<uint16_t>((e + 127) << 7 | m);
        const uint16_t b = static_cast<uint16_t>((m & 1) << 15 | 64 << 7 | ((m * 5) & 0x7F));  // ±2^-63·(...)
        l.add(acc, a, b, static_cast<uint16_t>((m & 2) << 14), 0x3F80);
      }
  // The smallest normals plus a zero product of a huge factor (nothing to flush).
  for (uint32_t acc : {0x00800000u, 0x80800000u, 0x00800001u})
    for (uint16_t huge : {0x7F7F, 0x6F80, 0x4F80, 0xCF80})
      for (uint16_t zero : {0x0000, 0x8000, 0x0001}) {
        l.add(acc, huge, zero, 0, 0);
        l.add(acc, zero, huge, huge, zero);
      }
  while (l.acc.size() % 16 != 0) l.add(0, 0, 0, 0, 0);
  const size_t n = l.acc.size();
  std::vector<float> hw(n), emu(n);
  for (size_t i = 0; i < n; i += 16) {
    hardware_dpbf16(&l.acc[i], &l.a[2 * i], &l.b[2 * i], &hw[i]);
    dsv4_emu_bridge::dpbf16_ps(&l.acc[i], &l.a[2 * i], &l.b[2 * i], &emu[i]);
  }
  int64_t mismatches = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t h = 0, e = 0, acc = 0;
    std::memcpy(&h, &hw[i], 4);
    std::memcpy(&e, &emu[i], 4);
    std::memcpy(&acc, &l.acc[i], 4);
    if (h == e) continue;
    if (++mismatches <= 10)
      ADD_FAILURE() << std::hex << "lane " << std::dec << i << std::hex << ": acc 0x" << acc << " odd 0x"
                    << l.a[2 * i + 1] << "·0x" << l.b[2 * i + 1] << " even 0x" << l.a[2 * i] << "·0x" << l.b[2 * i]
                    << ": instruction 0x" << h << " emulation 0x" << e;
  }
  EXPECT_EQ(mismatches, 0) << "of " << n << " lanes";
}

}  // namespace
}  // namespace dsv4::kernels::emulated_test
