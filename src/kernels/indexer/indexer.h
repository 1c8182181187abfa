// Lightning indexer of CSA layers (model.md §8, §0.4.5 A8, §7.4): per query row
// the top-k compressed entries by the indexer score, in the order the attention
// list uses them (§0.4.7).
//
// Index queries and head weights, row t at position p = pos[t]:
//   qi     = Linear(indexer.wq_b, qr)            [T, Hi·Di] bf16 (actq when wq_b is FP8/FP4)
//   RoPE on the last Dr dims of every head       bf16 (compress profile; caller's inv_freq)
//   qi_h   = fp4sim_32( Hadamard(qi_h) )         per head, bf16
//   ω      = Linear(weights_proj, a)             [T, Hi] bf16 (BF16 weight, no actq)
//   wgt_h  = bf16( f32( ω_h · fp32(σi) ) )       σi = Di^-0.5 · Hi^-0.5 in double, rounded once
// Scores of row t over its visible index entries J_i, i < n_t (n_t = n(p) = ⌊(p+1)/4⌋,
// computed by the caller):
//   d_h    = bf16( Σ₃₂_k qi_h[k]·J_i[k] )        ascending k
//   t_h    = bf16( f32( relu(d_h) · wgt_h ) )
//   score  = bf16( Σ₃₂_h t_h )                   ascending h, from 0
// The engine keeps exactly this per-score order (vectorized across entries), so
// its scores equal the reference's bit for bit.
// Top-k: the min(Ki, n_t) largest bf16 scores in descending order, exact ties →
// lower entry index (−0 ties +0; a total order, so every correct selection
// agrees); n_t = 0 → empty; n_t ≤ Ki → all entries, in score order.
//
// Index entries: row t reads its sequence's paged index cache (numeric/paged_rows.h),
// entry i < count[t] at rows[t].row(i): bf16 [Di] for the reference (IndexEntries), the
// packed e2m1 × ue8m0 row of numeric/cache_rows.h for the engine (IndexKeys; it decodes
// to the same values).
//
// Engine sequence (each line one ThreadPool::run; phases need barriers):
//   1. actq_rows(qr -> qr_q)                         (linear kernel; only when wq_b is
//                                                      quantized; the attention's wq_b
//                                                      uses the same qr_q)
//   2. indexer_project(wq_b, weights_proj, qr_q, a -> qi, ω)      output columns split
//   3. indexer_finish(qi, ω -> qi, wgt)                            (row, head) pairs split
//   4. indexer_select(qi, wgt, keys -> picks, partial lists)      (row, entry) pairs split
//   5. indexer_select_merge(partial lists -> picks)                rows split
// Streaming selection (runtime.md §7.2): no buffer grows with the context. Each thread
// scores its contiguous range of (row, entry) pairs tile by tile (64 entries) into a
// bounded heap of the best Ki; a row inside one thread's range is finished there, a row
// split between threads leaves one partial list per thread, merged in phase 5. The order
// (key, then lower index) is total, so the picks do not depend on the split.
#pragma once

#include <cstdint>

#include "base/cpu.h"
#include "numeric/bf16.h"
#include "numeric/cache_rows.h"
#include "numeric/paged_rows.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

struct IndexerParams {
  int n_heads = 0;   // Hi (index_n_heads)
  int head_dim = 0;  // Di (index_head_dim): a power of two, a multiple of 32, > rope_dim
  int rope_dim = 0;  // Dr (qk_rope_head_dim)
  int topk = 0;      // Ki (index_topk)
};

struct IndexEntries {
  const PagedRows* rows = nullptr;  // [T] row t's paged index cache: entry i at rows[t].row(i)
  const int32_t* count = nullptr;   // [T] visible entries n_t
};

struct IndexKeys {
  const PagedBytes* rows = nullptr;  // [T] row t's packed index cache
  const int32_t* count = nullptr;    // [T] visible entries n_t
  IndexKeyFormat format;
};

// Order key of a bf16 score: larger key = larger score; −0 and +0 share a key.
constexpr uint16_t indexer_score_key(bf16 s) {
  const uint16_t b = s.bits == 0x8000u ? uint16_t{0} : s.bits;
  return (b & 0x8000u) ? static_cast<uint16_t>(~b) : static_cast<uint16_t>(b | 0x8000u);
}

// fp32(Di^-0.5 · Hi^-0.5), formed in double and rounded once.
float indexer_weight_scale(const IndexerParams& p);

// --- reference (single-threaded) ---
// qr [T, Rq] (not quantized: actq applied inside when wq_b is FP8/FP4), pos [T],
// inv_freq [Dr/2] -> qi [T, Hi, Di].
void indexer_queries_ref(const IndexerParams& p, const LinearWeight& wq_b, const bf16* qr,
                         int64_t T, const float* inv_freq, const int64_t* pos, bf16* qi);
// a [T, D] -> wgt [T, Hi].
void indexer_weights_ref(const IndexerParams& p, const LinearWeight& weights_proj, const bf16* a,
                         int64_t T, bf16* wgt);
// qi [T, Hi, Di], wgt [T, Hi] -> scores [T, score_stride] (entries [0, count[t]) of row t).
void indexer_scores_ref(const IndexerParams& p, const bf16* qi, const bf16* wgt,
                        const IndexEntries& entries, int64_t T, bf16* scores,
                        int64_t score_stride);
// scores [T, score_stride], count [T] -> picks [T, Ki] (entries [n_picks[t], Ki) = −1),
// n_picks [T] = min(Ki, count[t]).
void indexer_topk_ref(const IndexerParams& p, const bf16* scores, int64_t score_stride,
                      const int32_t* count, int64_t T, int32_t* picks, int32_t* n_picks);

// --- engine (call inside ThreadPool::run; no allocation) ---
// qr_in = actq_rows(qr) when wq_b.quantized(), else qr; a [T, D] -> qi [T, Hi·Di],
// omega [T, Hi]. Both linears' output columns split over threads.
void indexer_project(const IndexerParams& p, const LinearWeight& wq_b,
                     const LinearWeight& weights_proj, const bf16* qr_in, const bf16* a,
                     int64_t T, bf16* qi, bf16* omega, int tid, int nthreads);
// In place on qi: RoPE, Hadamard, fp4sim_32 per head; wgt [T, Hi] from omega.
void indexer_finish(const IndexerParams& p, const float* inv_freq, const int64_t* pos, int64_t T,
                    bf16* qi, const bf16* omega, bf16* wgt, int tid, int nthreads);
// ISA of the score tiles and the queries' finish (indexer_tile.h, indexer_finish_tile.h; every
// variant gives the same bits): detect_isa() unless set. Set it between steps, not while a
// call runs.
void set_indexer_isa(Isa isa);
Isa indexer_isa();

// Scratch for indexer_select / indexer_select_merge with nthreads workers (independent of
// T and of the context length).
int64_t indexer_select_scratch_bytes(const IndexerParams& p, int nthreads);
// picks [T, Ki] (entries [n_picks[t], Ki) = −1), n_picks [T] = min(Ki, count[t]); rows
// finished in phase 4 are written there, the others in phase 5. scratch is 64-byte aligned.
void indexer_select(const IndexerParams& p, const bf16* qi, const bf16* wgt, const IndexKeys& keys,
                    int64_t T, int32_t* picks, int32_t* n_picks, void* scratch, int tid, int nthreads);
void indexer_select_merge(const IndexerParams& p, const IndexKeys& keys, int64_t T, int32_t* picks,
                          int32_t* n_picks, void* scratch, int tid, int nthreads);

}  // namespace dsv4::kernels
