// Manifold-constrained hyper-connections (model.md §5; Level A §0.4.5 A2, A14, A15).
// Streams X: [T, N, D] bf16 (N = hc_mult), flattened stream-major: x[k·D + d] = X[k][d].
// Every value below is fp32 with each operation rounded (f32), unless marked bf16.
//
// hc_pre (A2), per row; M = (2+N)·N mixing entries, fn [M, N·D] fp32, scale [3], base [M]:
//   x      = fp32(X)                                          exact
//   ρ      = rsqrt(f32(f32(Σ₃₂ x² · fp32(1/(N·D))) + ε))      ε = rms_norm_eps
//   m_i    = f32(Σ₃₂(fn_i · x) · ρ)
//   z_i    = f32(f32(m_i · scale_g) + base_i)                 g = 0 for i < N (pre), 1 for i < 2N (post), 2 (comb)
//   pre_k  = f32(sigmoid(z_k) + εh)                           sigmoid(z) = f32(1 / f32(1 + exp(−z)))
//   post_k = f32(2 · sigmoid(z_{N+k}))
//   Z_jk   = z_{2N + j·N + k}                                 j = source stream, k = destination stream
//   C_jk   = f32(softmax_k(Z_j·)_k + εh)                      softmax: exp(f32(Z − rowmax)), f32(e / Σ₃₂ e)
//   column step: C_jk = f32(C_jk / f32(Σ₃₂_j' C_j'k + εh)); then Th − 1 times: row step, column step
//   y      = bf16(Σ₃₂_k f32(pre_k · x_k))
// Outputs y [T, D] bf16, post [T, N] fp32, comb [T, N, N] fp32 (comb[t][j][k] = C_jk).
//
// hc_post (A14): X'_k = bf16(f32(f32(post_k · f) + Σ₃₂_j f32(comb_jk · X_j)))  (Σ over j ascending, then
//   the post term added); f [T, D] bf16, X and X' [T, N, D] bf16 (X' == X allowed).
//
// hc_head (A15, before the final norm): fn [N, N·D], one scale, base [N]:
//   m_k = f32(Σ₃₂(fn_k · x) · ρ); z_k = f32(f32(m_k · scale) + base_k); pre_k = f32(sigmoid(z_k) + εh);
//   y = bf16(Σ₃₂_k f32(pre_k · x_k)).
//
// hc_stream_mean (dspark.md §2, A17: the DSpark target features): F[d] = bf16(f32(Σ₃₂_k x_k[d]) ·
//   fp32(1/N)), the sum over k ascending; X [T, N, D] -> F rows of `stride` elements (a
//   layer's slice of the feature row).
//
// Engine: two phases, each its own ThreadPool::run:
//   hc_mix   raw dots mix[t][i] = Σ₃₂(fn_i · x_t) into caller scratch [T, n_mix] (mixing rows split
//            over threads: each fn row is read once for all T rows);
//   hc_pre_apply / hc_head_apply  ρ, gates, Sinkhorn and y per row (rows split over threads).
// Each dot and Σx² sums in a fixed order that depends only on N·D (the 8 lanes and fixed tree of
// kernels/lane_dot).
#pragma once

#include <cstdint>

#include "numeric/bf16.h"

namespace dsv4::kernels {

constexpr int kHcMaxMult = 16;  // bound on hc_mult (stack arrays of N² floats)

struct HcParams {
  int64_t hc_mult = 4;          // N
  int64_t hidden = 0;           // D
  int64_t sinkhorn_iters = 20;  // Th
  float hc_eps = 1e-6f;         // εh
  float rms_norm_eps = 1e-6f;   // ε

  int64_t n_mix() const { return (2 + hc_mult) * hc_mult; }  // M
  int64_t width() const { return hc_mult * hidden; }         // N·D
};

struct HcPreWeights {
  const float* fn = nullptr;     // [M, N·D]
  const float* scale = nullptr;  // [3]: pre, post, comb
  const float* base = nullptr;   // [M]
};

struct HcHeadWeights {
  const float* fn = nullptr;     // [N, N·D]
  const float* scale = nullptr;  // [1]
  const float* base = nullptr;   // [N]
};

// --- reference (single-threaded, obviously correct) ---
void hc_pre_ref(const bf16* X, const HcPreWeights& w, const HcParams& p, int64_t T, bf16* y,
                float* post, float* comb);
void hc_post_ref(const bf16* f, const bf16* X, const float* post, const float* comb,
                 const HcParams& p, int64_t T, bf16* X_out);
void hc_head_ref(const bf16* X, const HcHeadWeights& w, const HcParams& p, int64_t T, bf16* y);
void hc_stream_mean_ref(const bf16* X, const HcParams& p, int64_t T, bf16* F, int64_t stride);

// --- engine (inside ThreadPool::run; no allocation) ---
// Scratch floats of hc_mix's output for `capacity` rows and n_mix mixing rows.
inline int64_t hc_mix_scratch_floats(int64_t n_mix, int64_t capacity) { return n_mix * capacity; }

// mix[t][i] = Σ₃₂(fn[i] · fp32(X[t])) for i < n_mix (n_mix = p.n_mix() for hc_pre, p.hc_mult for
// hc_head). X [T, N, D], fn [n_mix, N·D], mix [T, n_mix].
void hc_mix(const bf16* X, const float* fn, int64_t n_mix, const HcParams& p, int64_t T, float* mix,
            int tid, int nthreads);
// After hc_mix with fn = w.fn and n_mix = p.n_mix().
void hc_pre_apply(const bf16* X, const HcPreWeights& w, const HcParams& p, int64_t T,
                  const float* mix, bf16* y, float* post, float* comb, int tid, int nthreads);
// After hc_mix with fn = w.fn and n_mix = p.hc_mult.
void hc_head_apply(const bf16* X, const HcHeadWeights& w, const HcParams& p, int64_t T,
                   const float* mix, bf16* y, int tid, int nthreads);
void hc_post(const bf16* f, const bf16* X, const float* post, const float* comb, const HcParams& p,
             int64_t T, bf16* X_out, int tid, int nthreads);
// hc_post on hidden columns [d0, d1) of every row, on the calling thread: each element's
// arithmetic is hc_post's, so a thread that wrote those columns of f may run it in the same run.
void hc_post_cols(const bf16* f, const bf16* X, const float* post, const float* comb, const HcParams& p,
                  int64_t T, int64_t d0, int64_t d1, bf16* X_out);
// (row, D-chunk) items split over threads.
void hc_stream_mean(const bf16* X, const HcParams& p, int64_t T, bf16* F, int64_t stride, int tid,
                    int nthreads);

}  // namespace dsv4::kernels
