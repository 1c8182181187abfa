// Reference sampler: model.md §10.2 step by step with a stable sort of the ids.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "kernels/sample/sample.h"

namespace dsv4::kernels {
namespace {

// p (softmax at the temperature), the order by p descending, the running sums c and K.
struct Dist {
  std::vector<float> p;
  std::vector<int32_t> order;
  std::vector<float> c;  // c[0] = 0, c[k] after k ids
  int64_t K = 0;
};

Dist distribution(const float* l, int64_t V, const SamplingParams& sp) {
  const float temp = sp.temperature < kMinTemperature ? kMinTemperature : sp.temperature;
  std::vector<float> x(V), e(V), p(V);
  for (int64_t v = 0; v < V; ++v) x[v] = l[v] / temp;
  float mu = x[0];
  for (int64_t v = 1; v < V; ++v) mu = std::max(mu, x[v]);
  float lane[8] = {};
  for (int64_t v = 0; v < V; ++v) {
    const float d = x[v] - mu;
    e[v] = std::exp(d);
    lane[v % 8] += e[v];
  }
  const float S =
      ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (int64_t v = 0; v < V; ++v) p[v] = e[v] / S;

  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  std::vector<float> c(V + 1);
  c[0] = 0.0f;
  for (int64_t k = 1; k <= V; ++k) c[k] = c[k - 1] + p[order[k - 1]];
  // top_k: K_k = min(top_k, V), 0 = off.
  int64_t Kk = V;
  if (sp.top_k > 0) Kk = std::min<int64_t>(sp.top_k, V);
  // min_p: the longest prefix of the first K_k ids whose p are all ≥ f32(min_p · p_{v_1}).
  int64_t Kp = Kk;
  if (sp.min_p != 0.0f) {
    const float tau = sp.min_p * p[order[0]];
    Kp = 1;
    for (int64_t k = 2; k <= Kk; ++k) {
      if (!(p[order[k - 1]] >= tau)) break;
      Kp = k;
    }
  }
  // top_p over the kept ids: fp32(top_p) when K' = V (model.md §10.2), else f32(top_p · c_{K'}).
  int64_t K = Kp;
  if (sp.top_p != 1.0f) {
    const float tau = Kp == V ? sp.top_p : sp.top_p * c[Kp];
    for (int64_t k = 1; k <= Kp; ++k)
      if (c[k] >= tau) {
        K = k;
        break;
      }
  }
  return Dist{std::move(p), std::move(order), std::move(c), K};
}

int32_t sample_row_ref(const float* l, int64_t V, const SampleRow& row) {
  const SamplingParams& sp = row.params;
  DSV4_CHECK(sp.temperature >= 0.0f, "temperature {}", sp.temperature);
  if (sp.temperature == 0.0f) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (l[v] > l[best]) best = v;
    return static_cast<int32_t>(best);
  }
  const Dist d = distribution(l, V, sp);
  const float u = sample_uniform(sp.seed, row.position, row.draft_slot);
  const float theta = u * d.c[d.K];
  for (int64_t k = 1; k <= d.K; ++k)
    if (d.c[k] > theta) return d.order[k - 1];
  return d.order[0];
}

}  // namespace

void sample_ref(const float* logits, int64_t T, int64_t V, const SampleRow* rows, int32_t* tokens) {
  for (int64_t t = 0; t < T; ++t) tokens[t] = sample_row_ref(logits + t * V, V, rows[t]);
}

void sample_distribution_ref(const float* l, int64_t V, const SamplingParams& sp, float* pi) {
  DSV4_CHECK(sp.temperature > 0.0f, "temperature {}", sp.temperature);
  const Dist d = distribution(l, V, sp);
  std::fill(pi, pi + V, 0.0f);
  for (int64_t k = 0; k < d.K; ++k) pi[d.order[k]] = d.p[d.order[k]] / d.c[d.K];
}

int32_t residual_draw_ref(const float* pt, const float* pd, int64_t V, float u) {
  std::vector<float> r(V);
  for (int64_t v = 0; v < V; ++v) r[v] = std::max(0.0f, pt[v] - pd[v]);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return r[a] > r[b]; });
  std::vector<float> c(V);
  float run = 0.0f;
  for (int64_t k = 0; k < V; ++k) c[k] = run = run + r[order[k]];
  const float Z = c[V - 1];
  if (!(Z > 0.0f)) return -1;
  const float theta = u * Z;
  for (int64_t k = 0; k < V; ++k)
    if (c[k] > theta) return order[k];
  return -1;
}

int32_t rejection_verify_ref(const RejectionRound& r, int64_t V, int32_t* tokens) {
  const SamplingParams& sp = r.params;
  std::vector<float> pt(V), pd(V);
  for (int32_t k = 1; k <= r.ell; ++k) {
    const int64_t q = r.q1 + k - 1;
    const int32_t d = r.drafts[k - 1];
    sample_distribution_ref(r.target[k - 1], V, sp, pt.data());
    sample_distribution_ref(r.draft[k - 1], V, sp, pd.data());
    const double test = static_cast<double>(sample_uniform(sp.seed, q, 2)) * static_cast<double>(pd[d]);
    if (test < static_cast<double>(pt[d])) {
      tokens[k - 1] = d;
      continue;
    }
    int32_t b = residual_draw_ref(pt.data(), pd.data(), V, sample_uniform(sp.seed, q, 3));
    if (b < 0) {
      const SampleRow row{sp, q, 3};
      sample_ref(r.target[k - 1], 1, V, &row, &b);
    }
    tokens[k - 1] = b;
    return k - 1;
  }
  const SampleRow row{sp, r.q1 + r.ell, 0};
  sample_ref(r.target[r.ell], 1, V, &row, &tokens[r.ell]);
  return r.ell;
}

}  // namespace dsv4::kernels
