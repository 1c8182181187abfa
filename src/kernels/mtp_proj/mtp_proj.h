// MTP input projection (model.md §11, §0.4.5 A16), per row t (position p, next
// token t_{p+1} = next_tok[t], main model's final stack Xfinal = X[t]):
//   ê   = RMSNorm(embed[next_tok[t]]; enorm)                  [D] bf16
//   Ĥ_k = RMSNorm(X[t, k]; hnorm)                              [N, D] bf16, each stream
//   Z_k = bf16( f32( Linear(e_proj, ê) + Linear(h_proj, Ĥ_k) ) )
//         both terms bf16 (actq on ê / Ĥ_k when the weight is stored FP8/FP4); the e_proj
//         term is shared by the N streams; the sum is rounded to bf16.
// next_tok [T] int32 (valid ids: embed.h validate_token_ids), X [T, N, D] bf16,
// Z [T, N, D] bf16 (Z == X not allowed).
//
// Engine: kMtpProjPhases phases, each its own ThreadPool::run:
//   0 embed + enorm + actq for the T rows, hnorm + actq for the T·N streams   vectors split
//   1 e_proj (T rows) and h_proj (T·N rows)                                   columns split
//   2 Z = bf16(ep + hp)                                                       (row, stream) split
#pragma once

#include <cstdint>

#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

struct MtpProjParams {
  int64_t vocab_size = 0;  // V
  int64_t hidden = 0;      // D
  int hc_mult = 0;         // N
  float eps = 1e-6f;       // fp32(rms_norm_eps)
};

struct MtpProjWeights {
  const bf16* embed = nullptr;  // [V, D] (shared with the main model)
  const bf16* enorm = nullptr;  // [D]
  const bf16* hnorm = nullptr;  // [D]
  LinearWeight e_proj;          // [D, D]
  LinearWeight h_proj;          // [D, D]
};

struct MtpProjIO {
  int64_t T = 0;
  const int32_t* next_tok = nullptr;  // [T]
  const bf16* X = nullptr;            // [T, N, D]
  bf16* Z = nullptr;                  // [T, N, D] out
  bf16* scratch = nullptr;            // mtp_proj_scratch_elems(p, capacity) bf16
};

// bf16 elements of scratch for T <= capacity rows, in this order:
// ê [T, D], êq [T, D], Ĥ [T·N, D], Ĥq [T·N, D], ep [T, D], hp [T·N, D].
int64_t mtp_proj_scratch_elems(const MtpProjParams& p, int64_t capacity);

void mtp_proj_ref(const MtpProjParams& p, const MtpProjWeights& w, const int32_t* next_tok,
                  const bf16* X, int64_t T, bf16* Z);

constexpr int kMtpProjPhases = 3;
void mtp_proj(int phase, const MtpProjParams& p, const MtpProjWeights& w, const MtpProjIO& io,
              int tid, int nthreads);

}  // namespace dsv4::kernels
