// The emulated linear engine seen from native code. dsv4_linear_emulated (tests/CMakeLists.txt)
// is the linear kernel built again against kernels/linear/isa_emulation.h, in namespace
// dsv4_emu (-Ddsv4=dsv4_emu): every variant runs on any host. One translation unit cannot
// include linear.h under both namespaces, so this bridge (linear_emulated.cc, built with the
// emulated library) takes plain mirrors of the engine's types.
#pragma once

#include <cstdint>

namespace dsv4_emu_bridge {

// LinearWeight's fields (format: the WeightFormat value).
struct Weight {
  int format;
  int64_t out, in;
  const void* data;
  const uint8_t* scale;
  bool fp4_dot, fp8_dot, bf16_tiles;
};
// LinearSlice's fields.
struct Slice {
  int64_t o0, o1, k0, k1, x_stride, y_stride, k_group;
};

// dsv4_emu::kernels::linear_slice on variant `isa` (the Isa value), one thread; x and y as
// the engine's overloads (bf16 as its bits).
void linear_slice(int isa, const Weight& w, const Slice& s, const uint16_t* x, int64_t T, uint16_t* y);
void linear_slice(int isa, const Weight& w, const Slice& s, const uint16_t* x, int64_t T, float* y);
void linear_slice(int isa, const Weight& w, const Slice& s, const float* x, int64_t T, float* y);
// dsv4_emu::kernels::actq_rows on variant `isa`, one thread.
void actq_rows(int isa, const uint16_t* x, int64_t T, int64_t in, uint16_t* xq);
// The emulated _mm512_dpbf16_ps on one vector: acc[16] fp32, a[32] and b[32] bf16 bits -> out[16].
void dpbf16_ps(const float* acc, const uint16_t* a, const uint16_t* b, float* out);

}  // namespace dsv4_emu_bridge
