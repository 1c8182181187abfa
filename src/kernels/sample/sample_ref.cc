// Reference sampler: model.md §10.2 step by step with a stable sort of the ids.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/check.h"
#include "kernels/sample/sample.h"

namespace dsv4::kernels {
namespace {

int32_t sample_row_ref(const float* l, int64_t V, const SampleRow& row) {
  const SamplingParams& sp = row.params;
  DSV4_CHECK(sp.temperature >= 0.0f, "temperature {}", sp.temperature);
  if (sp.temperature == 0.0f) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (l[v] > l[best]) best = v;
    return static_cast<int32_t>(best);
  }
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
  int64_t K = V;
  if (sp.top_p != 1.0f) {
    for (int64_t k = 1; k <= V; ++k)
      if (c[k] >= sp.top_p) {
        K = k;
        break;
      }
  }
  const float u = sample_uniform(sp.seed, row.position, row.draft_slot);
  const float theta = u * c[K];
  for (int64_t k = 1; k <= K; ++k)
    if (c[k] > theta) return order[k - 1];
  return order[0];
}

}  // namespace

void sample_ref(const float* logits, int64_t T, int64_t V, const SampleRow* rows, int32_t* tokens) {
  for (int64_t t = 0; t < T; ++t) tokens[t] = sample_row_ref(logits + t * V, V, rows[t]);
}

}  // namespace dsv4::kernels
