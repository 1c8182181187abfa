// Engine compressor. Pooling runs over channel chunks with the candidates in the
// reference's order (previous block, then own block, ascending positions), so
// given the same projections it reproduces the reference's pooled bits; a
// missing candidate (entry 0's previous block) is skipped, which is exact
// (it adds e = 0 to S and 0 to P). B = f32(G + ape) is formed where it is read.
#include "kernels/compressor/compressor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "base/math.h"
#include "kernels/hadamard/hadamard.h"
#include "kernels/linear/linear.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kChunk = 64;  // channels pooled together (stack accumulators)

// Candidate rows at channel 0 of the half it contributes: logit = b, or f32(b + ape)
// when ape is set (a projection of this step, whose scratch holds the gate sum G).
struct Candidate {
  const float* a;
  const float* b;
  const float* ape;
};

inline void logits(const Candidate& cd, int c0, int n, float* out) {
  const float* b = cd.b + c0;
  if (cd.ape) {
    const float* ape = cd.ape + c0;
    for (int k = 0; k < n; ++k) out[k] = b[k] + ape[k];
  } else {
    for (int k = 0; k < n; ++k) out[k] = b[k];
  }
}

// Pools candidates [j0, n_cand) of one entry (cand(j) -> Candidate) into bf16(P) [c].
template <class Cand>
void pool_entry(int c, int j0, int n_cand, Cand cand, bf16* out) {
  for (int c0 = 0; c0 < c; c0 += kChunk) {
    const int n = std::min(kChunk, c - c0);
    float mu[kChunk], sum[kChunk], acc[kChunk], z[kChunk];
    for (int k = 0; k < n; ++k) {
      mu[k] = kNegInf;
      sum[k] = 0.0f;
      acc[k] = 0.0f;
    }
    for (int j = j0; j < n_cand; ++j) {
      logits(cand(j), c0, n, z);
      for (int k = 0; k < n; ++k) mu[k] = std::max(mu[k], z[k]);
    }
    for (int j = j0; j < n_cand; ++j) {
      logits(cand(j), c0, n, z);
      for (int k = 0; k < n; ++k) sum[k] = sum[k] + std::exp(z[k] - mu[k]);
    }
    for (int j = j0; j < n_cand; ++j) {
      const Candidate cd = cand(j);
      logits(cd, c0, n, z);
      const float* a = cd.a + c0;
      for (int k = 0; k < n; ++k) {
        const float e = std::exp(z[k] - mu[k]);
        const float wk = e / sum[k];
        const float prod = a[k] * wk;
        acc[k] = acc[k] + prod;
      }
    }
    for (int k = 0; k < n; ++k) out[c0 + k] = bf16::from_float(acc[k]);
  }
}

// Candidate j of entry i: overlap j < r -> position (i−1)·r + j, columns [0, c);
// j ≥ r -> position i·r + j − r, columns [c, 2c); non-overlap: i·r + j, [0, c).
struct CandPos {
  int64_t q;
  int half_off;
};
inline CandPos cand_pos(const CompressorParams& p, int64_t i, int j) {
  const int r = p.ratio;
  if (!p.overlap()) return {i * r + j, 0};
  if (j < r) return {(i - 1) * r + j, 0};
  return {i * r + (j - r), p.dim};
}
inline int first_cand(const CompressorParams& p, int64_t i) {
  return p.overlap() && i == 0 ? p.ratio : 0;
}

// bf16(P) in e -> RMSNorm -> RoPE at i·r -> post-processing, in place.
void finish_entry(const CompressorParams& p, const CompressorWeights& w, int64_t index, bf16* e) {
  const int c = p.dim;
  rmsnorm(e, w.norm, e, 1, c, p.eps, 0, 1);
  const int64_t rope_pos = index * p.ratio;
  rope(w.inv_freq, p.rope_dim, e, 1, 1, c, &rope_pos, false, 0, 1);
  if (p.kind == CompressorKind::kMain) {
    fp8sim_row(e, c - p.rope_dim, kFp8SimBlock);
  } else {
    hadamard_vec(e, e, c);
    fp4sim_row(e, c, kFp4SimBlock);
  }
}

}  // namespace

Status compressor_check_params(const CompressorParams& p) {
  const char* inst = p.kind == CompressorKind::kMain ? "main compressor" : "indexer compressor";
  if (p.ratio < 1) return Status::errorf("{}: compress ratio {} must be >= 1", inst, p.ratio);
  if (p.hidden < 1) return Status::errorf("{}: hidden_size {} must be >= 1", inst, p.hidden);
  if (p.ring_rows != 0 && p.ring_rows < p.candidates())
    return Status::errorf("{}: state ring of {} rows is shorter than the {} positions an entry pools",
                          inst, p.ring_rows, p.candidates());
  if (p.rope_dim < 0 || p.rope_dim % 2 != 0 || p.rope_dim > p.dim)
    return Status::errorf("{}: qk_rope_head_dim {} must be even and <= the entry width {}", inst,
                          p.rope_dim, p.dim);
  if (p.kind == CompressorKind::kMain) {
    const int nope = p.dim - p.rope_dim;
    if (nope <= 0 || nope % kFp8SimBlock != 0)
      return Status::errorf(
          "main compressor: head_dim {} - qk_rope_head_dim {} = {} must be a positive "
          "multiple of the fp8sim block {} (Level A)",
          p.dim, p.rope_dim, nope, kFp8SimBlock);
  } else {
    if (p.dim <= p.rope_dim || !std::has_single_bit(static_cast<unsigned>(p.dim)) ||
        p.dim % kFp4SimBlock != 0 || p.dim > kHadamardMaxN)
      return Status::errorf(
          "indexer compressor: index_head_dim {} must be a power of two, a multiple of "
          "{} (Level A), > qk_rope_head_dim {} and <= {}",
          p.dim, kFp4SimBlock, p.rope_dim, kHadamardMaxN);
  }
  return Status();
}

Status compressor_check_step(const CompressorStep& step, int64_t n_seq) {
  for (int64_t t = 0; t < step.T; ++t) {
    const int32_t s = step.seq[t];
    if (s < 0 || s >= n_seq)
      return Status::errorf("compressor step row {}: sequence {} outside [0, {})", t, s, n_seq);
    if (step.pos[t] < 0)
      return Status::errorf("compressor step row {}: position {} < 0", t, step.pos[t]);
    if (t > 0 && step.seq[t - 1] == s) {
      if (step.pos[t] != step.pos[t - 1] + 1)
        return Status::errorf(
            "compressor step row {}: position {} does not follow {} of sequence {}", t, step.pos[t],
            step.pos[t - 1], s);
      continue;
    }
    for (int64_t u = 0; u < t; ++u)  // a new run: the sequence must not have had an earlier one
      if (step.seq[u] == s)
        return Status::errorf("compressor step row {}: rows of sequence {} are not consecutive", t,
                              s);
  }
  return Status();
}

int64_t compressor_count_emits(const int64_t* pos, int64_t T, int ratio) {
  int64_t n = 0;
  for (int64_t t = 0; t < T; ++t) n += (pos[t] + 1) % ratio == 0;
  return n;
}

int64_t compressor_state_floats(const CompressorParams& p) {
  return static_cast<int64_t>(p.state_rows()) * p.proj_dim();
}

void compressor_state_reset(const CompressorParams& p, CompressorState s) {
  const int64_t n = compressor_state_floats(p);
  std::fill(s.kv, s.kv + n, 0.0f);
  std::fill(s.score, s.score + n, kNegInf);
}

int64_t compressor_scratch_floats(const CompressorParams& p, int64_t capacity) {
  return 2 * capacity * p.proj_dim();
}

void compressor_project(const CompressorParams& p, const CompressorWeights& w, const bf16* x,
                        int64_t T, float* scratch, int tid, int nthreads) {
  linear_f32(w.wkv, x, T, scratch, tid, nthreads);
  linear_f32(w.wgate, x, T, scratch + T * p.proj_dim(), tid, nthreads);
}

void compressor_emit(const CompressorParams& p, const CompressorWeights& w,
                     const CompressorStep& step, const CompressorState* states,
                     const float* scratch, CompressorEmit* emits, bf16* entries, int tid,
                     int nthreads) {
  const int64_t T = step.T;
  const int kc = p.proj_dim(), ring = p.state_rows(), r = p.ratio;
  const float* A = scratch;
  const float* G = scratch + T * kc;
  const Range mine = split_range(compressor_count_emits(step.pos, T, r), tid, nthreads);
  int64_t k = 0;
  for (int64_t t = 0; t < T && k < mine.end; ++t) {
    const int64_t p_t = step.pos[t];
    if ((p_t + 1) % r != 0) continue;
    if (k++ < mine.begin) continue;
    const int32_t s = step.seq[t];
    const CompressorState st = states[s];
    const int64_t i = p_t / r;
    // Position q is this step's row t − (p_t − q) if that row belongs to sequence s
    // (its rows are consecutive with contiguous positions), else it is in the state.
    auto cand = [&](int j) {
      const CandPos cp = cand_pos(p, i, j);
      const int64_t u = t - (p_t - cp.q);
      if (u >= 0 && step.seq[u] == s)
        return Candidate{A + u * kc + cp.half_off, G + u * kc + cp.half_off,
                         w.ape + (cp.q % r) * kc + cp.half_off};
      const int64_t row = cp.q % ring;
      return Candidate{st.kv + row * kc + cp.half_off, st.score + row * kc + cp.half_off, nullptr};
    };
    bf16* e = entries + (k - 1) * p.dim;
    pool_entry(p.dim, first_cand(p, i), p.candidates(), cand, e);
    finish_entry(p, w, i, e);
    emits[k - 1] = CompressorEmit{static_cast<int32_t>(t), s, i};
  }
}

namespace {
// State row of position q from this step's projections A, G at row u.
void write_state_row(const CompressorParams& p, const CompressorWeights& w, const float* A,
                     const float* G, int64_t u, int64_t q, CompressorState st) {
  const int kc = p.proj_dim();
  const int64_t row = q % p.state_rows();
  const float* a = A + u * kc;
  const float* g = G + u * kc;
  const float* ape = w.ape + (q % p.ratio) * kc;
  float* kv = st.kv + row * kc;
  float* score = st.score + row * kc;
  for (int j = 0; j < kc; ++j) {
    kv[j] = a[j];
    score[j] = g[j] + ape[j];
  }
}
}  // namespace

void compressor_commit(const CompressorParams& p, const CompressorWeights& w,
                       const CompressorStep& step, const CompressorState* states,
                       const float* scratch, int tid, int nthreads) {
  const int64_t T = step.T;
  const int ring = p.state_rows();
  const float* A = scratch;
  const float* G = scratch + T * p.proj_dim();
  const Range mine = split_range(T, tid, nthreads);
  for (int64_t t = mine.begin; t < mine.end; ++t) {
    const int32_t s = step.seq[t];
    if (t + ring < T && step.seq[t + ring] == s) continue;  // position p + ring reuses the ring row
    write_state_row(p, w, A, G, t, step.pos[t], states[s]);
  }
}

void compressor_prompt_emit(const CompressorParams& p, const CompressorWeights& w, int64_t n,
                            const float* scratch, bf16* entries, int tid, int nthreads) {
  const int kc = p.proj_dim(), r = p.ratio;
  const float* A = scratch;
  const float* G = scratch + n * kc;
  const Range mine = split_range(n / r, tid, nthreads);
  for (int64_t i = mine.begin; i < mine.end; ++i) {
    auto cand = [&](int j) {
      const CandPos cp = cand_pos(p, i, j);
      return Candidate{A + cp.q * kc + cp.half_off, G + cp.q * kc + cp.half_off,
                       w.ape + (cp.q % r) * kc + cp.half_off};
    };
    bf16* e = entries + i * p.dim;
    pool_entry(p.dim, first_cand(p, i), p.candidates(), cand, e);
    finish_entry(p, w, i, e);
  }
}

void compressor_prompt_commit(const CompressorParams& p, const CompressorWeights& w, int64_t n,
                              const float* scratch, CompressorState state, int tid, int nthreads) {
  const int kc = p.proj_dim(), ring = p.state_rows();
  const float* A = scratch;
  const float* G = scratch + n * kc;
  const Range mine = split_range(ring, tid, nthreads);
  for (int64_t row = mine.begin; row < mine.end; ++row) {
    // The last position q < n with q mod κr == row, if any.
    const int64_t q = n - 1 - ((n - 1 - row) % ring + ring) % ring;
    if (q >= 0) {
      write_state_row(p, w, A, G, q, q, state);
    } else {
      std::fill(state.kv + row * kc, state.kv + (row + 1) * kc, 0.0f);
      std::fill(state.score + row * kc, state.score + (row + 1) * kc, kNegInf);
    }
  }
}

}  // namespace dsv4::kernels
