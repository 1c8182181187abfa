// Engine lightning indexer. Scores: the (row, entry) pairs of the call are split
// in contiguous ranges over threads; a thread converts its row's queries to fp32
// once and each tile of 64 entries to a transposed fp32 tile, so the dot loops run
// across entries with the reference's per-score order (ascending k, then heads).
// Top-k: a bounded heap of k entry ids kept in the output row itself.
#include <algorithm>

#include "base/check.h"
#include "base/math.h"
#include "kernels/hadamard/hadamard.h"
#include "kernels/common/dot_columns.h"
#include "kernels/indexer/indexer.h"
#include "kernels/linear/linear.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {
namespace {

constexpr int kScoreTile = 64;  // entries per transposed tile

int64_t per_thread_floats(const IndexerParams& p) {
  const int64_t Hi = p.n_heads, Di = p.head_dim;
  return Di * kScoreTile  // jt [Di, 64]
         + Hi * Di        // qf [Hi, Di]
         + Hi             // wgt as fp32 [Hi]
         + 2 * kScoreTile;  // dot, score accumulators [64]
}

}  // namespace

void indexer_project(const IndexerParams& p, const LinearWeight& wq_b,
                     const LinearWeight& weights_proj, const bf16* qr_in, const bf16* a,
                     int64_t T, bf16* qi, bf16* omega, int tid, int nthreads) {
  DSV4_CHECK(wq_b.out == static_cast<int64_t>(p.n_heads) * p.head_dim, "indexer.wq_b out {}",
             wq_b.out);
  DSV4_CHECK(weights_proj.out == p.n_heads && !weights_proj.quantized(),
             "indexer.weights_proj must be a BF16/F32 [{}, D] weight", p.n_heads);
  linear(wq_b, qr_in, T, qi, tid, nthreads);
  linear(weights_proj, a, T, omega, tid, nthreads);
}

void indexer_finish(const IndexerParams& p, const float* inv_freq, const int64_t* pos, int64_t T,
                    bf16* qi, const bf16* omega, bf16* wgt, int tid, int nthreads) {
  const int Hi = p.n_heads, Di = p.head_dim;
  const Range rows = split_range(T, tid, nthreads);
  if (rows.size() == 0) return;
  bf16* q0 = qi + rows.begin * Hi * Di;
  rope(inv_freq, p.rope_dim, q0, rows.size(), Hi, Di, pos + rows.begin, /*inverse=*/false, 0, 1);
  for (int64_t v = 0; v < rows.size() * Hi; ++v) {
    bf16* qh = q0 + v * Di;
    hadamard_vec(qh, qh, Di);
    fp4sim_row(qh, Di);
  }
  const float scale = indexer_weight_scale(p);
  for (int64_t i = rows.begin * Hi; i < rows.end * Hi; ++i)
    wgt[i] = bf16::from_float(omega[i].to_float() * scale);
}

int64_t indexer_scores_scratch_floats(const IndexerParams& p, int nthreads) {
  return per_thread_floats(p) * nthreads;
}

void indexer_scores(const IndexerParams& p, const bf16* qi, const bf16* wgt,
                    const IndexEntries& entries, int64_t T, bf16* scores, int64_t score_stride,
                    float* scratch, int tid, int nthreads) {
  const int Hi = p.n_heads, Di = p.head_dim;
  float* jt = scratch + per_thread_floats(p) * tid;
  float* qf = jt + static_cast<int64_t>(Di) * kScoreTile;
  float* wf = qf + static_cast<int64_t>(Hi) * Di;
  float* dv = wf + Hi;
  float* sc = dv + kScoreTile;

  int64_t total = 0;
  for (int64_t t = 0; t < T; ++t) {
    DSV4_CHECK(entries.count[t] >= 0 && entries.count[t] <= score_stride, "row {}: {} entries", t,
               entries.count[t]);
    total += entries.count[t];
  }
  const Range work = split_range(total, tid, nthreads);
  int64_t off = 0;
  for (int64_t t = 0; t < T && off < work.end; off += entries.count[t], ++t) {
    const int64_t lo = std::max(work.begin, off) - off;
    const int64_t hi = std::min(work.end, off + entries.count[t]) - off;
    if (lo >= hi) continue;
    for (int64_t i = 0; i < static_cast<int64_t>(Hi) * Di; ++i) qf[i] = qi[t * Hi * Di + i].to_float();
    for (int h = 0; h < Hi; ++h) wf[h] = wgt[t * Hi + h].to_float();
    for (int64_t i0 = lo; i0 < hi; i0 += kScoreTile) {
      const int nb = static_cast<int>(std::min<int64_t>(kScoreTile, hi - i0));
      for (int j = 0; j < nb; ++j) {
        const bf16* J = entries.rows[t].row(i0 + j);
        for (int k = 0; k < Di; ++k) jt[k * kScoreTile + j] = J[k].to_float();
      }
      for (int j = 0; j < nb; ++j) sc[j] = 0.0f;
      for (int h = 0; h < Hi; ++h) {
        const float* q = qf + static_cast<int64_t>(h) * Di;
        for (int j = 0; j < nb; ++j) dv[j] = 0.0f;
        dot_columns<kScoreTile>(q, jt, Di, nb, dv);
        const float w = wf[h];
        for (int j = 0; j < nb; ++j) {
          const float d = round_bf16(dv[j]);
          const float relu = d > 0.0f ? d : 0.0f;
          sc[j] += round_bf16(relu * w);
        }
      }
      bf16* out = scores + t * score_stride + i0;
      for (int j = 0; j < nb; ++j) out[j] = bf16::from_float(sc[j]);
    }
  }
}

void indexer_topk(const IndexerParams& p, const bf16* scores, int64_t score_stride,
                  const int32_t* count, int64_t T, int32_t* picks, int32_t* n_picks, int tid,
                  int nthreads) {
  const Range rows = split_range(T, tid, nthreads);
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    const bf16* s = scores + t * score_stride;
    const int32_t n = count[t];
    const int32_t k = std::min<int32_t>(p.topk, n);
    int32_t* out = picks + t * p.topk;
    // better(a, b): a ranks before b. Under it the heap's front is the worst kept id.
    auto better = [s](int32_t a, int32_t b) {
      const uint16_t ka = indexer_score_key(s[a]), kb = indexer_score_key(s[b]);
      return ka > kb || (ka == kb && a < b);
    };
    if (k > 0) {
      for (int32_t i = 0; i < k; ++i) out[i] = i;
      std::make_heap(out, out + k, better);
      for (int32_t i = k; i < n; ++i) {
        if (!better(i, out[0])) continue;
        std::pop_heap(out, out + k, better);
        out[k - 1] = i;
        std::push_heap(out, out + k, better);
      }
      std::sort_heap(out, out + k, better);
    }
    for (int32_t j = k; j < p.topk; ++j) out[j] = -1;
    n_picks[t] = k;
  }
}

}  // namespace dsv4::kernels
