// Query path (model.md §6.1, §0.4.5 A4), per row t at position pos[t]:
//   qa = Linear(wq_a, a)          [T, Rq]    bf16 (actq on a when wq_a is stored FP8/FP4)
//   qr = RMSNorm(qa; q_norm)      [T, Rq]    bf16 (A3; also the indexer's input)
//   q  = Linear(wq_b, qr)         [T, H, Dh] bf16 (actq on qr when wq_b is stored FP8/FP4)
//   per head, in bf16 arithmetic (head_rms; five bf16 roundings):
//     sq_i = bf16(q_i·q_i);  μ = bf16(f32(Σ₃₂ sq_i · fp32(1/Dh)));  v = bf16(f32(μ + fp32(ε)))
//     r = bf16(rsqrt(v));    q_i = bf16(f32(q_i · r))
//   RoPE on the last Dr dims of every head (A5, the layer's profile table)
// The fp32-factor form q_i = bf16(q_i·ρ_Dh) is Level B, not this.
// Σ₃₂ sq_i is summed in ascending i (engine and reference); rsqrt is 1/sqrt.
//
// Engine: kQPathPhases phases, each its own ThreadPool::run (barrier between):
//   0 actq(a) -> aq          rows split        (skipped when wq_a is BF16)
//   1 wq_a: aq -> qa         columns split
//   2 q_norm: qa -> qr; actq(qr) -> qrq       rows split
//   3 wq_b: qrq -> q         columns split
//   4 head_rms + RoPE on q   (row, head) pairs split
#pragma once

#include <cstdint>

#include "base/cpu.h"
#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

struct QPathParams {
  int64_t hidden = 0;       // D
  int64_t q_lora_rank = 0;  // Rq
  int n_heads = 0;          // H (heads of this call)
  int head_dim = 0;         // Dh
  int rope_dim = 0;         // Dr
  float eps = 1e-6f;        // fp32(rms_norm_eps)
};

struct QPathWeights {
  LinearWeight wq_a;                // [Rq, D]
  const bf16* q_norm = nullptr;     // [Rq]
  LinearWeight wq_b;                // [H·Dh, Rq]
  const float* inv_freq = nullptr;  // [Dr/2], the layer's RoPE profile
};

struct QPathIO {
  int64_t T = 0;
  const bf16* a = nullptr;        // [T, D]   attention input (after attn_norm)
  const int64_t* pos = nullptr;   // [T]
  bf16* qr = nullptr;             // [T, Rq]  out
  bf16* q = nullptr;              // [T, H, Dh] out
  bf16* scratch = nullptr;        // q_path_scratch_elems(p, capacity) bf16
};

// Per-head RMS of A4 on q [T, H, Dh], in place.
void head_rms_ref(bf16* q, int64_t T, int n_heads, int head_dim, float eps);
void head_rms(bf16* q, int64_t T, int n_heads, int head_dim, float eps, int tid, int nthreads);
// ISA of head_rms (phase 4 too; head_rms_tile.h: every variant gives the same bits):
// detect_isa() unless set. Set it between steps, not while a call runs.
void set_q_path_isa(Isa isa);
Isa q_path_isa();

// bf16 elements of scratch for T <= capacity rows: aq [T, D], qa [T, Rq], qrq [T, Rq].
int64_t q_path_scratch_elems(const QPathParams& p, int64_t capacity);
// Where q_path keeps actq(a) [T, D] (after phase 0) and actq(qr) [T, Rq] (after phase 2) in
// io.scratch, for other kernels on the same rows; nullptr when the weight is not quantized
// (no actq made).
const bf16* q_path_a_quantized(const QPathParams& p, const QPathWeights& w, const QPathIO& io);
const bf16* q_path_qr_quantized(const QPathParams& p, const QPathWeights& w, const QPathIO& io);

void q_path_ref(const QPathParams& p, const QPathWeights& w, const bf16* a, int64_t T,
                const int64_t* pos, bf16* qr, bf16* q);

constexpr int kQPathPhases = 5;
void q_path(int phase, const QPathParams& p, const QPathWeights& w, const QPathIO& io, int tid,
            int nthreads);

}  // namespace dsv4::kernels
