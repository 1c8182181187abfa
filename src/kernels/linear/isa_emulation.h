// Portable emulation of the x86 intrinsics of the linear ISA translation units, for the
// emulated test build only (DSV4_ISA_EMULATED, isa_intrinsics.h; tests/CMakeLists.txt
// dsv4_linear_emulated): built without any -m flag, every AVX2 / AVX-512 path runs on any
// x86-64-v2 host. SIMDe supplies the intrinsics under their native names (its portable
// code: the vector types are plain GCC vectors); below, what SIMDe 0.7.4 lacks, and what it
// computes differently from the hardware:
//   __mmask8 .. __mmask64               the mask type names (SIMDe has simde__mmask*)
//   masked loads (maskz_loadu)          missing; read only the selected elements, as the
//                                       hardware's fault suppression does
//   _mm512_cvtep{i8,u8,u16}_epi32       missing
//   _mm512_reduce_max_epu32             missing
//   _mm512_shuffle_f32x4                missing (SIMDe has the i32x4 form)
//   _mm256_fmadd_ps, _mm512_fmadd_ps    SIMDe rounds the product and the sum separately;
//                                       the hardware rounds once
//   _mm512_dpbf16_ps                    SIMDe adds the even product first, rounds each
//                                       product and flushes nothing; the model below is
//                                       the hardware's (tests/kernels/linear/
//                                       linear_emulated_test.cc checks it against
//                                       VDPBF16PS where the CPU has it)
// Plain C++ on the lanes, written for clarity, not speed.
#pragma once

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cstdint>
#include <cstring>

typedef simde__mmask8 __mmask8;
typedef simde__mmask16 __mmask16;
typedef simde__mmask32 __mmask32;
typedef simde__mmask64 __mmask64;

namespace {

// The lanes of a vector, and back (by address: GCC warns on vector types as template
// arguments).
template <class T, int N>
struct EmuLanes {
  T v[N];
};
template <class T, int N>
inline EmuLanes<T, N> emu_lanes(const void* vec) {
  EmuLanes<T, N> r;
  std::memcpy(r.v, vec, sizeof(r.v));
  return r;
}
template <class T, int N>
inline void emu_store(const EmuLanes<T, N>& l, void* vec) {
  std::memcpy(vec, l.v, sizeof(l.v));
}

inline float emu_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t emu_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Masked loads: element i from p when bit i of k is set (only those are read), else zero.
template <class T, int N>
inline EmuLanes<T, N> emu_maskz_loadu(uint64_t k, const void* p) {
  EmuLanes<T, N> r{};
  for (int i = 0; i < N; ++i)
    if ((k >> i) & 1) std::memcpy(&r.v[i], static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return r;
}
template <class V, class T, int N>
inline V emu_maskz_vec(uint64_t k, const void* p) {
  V out;
  emu_store(emu_maskz_loadu<T, N>(k, p), &out);
  return out;
}
inline __m128i emu_mm_maskz_loadu_epi8(__mmask16 k, const void* p) { return emu_maskz_vec<__m128i, uint8_t, 16>(k, p); }
inline __m256i emu_mm256_maskz_loadu_epi16(__mmask16 k, const void* p) {
  return emu_maskz_vec<__m256i, uint16_t, 16>(k, p);
}
inline __m512i emu_mm512_maskz_loadu_epi8(__mmask64 k, const void* p) { return emu_maskz_vec<__m512i, uint8_t, 64>(k, p); }
inline __m512 emu_mm512_maskz_loadu_ps(__mmask16 k, const void* p) { return emu_maskz_vec<__m512, float, 16>(k, p); }

// Widening conversions of 16 elements to 16 dwords.
template <class From>
inline EmuLanes<int32_t, 16> emu_widen(const void* a) {
  const EmuLanes<From, 16> s = emu_lanes<From, 16>(a);
  EmuLanes<int32_t, 16> r;
  for (int i = 0; i < 16; ++i) r.v[i] = s.v[i];
  return r;
}
inline __m512i emu_mm512_cvtepi8_epi32(__m128i a) {
  __m512i out;
  emu_store(emu_widen<int8_t>(&a), &out);
  return out;
}
inline __m512i emu_mm512_cvtepu8_epi32(__m128i a) {
  __m512i out;
  emu_store(emu_widen<uint8_t>(&a), &out);
  return out;
}
inline __m512i emu_mm512_cvtepu16_epi32(__m256i a) {
  __m512i out;
  emu_store(emu_widen<uint16_t>(&a), &out);
  return out;
}

inline unsigned int emu_mm512_reduce_max_epu32(__m512i a) {
  const EmuLanes<uint32_t, 16> l = emu_lanes<uint32_t, 16>(&a);
  uint32_t m = 0;
  for (uint32_t v : l.v) m = v > m ? v : m;
  return m;
}

// 128-bit lanes: a's lanes imm[1:0], imm[3:2], then b's lanes imm[5:4], imm[7:6].
inline __m512 emu_mm512_shuffle_f32x4(__m512 a, __m512 b, int imm) {
  const EmuLanes<float, 16> la = emu_lanes<float, 16>(&a), lb = emu_lanes<float, 16>(&b);
  EmuLanes<float, 16> r;
  for (int q = 0; q < 4; ++q) {
    const float* src = (q < 2 ? la.v : lb.v) + 4 * ((imm >> (2 * q)) & 3);
    for (int i = 0; i < 4; ++i) r.v[4 * q + i] = src[i];
  }
  __m512 out;
  emu_store(r, &out);
  return out;
}

// a·b + c rounded once per lane (__builtin_fmaf without -mfma: the C library's exact fmaf).
template <int N>
inline EmuLanes<float, N> emu_fmadd(const void* a, const void* b, const void* c) {
  const EmuLanes<float, N> la = emu_lanes<float, N>(a), lb = emu_lanes<float, N>(b), lc = emu_lanes<float, N>(c);
  EmuLanes<float, N> r;
  for (int i = 0; i < N; ++i) r.v[i] = __builtin_fmaf(la.v[i], lb.v[i], lc.v[i]);
  return r;
}
inline __m256 emu_mm256_fmadd_ps(__m256 a, __m256 b, __m256 c) {
  __m256 out;
  emu_store(emu_fmadd<8>(&a, &b, &c), &out);
  return out;
}
inline __m512 emu_mm512_fmadd_ps(__m512 a, __m512 b, __m512 c) {
  __m512 out;
  emu_store(emu_fmadd<16>(&a, &b, &c), &out);
  return out;
}

// VDPBF16PS, one fp32 lane i: acc = (acc + a[2i+1]·b[2i+1]) + a[2i]·b[2i]. Each step is a
// fused multiply-add rounded to nearest even (the bf16 product exact), with (measured on
// AVX512_BF16 hardware, tests/kernels/linear/linear_emulated_test.cc):
//   DAZ: a subnormal acc and subnormal bf16 operands read as zero of their sign;
//   FTZ: a result whose magnitude, rounded with an unbounded exponent, is below 2^-126
//        becomes zero of its sign (tininess after rounding: a sum just below 2^-126 that
//        rounds up to 2^-126 is kept);
//   NaN: the first NaN of (a, b, acc), quieted; an invalid operation (Inf·0, Inf - Inf)
//        gives the default NaN 0xFFC00000.
inline float emu_daz(float v) { return (emu_bits(v) & 0x7F800000u) == 0 ? emu_f32(emu_bits(v) & 0x80000000u) : v; }
inline bool emu_is_nan(float v) { return (emu_bits(v) & 0x7FFFFFFFu) > 0x7F800000u; }
inline float emu_dpbf16_step(float acc, uint16_t a, uint16_t b) {
  const float x = emu_daz(emu_f32(uint32_t{a} << 16)), y = emu_daz(emu_f32(uint32_t{b} << 16));
  acc = emu_daz(acc);
  for (float v : {x, y, acc})
    if (emu_is_nan(v)) return emu_f32(emu_bits(v) | 0x00400000u);
  float r = __builtin_fmaf(x, y, acc);
  if (emu_is_nan(r)) return emu_f32(0xFFC00000u);
  if (r != 0.0f && __builtin_fabsf(r) <= 0x1p-126f && x != 0.0f && y != 0.0f) {
    // Tiny, or rounded up to 2^-126 on the subnormal grid: round again 2^64 higher, where
    // nothing is subnormal. A non-zero sum of magnitude <= 2^-126 of a normal acc and a
    // non-zero product needs |acc| < 2^-100 and |x|, |y| < 2^27 (its bits are multiples of
    // the operands' ulps), so the scaling is exact. (A zero product leaves acc: not tiny.)
    const float s = __builtin_fmaf(x * 0x1p64f, y, acc * 0x1p64f);
    r = __builtin_fabsf(s) < 0x1p-62f ? emu_f32(emu_bits(s) & 0x80000000u) : s * 0x1p-64f;
  }
  return r;
}
inline __m512 emu_mm512_dpbf16_ps(__m512 acc, __m512bh a, __m512bh b) {
  EmuLanes<float, 16> r = emu_lanes<float, 16>(&acc);
  const EmuLanes<uint16_t, 32> la = emu_lanes<uint16_t, 32>(&a), lb = emu_lanes<uint16_t, 32>(&b);
  for (int i = 0; i < 16; ++i) {
    r.v[i] = emu_dpbf16_step(r.v[i], la.v[2 * i + 1], lb.v[2 * i + 1]);
    r.v[i] = emu_dpbf16_step(r.v[i], la.v[2 * i], lb.v[2 * i]);
  }
  __m512 out;
  emu_store(r, &out);
  return out;
}

}  // namespace

// The native names (SIMDe's own aliases, where it has one, replaced).
#undef _mm_maskz_loadu_epi8
#define _mm_maskz_loadu_epi8 emu_mm_maskz_loadu_epi8
#undef _mm256_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16 emu_mm256_maskz_loadu_epi16
#undef _mm512_maskz_loadu_epi8
#define _mm512_maskz_loadu_epi8 emu_mm512_maskz_loadu_epi8
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps emu_mm512_maskz_loadu_ps
#undef _mm512_cvtepi8_epi32
#define _mm512_cvtepi8_epi32 emu_mm512_cvtepi8_epi32
#undef _mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi32 emu_mm512_cvtepu8_epi32
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32 emu_mm512_cvtepu16_epi32
#undef _mm512_reduce_max_epu32
#define _mm512_reduce_max_epu32 emu_mm512_reduce_max_epu32
#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4 emu_mm512_shuffle_f32x4
#undef _mm256_fmadd_ps
#define _mm256_fmadd_ps emu_mm256_fmadd_ps
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps emu_mm512_fmadd_ps
#undef _mm512_dpbf16_ps
#define _mm512_dpbf16_ps emu_mm512_dpbf16_ps
