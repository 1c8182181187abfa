// Engine query path: the phases of q_path.h over linear / rmsnorm / rope, and the ISA
// dispatch of head_rms (head_rms_tile.h; this unit holds its x86-64-v2 copy).
#include <cmath>

#include "base/check.h"
#include "base/math.h"
#include "kernels/linear/linear.h"
#include "kernels/q_path/head_rms_tile.h"
#include "kernels/q_path/q_path.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {
namespace {

IsaChoice g_isa("q_path");

head_rms_tile::HeadsFn heads_fn() {
  static const head_rms_tile::HeadsFn avx2 = head_rms_tile::heads_avx2(), avx512 = head_rms_tile::heads_avx512();
  switch (q_path_isa()) {
    case Isa::kScalar: return head_rms_tile::heads_portable;
    case Isa::kAvx2: return avx2;
    default: return avx512;
  }
}

}  // namespace

void set_q_path_isa(Isa isa) { g_isa.set(isa); }
Isa q_path_isa() { return g_isa.get(); }

void head_rms(bf16* q, int64_t T, int n_heads, int head_dim, float eps, int tid, int nthreads) {
  const float inv_n = static_cast<float>(1.0 / head_dim);
  const Range r = split_range(T * n_heads, tid, nthreads);
  heads_fn()(q + r.begin * head_dim, r.size(), head_dim, inv_n, eps, head_rms_tile::HeadRope{});
}

int64_t q_path_scratch_elems(const QPathParams& p, int64_t capacity) {
  return capacity * (p.hidden + 2 * p.q_lora_rank);
}

const bf16* q_path_a_quantized(const QPathParams&, const QPathWeights& w, const QPathIO& io) {
  return w.wq_a.quantized() ? io.scratch : nullptr;
}

const bf16* q_path_qr_quantized(const QPathParams& p, const QPathWeights& w, const QPathIO& io) {
  return w.wq_b.quantized() ? io.scratch + io.T * (p.hidden + p.q_lora_rank) : nullptr;
}

void q_path(int phase, const QPathParams& p, const QPathWeights& w, const QPathIO& io, int tid,
            int nthreads) {
  const int64_t T = io.T;
  bf16* aq = io.scratch;
  bf16* qa = aq + T * p.hidden;
  bf16* qrq = qa + T * p.q_lora_rank;
  const bf16* a_in = w.wq_a.quantized() ? aq : io.a;
  const bf16* qr_in = w.wq_b.quantized() ? qrq : io.qr;
  switch (phase) {
    case 0:
      DSV4_CHECK(w.wq_a.in == p.hidden && w.wq_a.out == p.q_lora_rank, "wq_a [{}, {}]", w.wq_a.out, w.wq_a.in);
      DSV4_CHECK(w.wq_b.in == p.q_lora_rank && w.wq_b.out == int64_t{p.n_heads} * p.head_dim,
                 "wq_b [{}, {}]", w.wq_b.out, w.wq_b.in);
      if (w.wq_a.quantized()) actq_rows(io.a, T, p.hidden, aq, tid, nthreads);
      return;
    case 1:
      linear(w.wq_a, a_in, T, qa, tid, nthreads);
      return;
    case 2: {
      const Range r = split_range(T, tid, nthreads);
      rmsnorm(qa + r.begin * p.q_lora_rank, w.q_norm, io.qr + r.begin * p.q_lora_rank, r.size(),
              p.q_lora_rank, p.eps, 0, 1);
      if (w.wq_b.quantized())
        actq_rows(io.qr + r.begin * p.q_lora_rank, r.size(), p.q_lora_rank,
                  qrq + r.begin * p.q_lora_rank, 0, 1);
      return;
    }
    case 3:
      linear(w.wq_b, qr_in, T, io.q, tid, nthreads);
      return;
    case 4: {
      DSV4_CHECK(p.rope_dim % 2 == 0 && p.rope_dim <= kRopeMaxDim && p.rope_dim <= p.head_dim,
                 "rope_dim {} (max {}, head {})", p.rope_dim, kRopeMaxDim, p.head_dim);
      const head_rms_tile::HeadsFn heads = heads_fn();
      const float inv_n = static_cast<float>(1.0 / p.head_dim);
      // (row, head) pairs split; RoPE tables once per run of a row's heads.
      for_row_runs(split_range(T * p.n_heads, tid, nthreads), p.n_heads, [&](int64_t t, int64_t h0, int64_t h1) {
        float cs[kRopeMaxDim / 2], sn[kRopeMaxDim / 2];
        rope_tables(w.inv_freq, p.rope_dim, io.pos[t], /*inverse=*/false, cs, sn);
        heads(io.q + (t * p.n_heads + h0) * p.head_dim, h1 - h0, p.head_dim, inv_n, p.eps,
              head_rms_tile::HeadRope{p.rope_dim, cs, sn});
      });
      return;
    }
  }
  DSV4_CHECK(false, "q_path phase {} of {}", phase, kQPathPhases);
}

}  // namespace dsv4::kernels
