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
  return 2 * kAttnBlock * Dh  // kb [64, Dh], kt [Dh, 64]
         + H * Dh             // acc [H, Dh]
         + 2 * H              // m, S [H]
         + attn_tile::kMaxHeads * (kAttnBlock + Dh + 1);  // per head of a pass: logits /
                                                          // probabilities [64], q_h fp32 [Dh], alpha
}

IsaChoice g_isa("sparse_attn");

// One head's block step on its logits s[0, nr): scaled, the running max m and sum S updated,
// s replaced by the bf16-rounded probabilities, *alpha the old state's factor.
void block_softmax(float* s, int nr, float scale, float* m, float* S, float* alpha) {
  const float kNegInf = -std::numeric_limits<float>::infinity();
  float bmax = kNegInf;
  for (int j = 0; j < nr; ++j) {
    s[j] = s[j] * scale;
    bmax = s[j] > bmax ? s[j] : bmax;
  }
  const float m_new = *m > bmax ? *m : bmax;
  *alpha = *m == kNegInf ? 0.0f : std::exp(*m - m_new);
  float psum = 0.0f;
  for (int j = 0; j < nr; ++j) {
    s[j] = std::exp(s[j] - m_new);
    psum += s[j];
  }
  *S = *S * *alpha + psum;
  *m = m_new;
  for (int j = 0; j < nr; ++j) s[j] = round_bf16(s[j]);
}

const attn_tile::Fns& fns(Isa isa) {
  static const attn_tile::Fns base{1, attn_tile::logits_impl<1>, attn_tile::accumulate_pv_impl<1>,
                                   attn_tile::transpose_impl};
  static const attn_tile::Fns avx2 = attn_tile::fns_avx2(), avx512 = attn_tile::fns_avx512();
  switch (isa) {
    case Isa::kAvx2: return avx2;
    case Isa::kAvx512:
    case Isa::kAvx512Bf16: return avx512;
    default: return base;
  }
}

}  // namespace

void set_sparse_attn_isa(Isa isa) { g_isa.set(isa); }
Isa sparse_attn_isa() { return g_isa.get(); }

int64_t sparse_attn_scratch_floats(const SparseAttnParams& p, int nthreads) {
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
  float* acc_all = kt + kAttnBlock * Dh;
  float* m_all = acc_all + static_cast<int64_t>(H) * Dh;
  float* s_all = m_all + H;
  float* sj = s_all + H;                           // [G, 64]
  float* qf = sj + attn_tile::kMaxHeads * kAttnBlock;  // [G, Dh]
  float* alpha = qf + attn_tile::kMaxHeads * Dh;       // [G]

  const Range units = split_range(T * H, tid, nthreads);
  for (int64_t t = units.begin / H; t * H < units.end; ++t) {
    const int h0 = static_cast<int>(units.begin > t * H ? units.begin - t * H : 0);
    const int h1 = static_cast<int>(units.end < (t + 1) * H ? units.end - t * H : H);
    if (h0 >= h1) continue;
    const int32_t* entries = list.entries + t * list.stride;
    const int64_t n_list = list.len[t];
    const int64_t n = n_list + (list.n_dense ? list.n_dense[t] : 0);
    const int64_t n_win = list.n_win[t];
    for (int h = h0; h < h1; ++h) {
      m_all[h] = kNegInf;
      s_all[h] = 0.0f;
      float* acc = acc_all + static_cast<int64_t>(h) * Dh;
      for (int d = 0; d < Dh; ++d) acc[d] = 0.0f;
    }
    for (int64_t b0 = 0; b0 < n; b0 += kAttnBlock) {
      const int64_t b1 = b0 + kAttnBlock < n ? b0 + kAttnBlock : n;
      // Gather the block's real keys (compacted, list order kept).
      int nr = 0;
      for (int64_t j = b0; j < b1; ++j) {
        const int32_t e = j < n_list ? entries[j] : static_cast<int32_t>(j - n_list);
        if (e < 0) continue;
        const uint8_t* k = j < n_win ? keys.win[t].row(e) : keys.cmp[t].row(e);
        float* kr = kb + static_cast<int64_t>(nr) * Dh;
        kv_unpack_row(keys.format, k, kr);
        ++nr;
      }
      if (nr == 0) continue;  // all-empty block: state unchanged
      f.transpose(kb, Dh, nr, kt);
      for (int h = h0; h < h1; h += f.heads) {
        const int G = h1 - h < f.heads ? h1 - h : f.heads;
        for (int64_t i = 0; i < static_cast<int64_t>(G) * Dh; ++i) qf[i] = q[(t * H + h) * Dh + i].to_float();
        f.logits(qf, G, kt, Dh, sj);
        for (int g = 0; g < G; ++g)
          block_softmax(sj + g * kAttnBlock, nr, scale, &m_all[h + g], &s_all[h + g], &alpha[g]);
        f.accumulate_pv(sj, alpha, G, kb, Dh, nr, acc_all + static_cast<int64_t>(h) * Dh);
      }
    }
    for (int h = h0; h < h1; ++h) {
      const float S = s_all[h] + std::exp(sink[h] - m_all[h]);
      const float* acc = acc_all + static_cast<int64_t>(h) * Dh;
      bf16* oh = o + (t * H + h) * Dh;
      for (int d = 0; d < Dh; ++d) oh[d] = bf16::from_float(acc[d] / S);
    }
  }
}

}  // namespace dsv4::kernels
