// Engine MTP projection: the phases of mtp_proj.h over embed / rmsnorm / linear.
#include "base/check.h"
#include "base/math.h"
#include "kernels/embed/embed.h"
#include "kernels/linear/linear.h"
#include "kernels/mtp_proj/mtp_proj.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "numeric/quant.h"

namespace dsv4::kernels {

int64_t mtp_proj_scratch_elems(const MtpProjParams& p, int64_t capacity) {
  return capacity * p.hidden * (3 + 3 * int64_t{p.hc_mult});
}

void mtp_proj(int phase, const MtpProjParams& p, const MtpProjWeights& w, const MtpProjIO& io,
              int tid, int nthreads) {
  const int64_t T = io.T, D = p.hidden, N = p.hc_mult;
  bf16* e = io.scratch;     // [T, D]
  bf16* eq = e + T * D;     // [T, D]
  bf16* h = eq + T * D;     // [T·N, D]
  bf16* hq = h + T * N * D; // [T·N, D]
  bf16* ep = hq + T * N * D;  // [T, D]
  bf16* hp = ep + T * D;      // [T·N, D]
  switch (phase) {
    case 0: {
      DSV4_CHECK(w.e_proj.out == D && w.e_proj.in == D, "e_proj [{}, {}]", w.e_proj.out, w.e_proj.in);
      DSV4_CHECK(w.h_proj.out == D && w.h_proj.in == D, "h_proj [{}, {}]", w.h_proj.out, w.h_proj.in);
      // Vectors [0, T): embedding rows; [T, T + T·N): streams.
      const Range r = split_range(T * (1 + N), tid, nthreads);
      for (int64_t j = r.begin; j < r.end; ++j) {
        if (j < T) {
          embed({p.vocab_size, D, 1}, w.embed, io.next_tok + j, 1, e + j * D, 0, 1);
          rmsnorm(e + j * D, w.enorm, e + j * D, 1, D, p.eps, 0, 1);
          if (w.e_proj.quantized()) actq_rows(e + j * D, 1, D, eq + j * D, 0, 1);
        } else {
          const int64_t s = j - T;
          rmsnorm(io.X + s * D, w.hnorm, h + s * D, 1, D, p.eps, 0, 1);
          if (w.h_proj.quantized()) actq_rows(h + s * D, 1, D, hq + s * D, 0, 1);
        }
      }
      return;
    }
    case 1:
      linear(w.e_proj, w.e_proj.quantized() ? eq : e, T, ep, tid, nthreads);
      linear(w.h_proj, w.h_proj.quantized() ? hq : h, T * N, hp, tid, nthreads);
      return;
    case 2: {
      const Range r = split_range(T * N, tid, nthreads);
      for (int64_t s = r.begin; s < r.end; ++s) {
        const bf16* et = ep + (s / N) * D;
        const bf16* hs = hp + s * D;
        bf16* z = io.Z + s * D;
        for (int64_t d = 0; d < D; ++d) z[d] = bf16::from_float(et[d].to_float() + hs[d].to_float());
      }
      return;
    }
  }
  DSV4_CHECK(false, "mtp_proj phase {} of {}", phase, kMtpProjPhases);
}

}  // namespace dsv4::kernels
