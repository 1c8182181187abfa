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

int32_t sample_row(const float* l, int64_t V, const SampleRow& row, float* p, uint64_t* a,
                   uint64_t* b) {
  const SamplingParams& sp = row.params;
  DSV4_CHECK(sp.temperature >= 0.0f, "temperature {}", sp.temperature);
  if (sp.temperature == 0.0f) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (l[v] > l[best]) best = v;
    return static_cast<int32_t>(best);
  }
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
  for (int64_t i = 0; i < V; ++i) {
    p[i] = p[i] / S;
    // p ≥ 0: its bit pattern orders like the value; ~bits sorts descending, the id breaks ties.
    a[i] = (static_cast<uint64_t>(~std::bit_cast<uint32_t>(p[i])) << 32) | static_cast<uint64_t>(i);
  }
  const uint64_t* order = radix_sort_hi32(a, b, V);
  auto id_at = [&](int64_t k) { return static_cast<int32_t>(order[k] & 0xffffffffu); };

  int64_t K = V;
  float cK = 0.0f;
  for (int64_t k = 0; k < V; ++k) {
    cK = cK + p[id_at(k)];
    if (sp.top_p != 1.0f && cK >= sp.top_p) {
      K = k + 1;
      break;
    }
  }
  const float theta = sample_uniform(sp.seed, row.position, row.draft_slot) * cK;
  float c = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    c = c + p[id_at(k)];
    if (c > theta) return id_at(k);
  }
  return id_at(0);
}

}  // namespace

Status validate_sampling_params(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature))
    return Status::errorf("temperature: {} is not a finite value >= 0", p.temperature);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return Status::errorf("top_p: {} is outside (0, 1]", p.top_p);
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
  char* mine = static_cast<char*>(scratch) + thread_bytes(V) * tid;
  float* p = reinterpret_cast<float*>(mine);
  uint64_t* a = reinterpret_cast<uint64_t*>(mine + probs_bytes(V));
  uint64_t* b = a + V;
  const Range r = split_range(T, tid, nthreads);
  for (int64_t t = r.begin; t < r.end; ++t)
    tokens[t] = sample_row(row_at(t), V, rows[t], p, a, b);
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

}  // namespace dsv4::kernels
