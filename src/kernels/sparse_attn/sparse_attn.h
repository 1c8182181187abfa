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
// The engine's order (one for every ISA variant and the reference, independent of T and the
// thread split; model.md §0.3 leaves the order of each Σ₃₂ free): the block's real entries are
// compacted (c = 0 .. nr − 1 in list order);
//   logit: from 0, the dims in pairs (2i, 2i + 1) ascending, the odd dim's product added first;
//   Σ p_j: 16 lanes (c ≡ l mod 16, ascending), then halved pairwise (attn_sum16), then added to
//          f32(S·α);
//   P·V:   u = Σ bf16(p_c)·K_c from 0, the entries in pairs (2i, 2i + 1) ascending, the odd one's
//          product added first (a last unpaired entry alone); then acc = f32(f32(acc·α) + u).
// That is VDPBF16PS's order (lane += odd product, then += even product, each rounded), so
// AVX-512 BF16 runs both products on it (32 multiply-adds an instruction) and the other
// variants do the same fp32 steps one at a time. Operands (q, K and bf16(p)) below 2^-56 in
// magnitude read as 0 (attn_operand): then every partial sum is 0 or at least 2^-126 in
// magnitude (products of such bf16 values are multiples of 2^-126), so the instruction's
// flush of subnormal inputs and results never acts, and every product is exact (finite for
// operands below 2^63: FP8 KV images and any sane query), and all variants agree bit for bit.
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
// lays out each 64-entry block of keys once per row (sparse_attn_tile.h) and uses it for
// all of its heads of that row. Dh is even.
#pragma once

#include <bit>
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

// An operand of the logits' and P·V's products: 0 below 2^-56 in magnitude (see above).
inline float attn_operand(float x) { return (x < 0.0f ? -x : x) < 0x1p-56f ? 0.0f : x; }

// The sum of 16 lane sums: lanes l and l + 8, then l and l + 4, l and l + 2, then the two left.
inline float attn_sum16(const float* t) {
  float h[8];
  for (int i = 0; i < 8; ++i) h[i] = t[i] + t[i + 8];
  for (int i = 0; i < 4; ++i) h[i] = h[i] + h[i + 4];
  for (int i = 0; i < 2; ++i) h[i] = h[i] + h[i + 2];
  return h[0] + h[1];
}

// exp(x) for x <= 0, the probabilities' and α's (model.md §0.3 leaves exp's last ulp free):
// one sequence of fp32 operations, written the same on vectors (sparse_attn_tile.h exp_v), so
// every variant and the reference agree bit for bit. x = n·ln2 + r (n = round(x·log2 e), two-
// part ln2), e^r by its degree-7 Taylor polynomial (|r| <= 0.347: truncation below 0.1 ulp),
// times 2^n; 0 below ln(2^-126) (and for −∞). Within 2 ulp of exp (tests).
namespace attn_exp_const {
inline constexpr float kLog2e = 1.44269502f, kMagic = 12582912.0f;  // 1.5·2^23: rounds to integers
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194442e-4f;  // kLn2Hi·n exact for |n| < 2^15
inline constexpr float kMin = -87.3365479f;  // ln(2^-126)
inline constexpr float kC[8] = {1.0f, 1.0f, 0.5f, 1.66666672e-1f, 4.16666679e-2f, 8.33333377e-3f, 1.38888892e-3f,
                                1.98412701e-4f};  // 1/k!
}  // namespace attn_exp_const
inline float attn_exp(float x) {
  using namespace attn_exp_const;
  const float t = x * kLog2e + kMagic;
  const float n = t - kMagic;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = kC[7];
  for (int k = 6; k >= 0; --k) p = p * r + kC[k];
  const uint32_t two_n = (std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kMagic) + 127u) << 23;
  const float v = p * std::bit_cast<float>(two_n);
  return x < kMin ? 0.0f : v;
}

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
