// The inner loops of the engine's sparse attention (sparse_attn.h order), compiled once per
// ISA: the fp32 loops below in sparse_attn.cc (x86-64-v2), sparse_attn_avx2.cc and
// sparse_attn_avx512.cc; VDPBF16PS on bf16 pairs in sparse_attn_avx512bf16.cc.
// A pass takes up to `heads` heads of one row against a block of keys, so each key vector
// loaded from the block's scratch feeds every head of the pass (one head per pass re-read the
// block's 2 x 128 KiB of fp32 keys from L2 once per head: the loops were L2-bound).
// Logits vectorize across the block's 64 entries, P·V across 64 dims at a time. Every element
// keeps its operation order (no contraction; an explicit FMA only on the exact products), so
// all variants give the same bits.
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/sparse_attn/sparse_attn.h"
#include "numeric/cache_rows.h"
#include "numeric/ue8m0.h"

#include "kernels/common/immintrin_quiet.h"

namespace dsv4::kernels::attn_tile {

constexpr int kBlock = 64;     // kAttnBlock
constexpr int kMaxHeads = 4;   // most heads of a pass in any variant

// One block's n real keys (1 <= n <= kBlock): Fns::unpack writes them one by one, Fns::layout
// lays them out for the logits and P·V.
struct Block {
  float* kb;  // scratch [kBlock·Dh]: the keys' operands, row-major: fp32 [n, Dh] (fp32 variants)
              // or pair words [n, Dh/2] (the pair variant); rows up to the next 16 don't-care
  float* kt;  // scratch [kBlock·Dh]: the logits' layout
  float* kv;  // scratch [kBlock/2·Dh]: the P·V layout (the pair variant; the fp32 ones read kb)
  int n, Dh;
};

struct Fns {
  int heads;  // heads per pass, 1..kMaxHeads
  // Key c of the block = attn_operand of the packed row's values (numeric/cache_rows.h
  // kv_unpack_row), into b.kb.
  void (*unpack)(const KvRowFormat& f, const uint8_t* row, const Block& b, int c);
  // The operands of n query values (a row's heads, once per row): qf [n] fp32 (fp32 variants)
  // or qw [n/2] pair words (the pair variant); the other is left alone.
  void (*prep_q)(const bf16* q, int64_t n, float* qf, uint32_t* qw);
  void (*layout)(const Block& b);
  // s[g·kBlock + c] = the dot of head g's q with key c (sparse_attn.h order, before σa) for
  // g < G, c < n (lanes up to the next multiple of 16 are don't-care). qf: the G heads' q
  // operands [G, Dh] fp32; qw: the same as bf16 pairs [G, Dh/2] (low half the even dim).
  void (*logits)(const float* qf, const uint32_t* qw, int G, const Block& b, float* s);
  // The block's softmax step of G heads (sparse_attn.h): s[g·kBlock + c], c < n, the dots ->
  // the bf16(p) operands, and 0 from c = n to the next multiple of 16 (an odd n's pair pad);
  // m[g], S[g] updated, alpha[g] the old state's factor.
  void (*softmax)(float* s, int G, int n, float scale, float* m, float* S, float* alpha);
  // acc[g·Dh + d] = f32(f32(acc·alpha[g]) + u), u = Σ p[g·kBlock + c]·kb[c·Dh + d] in pair
  // order; p holds the bf16(p) operands as fp32, and p[g·kBlock + n] = 0 when n is odd.
  void (*accumulate_pv)(const float* p, const float* alpha, int G, const Block& b, float* acc);
  // o [Dh] = bf16(acc / S), each element.
  void (*finish)(const float* acc, float S, bf16* o, int Dh);
};
Fns fns_avx2();
Fns fns_avx512();
Fns fns_avx512bf16();

// The pair word of two bf16-valued floats (exact): the even one's bits in the low half.
inline uint32_t pair_word(float even, float odd) {
  return (std::bit_cast<uint32_t>(even) >> 16) | (std::bit_cast<uint32_t>(odd) & 0xFFFF0000u);
}

// The c-th entry a pair-order loop visits over n entries: pairs (2i, 2i + 1), the odd first.
constexpr int pair_order(int c, int n) { return (c ^ 1) < n ? c ^ 1 : c; }

namespace {  // one copy per translation unit: each is compiled for its own ISA

// The TU's native vector: 16 floats (AVX-512), 8 (AVX2) or 4 (SSE, and the emulated build).
// (A 64-byte vector on AVX2 is lowered through the stack: 6 GFLOP/s instead of 100.)
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX2__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
using Vec = float __attribute__((vector_size(4 * kLanes)));
using VecU = float __attribute__((vector_size(4 * kLanes), aligned(4)));  // unaligned access

inline Vec loadv(const float* p) { return *reinterpret_cast<const VecU*>(p); }
inline void storev(float* p, Vec v) { *reinterpret_cast<VecU*>(p) = v; }
inline Vec splat(float x) { return Vec{} + x; }

// a·b + c for the logits' and P·V's products, which are exact (sparse_attn.h: operands of at
// most 8 significant bits, none below 2^-56), so one FMA gives the bits of the multiply and the
// add: FMA where the unit is compiled with it (AVX2, AVX-512), the two steps elsewhere.
inline Vec product_add(Vec a, Vec b, Vec c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}

constexpr int kChunk = 4;  // vectors of keys (logits) or dims (P·V) per head in one pass

// The logits of G heads for keys [j0, j0 + NV·kLanes): one product and one sum per element,
// the dims in pair order.
template <int G, int NV>
void logits_chunk(const float* __restrict q, const float* __restrict kt, int Dh, int j0, float* __restrict s) {
  Vec acc[G][NV];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) acc[g][c] = Vec{};
  const auto step = [&](int d) {
    const float* row = kt + static_cast<int64_t>(d) * kBlock + j0;
    Vec k[NV];
    for (int c = 0; c < NV; ++c) k[c] = loadv(row + kLanes * c);
    for (int g = 0; g < G; ++g) {
      const Vec qd = splat(q[static_cast<int64_t>(g) * Dh + d]);
      for (int c = 0; c < NV; ++c) acc[g][c] = product_add(qd, k[c], acc[g][c]);
    }
  };
  for (int d = 0; d < Dh; d += 2) {  // Dh is even
    step(d + 1);
    step(d);
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) storev(s + g * kBlock + j0 + kLanes * c, acc[g][c]);
}

template <int G>
void logits_heads(const float* q, const float* kt, int Dh, int n, float* s) {
  for (int j0 = 0; j0 < n; j0 += kChunk * kLanes) {
    const int nv = (n - j0 + kLanes - 1) / kLanes;
    if (nv >= 4) logits_chunk<G, 4>(q, kt, Dh, j0, s);
    else if (nv == 3) logits_chunk<G, 3>(q, kt, Dh, j0, s);
    else if (nv == 2) logits_chunk<G, 2>(q, kt, Dh, j0, s);
    else logits_chunk<G, 1>(q, kt, Dh, j0, s);
  }
}

// P·V of G heads over NV vectors of dims [d0, d0 + NV·kLanes).
template <int G, int NV>
void pv_chunk(const float* __restrict p, const float* __restrict alpha, const float* __restrict kb, int Dh, int n,
              int d0, float* __restrict acc) {
  Vec u[G][NV];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) u[g][c] = Vec{};
  const auto step = [&](int j) {
    const float* row = kb + static_cast<int64_t>(j) * Dh + d0;
    Vec k[NV];
    for (int c = 0; c < NV; ++c) k[c] = loadv(row + kLanes * c);
    for (int g = 0; g < G; ++g) {
      const Vec pj = splat(p[g * kBlock + j]);
      for (int c = 0; c < NV; ++c) u[g][c] = product_add(pj, k[c], u[g][c]);
    }
  };
  int j = 0;
  for (; j + 1 < n; j += 2) {
    step(j + 1);
    step(j);
  }
  if (j < n) step(j);
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < NV; ++c) {
      float* a = acc + static_cast<int64_t>(g) * Dh + d0 + kLanes * c;
      storev(a, loadv(a) * splat(alpha[g]) + u[g][c]);
    }
}

// Dims [d0, Dh) one at a time in the same order (one sum a statement: see sparse_attn_ref.cc);
// key(j, d) reads key j's operand in dim d from the variant's layout.
template <class Key>
inline void pv_tail(const float* p, const float* alpha, int G, Key&& key, int Dh, int n, int d0, float* acc) {
  for (int g = 0; g < G; ++g)
    for (int d = d0; d < Dh; ++d) {
      float u = 0.0f;
      for (int e = 0; e < n; ++e) {
        const int j = pair_order(e, n);
        u = u + p[g * kBlock + j] * key(j, d);
      }
      float* a = acc + static_cast<int64_t>(g) * Dh + d;
      *a = *a * alpha[g] + u;
    }
}

template <int G>
void pv_heads(const float* p, const float* alpha, const float* kb, int Dh, int n, float* acc) {
  int d0 = 0;
  for (; d0 + kChunk * kLanes <= Dh; d0 += kChunk * kLanes) pv_chunk<G, kChunk>(p, alpha, kb, Dh, n, d0, acc);
  for (; d0 + kLanes <= Dh; d0 += kLanes) pv_chunk<G, 1>(p, alpha, kb, Dh, n, d0, acc);
  pv_tail(p, alpha, G, [&](int j, int d) { return kb[static_cast<int64_t>(j) * Dh + d]; }, Dh, n, d0, acc);
}

using VecU32 = uint32_t __attribute__((vector_size(4 * kLanes)));
// kLanes bytes or 16-bit values, zero-extended (GCC 12 widens __builtin_convertvector's byte
// vectors one lane at a time: the PMOVZX intrinsics instead).
template <class V>
inline VecU32 as_u32(const V& v) {
  VecU32 r;
  __builtin_memcpy(&r, &v, sizeof r);
  return r;
}
#if defined(__AVX512F__)
using NativeI = __m512i;
#elif defined(__AVX2__)
using NativeI = __m256i;
#else
using NativeI = __m128i;
#endif
inline NativeI as_m(const VecU32& v) {
  NativeI r;
  __builtin_memcpy(&r, &v, sizeof r);
  return r;
}
inline VecU32 load_u32(const uint8_t* p) {
#if defined(__AVX512F__)
  return as_u32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#elif defined(__AVX2__)
  return as_u32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  int32_t w;
  __builtin_memcpy(&w, p, sizeof w);
  return as_u32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(w)));
#endif
}
inline VecU32 load_bf16_bits(const bf16* p) {  // as fp32 bits
#if defined(__AVX512F__)
  return as_u32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))) << 16;
#elif defined(__AVX2__)
  return as_u32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))) << 16;
#else
  return as_u32(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))) << 16;
#endif
}
inline Vec operand_v(Vec x) {  // attn_operand lane by lane
  const Vec a = x < Vec{} ? -x : x;
  return a < splat(0x1p-56f) ? Vec{} : x;
}

// attn_operand(e4m3_decode(codes[0, kLanes))·scale), the nope dims of a packed KV row.
// The code's 7 magnitude bits in the fp32 exponent and mantissa fields (sign | mag << 20) are the
// value times 2^-120, an e4m3 subnormal an fp32 subnormal: one exact multiply by 2^120 decodes
// both (the FP8 linear's decode_f32 does the same); NaN codes (magnitude 0x7F) give NaN.
inline Vec decode_e4m3_v(const uint8_t* codes, Vec scale) {
  const VecU32 c = load_u32(codes);
  const VecU32 bits = ((c & 0x80u) << 24) | ((c & 0x7Fu) << 20);
  const Vec v = (c & 0x7Fu) == 0x7Fu ? (Vec)(VecU32{} + 0x7fc00000u) : (Vec)bits * splat(0x1p120f);
  return operand_v(v * scale);
}

// The fp32 variants' unpack: kb row c [Dh] fp32.
inline void unpack_fp32(const KvRowFormat& f, const uint8_t* row, const Block& blk, int c) {
  float* out = blk.kb + static_cast<int64_t>(c) * blk.Dh;
  const int Dn = f.nope(), Dr = f.rope_dim;
  const auto* rope = reinterpret_cast<const bf16*>(row);
  const uint8_t* codes = row + 2 * Dr;
  const uint8_t* scales = codes + Dn;
  for (int b = 0; b < f.blocks(); ++b) {
    const Vec s = splat(ue8m0_decode(scales[b]));
    for (int i = b * 64; i < b * 64 + 64; i += kLanes) storev(out + i, decode_e4m3_v(codes + i, s));  // kLanes | 64
  }
  int d = 0;
  for (; d + kLanes <= Dr; d += kLanes) storev(out + Dn + d, operand_v((Vec)load_bf16_bits(rope + d)));
  for (; d < Dr; ++d) out[Dn + d] = attn_operand(rope[d].to_float());
}

inline void prep_q_fp32(const bf16* q, int64_t n, float* qf, uint32_t*) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) storev(qf + i, operand_v((Vec)load_bf16_bits(q + i)));
  for (; i < n; ++i) qf[i] = attn_operand(q[i].to_float());
}

// attn_exp on a vector: the same operations lane by lane.
inline Vec exp_v(Vec x) {
  using namespace attn_exp_const;
  const Vec t = x * splat(kLog2e) + splat(kMagic);
  const Vec n = t - splat(kMagic);
  const Vec r = (x - n * splat(kLn2Hi)) - n * splat(kLn2Lo);
  Vec p = splat(kC[7]);
  for (int k = 6; k >= 0; --k) p = p * r + splat(kC[k]);
  const VecU32 two_n = ((VecU32)t - (VecU32)splat(kMagic) + 127u) << 23;
  const Vec v = p * (Vec)two_n;
  return x < splat(kMin) ? Vec{} : v;
}

// bf16::from_float's bits (round to nearest even, NaN kept quiet) of each lane, in its low half.
inline VecU32 bf16_bits_v(VecU32 u) {
  const auto nan = (u & 0x7fffffffu) > 0x7f800000u;
  return nan ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// attn_operand(round_bf16(p)) on a vector.
inline Vec bf16_operand_v(Vec p) { return operand_v((Vec)(bf16_bits_v((VecU32)p) << 16)); }

inline void softmax_impl(float* s_all, int G, int n, float scale, float* m, float* S, float* alpha) {
  const float kNegInf = -__builtin_inff();
  const int nv = (n + 15) / 16 * (16 / kLanes);  // whole 16s: the pad reaches the pair P·V reads
  using VecI32 = int32_t __attribute__((vector_size(4 * kLanes)));
  VecI32 lane;
  for (int l = 0; l < kLanes; ++l) lane[l] = l;
  for (int g = 0; g < G; ++g) {
    float* s = s_all + g * kBlock;
    Vec mx = splat(kNegInf);
    for (int v = 0; v < nv; ++v) {  // scaled; −∞ past n (then p = 0 there)
      const Vec x = loadv(s + kLanes * v) * splat(scale);
      const Vec xs = lane + kLanes * v < n ? x : splat(kNegInf);
      storev(s + kLanes * v, xs);
      mx = xs > mx ? xs : mx;
    }
    float bmax = kNegInf;
    for (int l = 0; l < kLanes; ++l) bmax = mx[l] > bmax ? mx[l] : bmax;
    const float m_new = m[g] > bmax ? m[g] : bmax;
    alpha[g] = m[g] == kNegInf ? 0.0f : attn_exp(m[g] - m_new);
    Vec lanes[16 / kLanes] = {};  // lane l of the 16: c ≡ l (mod 16); the zeros past n add nothing
    for (int v = 0; v < nv; ++v) {
      const Vec p = exp_v(loadv(s + kLanes * v) - splat(m_new));
      storev(s + kLanes * v, p);
      lanes[v % (16 / kLanes)] = lanes[v % (16 / kLanes)] + p;
    }
    float t[16];
    for (int i = 0; i < 16 / kLanes; ++i) storev(t + kLanes * i, lanes[i]);
    S[g] = S[g] * alpha[g] + attn_sum16(t);
    m[g] = m_new;
    for (int v = 0; v < nv; ++v) storev(s + kLanes * v, bf16_operand_v(loadv(s + kLanes * v)));
  }
}

// o [Dh] = bf16(acc / S) (bf16::from_float: round to nearest even, NaN kept quiet).
inline void finish_impl(const float* acc, float S, bf16* o, int Dh) {
  int d = 0;
  for (; d + kLanes <= Dh; d += kLanes) {
    const VecU32 h = bf16_bits_v((VecU32)(loadv(acc + d) / splat(S)));
#if defined(__AVX512F__)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + d), _mm512_cvtepi32_epi16(as_m(h)));
#elif defined(__AVX2__)
    const __m256i w = as_m(h);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + d),
                     _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
#else
    const __m128i w = as_m(h);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + d), _mm_packus_epi32(w, w));
#endif
  }
  for (; d < Dh; ++d) o[d] = bf16::from_float(acc[d] / S);
}

// Dispatch on G (1..kMaxG of the variant).
template <int kMaxG, int G = kMaxG>
void logits_impl(const float* qf, const uint32_t* qw, int g, const Block& b, float* s) {
  if constexpr (G > 1)
    if (g < G) return logits_impl<kMaxG, G - 1>(qf, qw, g, b, s);
  logits_heads<G>(qf, b.kt, b.Dh, b.n, s);
}
template <int kMaxG, int G = kMaxG>
void accumulate_pv_impl(const float* p, const float* alpha, int g, const Block& b, float* acc) {
  if constexpr (G > 1)
    if (g < G) return accumulate_pv_impl<kMaxG, G - 1>(p, alpha, g, b, acc);
  pv_heads<G>(p, alpha, b.kb, b.Dh, b.n, acc);
}

inline void transpose_plain(const float* kb, int Dh, int d0, int n, float* kt) {
  for (int j = 0; j < n; ++j)
    for (int d = d0; d < Dh; ++d) kt[static_cast<int64_t>(d) * kBlock + j] = kb[static_cast<int64_t>(j) * Dh + d];
}

#if defined(__AVX512F__)
// 16 keys x 16 dims from kb (rows j0.., dims d0..) into kt, in registers: pairs of rows
// interleaved, then 4-row groups per 128-bit lane, then the lanes gathered per column.
inline void transpose16(const float* kb, int Dh, int j0, int d0, float* kt) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(kb + static_cast<int64_t>(j0 + i) * Dh + d0);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + k], 128-bit lane L: rows 4i .. 4i + 3 at column 4L + k.
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 s0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x44), s1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xEE);
    const __m512 s2 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x44);
    const __m512 s3 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xEE);
    float* col = kt + static_cast<int64_t>(d0 + k) * kBlock + j0;  // column 4L + k at col + 4L·kBlock
    _mm512_storeu_ps(col, _mm512_shuffle_f32x4(s0, s2, 0x88));
    _mm512_storeu_ps(col + 4 * kBlock, _mm512_shuffle_f32x4(s0, s2, 0xDD));
    _mm512_storeu_ps(col + 8 * kBlock, _mm512_shuffle_f32x4(s1, s3, 0x88));
    _mm512_storeu_ps(col + 12 * kBlock, _mm512_shuffle_f32x4(s1, s3, 0xDD));
  }
}
// Whole 16-key groups (rows of kb up to the next multiple of 16 are scratch, their columns
// in kt don't-care: the logits' lanes past n), the dims past the last 16 one at a time.
inline void transpose_impl(const float* kb, int Dh, int n, float* kt) {
  const int d_whole = Dh & ~15;
  for (int j0 = 0; j0 < n; j0 += 16)
    for (int d0 = 0; d0 < d_whole; d0 += 16) transpose16(kb, Dh, j0, d0, kt);
  transpose_plain(kb, Dh, d_whole, n, kt);
}
#else
inline void transpose_impl(const float* kb, int Dh, int n, float* kt) { transpose_plain(kb, Dh, 0, n, kt); }
#endif

// The fp32 variants' layout: kt [Dh, kBlock] the keys transposed (P·V reads kb).
inline void layout_fp32(const Block& b) { transpose_impl(b.kb, b.Dh, b.n, b.kt); }

// The fp32 variants' table (heads a pass, the layout above, the loops above).
template <int kMaxG>
Fns fp32_fns() {
  return Fns{kMaxG,        unpack_fp32,  prep_q_fp32,
             layout_fp32,  logits_impl<kMaxG>, softmax_impl,
             accumulate_pv_impl<kMaxG>, finish_impl};
}

}  // namespace
}  // namespace dsv4::kernels::attn_tile
