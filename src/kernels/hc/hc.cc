// Engine hyper-connections: the op sequence of hc_ref.cc; the long reductions (fn·x, Σx²) are
// the lane dots of kernels/lane_dot (8 interleaved fp32 sums, a fixed tree), so a row's bits
// depend only on N·D, never on T, the row's tile or the thread count.
#include <algorithm>
#include <bit>
#include <cmath>

#include "base/check.h"
#include "base/math.h"
#include "kernels/hc/hc.h"
#include "kernels/lane_dot/lane_dot.h"

namespace dsv4::kernels {
namespace {

constexpr int kRowTile = kLaneDotMaxRows;  // rows sharing one pass over an fn row
constexpr int64_t kChunk = 64;  // hidden elements per hc_post work item / y chunk

inline float to_f32(bf16 v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }

float rms_factor(const bf16* x, int64_t n, float eps) {
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(n));
  float squares = 0.0f;
  lane_dot_rows(x, &x, 1, n, &squares);  // Σ₃₂ x² in the lane order
  const float mean = squares * inv_n;
  const float v = mean + eps;
  return 1.0f / std::sqrt(v);
}

inline float sigmoid(float z) {
  const float e = std::exp(-z);
  const float d = 1.0f + e;
  return 1.0f / d;
}

// y[d] = bf16(Σ_k f32(pre_k · x_k[d])), k ascending.
void collapse(const bf16* Xt, const float* pre, int64_t N, int64_t D, bf16* y) {
  for (int64_t d0 = 0; d0 < D; d0 += kChunk) {
    const int64_t n = std::min(kChunk, D - d0);
    float acc[kChunk] = {};
    for (int64_t k = 0; k < N; ++k) {
      const bf16* xk = Xt + k * D + d0;
      const float pk = pre[k];
      for (int64_t i = 0; i < n; ++i) acc[i] += pk * to_f32(xk[i]);
    }
    for (int64_t i = 0; i < n; ++i) y[d0 + i] = bf16::from_float(acc[i]);
  }
}

// Sinkhorn-Knopp on the N×N comb logits Z (row j = source), result C.
void sinkhorn(const float* Z, int64_t N, int64_t iters, float eps, float* C) {
  for (int64_t j = 0; j < N; ++j) {
    const float* Zj = Z + j * N;
    float mu = Zj[0];
    for (int64_t k = 1; k < N; ++k) mu = std::max(mu, Zj[k]);
    float e[kHcMaxMult];
    float S = 0.0f;
    for (int64_t k = 0; k < N; ++k) {
      e[k] = std::exp(Zj[k] - mu);
      S += e[k];
    }
    for (int64_t k = 0; k < N; ++k) C[j * N + k] = e[k] / S + eps;
  }
  for (int64_t it = 0; it < iters; ++it) {
    if (it > 0) {  // row step
      for (int64_t j = 0; j < N; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < N; ++k) s += C[j * N + k];
        const float d = s + eps;
        for (int64_t k = 0; k < N; ++k) C[j * N + k] /= d;
      }
    }
    for (int64_t k = 0; k < N; ++k) {  // column step
      float s = 0.0f;
      for (int64_t j = 0; j < N; ++j) s += C[j * N + k];
      const float d = s + eps;
      for (int64_t j = 0; j < N; ++j) C[j * N + k] /= d;
    }
  }
}

}  // namespace

void hc_mix(const bf16* X, const float* fn, int64_t n_mix, const HcParams& p, int64_t T, float* mix,
            int tid, int nthreads) {
  const int64_t n = p.width();
  const Range r = split_range(n_mix, tid, nthreads);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float* w = fn + i * n;
    int64_t t = 0;
    for (; t + kRowTile <= T; t += kRowTile) {
      const bf16* x[kRowTile];
      float out[kRowTile];
      for (int q = 0; q < kRowTile; ++q) x[q] = X + (t + q) * n;
      lane_dot_rows(w, x, kRowTile, n, out);
      for (int q = 0; q < kRowTile; ++q) mix[(t + q) * n_mix + i] = out[q];
    }
    for (; t < T; ++t) {
      const bf16* x[1] = {X + t * n};
      lane_dot_rows(w, x, 1, n, &mix[t * n_mix + i]);
    }
  }
}

void hc_pre_apply(const bf16* X, const HcPreWeights& w, const HcParams& p, int64_t T,
                  const float* mix, bf16* y, float* post, float* comb, int tid, int nthreads) {
  const int64_t N = p.hc_mult, D = p.hidden, M = p.n_mix();
  DSV4_CHECK(N >= 1 && N <= kHcMaxMult, "hc_mult {}", N);
  DSV4_CHECK(p.sinkhorn_iters >= 1, "hc_sinkhorn_iters {}", p.sinkhorn_iters);
  const Range r = split_range(T, tid, nthreads);
  for (int64_t t = r.begin; t < r.end; ++t) {
    const bf16* Xt = X + t * N * D;
    const float rho = rms_factor(Xt, N * D, p.rms_norm_eps);
    float z[(2 + kHcMaxMult) * kHcMaxMult];
    for (int64_t i = 0; i < M; ++i) {
      const int g = i < N ? 0 : (i < 2 * N ? 1 : 2);
      const float m = mix[t * M + i] * rho;
      z[i] = m * w.scale[g] + w.base[i];
    }
    float pre[kHcMaxMult];
    for (int64_t k = 0; k < N; ++k) {
      pre[k] = sigmoid(z[k]) + p.hc_eps;
      post[t * N + k] = 2.0f * sigmoid(z[N + k]);
    }
    float C[kHcMaxMult * kHcMaxMult];
    sinkhorn(z + 2 * N, N, p.sinkhorn_iters, p.hc_eps, C);
    std::copy(C, C + N * N, comb + t * N * N);
    collapse(Xt, pre, N, D, y + t * D);
  }
}

void hc_head_apply(const bf16* X, const HcHeadWeights& w, const HcParams& p, int64_t T,
                   const float* mix, bf16* y, int tid, int nthreads) {
  const int64_t N = p.hc_mult, D = p.hidden;
  DSV4_CHECK(N >= 1 && N <= kHcMaxMult, "hc_mult {}", N);
  const Range r = split_range(T, tid, nthreads);
  for (int64_t t = r.begin; t < r.end; ++t) {
    const bf16* Xt = X + t * N * D;
    const float rho = rms_factor(Xt, N * D, p.rms_norm_eps);
    float pre[kHcMaxMult];
    for (int64_t k = 0; k < N; ++k) {
      const float m = mix[t * N + k] * rho;
      const float z = m * w.scale[0] + w.base[k];
      pre[k] = sigmoid(z) + p.hc_eps;
    }
    collapse(Xt, pre, N, D, y + t * D);
  }
}

namespace {

// hc_post of row t on columns [d0, d0 + n), n <= kChunk.
void hc_post_chunk(const bf16* f, const bf16* X, const float* post, const float* comb, int64_t N, int64_t D,
                   int64_t t, int64_t d0, int64_t n, bf16* X_out) {
  const bf16* Xt = X + t * N * D;
  const float* Ct = comb + t * N * N;
  const bf16* ft = f + t * D + d0;
  float out[kHcMaxMult][kChunk];  // all N streams first: X_out may alias X
  for (int64_t k = 0; k < N; ++k) {
    float s[kChunk] = {};
    for (int64_t j = 0; j < N; ++j) {
      const float c = Ct[j * N + k];
      const bf16* xj = Xt + j * D + d0;
      for (int64_t i = 0; i < n; ++i) s[i] += c * to_f32(xj[i]);
    }
    const float pk = post[t * N + k];
    for (int64_t i = 0; i < n; ++i) out[k][i] = pk * to_f32(ft[i]) + s[i];
  }
  for (int64_t k = 0; k < N; ++k)
    for (int64_t i = 0; i < n; ++i) X_out[t * N * D + k * D + d0 + i] = bf16::from_float(out[k][i]);
}

}  // namespace

void hc_post(const bf16* f, const bf16* X, const float* post, const float* comb, const HcParams& p,
             int64_t T, bf16* X_out, int tid, int nthreads) {
  const int64_t N = p.hc_mult, D = p.hidden;
  DSV4_CHECK(N >= 1 && N <= kHcMaxMult, "hc_mult {}", N);
  const int64_t n_chunks = ceil_div(D, kChunk);
  const Range r = split_range(T * n_chunks, tid, nthreads);
  for (int64_t item = r.begin; item < r.end; ++item) {
    const int64_t t = item / n_chunks, d0 = (item % n_chunks) * kChunk;
    hc_post_chunk(f, X, post, comb, N, D, t, d0, std::min(kChunk, D - d0), X_out);
  }
}

void hc_post_cols(const bf16* f, const bf16* X, const float* post, const float* comb, const HcParams& p,
                  int64_t T, int64_t d0, int64_t d1, bf16* X_out) {
  const int64_t N = p.hc_mult, D = p.hidden;
  DSV4_CHECK(N >= 1 && N <= kHcMaxMult, "hc_mult {}", N);
  DSV4_CHECK(0 <= d0 && d0 <= d1 && d1 <= D, "hc_post columns [{}, {}) of {}", d0, d1, D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = d0; c < d1; c += kChunk) hc_post_chunk(f, X, post, comb, N, D, t, c, std::min(kChunk, d1 - c), X_out);
}

void hc_stream_mean(const bf16* X, const HcParams& p, int64_t T, bf16* F, int64_t stride, int tid,
                    int nthreads) {
  const int64_t N = p.hc_mult, D = p.hidden;
  const int64_t n_chunks = ceil_div(D, kChunk);
  const float inv_n = 1.0f / static_cast<float>(N);
  const Range r = split_range(T * n_chunks, tid, nthreads);
  for (int64_t item = r.begin; item < r.end; ++item) {
    const int64_t t = item / n_chunks, d0 = (item % n_chunks) * kChunk;
    const int64_t n = std::min(kChunk, D - d0);
    float s[kChunk] = {};
    for (int64_t k = 0; k < N; ++k) {
      const bf16* xk = X + (t * N + k) * D + d0;
      for (int64_t i = 0; i < n; ++i) s[i] += to_f32(xk[i]);
    }
    for (int64_t i = 0; i < n; ++i) F[t * stride + d0 + i] = bf16::from_float(s[i] * inv_n);
  }
}

}  // namespace dsv4::kernels
