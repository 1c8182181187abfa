// The bridge of linear_emulated.h. Built with -Ddsv4=dsv4_emu like the rest of
// dsv4_linear_emulated: every dsv4:: below is the emulated engine's dsv4_emu::.
#include "kernels/linear/emulated/linear_emulated.h"

#include "kernels/linear/isa_intrinsics.h"
#include "kernels/linear/linear.h"

#if !defined(DSV4_ISA_EMULATED)
#error "linear_emulated.cc belongs to the emulated build (DSV4_ISA_EMULATED)"
#endif

namespace dsv4_emu_bridge {
namespace {

dsv4::LinearWeight weight(const Weight& w) {
  dsv4::LinearWeight r;
  r.format = static_cast<dsv4::WeightFormat>(w.format);
  r.out = w.out;
  r.in = w.in;
  r.data = w.data;
  r.scale = w.scale;
  r.fp4_dot = w.fp4_dot;
  r.fp8_dot = w.fp8_dot;
  r.bf16_tiles = w.bf16_tiles;
  return r;
}
dsv4::kernels::LinearSlice slice(const Slice& s) {
  dsv4::kernels::LinearSlice r;
  r.o0 = s.o0;
  r.o1 = s.o1;
  r.k0 = s.k0;
  r.k1 = s.k1;
  r.x_stride = s.x_stride;
  r.y_stride = s.y_stride;
  r.k_group = s.k_group;
  return r;
}
const dsv4::bf16* bf16s(const uint16_t* p) { return reinterpret_cast<const dsv4::bf16*>(p); }
dsv4::bf16* bf16s(uint16_t* p) { return reinterpret_cast<dsv4::bf16*>(p); }

}  // namespace

void linear_slice(int isa, const Weight& w, const Slice& s, const uint16_t* x, int64_t T, uint16_t* y) {
  dsv4::kernels::set_linear_isa(static_cast<dsv4::Isa>(isa));
  dsv4::kernels::linear_slice(weight(w), slice(s), bf16s(x), T, bf16s(y), 0, 1);
}
void linear_slice(int isa, const Weight& w, const Slice& s, const uint16_t* x, int64_t T, float* y) {
  dsv4::kernels::set_linear_isa(static_cast<dsv4::Isa>(isa));
  dsv4::kernels::linear_slice(weight(w), slice(s), bf16s(x), T, y, 0, 1);
}
void linear_slice(int isa, const Weight& w, const Slice& s, const float* x, int64_t T, float* y) {
  dsv4::kernels::set_linear_isa(static_cast<dsv4::Isa>(isa));
  dsv4::kernels::linear_slice(weight(w), slice(s), x, T, y, 0, 1);
}
void actq_rows(int isa, const uint16_t* x, int64_t T, int64_t in, uint16_t* xq) {
  dsv4::kernels::set_linear_isa(static_cast<dsv4::Isa>(isa));
  dsv4::kernels::actq_rows(bf16s(x), T, in, bf16s(xq), 0, 1);
}

void dpbf16_ps(const float* acc, const uint16_t* a, const uint16_t* b, float* out) {
  _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a),
                                         (__m512bh)_mm512_loadu_si512(b)));
}

}  // namespace dsv4_emu_bridge
