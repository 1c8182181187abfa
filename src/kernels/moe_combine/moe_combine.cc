// Engine combine: the row's distinct ids put in ascending order by insertion (K ≤ 32), then
// vectorizable adds over a chunk of D, one output row term at a time.
#include <algorithm>
#include <bit>

#include "base/check.h"
#include "base/math.h"
#include "kernels/moe_combine/moe_combine.h"

namespace dsv4::kernels {
namespace {

constexpr int kMaxK = 32;
constexpr int64_t kChunk = 256;

inline float to_f32(bf16 v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }

// Output rows of row t's distinct ids in ascending id order; returns their count.
int64_t ordered_terms(const int32_t* route_row, const int32_t* ids, int64_t t, int64_t K,
                      int64_t* rows) {
  int32_t id[kMaxK];
  int64_t n = 0;
  for (int64_t k = 0; k < K; ++k) {
    const int32_t e = ids[t * K + k];
    int64_t pos = n;
    bool dup = false;
    for (int64_t i = 0; i < n; ++i) dup = dup || id[i] == e;
    if (dup) continue;
    const int64_t r = route_row ? route_row[t * K + k] : t * K + k;
    DSV4_CHECK(r >= 0, "route ({}, {}) has no output row", t, k);
    for (; pos > 0 && id[pos - 1] > e; --pos) {
      id[pos] = id[pos - 1];
      rows[pos] = rows[pos - 1];
    }
    id[pos] = e;
    rows[pos] = r;
    ++n;
  }
  return n;
}

// Row t on columns [d0, d0 + n), n <= kChunk, from its ordered terms.
void combine_chunk(const bf16* routed, const int64_t* rows, int64_t n_terms, const bf16* shared, int64_t D,
                   int64_t t, int64_t d0, int64_t n, bf16* m) {
  float y[kChunk] = {};
  for (int64_t i = 0; i < n_terms; ++i) {
    const bf16* src = routed + rows[i] * D + d0;
    for (int64_t j = 0; j < n; ++j) y[j] += to_f32(src[j]);
  }
  const bf16* sh = shared + t * D + d0;
  for (int64_t j = 0; j < n; ++j) y[j] += to_f32(sh[j]);
  for (int64_t j = 0; j < n; ++j) m[t * D + d0 + j] = bf16::from_float(y[j]);
}

}  // namespace

void moe_combine(const bf16* routed, const int32_t* route_row, const int32_t* ids,
                 const bf16* shared, const MoeCombineParams& p, int64_t T, bf16* m, int tid,
                 int nthreads) {
  const int64_t D = p.hidden, K = p.num_experts_per_tok;
  DSV4_CHECK(K >= 1 && K <= kMaxK, "num_experts_per_tok {}", K);
  const int64_t n_chunks = ceil_div(D, kChunk);
  const Range r = split_range(T * n_chunks, tid, nthreads);
  int64_t t_terms = -1, n_terms = 0;
  int64_t rows[kMaxK];
  for (int64_t item = r.begin; item < r.end; ++item) {
    const int64_t t = item / n_chunks, d0 = (item % n_chunks) * kChunk;
    if (t != t_terms) {
      n_terms = ordered_terms(route_row, ids, t, K, rows);
      t_terms = t;
    }
    combine_chunk(routed, rows, n_terms, shared, D, t, d0, std::min(kChunk, D - d0), m);
  }
}

void moe_combine_cols(const bf16* routed, const int32_t* route_row, const int32_t* ids, const bf16* shared,
                      const MoeCombineParams& p, int64_t T, int64_t d0, int64_t d1, bf16* m) {
  const int64_t D = p.hidden, K = p.num_experts_per_tok;
  DSV4_CHECK(K >= 1 && K <= kMaxK, "num_experts_per_tok {}", K);
  DSV4_CHECK(0 <= d0 && d0 <= d1 && d1 <= D, "moe_combine columns [{}, {}) of {}", d0, d1, D);
  int64_t rows[kMaxK];
  for (int64_t t = 0; t < T && d0 < d1; ++t) {
    const int64_t n_terms = ordered_terms(route_row, ids, t, K, rows);
    for (int64_t c = d0; c < d1; c += kChunk) combine_chunk(routed, rows, n_terms, shared, D, t, c, std::min(kChunk, d1 - c), m);
  }
}

}  // namespace dsv4::kernels
