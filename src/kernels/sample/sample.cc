// Engine sampler (and the parameter check and counter-based uniform shared with the reference).
// Per row: one pass for x and its max, one for e and S, one for p and the sort keys, an LSD
// radix sort over the 32 key bits (passes whose digit is constant are skipped), then the
// running sums twice (find K and c_K, then the first c_k > θ).
#include <algorithm>
#include <bit>
#include <cmath>

#include "base/check.h"
#include "base/math.h"
#include "kernels/sample/sample.h"

namespace dsv4::kernels {
namespace {

int64_t probs_bytes(int64_t V) { return ceil_div<int64_t>(V * 4, 8) * 8; }
int64_t thread_bytes(int64_t V) { return probs_bytes(V) + 2 * V * 8; }

// Stable LSD radix sort of n keys by their upper 32 bits, 8 bits per pass; returns the buffer
// that holds the result (a or b).
uint64_t* radix_sort_hi32(uint64_t* a, uint64_t* b, int64_t n) {
  for (int shift = 32; shift < 64; shift += 8) {
    int64_t count[256] = {};
    for (int64_t i = 0; i < n; ++i) ++count[(a[i] >> shift) & 255];
    if (count[(a[0] >> shift) & 255] == n) continue;  // one digit value: order unchanged
    int64_t run = 0;
    for (int d = 0; d < 256; ++d) {
      const int64_t c = count[d];
      count[d] = run;
      run += c;
    }
    for (int64_t i = 0; i < n; ++i) b[count[(a[i] >> shift) & 255]++] = a[i];
    std::swap(a, b);
  }
  return a;
}

int32_t id_of(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

// The sorted order of the ids by the non-negative values w (descending, equal → lower id).
const uint64_t* sort_desc(const float* w, int64_t V, uint64_t* a, uint64_t* b) {
  // w ≥ 0: its bit pattern orders like the value; ~bits sorts descending, the id breaks ties.
  for (int64_t i = 0; i < V; ++i)
    a[i] = (static_cast<uint64_t>(~std::bit_cast<uint32_t>(w[i])) << 32) | static_cast<uint64_t>(i);
  return radix_sort_hi32(a, b, V);
}

// p (model.md §10.2 at T > 0) into p, the order by p, K and c_K.
struct Kept {
  const uint64_t* order;
  int64_t K;
  float cK;
};
Kept distribution(const float* l, int64_t V, const SamplingParams& sp, float* p, uint64_t* a, uint64_t* b) {
  const float temp = sp.temperature < kMinTemperature ? kMinTemperature : sp.temperature;
  float mu = -INFINITY;
  for (int64_t v = 0; v < V; ++v) {
    p[v] = l[v] / temp;
    mu = std::max(mu, p[v]);
  }
  float lane[8] = {};
  int64_t v = 0;
  for (; v + 8 <= V; v += 8)
    for (int i = 0; i < 8; ++i) {
      p[v + i] = std::exp(p[v + i] - mu);
      lane[i] += p[v + i];
    }
  for (; v < V; ++v) {
    p[v] = std::exp(p[v] - mu);
    lane[v % 8] += p[v];
  }
  const float S =
      ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (int64_t i = 0; i < V; ++i) p[i] = p[i] / S;
  const uint64_t* order = sort_desc(p, V, a, b);
  // top_k, then min_p: the kept prefix v_1 … v_{Kp}.
  int64_t Kp = sp.top_k > 0 && sp.top_k < V ? sp.top_k : V;
  if (sp.min_p != 0.0f) {
    const float tau = sp.min_p * p[id_of(order[0])];
    int64_t k = 1;
    while (k < Kp && p[id_of(order[k])] >= tau) ++k;
    Kp = k;
  }
  // top_p over the kept prefix: model.md's fp32(top_p) when nothing was cut, else top_p of c_{Kp}.
  float tau = sp.top_p;
  if (sp.top_p != 1.0f && Kp < V) {
    float cKp = 0.0f;
    for (int64_t k = 0; k < Kp; ++k) cKp = cKp + p[id_of(order[k])];
    tau = sp.top_p * cKp;
  }
  int64_t K = Kp;
  float cK = 0.0f;
  for (int64_t k = 0; k < Kp; ++k) {
    cK = cK + p[id_of(order[k])];
    if (sp.top_p != 1.0f && cK >= tau) {
      K = k + 1;
      break;
    }
  }
  return Kept{order, K, cK};
}

int32_t sample_row(const float* l, int64_t V, const SampleRow& row, float* p, uint64_t* a, uint64_t* b) {
  const SamplingParams& sp = row.params;
  DSV4_CHECK(sp.temperature >= 0.0f, "temperature {}", sp.temperature);
  if (sp.temperature == 0.0f) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (l[v] > l[best]) best = v;
    return static_cast<int32_t>(best);
  }
  const Kept d = distribution(l, V, sp, p, a, b);
  const float theta = sample_uniform(sp.seed, row.position, row.draft_slot) * d.cK;
  float c = 0.0f;
  for (int64_t k = 0; k < d.K; ++k) {
    c = c + p[id_of(d.order[k])];
    if (c > theta) return id_of(d.order[k]);
  }
  return id_of(d.order[0]);
}

// One thread's scratch: p [V] floats, then two key buffers [V].
struct RowScratch {
  float* p;
  uint64_t* a;
  uint64_t* b;
};
RowScratch row_scratch(int64_t V, void* scratch, int64_t scratch_bytes) {
  DSV4_CHECK(thread_bytes(V) <= scratch_bytes, "sample scratch {} bytes, need {}", scratch_bytes, thread_bytes(V));
  char* mine = static_cast<char*>(scratch);
  uint64_t* a = reinterpret_cast<uint64_t*>(mine + probs_bytes(V));
  return RowScratch{reinterpret_cast<float*>(mine), a, a + V};
}

}  // namespace

Status validate_sampling_params(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature))
    return Status::errorf("temperature: {} is not a finite value >= 0", p.temperature);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return Status::errorf("top_p: {} is outside (0, 1]", p.top_p);
  if (p.top_k < 0) return Status::errorf("top_k: {} is negative (0 = off)", p.top_k);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    return Status::errorf("min_p: {} is outside [0, 1]", p.min_p);
  return Status();
}

uint64_t sample_mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float sample_uniform(uint64_t seed, int64_t q, int j) {
  DSV4_CHECK(q >= 0 && q < (int64_t{1} << 56) && j >= 0 && j < 256, "q {} j {}", q, j);
  const uint64_t key =
      sample_mix(seed) ^ ((static_cast<uint64_t>(q) << 8) + static_cast<uint64_t>(j));
  return static_cast<float>(sample_mix(key) >> 40) * 0x1p-24f;
}

int64_t sample_scratch_bytes(int64_t V, int nthreads) { return thread_bytes(V) * nthreads; }

namespace {

template <class RowAt>
void sample_rows(RowAt row_at, int64_t T, int64_t V, const SampleRow* rows, int32_t* tokens, void* scratch,
                 int64_t scratch_bytes, int tid, int nthreads) {
  DSV4_CHECK(V >= 1 && V <= (int64_t{1} << 31), "vocab {}", V);
  DSV4_CHECK(thread_bytes(V) * (tid + 1) <= scratch_bytes, "sample scratch {} bytes for thread {}",
             scratch_bytes, tid);
  const RowScratch w = row_scratch(V, static_cast<char*>(scratch) + thread_bytes(V) * tid, thread_bytes(V));
  const Range r = split_range(T, tid, nthreads);
  for (int64_t t = r.begin; t < r.end; ++t) tokens[t] = sample_row(row_at(t), V, rows[t], w.p, w.a, w.b);
}

}  // namespace

void sample(const float* logits, int64_t T, int64_t V, const SampleRow* rows, int32_t* tokens,
            void* scratch, int64_t scratch_bytes, int tid, int nthreads) {
  sample_rows([&](int64_t t) { return logits + t * V; }, T, V, rows, tokens, scratch, scratch_bytes, tid,
              nthreads);
}

void sample(const float* const* logits, int64_t T, int64_t V, const SampleRow* rows, int32_t* tokens,
            void* scratch, int64_t scratch_bytes, int tid, int nthreads) {
  sample_rows([&](int64_t t) { return logits[t]; }, T, V, rows, tokens, scratch, scratch_bytes, tid, nthreads);
}

int64_t rejection_scratch_bytes(int64_t V) { return thread_bytes(V) + 2 * probs_bytes(V); }

void sample_distribution(const float* l, int64_t V, const SamplingParams& sp, float* pi, void* scratch,
                         int64_t scratch_bytes) {
  DSV4_CHECK(sp.temperature > 0.0f, "temperature {}", sp.temperature);
  const RowScratch w = row_scratch(V, scratch, scratch_bytes);
  const Kept d = distribution(l, V, sp, w.p, w.a, w.b);
  std::fill(pi, pi + V, 0.0f);
  for (int64_t k = 0; k < d.K; ++k) {
    const int32_t v = id_of(d.order[k]);
    pi[v] = w.p[v] / d.cK;
  }
}

int32_t residual_draw(const float* pt, const float* pd, int64_t V, float u, void* scratch, int64_t scratch_bytes) {
  const RowScratch w = row_scratch(V, scratch, scratch_bytes);
  for (int64_t v = 0; v < V; ++v) w.p[v] = std::max(0.0f, pt[v] - pd[v]);
  const uint64_t* order = sort_desc(w.p, V, w.a, w.b);
  float Z = 0.0f;
  for (int64_t k = 0; k < V; ++k) Z = Z + w.p[id_of(order[k])];
  if (!(Z > 0.0f)) return -1;
  const float theta = u * Z;
  float c = 0.0f;
  for (int64_t k = 0; k < V; ++k) {
    c = c + w.p[id_of(order[k])];
    if (c > theta) return id_of(order[k]);
  }
  return -1;
}

int32_t rejection_verify(const RejectionRound& r, int64_t V, int32_t* tokens, void* scratch, int64_t scratch_bytes) {
  DSV4_CHECK(rejection_scratch_bytes(V) <= scratch_bytes, "rejection scratch {} bytes, need {}", scratch_bytes,
             rejection_scratch_bytes(V));
  const SamplingParams& sp = r.params;
  char* base = static_cast<char*>(scratch);
  float* pt = reinterpret_cast<float*>(base + thread_bytes(V));
  float* pd = reinterpret_cast<float*>(base + thread_bytes(V) + probs_bytes(V));
  const int64_t row_bytes = thread_bytes(V);
  for (int32_t k = 1; k <= r.ell; ++k) {
    const int64_t q = r.q1 + k - 1;
    const int32_t d = r.drafts[k - 1];
    sample_distribution(r.target[k - 1], V, sp, pt, base, row_bytes);
    sample_distribution(r.draft[k - 1], V, sp, pd, base, row_bytes);
    const double test = static_cast<double>(sample_uniform(sp.seed, q, 2)) * static_cast<double>(pd[d]);
    if (test < static_cast<double>(pt[d])) {
      tokens[k - 1] = d;
      continue;
    }
    int32_t b = residual_draw(pt, pd, V, sample_uniform(sp.seed, q, 3), base, row_bytes);
    if (b < 0) {
      const SampleRow row{sp, q, 3};
      const RowScratch w = row_scratch(V, base, row_bytes);
      b = sample_row(r.target[k - 1], V, row, w.p, w.a, w.b);
    }
    tokens[k - 1] = b;
    return k - 1;
  }
  const SampleRow row{sp, r.q1 + r.ell, 0};
  const RowScratch w = row_scratch(V, base, row_bytes);
  tokens[r.ell] = sample_row(r.target[r.ell], V, row, w.p, w.a, w.b);
  return r.ell;
}

}  // namespace dsv4::kernels
