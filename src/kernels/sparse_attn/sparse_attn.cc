// Engine Level-A sparse attention: (row, head) pairs split over threads; per
// row, each 64-entry block of packed keys is decoded once into fp32 (row-major for
// P·V, transposed for the logits) and reused by all of the thread's heads, a pass of
// up to attn_tile::Fns::heads heads at a time. Loops vectorize across list entries
// (logits) and across dims (P·V) while every output keeps the reference's
// per-element summation order.
#include <cmath>
#include <limits>

#include "base/check.h"
#include "base/math.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "kernels/sparse_attn/sparse_attn_tile.h"

namespace dsv4::kernels {
namespace {

int64_t per_thread_floats(const SparseAttnParams& p) {
  const int64_t H = p.n_heads, Dh = p.head_dim;
  return kAttnBlock * Dh        // kb [64, Dh]: the block's key operands
         + kAttnBlock * Dh      // kt: the logits' layout
         + kAttnBlock / 2 * Dh  // kv: the P·V layout (pair variants)
         + H * Dh               // acc [H, Dh]
         + 2 * H                // m, S [H]
         + attn_tile::kMaxHeads * (kAttnBlock + 1)  // per head of a pass: logits / probabilities
                                                    // [64], alpha
         + H * Dh;                                  // the row's query operands
}

IsaChoice g_isa("sparse_attn");

const attn_tile::Fns& fns(Isa isa) {
  static const attn_tile::Fns base = attn_tile::fp32_fns<1>();
  static const attn_tile::Fns avx2 = attn_tile::fns_avx2(), avx512 = attn_tile::fns_avx512(),
                              avx512bf16 = attn_tile::fns_avx512bf16();
  switch (isa) {
    case Isa::kAvx2: return avx2;
    case Isa::kAvx512: return avx512;
    case Isa::kAvx512Bf16: return avx512bf16;
    default: return base;
  }
}

}  // namespace

void set_sparse_attn_isa(Isa isa) { g_isa.set(isa); }
Isa sparse_attn_isa() { return g_isa.get(); }

int64_t sparse_attn_scratch_floats(const SparseAttnParams& p, int nthreads) {
  DSV4_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0, "sparse attention: head_dim {} is not even (dims go in pairs)",
             p.head_dim);
  return per_thread_floats(p) * nthreads;
}

void sparse_attn(const SparseAttnParams& p, const bf16* q, int64_t T, const AttnList& list,
                 const PackedAttnKeys& keys, const float* sink, bf16* o, float* scratch, int tid,
                 int nthreads) {
  const int H = p.n_heads, Dh = p.head_dim;
  const float scale = attn_softmax_scale(Dh);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const attn_tile::Fns& f = fns(sparse_attn_isa());
  float* kb = scratch + per_thread_floats(p) * tid;
  float* kt = kb + kAttnBlock * Dh;
  float* kv = kt + kAttnBlock * Dh;
  float* acc_all = kv + kAttnBlock / 2 * Dh;
  float* m_all = acc_all + static_cast<int64_t>(H) * Dh;
  float* s_all = m_all + H;
  float* sj = s_all + H;                                  // [G, 64]
  float* alpha = sj + attn_tile::kMaxHeads * kAttnBlock;  // [G]
  float* qf = alpha + attn_tile::kMaxHeads;               // [H, Dh] the row's query operands
  auto* qw = reinterpret_cast<uint32_t*>(qf);             // or [H, Dh/2] as pair words

  const Range units = split_range(T * H, tid, nthreads);
  for (int64_t t = units.begin / H; t * H < units.end; ++t) {
    const int h0 = static_cast<int>(units.begin > t * H ? units.begin - t * H : 0);
    const int h1 = static_cast<int>(units.end < (t + 1) * H ? units.end - t * H : H);
    if (h0 >= h1) continue;
    const int32_t* entries = list.entries + t * list.stride;
    const int64_t n_list = list.len[t];
    const int64_t n = n_list + (list.n_dense ? list.n_dense[t] : 0);
    const int64_t n_win = list.n_win[t];
    f.prep_q(q + (t * H + h0) * Dh, static_cast<int64_t>(h1 - h0) * Dh, qf + static_cast<int64_t>(h0) * Dh,
             qw + static_cast<int64_t>(h0) * Dh / 2);
    for (int h = h0; h < h1; ++h) {
      m_all[h] = kNegInf;
      s_all[h] = 0.0f;
      float* acc = acc_all + static_cast<int64_t>(h) * Dh;
      for (int d = 0; d < Dh; ++d) acc[d] = 0.0f;
    }
    for (int64_t b0 = 0; b0 < n; b0 += kAttnBlock) {
      const int64_t b1 = b0 + kAttnBlock < n ? b0 + kAttnBlock : n;
      // Gather the block's real keys (compacted, list order kept) as operands.
      attn_tile::Block block{kb, kt, kv, 0, Dh};
      for (int64_t j = b0; j < b1; ++j) {
        const int32_t e = j < n_list ? entries[j] : static_cast<int32_t>(j - n_list);
        if (e < 0) continue;
        f.unpack(keys.format, j < n_win ? keys.win[t].row(e) : keys.cmp[t].row(e), block, block.n);
        ++block.n;
      }
      if (block.n == 0) continue;  // all-empty block: state unchanged
      f.layout(block);
      for (int h = h0; h < h1; h += f.heads) {
        const int G = h1 - h < f.heads ? h1 - h : f.heads;
        f.logits(qf + static_cast<int64_t>(h) * Dh, qw + static_cast<int64_t>(h) * Dh / 2, G, block, sj);
        f.softmax(sj, G, block.n, scale, m_all + h, s_all + h, alpha);
        f.accumulate_pv(sj, alpha, G, block, acc_all + static_cast<int64_t>(h) * Dh);
      }
    }
    for (int h = h0; h < h1; ++h) {
      const float S = s_all[h] + std::exp(sink[h] - m_all[h]);
      f.finish(acc_all + static_cast<int64_t>(h) * Dh, S, o + (t * H + h) * Dh, Dh);
    }
  }
}

}  // namespace dsv4::kernels
