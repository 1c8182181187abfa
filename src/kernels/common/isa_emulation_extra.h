// What the ISA translation units outside linear/ use beyond kernels/linear/isa_emulation.h
// (SIMDe 0.7.4 lacks them), for the emulated test build only (DSV4_ISA_EMULATED). Plain C++
// on the lanes, written for clarity, not speed.
//   _mm512_cvtepi32_epi16   truncation of each int32 to int16
//   _mm512_permute_ps       the in-lane (128-bit) float permute by immediate
//   _mm512_reduce_max_ps    the largest lane (callers pass no NaN)
#pragma once

#include "kernels/linear/isa_emulation.h"

namespace {

inline __m256i emu_mm512_cvtepi32_epi16(__m512i a) {
  const EmuLanes<int32_t, 16> in = emu_lanes<int32_t, 16>(&a);
  EmuLanes<int16_t, 16> out;
  for (int i = 0; i < 16; ++i) out.v[i] = static_cast<int16_t>(in.v[i]);
  __m256i r;
  emu_store(out, &r);
  return r;
}

inline __m512 emu_mm512_permute_ps(__m512 a, int imm) {
  const EmuLanes<float, 16> in = emu_lanes<float, 16>(&a);
  EmuLanes<float, 16> out;
  for (int i = 0; i < 16; ++i) out.v[i] = in.v[(i & ~3) + ((imm >> (2 * (i & 3))) & 3)];
  __m512 r;
  emu_store(out, &r);
  return r;
}

inline float emu_mm512_reduce_max_ps(__m512 a) {
  const EmuLanes<float, 16> in = emu_lanes<float, 16>(&a);
  float m = in.v[0];
  for (int i = 1; i < 16; ++i) m = in.v[i] > m ? in.v[i] : m;
  return m;
}

}  // namespace

#define _mm512_cvtepi32_epi16 emu_mm512_cvtepi32_epi16
#define _mm512_permute_ps emu_mm512_permute_ps
#define _mm512_reduce_max_ps emu_mm512_reduce_max_ps
