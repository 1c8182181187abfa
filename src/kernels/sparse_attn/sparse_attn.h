// Sparse attention with sink, Level A (model.md §6.5, §0.4.6). Per row t and
// head h, over the row's index list (attn_select.h) in blocks of 64 consecutive
// list entries (block b = entries 64b .. 64b+63), in list order:
//   m = −∞; S = 0; acc[0..Dh) = 0                                      fp32
//   per block:
//     s_j = −∞, K_j = 0                    empty entry (−1)
//     s_j = f32( Σ₃₂(q_h·K_j) · fp32(σa) ) otherwise, σa = Dh^-0.5 formed in double
//     m'  = max(m, max_j s_j)              running max over real logits only
//     α   = exp(f32(m − m'))               0 for the first block (m = −∞)
//     p_j = exp(f32(s_j − m'))             0 for an empty entry
//     S   = f32( f32(S·α) + Σ₃₂_j p_j )
//     acc = f32(acc·α) + Σ₃₂_j bf16(p_j)·K_j
//     m   = m'
//   S   = f32( S + exp(f32(sink_h − m)) )  the sink joins once, after the last block
//   o_h = bf16( f32(acc / S) )
// Values = keys (one shared KV head of Dh dims). A block with no real entry
// leaves m, S, acc unchanged and is skipped (also before the first real key).
// A list with no real entry at all gives o_h = 0 (cannot happen: the row's own
// key is always in its window part).
// Summation order (fixed, the same in ref and engine, independent of T and the
// thread split): the dot in ascending dims; Σ p_j in ascending list order within
// the block, then added to f32(S·α); acc: f32(acc·α) then each real entry's
// f32(bf16(p_j)·K_j[d]) added in ascending list order.
//
// Shapes: q [T, H, Dh] bf16, o [T, H, Dh] bf16, sink [H] fp32.
// Keys of row t (AttnKeys: bf16 rows, the reference; PackedAttnKeys: the packed rows of
// numeric/cache_rows.h, the engine, decoding to the same values): list entry j with value
// e ≥ 0 reads
//   j < n_win[t]:  window key at absolute position e: win[t].row(e) (the paged
//                  window ring of the row's sequence, numeric/paged_rows.h)
//   j ≥ n_win[t]:  compressed entry e: cmp[t].row(e) (the sequence's paged
//                  compressed KV cache; unused by SWA lists)
// Engine: work = the T·H (row, head) pairs split in contiguous ranges; a thread
// converts each 64-entry block of keys to fp32 once per row and uses it for all
// of its heads of that row.
#pragma once

#include <cstdint>

#include "kernels/attn_select/attn_select.h"
#include "base/cpu.h"
#include "numeric/bf16.h"
#include "numeric/cache_rows.h"
#include "numeric/paged_rows.h"

namespace dsv4::kernels {

constexpr int kAttnBlock = 64;  // list entries per block of the Level-A kernel

struct SparseAttnParams {
  int n_heads = 0;   // H
  int head_dim = 0;  // Dh
};

struct AttnKeys {
  const PagedRows* win = nullptr;  // [T] window KV of row t's sequence, by absolute position
  const PagedRows* cmp = nullptr;  // [T] compressed KV of row t's sequence, by entry index (or null)
};

struct PackedAttnKeys {
  const PagedBytes* win = nullptr;  // [T] as AttnKeys::win, packed rows
  const PagedBytes* cmp = nullptr;  // [T] as AttnKeys::cmp, packed rows (or null)
  KvRowFormat format;               // format.dim == head_dim
};

// fp32(Dh^-0.5), formed in double and rounded once.
float attn_softmax_scale(int head_dim);

void sparse_attn_ref(const SparseAttnParams& p, const bf16* q, int64_t T, const AttnList& list,
                     const AttnKeys& keys, const float* sink, bf16* o);

// ISA of the inner loops (sparse_attn_tile.h; every variant gives the same bits):
// detect_isa() unless set. Set it between steps, not while a call runs.
void set_sparse_attn_isa(Isa isa);
Isa sparse_attn_isa();

// Scratch floats for nthreads workers (each uses its own slice).
int64_t sparse_attn_scratch_floats(const SparseAttnParams& p, int nthreads);
void sparse_attn(const SparseAttnParams& p, const bf16* q, int64_t T, const AttnList& list,
                 const PackedAttnKeys& keys, const float* sink, bf16* o, float* scratch, int tid,
                 int nthreads);

}  // namespace dsv4::kernels
