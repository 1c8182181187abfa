// Engine lane dots: the x86-64-v2 copy of lane_dot_tile.h and the ISA dispatch.
#include "base/check.h"
#include "kernels/lane_dot/lane_dot.h"
#include "kernels/lane_dot/lane_dot_tile.h"

namespace dsv4::kernels {
namespace {

IsaChoice g_isa("lane_dot");

const lane_dot_tile::Fns& fns() {
  static const lane_dot_tile::Fns base = lane_dot_tile::fns_of<lane_dot_tile::PortableDot>(), avx2 = lane_dot_tile::fns_avx2();
  static const lane_dot_tile::Fns avx512{avx2.f32, avx2.bf16w, lane_dot_tile::block_avx512()};
  switch (lane_dot_isa()) {
    case Isa::kScalar: return base;
    case Isa::kAvx2: return avx2;
    default: return avx512;
  }
}

void check_rows(int rows) {
  DSV4_CHECK(rows >= 1 && rows <= kLaneDotMaxRows, "lane_dot_rows: rows = {} outside [1, {}]", rows, kLaneDotMaxRows);
}

}  // namespace

void set_lane_dot_isa(Isa isa) { g_isa.set(isa); }
Isa lane_dot_isa() { return g_isa.get(); }

void lane_dot_rows(const float* w, const bf16* const* x, int rows, int64_t n, float* out) {
  check_rows(rows);
  fns().f32(w, x, rows, n, out);
}

void lane_dot_rows(const bf16* w, const bf16* const* x, int rows, int64_t n, float* out) {
  check_rows(rows);
  fns().bf16w(w, x, rows, n, out);
}

void lane_dot_block(const bf16* const* w, int n_w, const bf16* const* x, int rows, int64_t n, float* out) {
  check_rows(rows);
  DSV4_CHECK(n_w >= 1 && n_w <= kLaneDotMaxWeights, "lane_dot_block: n_w = {} outside [1, {}]", n_w, kLaneDotMaxWeights);
  fns().block(w, n_w, x, rows, n, out);
}

}  // namespace dsv4::kernels
