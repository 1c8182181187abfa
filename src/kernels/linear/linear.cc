// Engine linear (see linear.h for the fixed K order): output columns split over
// threads, tiles of outputs x rows computed by the selected ISA variant
// (linear_tile.h). The scalar variant here is the portable engine: weights
// dequantized one 128-wide K block at a time into a stack buffer, reused across
// the tile's rows. FP4 and FP8 weights take their own tiles (run_quant: the variant's
// Kernels::fp4 / fp8 of linear_fp4.h / linear_fp8.h, or tile_quant_scalar
// here).
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#if defined(__SSE4_1__)
#include <smmintrin.h>
#endif

#include "base/check.h"
#include "base/math.h"
#include "kernels/linear/linear.h"
#include "kernels/linear/linear_fp4.h"
#include "kernels/linear/linear_fp8.h"
#include "kernels/linear/linear_tile.h"
#include "numeric/e4m3.h"
#include "numeric/quant.h"

namespace dsv4::kernels {
namespace {

using linear_tile::kBlock;
using linear_tile::kLanes;
using linear_tile::kRowTile;
using linear_tile::BlockChain;
using linear_tile::block_chain;
using linear_tile::chain_beta;
constexpr int kOutTile = 8;  // outputs sharing one converted input block (scalar tile)

// A NaN result is stored as the positive quiet NaN: which NaN operand an add
// propagates (sign, payload) depends on instruction operand order, which C++
// leaves to the compiler; canonical NaNs keep every variant and thread count
// bit-identical.
inline float canonical(float v) { return v != v ? std::numeric_limits<float>::quiet_NaN() : v; }
inline void store(bf16* y, float v) { *y = bf16::from_float(canonical(v)); }
inline void store(float* y, float v) { *y = canonical(v); }

// e2m1 nibble -> value (sign included), the values of e2m1_decode.
constexpr float kE2M1Signed[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// ue8m0 byte -> 2^(b−127) without a libm call (ue8m0_decode's values: 255 is NaN,
// 0 is the fp32 subnormal 2^−127).
inline float scale_value(uint8_t b) {
  if (b == 255) return std::numeric_limits<float>::quiet_NaN();
  if (b == 0) return 0x1p-127f;
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 23);
}

// Weight row o, columns [k, k + n) (k a multiple of 128, n <= 128) as fp32.
void decode_block(const LinearWeight& w, int64_t o, int64_t k, int n, float* wb) {
  switch (w.format) {
    case WeightFormat::kBF16: {
      const bf16* p = static_cast<const bf16*>(w.data) + bf16_offset(w, o, k);
      for (int j = 0; j < n; ++j) wb[j] = p[j].to_float();
      return;
    }
    case WeightFormat::kF32:
      std::memcpy(wb, static_cast<const float*>(w.data) + o * w.in + k, sizeof(float) * n);
      return;
    case WeightFormat::kFP8:
    case WeightFormat::kFP4: break;  // never here: run_quant (linear_fp4.h, linear_fp8.h)
  }
}

// beta of one K block on fp32 operands: 16 fixed lanes, folded by a fixed tree.
inline float block_dot(const float* x, const float* wb, int n) {
  float lane[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += x[j + l] * wb[j + l];
  for (int l = 0; j + l < n; ++l) lane[l] += x[j + l] * wb[j + l];
  for (int h = kLanes / 2; h > 0; h /= 2)
    for (int l = 0; l < h; ++l) lane[l] += lane[l + h];
  return lane[0];
}

// Two outputs of one full 128-wide block sharing the input loads; the same
// lanes and fold as block_dot (lane l = element l % 4 of accumulator l / 4).
typedef float v4f __attribute__((vector_size(16)));
inline v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline float fold(v4f a0, v4f a1, v4f a2, v4f a3) {
  a0 += a2;  // l += l+8
  a1 += a3;
  a0 += a1;  // l += l+4
  const float l0 = a0[0] + a0[2], l1 = a0[1] + a0[3];  // l += l+2
  return l0 + l1;                                       // l += l+1
}
inline void block_dot_x2(const float* x, const float* w0, const float* w1, float* r0, float* r1) {
  v4f a0{}, a1{}, a2{}, a3{}, b0{}, b1{}, b2{}, b3{};
  for (int j = 0; j < kBlock; j += kLanes) {
    const v4f x0 = load4(x + j), x1 = load4(x + j + 4), x2 = load4(x + j + 8), x3 = load4(x + j + 12);
    a0 += x0 * load4(w0 + j);
    a1 += x1 * load4(w0 + j + 4);
    a2 += x2 * load4(w0 + j + 8);
    a3 += x3 * load4(w0 + j + 12);
    b0 += x0 * load4(w1 + j);
    b1 += x1 * load4(w1 + j + 4);
    b2 += x2 * load4(w1 + j + 8);
    b3 += x3 * load4(w1 + j + 12);
  }
  *r0 = fold(a0, a1, a2, a3);
  *r1 = fold(b0, b1, b2, b3);
}

inline void load_block(const bf16* x, int n, float* xb) {
  for (int j = 0; j < n; ++j) xb[j] = x[j].to_float();
}
inline void load_block(const float* x, int n, float* xb) { std::memcpy(xb, x, sizeof(float) * n); }

// Scalar tile: kRowTile rows x kOutTile outputs share the decoded weight and input blocks.
template <class XT>
void tile_scalar(const linear_tile::Tile& tl) {
  const LinearWeight& w = *tl.w;
  const XT* x = static_cast<const XT*>(tl.x);
  const int nt = tl.nt, no = tl.no;
  const int64_t n_blk = ceil_div<int64_t>(tl.k1 - tl.k0, kBlock);
  const int64_t g_blk = tl.g_blk;
  alignas(64) float wb[kOutTile][kBlock];
  alignas(64) float xb[kRowTile][kBlock];
  float part[kRowTile][kOutTile], total[kRowTile][kOutTile];
  for (int64_t b = 0; b < n_blk; ++b) {
    const int64_t k = tl.k0 + b * kBlock;
    const int n = static_cast<int>(std::min<int64_t>(kBlock, tl.k1 - k));
    for (int j = 0; j < no; ++j) decode_block(w, tl.o + j, k, n, wb[j]);
    for (int i = 0; i < nt; ++i) load_block(x + i * tl.x_stride + k, n, xb[i]);
    const BlockChain chain = block_chain(b, n_blk, g_blk);
    float beta[kRowTile][kOutTile];
    for (int i = 0; i < nt; ++i) {
      int j = 0;
      if (n == kBlock)
        for (; j + 2 <= no; j += 2) block_dot_x2(xb[i], wb[j], wb[j + 1], &beta[i][j], &beta[i][j + 1]);
      for (; j < no; ++j) beta[i][j] = block_dot(xb[i], wb[j], n);
    }
    for (int i = 0; i < nt; ++i)
      for (int j = 0; j < no; ++j) chain_beta(chain, beta[i][j], part[i][j], total[i][j], std::plus<float>());
  }
  for (int i = 0; i < nt; ++i)
    for (int j = 0; j < no; ++j) tl.y[i * linear_tile::kMaxOutTile + j] = total[i][j];
}

// beta of one FP4 block of n columns (n % 32 == 0) in the FP4 K order (linear_fp4.h): code
// the e2m1 values, scale the groups' 2^(s-127).
inline float fp4_block_dot(const float* x, const float* code, const float* scale, int n) {
  float beta = 0.0f;
  for (int g = 0; g < n; g += 32) {
    float p = 0.0f;
    for (int j = g; j < g + 32; ++j) {  // j ^ 1: the odd column of a pair first (linear_ref.cc)
      const int i = j ^ 1;
      p += code[i] * x[i];
    }
    const float ps = p * scale[g / 32];
    beta = g == 0 ? ps : beta + ps;
  }
  return beta;
}

// beta of one FP8 block of n columns in the FP8 K order (linear_fp8.h): code the e4m3
// values, s the block's 2^(s-127).
inline float fp8_block_dot(const float* x, const float* code, float s, int n) {
  float p = 0.0f;
  for (int r = 0; r < n; ++r) {  // r ^ 1: the odd column of a pair first (linear_ref.cc)
    const int i = r % 2 == 0 && r + 1 == n ? r : r ^ 1;
    p += code[i] * x[i];
  }
  return p * s;
}

// One output's 128-column block of each format, decoded to fp32 (code) with its scales, and
// its beta against a row's block (the formats' K orders above).
struct Fp4Block {
  alignas(64) float code[kBlock];
  float scale[kBlock / 32];
  void decode(const LinearWeight& w, int64_t o, int64_t k, int n) {
    for (int c = 0; c < n; ++c) code[c] = kE2M1Signed[fp4_code(w, o, k + c)];
    for (int g = 0; g < n / 32; ++g) scale[g] = scale_value(fp4_scale(w, o, k + 32 * g));
  }
  float beta(const float* x, int n) const { return fp4_block_dot(x, code, scale, n); }
};
struct Fp8Block {
  alignas(64) float code[kBlock];
  float scale = 0.0f;
  void decode(const LinearWeight& w, int64_t o, int64_t k, int n) {
    for (int c = 0; c < n; ++c) code[c] = e4m3_decode(fp8_code(w, o, k + c));
    scale = scale_value(w.scale[(o / kBlock) * ceil_div<int64_t>(w.in, kBlock) + k / kBlock]);
  }
  float beta(const float* x, int n) const { return fp8_block_dot(x, code, scale, n); }
};

// Scalar FP4 / FP8 tile (Block: Fp4Block, Fp8Block) on either layout and x type: up to
// kMaxRowTile rows x kMaxOutTile outputs.
template <class Block, class XT>
void tile_quant_scalar(const linear_tile::Tile& tl) {
  const LinearWeight& w = *tl.w;
  const XT* x = static_cast<const XT*>(tl.x);
  const int64_t n_blk = ceil_div<int64_t>(tl.k1 - tl.k0, kBlock);
  alignas(64) float xb[linear_tile::kMaxRowTile][kBlock];
  Block blk;
  float part[linear_tile::kMaxRowTile][linear_tile::kMaxOutTile];
  float* total = tl.y;  // (i, j) at i·kMaxOutTile + j
  for (int64_t b = 0; b < n_blk; ++b) {
    const int64_t k = tl.k0 + b * kBlock;
    const int n = static_cast<int>(std::min<int64_t>(kBlock, tl.k1 - k));
    for (int i = 0; i < tl.nt; ++i) load_block(x + i * tl.x_stride + k, n, xb[i]);
    const BlockChain chain = block_chain(b, n_blk, tl.g_blk);
    for (int j = 0; j < tl.no; ++j) {
      blk.decode(w, tl.o + j, k, n);
      for (int i = 0; i < tl.nt; ++i)
        chain_beta(chain, blk.beta(xb[i], n), part[i][j], total[i * linear_tile::kMaxOutTile + j], std::plus<float>());
    }
  }
}

// Whether row x[0, n) may take the bf16 dot of an FP4 or FP8 tile (linear_fp4.h,
// linear_fp8.h): every value zero or normal with biased exponent in [lo, hi] (1 <= lo <= hi
// <= 254). As one unsigned test per value: the magnitude bits minus lo·128 (0 for a zero)
// below (hi - lo + 1)·128, so the largest of them decides; SSE4.1 takes 8 values a step
// (every linear call scans all its rows: the plain loop cost 6-12 % of an FP4 GEMM).
bool quant_dot_row(const bf16* x, int64_t n, int lo, int hi) {
  const uint16_t* b = reinterpret_cast<const uint16_t*>(x);
  const auto base = static_cast<uint16_t>(lo << 7), span = static_cast<uint16_t>((hi - lo + 1) << 7);
  uint16_t worst = 0;
  int64_t i = 0;
#if defined(__SSE4_1__)
  const __m128i mag = _mm_set1_epi16(0x7FFF), vbase = _mm_set1_epi16(static_cast<int16_t>(base));
  __m128i w = _mm_setzero_si128();
  for (; i + 8 <= n; i += 8) {
    const __m128i m = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)), mag);
    w = _mm_max_epu16(w, _mm_andnot_si128(_mm_cmpeq_epi16(m, _mm_setzero_si128()), _mm_sub_epi16(m, vbase)));
  }
  alignas(16) uint16_t lanes[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), w);
  for (const uint16_t l : lanes) worst = std::max(worst, l);
#endif
  for (; i < n; ++i) {
    const auto m = static_cast<uint16_t>(b[i] & 0x7FFF);
    worst = std::max(worst, m == 0 ? uint16_t{0} : static_cast<uint16_t>(m - base));
  }
  return worst < span;
}
// The exponent window of quant_dot_row for w's format.
struct DotExp {
  int lo, hi;
};
constexpr DotExp kFp4DotExp{linear_tile::fp4::kDotExpLo, linear_tile::fp4::kDotExpHi};
constexpr DotExp kFp8DotExp{linear_tile::fp8::kDotExpLo, linear_tile::fp8::kDotExpHi};
inline uint64_t quant_dot_rows(const bf16* x, int64_t x_stride, int64_t k0, int64_t k1, int nt, DotExp e) {
  uint64_t m = 0;
  for (int i = 0; i < nt; ++i)
    if (quant_dot_row(x + i * x_stride + k0, k1 - k0, e.lo, e.hi)) m |= uint64_t{1} << i;
  return m;
}
inline uint64_t quant_dot_rows(const float*, int64_t, int64_t, int64_t, int, DotExp) { return 0; }

// The variant's tile kernels; detect_isa() until set_linear_isa.
std::atomic<int> g_isa{-1};

Isa current_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(detect_isa());
    g_isa.store(v, std::memory_order_relaxed);
  }
  return static_cast<Isa>(v);
}

// AVX512_VBMI, which the GEMM tile of kAvx512Bf16 needs; the emulated test build
// (isa_intrinsics.h) runs that tile on any CPU.
bool cpu_has_vbmi() {
#if defined(DSV4_ISA_EMULATED)
  return true;
#else
  return __builtin_cpu_supports("avx512vbmi");
#endif
}

const linear_tile::Kernels& kernels(Isa isa) {
  static const linear_tile::Kernels k[] = {linear_tile::scalar_kernels(), linear_tile::avx2_kernels(),
                                           linear_tile::avx512_kernels(),
                                           linear_tile::avx512_bf16_kernels(cpu_has_vbmi())};
  return k[static_cast<int>(isa)];
}

inline linear_tile::TileFn tile_fn(const linear_tile::Kernels& k, const bf16*) { return k.x_bf16; }
inline linear_tile::TileFn tile_fn(const linear_tile::Kernels& k, const float*) { return k.x_f32; }

// The slice's outputs of thread tid (offsets from s.o0); weights in a tile layout split in
// whole 16-row tiles.
Range split_outputs(const LinearSlice& s, bool tiles, int tid, int nthreads) {
  const int64_t unit = tiles ? kDotTileRows : 1;
  Range r = split_range(ceil_div<int64_t>(s.o1 - s.o0, unit), tid, nthreads);
  r.begin *= unit;
  r.end = std::min(r.end * unit, s.o1 - s.o0);
  return r;
}

// The tile fields a slice fixes (weight, K range and tree, x stride); the caller sets the rest.
linear_tile::Tile slice_tile(const LinearWeight& w, const LinearSlice& s) {
  linear_tile::Tile tl{};
  tl.w = &w;
  tl.k0 = s.k0;
  tl.k1 = s.k1;
  tl.g_blk = s.k_group > 0 ? s.k_group / kBlock : ceil_div<int64_t>(s.k1 - s.k0, kBlock);
  tl.x_stride = s.x_stride;
  return tl;
}

// FP4 or FP8 (the slice checked by run_slice): tiles of kMaxOutTile outputs x kMaxRowTile
// rows through the variant's FP4 / FP8 tile (the tile layout, bf16 x, o0 on a tile) or the
// scalar one.
template <class XT, class YT>
void run_quant(const LinearWeight& w, const LinearSlice& s, const XT* x, int64_t T, YT* y, int tid, int nthreads) {
  const linear_tile::Kernels& kern = kernels(current_isa());
  const bool fp4 = w.format == WeightFormat::kFP4;
  const bool packed = fp4 ? w.fp4_dot : w.fp8_dot;
  const linear_tile::TileFn kern_fn = fp4 ? kern.fp4 : kern.fp8;
  const bool tiles = packed && std::is_same_v<XT, bf16> && s.o0 % kDotTileRows == 0 && kern_fn != nullptr;
  const linear_tile::TileFn fn = tiles ? kern_fn : fp4 ? tile_quant_scalar<Fp4Block, XT> : tile_quant_scalar<Fp8Block, XT>;
  const bool dot = tiles;  // Tile::dot_rows: read by every FP4 / FP8 tile
  const DotExp dot_exp = fp4 ? kFp4DotExp : kFp8DotExp;
  const Range r = split_outputs(s, packed, tid, nthreads);
  if (r.size() == 0 || T <= 0) return;
  constexpr int kRows = linear_tile::kMaxRowTile, kOut = linear_tile::kMaxOutTile;
  // The rows' dot marks, once per call (up to kMaskTiles row tiles; beyond, per tile).
  constexpr int64_t kMaskTiles = 64;
  uint64_t masks[kMaskTiles];
  const int64_t n_row_tiles = ceil_div<int64_t>(T, kRows);
  auto rows_of = [&](int64_t t0) { return static_cast<int>(std::min<int64_t>(kRows, T - t0)); };
  auto mask_of = [&](int64_t t0) {
    return quant_dot_rows(x + t0 * s.x_stride, s.x_stride, s.k0, s.k1, rows_of(t0), dot_exp);
  };
  if (dot)
    for (int64_t i = 0; i < std::min(n_row_tiles, kMaskTiles); ++i) masks[i] = mask_of(i * kRows);
  linear_tile::Tile tl = slice_tile(w, s);
  alignas(64) float res[kRows * kOut];
  tl.y = res;
  for (int64_t oa = s.o0 + r.begin; oa < s.o0 + r.end; oa += kOut) {
    tl.o = oa;
    tl.no = static_cast<int>(std::min<int64_t>(kOut, s.o0 + r.end - oa));
    for (int64_t t0 = 0; t0 < T; t0 += kRows) {
      tl.nt = rows_of(t0);
      tl.x = x + t0 * s.x_stride;
      tl.dot_rows = !dot ? 0 : t0 / kRows < kMaskTiles ? masks[t0 / kRows] : mask_of(t0);
      fn(tl);
      for (int i = 0; i < tl.nt; ++i)
        for (int j = 0; j < tl.no; ++j) store(y + (t0 + i) * s.y_stride + (oa + j - s.o0), res[i * kOut + j]);
    }
  }
}

// Output columns [o0, o1) split over threads; per thread, tiles of out_tile
// outputs x row_tile rows (rows inner, so a tile's weights stay in cache).
template <class XT, class YT>
void run_slice(const LinearWeight& w, const LinearSlice& s_in, const XT* x, int64_t T, YT* y,
               int tid, int nthreads) {
  LinearSlice s = s_in;
  if (s.o1 < 0) s.o1 = w.out;
  if (s.k1 < 0) s.k1 = w.in;
  if (s.x_stride < 0) s.x_stride = w.in;
  if (s.y_stride < 0) s.y_stride = s.o1 - s.o0;
  DSV4_CHECK(s.o0 >= 0 && s.o0 <= s.o1 && s.o1 <= w.out, "outputs [{}, {}) of {}", s.o0, s.o1, w.out);
  DSV4_CHECK(s.k0 >= 0 && s.k0 % kBlock == 0 && s.k0 < s.k1 && s.k1 <= w.in &&
                 (s.k1 % kBlock == 0 || s.k1 == w.in),
             "K range [{}, {}) of {}", s.k0, s.k1, w.in);
  DSV4_CHECK(s.k_group == 0 || (s.k_group % kBlock == 0 && (s.k1 - s.k0) % s.k_group == 0),
             "k_group {} for K width {}", s.k_group, s.k1 - s.k0);
  DSV4_CHECK(w.format != WeightFormat::kFP4 || w.in % 32 == 0, "FP4 in {} % 32", w.in);
  DSV4_CHECK(s.x_stride >= s.k1 && s.y_stride >= s.o1 - s.o0, "strides");
  if (w.quantized()) return run_quant(w, s, x, T, y, tid, nthreads);
  // BF16 tiles (LinearWeight::bf16_tiles): a slice off a tile boundary runs on the scalar tile
  // (the ISA tiles read 16 rows of a tile at a time).
  const Range r = split_outputs(s, w.bf16_tiles, tid, nthreads);
  if (r.size() == 0 || T <= 0) return;
  const bool off_tile = w.bf16_tiles && s.o0 % kDotTileRows != 0;
  const linear_tile::Kernels& kern = kernels(off_tile ? Isa::kScalar : current_isa());
  const linear_tile::TileFn fn = tile_fn(kern, x);
  linear_tile::Tile tl = slice_tile(w, s);
  alignas(64) float res[linear_tile::kMaxRowTile * linear_tile::kMaxOutTile];
  tl.y = res;
  for (int64_t oa = s.o0 + r.begin; oa < s.o0 + r.end; oa += kern.out_tile) {
    tl.o = oa;
    tl.no = static_cast<int>(std::min<int64_t>(kern.out_tile, s.o0 + r.end - oa));
    for (int64_t t0 = 0; t0 < T; t0 += kern.row_tile) {
      tl.nt = static_cast<int>(std::min<int64_t>(kern.row_tile, T - t0));
      tl.x = x + t0 * s.x_stride;
      fn(tl);
      for (int i = 0; i < tl.nt; ++i)
        for (int j = 0; j < tl.no; ++j)
          store(y + (t0 + i) * s.y_stride + (oa + j - s.o0), res[i * linear_tile::kMaxOutTile + j]);
    }
  }
}

}  // namespace

namespace linear_tile {
Kernels scalar_kernels() {
  return Kernels{kOutTile, kRowTile, tile_scalar<bf16>, tile_scalar<float>, nullptr, nullptr};
}
}  // namespace linear_tile

void set_linear_isa(Isa isa) {
  DSV4_CHECK(isa_supported(isa), "linear isa {} not supported by this CPU", isa_name(isa));
  g_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}
Isa linear_isa() { return current_isa(); }
bool linear_prefers_bf16_tiles() { return current_isa() == Isa::kAvx512Bf16 && cpu_has_vbmi(); }

void actq_rows(const bf16* x, int64_t T, int64_t in, bf16* xq, int tid, int nthreads) {
  DSV4_CHECK(in % kActqBlock == 0, "actq row length {} is not a multiple of {}", in, kActqBlock);
  const Range r = split_range(T, tid, nthreads);
  const bool avx512 = current_isa() >= Isa::kAvx512;  // the same bits (linear_tile.h)
  for (int64_t t = r.begin; t < r.end; ++t) {
    const bf16* xr = x + t * in;
    bf16* yr = xq + t * in;
    if (avx512 &&
        linear_tile::avx512_actq_row(reinterpret_cast<const uint16_t*>(xr), in, reinterpret_cast<uint16_t*>(yr),
                                     kActqAmaxFloor))
      continue;
    actq_dequant_row(xr, in, yr);
  }
}

void linear(const LinearWeight& w, const bf16* x, int64_t T, bf16* y, int tid, int nthreads) {
  run_slice(w, LinearSlice{}, x, T, y, tid, nthreads);
}
void linear_f32(const LinearWeight& w, const bf16* x, int64_t T, float* y, int tid, int nthreads) {
  run_slice(w, LinearSlice{}, x, T, y, tid, nthreads);
}
void linear_f32_in(const LinearWeight& w, const float* x, int64_t T, float* y, int tid, int nthreads) {
  run_slice(w, LinearSlice{}, x, T, y, tid, nthreads);
}

void linear_slice(const LinearWeight& w, const LinearSlice& s, const bf16* x, int64_t T, bf16* y,
                  int tid, int nthreads) {
  run_slice(w, s, x, T, y, tid, nthreads);
}
void linear_slice(const LinearWeight& w, const LinearSlice& s, const bf16* x, int64_t T, float* y,
                  int tid, int nthreads) {
  run_slice(w, s, x, T, y, tid, nthreads);
}
void linear_slice(const LinearWeight& w, const LinearSlice& s, const float* x, int64_t T, float* y,
                  int tid, int nthreads) {
  run_slice(w, s, x, T, y, tid, nthreads);
}

}  // namespace dsv4::kernels
