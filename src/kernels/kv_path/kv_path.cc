// Engine KV path: the phases of kv_path.h over linear / rmsnorm / rope.
#include "base/check.h"
#include "base/math.h"
#include "kernels/kv_path/kv_path.h"
#include "kernels/linear/linear.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {

int64_t kv_path_scratch_elems(const KvPathParams& p, int64_t capacity) { return capacity * p.hidden; }

void kv_path(int phase, const KvPathParams& p, const KvPathWeights& w, const KvPathIO& io, int tid,
             int nthreads) {
  const int64_t T = io.T;
  switch (phase) {
    case 0:
      DSV4_CHECK(w.wkv.in == p.hidden && w.wkv.out == p.head_dim, "wkv [{}, {}]", w.wkv.out, w.wkv.in);
      DSV4_CHECK(p.nope_dim() % kFp8SimBlock == 0, "nope dims {} % {}", p.nope_dim(), kFp8SimBlock);
      if (w.wkv.quantized() && !io.aq) actq_rows(io.a, T, p.hidden, io.scratch, tid, nthreads);
      return;
    case 1:
      linear(w.wkv, w.wkv.quantized() ? (io.aq ? io.aq : io.scratch) : io.a, T, io.kv, tid, nthreads);
      return;
    case 2: {
      const Range r = split_range(T, tid, nthreads);
      for (int64_t t = r.begin; t < r.end; ++t) {
        bf16* v = io.kv + t * p.head_dim;
        rmsnorm(v, w.kv_norm, v, 1, p.head_dim, p.eps, 0, 1);
        rope(w.inv_freq, p.rope_dim, v, 1, 1, p.head_dim, io.pos + t, false, 0, 1);
        fp8sim_row(v, p.nope_dim(), kFp8SimBlock);
      }
      return;
    }
  }
  DSV4_CHECK(false, "kv_path phase {} of {}", phase, kKvPathPhases);
}

}  // namespace dsv4::kernels
