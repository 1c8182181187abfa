// KV compressor (model.md §7, §0.4.5 A7; runtime.md §2.5), both instances:
//   main    (attn.compressor):         c = head_dim,       post = fp8sim_64 on dims [0, c−Dr)
//   indexer (attn.indexer.compressor): c = index_head_dim, post = Hadamard, then fp4sim_32 on all c
// Overlap iff r == 4 (κ = 2), else κ = 1. Per row at position p with input a_p [D] bf16:
//   A_p = Σ₃₂( wkv · fp32(a_p) )                        [κc] fp32
//   B_p = f32( Σ₃₂( wgate · fp32(a_p) ) + ape[p mod r] )  [κc] fp32
// Row p = i·r + r − 1 completes entry i. Per channel ch over the candidates
//   overlap:     (A_q[ch], B_q[ch]) for q in block i−1 (missing for i = 0: B = −∞, A = 0),
//                then (A_q[c+ch], B_q[c+ch]) for q in block i;
//   non-overlap: (A_q[ch], B_q[ch]) for q in block i,
// in that order (ascending q):
//   w = softmax(B) (§0.4.2: μ = max; e = exp(f32(B − μ)); S = Σ₃₂ e; w = f32(e / S))
//   P = Σ₃₂ f32(A · w)
//   E_i = RMSNorm(bf16(P); norm) (A3);  RoPE(E_i, position i·r, compress profile);  post.
//
// State (per sequence, model.md §7.6 shapes): kv / score fp32 [ring, κc], position-addressed
// ring of ring = state_rows() ≥ κr rows: A_q / B_q (B includes ape) of position q are row
// q mod ring, written unchanged. Entry i reads the rows of positions [i·r − (κ−1)·r, i·r + r)
// (no block copy at a boundary, unlike the demo's prev/current layout).
// Initial state (reset, at the start of every sequence): kv = 0, score = −∞. Positions < 0
// are never read (entry 0's missing block is handled explicitly).
// Rollback: a step of S rows writes positions [p0, p0+S); the next step starts anywhere in
// [p0+1, p0+S] and reads the κr − 1 positions before it. A ring of κr − 1 + S_MAX rows keeps
// those intact whatever suffix was rejected (runtime.md §2.5, the alternative form of the ring
// rule of §2.1: rows of a step read their in-step predecessors from the step's projections).
// The minimal ring of κr rows is only correct when every row is kept.
//
// Streaming step (CompressorStep): T rows of several sequences, each at its own positions;
// the rows of one sequence are consecutive with contiguous ascending positions, and its
// history (positions < its first row's) went through earlier steps (or the prompt form).
// A pool reads positions before the sequence's first row from the state and the others from
// this step's projections (runtime.md §2.5, "#1013 semantics"), so the state is committed
// after all pools. Three phases, each its own ThreadPool::run:
//   compressor_project: projections of rows [0, T) into scratch (wkv, wgate via linear_f32)
//   compressor_emit:    every entry completed by a row (rows with (p+1) % r == 0)
//   compressor_commit:  state rows of this step's positions (a row whose ring row a later
//                       row of the same sequence in this step reuses is skipped)
// Emitted entries (compact, in row order, hence in position order per sequence):
//   emits [n_emit] CompressorEmit {row, seq, index}, entries [n_emit, c] bf16, n_emit =
//   compressor_count_emits(pos, T, r) ≤ T; slots [n_emit, T) of both are left untouched.
//
// Prompt form (model.md §7.5a): one sequence, rows [0, n) at positions 0..n−1; emits
// entries 0 .. ⌊n/r⌋−1 (entries[i] is entry i) and leaves the state that feeding the n
// tokens one by one into a reset state leaves (rows of positions [max(0, n−κr), n), the
// other rows reset). Phases: compressor_project, compressor_prompt_emit, compressor_prompt_commit.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "numeric/bf16.h"
#include "numeric/linear_weight.h"

namespace dsv4::kernels {

enum class CompressorKind { kMain, kIndexer };

struct CompressorParams {
  CompressorKind kind = CompressorKind::kMain;
  int hidden = 0;     // D, input width
  int dim = 0;        // c: head_dim (main) or index_head_dim (indexer)
  int rope_dim = 0;   // Dr: RoPE on the last Dr dims of an entry
  int ratio = 0;      // r (compress ratio of the layer)
  float eps = 1e-6f;  // fp32(rms_norm_eps)
  int ring_rows = 0;  // state ring rows; 0 = κr (the least an entry reads). A cache that
                      // rolls back rejected drafts uses κr − 1 + S_MAX (runtime.md §2.1, §2.5)

  bool overlap() const { return ratio == 4; }
  int kappa() const { return overlap() ? 2 : 1; }
  int proj_dim() const { return kappa() * dim; }      // κc
  int candidates() const { return kappa() * ratio; }  // κr positions pooled per entry
  int state_rows() const { return ring_rows > 0 ? ring_rows : candidates(); }
};

// Rejects dims the Level-A math cannot take (names the field and value): r ≥ 1, Dr even and
// ≤ c (< c for the indexer), main: (c − Dr) % 64 == 0; indexer: c a power of two, c % 32 == 0;
// ring_rows 0 or ≥ κr.
Status compressor_check_params(const CompressorParams& p);

struct CompressorWeights {
  LinearWeight wkv;                 // [κc, D]
  LinearWeight wgate;               // [κc, D]
  const float* ape = nullptr;       // [r, κc] fp32
  const bf16* norm = nullptr;       // [c]
  const float* inv_freq = nullptr;  // [Dr/2], compress profile (rope_inv_freq)
};

// One sequence's state.
struct CompressorState {
  float* kv = nullptr;     // [κr, κc]  A of position q in row q mod κr
  float* score = nullptr;  // [κr, κc]  B of position q in row q mod κr
};
int64_t compressor_state_floats(const CompressorParams& p);  // ring·κc, each of kv and score
void compressor_state_reset(const CompressorParams& p, CompressorState s);  // kv 0, score −∞

// Rows of one streaming step.
struct CompressorStep {
  int64_t T = 0;
  const int32_t* seq = nullptr;  // [T] index into the states array
  const int64_t* pos = nullptr;  // [T] absolute position ≥ 0
};
// Step layout check (the outside world's data): seq in [0, n_seq), pos ≥ 0, the rows of a
// sequence consecutive (one run per step) with contiguous ascending positions.
Status compressor_check_step(const CompressorStep& step, int64_t n_seq);

struct CompressorEmit {
  int32_t row = 0;    // emitting row t (position i·r + r − 1)
  int32_t seq = 0;    // its sequence
  int64_t index = 0;  // entry index i = pos / r
};
int64_t compressor_count_emits(const int64_t* pos, int64_t T, int ratio);

// fp32 scratch for T ≤ capacity rows: A [T, κc] then G (gate sums without ape) [T, κc].
int64_t compressor_scratch_floats(const CompressorParams& p, int64_t capacity);

// --- reference (single-threaded, obviously correct) ---
// Streaming: rows in order, one by one: write A_p, B_p into the state, then pool entry i from
// the state when (p+1) % r == 0. Returns n_emit.
int64_t compressor_ref(const CompressorParams& p, const CompressorWeights& w, const bf16* x,
                       const CompressorStep& step, const CompressorState* states,
                       CompressorEmit* emits, bf16* entries);
// Prompt form of §7.5a: x [n, D] at positions 0..n−1, blocks [nb, r, κc] pooled over the
// r (2r) axis; entries [⌊n/r⌋, c]; state seeded as described above.
void compressor_prompt_ref(const CompressorParams& p, const CompressorWeights& w, const bf16* x,
                           int64_t n, CompressorState state, bf16* entries);

// --- engine (each phase inside its own ThreadPool::run; no allocation) ---
// x [T, D] -> scratch (output columns split over threads by linear_f32).
void compressor_project(const CompressorParams& p, const CompressorWeights& w, const bf16* x,
                        int64_t T, float* scratch, int tid, int nthreads);
// Emitted entries split over threads; reads the states, never writes them.
void compressor_emit(const CompressorParams& p, const CompressorWeights& w,
                     const CompressorStep& step, const CompressorState* states,
                     const float* scratch, CompressorEmit* emits, bf16* entries, int tid,
                     int nthreads);
// Rows split over threads; run after compressor_emit.
void compressor_commit(const CompressorParams& p, const CompressorWeights& w,
                       const CompressorStep& step, const CompressorState* states,
                       const float* scratch, int tid, int nthreads);
// Prompt form: blocks split over threads; then the state (ring rows split over threads).
void compressor_prompt_emit(const CompressorParams& p, const CompressorWeights& w, int64_t n,
                            const float* scratch, bf16* entries, int tid, int nthreads);
void compressor_prompt_commit(const CompressorParams& p, const CompressorWeights& w, int64_t n,
                              const float* scratch, CompressorState state, int tid, int nthreads);

}  // namespace dsv4::kernels
