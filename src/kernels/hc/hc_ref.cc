// Reference hyper-connections: plain loops straight from model.md §0.4.5 A2, A14, A15,
// one fp32 operation per statement. The two long sums (Σx², fn·x over N·D) use the engine's
// fixed order (element c in lane c % 8, lanes combined ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))),
// so engine and reference agree bit for bit; the short sums run in ascending index order.
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/hc/hc.h"

namespace dsv4::kernels {
namespace {

float ref_sigmoid(float z) {
  const float e = std::exp(-z);
  const float d = 1.0f + e;
  return 1.0f / d;
}

float lanes8(const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

// ρ_{N·D} of the flattened fp32 row.
float rms_factor_ref(const std::vector<float>& x, float eps) {
  float lane[8] = {};
  for (size_t c = 0; c < x.size(); ++c) lane[c % 8] += x[c] * x[c];
  const float ss = lanes8(lane);
  const float inv_n = static_cast<float>(1.0 / static_cast<double>(x.size()));
  const float mean = ss * inv_n;
  const float v = mean + eps;
  return 1.0f / std::sqrt(v);
}

// m_i = f32(Σ(fn_i · x) · ρ) for i < n_mix.
std::vector<float> mixes_ref(const std::vector<float>& x, const float* fn, int64_t n_mix,
                             float rho) {
  std::vector<float> m(n_mix);
  for (int64_t i = 0; i < n_mix; ++i) {
    float lane[8] = {};
    for (size_t c = 0; c < x.size(); ++c) lane[c % 8] += fn[i * static_cast<int64_t>(x.size()) + c] * x[c];
    m[i] = lanes8(lane) * rho;
  }
  return m;
}

std::vector<float> flatten(const bf16* X, int64_t width) {
  std::vector<float> x(width);
  for (int64_t c = 0; c < width; ++c) x[c] = X[c].to_float();
  return x;
}

// y[d] = bf16(Σ_k f32(pre_k · x_k[d])).
void collapse(const std::vector<float>& x, const std::vector<float>& pre, int64_t N, int64_t D,
              bf16* y) {
  for (int64_t d = 0; d < D; ++d) {
    float acc = 0.0f;
    for (int64_t k = 0; k < N; ++k) {
      const float t = pre[k] * x[k * D + d];
      acc = acc + t;
    }
    y[d] = bf16::from_float(acc);
  }
}

}  // namespace

void hc_pre_ref(const bf16* X, const HcPreWeights& w, const HcParams& p, int64_t T, bf16* y,
                float* post, float* comb) {
  const int64_t N = p.hc_mult, D = p.hidden, M = p.n_mix();
  DSV4_CHECK(N >= 1 && N <= kHcMaxMult, "hc_mult {}", N);
  DSV4_CHECK(p.sinkhorn_iters >= 1, "hc_sinkhorn_iters {}", p.sinkhorn_iters);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> x = flatten(X + t * N * D, N * D);
    const float rho = rms_factor_ref(x, p.rms_norm_eps);
    const std::vector<float> m = mixes_ref(x, w.fn, M, rho);
    std::vector<float> z(M);
    for (int64_t i = 0; i < M; ++i) {
      const int g = i < N ? 0 : (i < 2 * N ? 1 : 2);
      const float ms = m[i] * w.scale[g];
      z[i] = ms + w.base[i];
    }
    std::vector<float> pre(N);
    for (int64_t k = 0; k < N; ++k) {
      pre[k] = ref_sigmoid(z[k]) + p.hc_eps;
      post[t * N + k] = 2.0f * ref_sigmoid(z[N + k]);
    }
    // Sinkhorn-Knopp on C[j][k], j = source row, k = destination column.
    std::vector<float> C(N * N);
    for (int64_t j = 0; j < N; ++j) {
      const float* Z = z.data() + 2 * N + j * N;
      float mu = Z[0];
      for (int64_t k = 1; k < N; ++k) mu = std::max(mu, Z[k]);
      std::vector<float> e(N);
      float S = 0.0f;
      for (int64_t k = 0; k < N; ++k) {
        e[k] = std::exp(Z[k] - mu);
        S += e[k];
      }
      for (int64_t k = 0; k < N; ++k) {
        const float pk = e[k] / S;
        C[j * N + k] = pk + p.hc_eps;
      }
    }
    auto column_step = [&] {
      for (int64_t k = 0; k < N; ++k) {
        float s = 0.0f;
        for (int64_t j = 0; j < N; ++j) s += C[j * N + k];
        const float d = s + p.hc_eps;
        for (int64_t j = 0; j < N; ++j) C[j * N + k] = C[j * N + k] / d;
      }
    };
    auto row_step = [&] {
      for (int64_t j = 0; j < N; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < N; ++k) s += C[j * N + k];
        const float d = s + p.hc_eps;
        for (int64_t k = 0; k < N; ++k) C[j * N + k] = C[j * N + k] / d;
      }
    };
    column_step();
    for (int64_t it = 1; it < p.sinkhorn_iters; ++it) {
      row_step();
      column_step();
    }
    for (int64_t i = 0; i < N * N; ++i) comb[t * N * N + i] = C[i];
    collapse(x, pre, N, D, y + t * D);
  }
}

void hc_post_ref(const bf16* f, const bf16* X, const float* post, const float* comb,
                 const HcParams& p, int64_t T, bf16* X_out) {
  const int64_t N = p.hc_mult, D = p.hidden;
  DSV4_CHECK(N >= 1 && N <= kHcMaxMult, "hc_mult {}", N);
  for (int64_t t = 0; t < T; ++t) {
    const bf16* Xt = X + t * N * D;
    const float* Ct = comb + t * N * N;
    for (int64_t d = 0; d < D; ++d) {
      float out[kHcMaxMult];  // all N results first: X_out may alias X
      const float fd = f[t * D + d].to_float();
      for (int64_t k = 0; k < N; ++k) {
        float s = 0.0f;
        for (int64_t j = 0; j < N; ++j) {
          const float c = Ct[j * N + k] * Xt[j * D + d].to_float();
          s = s + c;
        }
        const float pf = post[t * N + k] * fd;
        out[k] = pf + s;
      }
      for (int64_t k = 0; k < N; ++k) X_out[t * N * D + k * D + d] = bf16::from_float(out[k]);
    }
  }
}

void hc_head_ref(const bf16* X, const HcHeadWeights& w, const HcParams& p, int64_t T, bf16* y) {
  const int64_t N = p.hc_mult, D = p.hidden;
  DSV4_CHECK(N >= 1 && N <= kHcMaxMult, "hc_mult {}", N);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> x = flatten(X + t * N * D, N * D);
    const float rho = rms_factor_ref(x, p.rms_norm_eps);
    const std::vector<float> m = mixes_ref(x, w.fn, N, rho);
    std::vector<float> pre(N);
    for (int64_t k = 0; k < N; ++k) {
      const float ms = m[k] * w.scale[0];
      const float z = ms + w.base[k];
      pre[k] = ref_sigmoid(z) + p.hc_eps;
    }
    collapse(x, pre, N, D, y + t * D);
  }
}

void hc_stream_mean_ref(const bf16* X, const HcParams& p, int64_t T, bf16* F, int64_t stride) {
  const int64_t N = p.hc_mult, D = p.hidden;
  const float inv_n = 1.0f / static_cast<float>(N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) {
      float sum = 0.0f;
      for (int64_t k = 0; k < N; ++k) sum += X[(t * N + k) * D + d].to_float();
      F[t * stride + d] = bf16::from_float(sum * inv_n);
    }
}

}  // namespace dsv4::kernels
