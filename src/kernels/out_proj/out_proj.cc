// Engine output projection: the phases of out_proj.h over rope / linear_slice.
#include <algorithm>

#include "base/check.h"
#include "base/math.h"
#include "kernels/linear/linear.h"
#include "kernels/out_proj/out_proj.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {

int64_t out_proj_scratch_elems(const OutProjParams& p, int64_t capacity) {
  return 2 * capacity * p.u_width();
}

void out_proj(int phase, const OutProjParams& p, const OutProjWeights& w, const OutProjIO& io,
              int tid, int nthreads) {
  const int64_t T = io.T;
  const int64_t hd = int64_t{p.n_heads} * p.head_dim, uw = p.u_width();
  bf16* u = io.scratch;
  bf16* uq = u + T * uw;
  switch (phase) {
    case 0:
      DSV4_CHECK(p.n_heads % p.o_groups == 0, "heads {} % o_groups {}", p.n_heads, p.o_groups);
      DSV4_CHECK(w.wo_a.out == uw && w.wo_a.in == p.group_in(), "wo_a [{}, {}]", w.wo_a.out, w.wo_a.in);
      DSV4_CHECK(w.wo_b.out == p.hidden && w.wo_b.in == uw, "wo_b [{}, {}]", w.wo_b.out, w.wo_b.in);
      rope(w.inv_freq, p.rope_dim, io.o, T, p.n_heads, p.head_dim, io.pos, true, tid, nthreads);
      return;
    case 1:
      for (int g = 0; g < p.o_groups; ++g) {
        LinearSlice s;
        s.o0 = g * p.o_lora_rank;
        s.o1 = s.o0 + p.o_lora_rank;
        s.x_stride = hd;
        s.y_stride = uw;
        linear_slice(w.wo_a, s, io.o + g * p.group_in(), T, u + s.o0, tid, nthreads);
      }
      return;
    case 2:
      if (w.wo_b.quantized()) actq_rows(u, T, uw, uq, tid, nthreads);
      return;
    case 3: {
      LinearSlice s;
      s.k_group = p.wo_b_k_group();
      linear_slice(w.wo_b, s, w.wo_b.quantized() ? uq : u, T, io.out, tid, nthreads);
      return;
    }
  }
  DSV4_CHECK(false, "out_proj phase {} of {}", phase, kOutProjPhases);
}

void out_proj_wo_a_cols(const OutProjParams& p, const OutProjWeights& w, const OutProjIO& io, int64_t c0,
                        int64_t c1) {
  const int64_t T = io.T, hd = int64_t{p.n_heads} * p.head_dim, uw = p.u_width();
  DSV4_CHECK(c0 % kActqBlock == 0 && (c1 % kActqBlock == 0 || c1 == uw) && c0 <= c1 && c1 <= uw,
             "u columns [{}, {}) of {} are not whole {}-blocks", c0, c1, uw, kActqBlock);
  if (c0 >= c1 || T == 0) return;
  bf16* u = io.scratch;
  bf16* uq = u + T * uw;
  for (int g = 0; g < p.o_groups; ++g) {
    LinearSlice s;
    s.o0 = std::max<int64_t>(c0, g * p.o_lora_rank);
    s.o1 = std::min<int64_t>(c1, (g + 1) * p.o_lora_rank);
    if (s.o0 >= s.o1) continue;
    s.x_stride = hd;
    s.y_stride = uw;
    linear_slice(w.wo_a, s, io.o + g * p.group_in(), T, u + s.o0, 0, 1);
  }
  if (w.wo_b.quantized())
    for (int64_t t = 0; t < T; ++t) actq_rows(u + t * uw + c0, 1, c1 - c0, uq + t * uw + c0, 0, 1);
}

void out_proj_wo_b_cols(const OutProjParams& p, const OutProjWeights& w, const OutProjIO& io, int64_t o0,
                        int64_t o1) {
  if (o0 >= o1 || io.T == 0) return;
  const bf16* u = io.scratch;
  const bf16* uq = u + io.T * p.u_width();
  LinearSlice s;
  s.k_group = p.wo_b_k_group();
  s.o0 = o0;
  s.o1 = o1;
  s.y_stride = p.hidden;
  linear_slice(w.wo_b, s, w.wo_b.quantized() ? uq : u, io.T, io.out + o0, 0, 1);
}

}  // namespace dsv4::kernels
