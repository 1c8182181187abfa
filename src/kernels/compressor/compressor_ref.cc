// Reference compressor: the streaming form processes rows one by one through the
// state (model.md §7.6); the prompt form reshapes into blocks (§7.5a). Both pool
// one channel at a time over an explicit candidate list, missing candidates
// included as (A = 0, B = −∞), with the op order of §0.4.2 / §0.4.5 A7.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/compressor/compressor.h"
#include "kernels/hadamard/hadamard.h"
#include "kernels/linear/linear.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {
namespace {

constexpr float kRefNegInf = -std::numeric_limits<float>::infinity();

// softmax over the candidates' logits, then Σ₃₂ f32(value · weight), in list order.
float pool_channel_ref(const std::vector<float>& values, const std::vector<float>& logits) {
  const size_t n = logits.size();
  float mu = kRefNegInf;
  for (size_t j = 0; j < n; ++j) mu = std::max(mu, logits[j]);
  std::vector<float> e(n);
  float sum = 0.0f;
  for (size_t j = 0; j < n; ++j) {
    const float z = logits[j] - mu;
    e[j] = std::exp(z);
    sum = sum + e[j];
  }
  float pooled = 0.0f;
  for (size_t j = 0; j < n; ++j) {
    const float wj = e[j] / sum;
    const float prod = values[j] * wj;
    pooled = pooled + prod;
  }
  return pooled;
}

// §7.3 after pooling: bf16(P) -> RMSNorm -> RoPE at i·r -> fp8sim_64 (main) or
// Hadamard + fp4sim_32 (indexer).
void finish_entry_ref(const CompressorParams& p, const CompressorWeights& w,
                      const std::vector<float>& pooled, int64_t index, bf16* out) {
  const int c = p.dim;
  std::vector<bf16> x(c);
  for (int ch = 0; ch < c; ++ch) x[ch] = bf16::from_float(pooled[ch]);
  rmsnorm_ref(x.data(), w.norm, out, 1, c, p.eps);
  const int64_t rope_pos = index * p.ratio;
  rope_ref(w.inv_freq, p.rope_dim, out, 1, 1, c, &rope_pos, false);
  if (p.kind == CompressorKind::kMain) {
    fp8sim_row(out, c - p.rope_dim, kFp8SimBlock);
  } else {
    hadamard_ref(out, out, 1, 1, c);
    fp4sim_row(out, c, kFp4SimBlock);
  }
}

// The full [κc] rows (A_q, B_q) of one position q.
struct Proj {
  const float* a;
  const float* b;
};

// Pools entry i (§7.3) from get(q) = the full [κc] rows (A_q, B_q) of position q.
template <class Get>
std::vector<float> pool_entry_ref(const CompressorParams& p, int64_t i, Get get) {
  const int c = p.dim, r = p.ratio;
  std::vector<float> pooled(c), values, logits;
  for (int ch = 0; ch < c; ++ch) {
    values.clear();
    logits.clear();
    if (p.overlap()) {
      for (int k = 0; k < r; ++k) {  // previous block, first half
        if (i == 0) {
          values.push_back(0.0f);
          logits.push_back(kRefNegInf);
        } else {
          const Proj pr = get((i - 1) * r + k);
          values.push_back(pr.a[ch]);
          logits.push_back(pr.b[ch]);
        }
      }
      for (int k = 0; k < r; ++k) {  // own block, second half
        const Proj pr = get(i * r + k);
        values.push_back(pr.a[c + ch]);
        logits.push_back(pr.b[c + ch]);
      }
    } else {
      for (int k = 0; k < r; ++k) {
        const Proj pr = get(i * r + k);
        values.push_back(pr.a[ch]);
        logits.push_back(pr.b[ch]);
      }
    }
    pooled[ch] = pool_channel_ref(values, logits);
  }
  return pooled;
}

// A_q, B_q = f32(G + ape[q mod r]) of one input row.
void project_row_ref(const CompressorParams& p, const CompressorWeights& w, const bf16* x,
                     int64_t q, float* a, float* b) {
  linear_f32_ref(w.wkv, x, 1, a);
  linear_f32_ref(w.wgate, x, 1, b);
  const float* ape = w.ape + (q % p.ratio) * p.proj_dim();
  for (int j = 0; j < p.proj_dim(); ++j) b[j] = b[j] + ape[j];
}

}  // namespace

int64_t compressor_ref(const CompressorParams& p, const CompressorWeights& w, const bf16* x,
                       const CompressorStep& step, const CompressorState* states,
                       CompressorEmit* emits, bf16* entries) {
  const int kc = p.proj_dim(), ring = p.state_rows();
  int64_t n_emit = 0;
  for (int64_t t = 0; t < step.T; ++t) {
    const CompressorState st = states[step.seq[t]];
    const int64_t q = step.pos[t];
    const int64_t row = q % ring;
    project_row_ref(p, w, x + t * p.hidden, q, st.kv + row * kc, st.score + row * kc);
    if ((q + 1) % p.ratio != 0) continue;
    const int64_t i = q / p.ratio;
    auto get = [&](int64_t qq) {
      return Proj{st.kv + (qq % ring) * kc, st.score + (qq % ring) * kc};
    };
    finish_entry_ref(p, w, pool_entry_ref(p, i, get), i, entries + n_emit * p.dim);
    emits[n_emit] = CompressorEmit{static_cast<int32_t>(t), step.seq[t], i};
    ++n_emit;
  }
  return n_emit;
}

void compressor_prompt_ref(const CompressorParams& p, const CompressorWeights& w, const bf16* x,
                           int64_t n, CompressorState state, bf16* entries) {
  const int kc = p.proj_dim(), ring = p.state_rows();
  std::vector<float> a(n * kc), b(n * kc);
  for (int64_t q = 0; q < n; ++q)
    project_row_ref(p, w, x + q * p.hidden, q, a.data() + q * kc, b.data() + q * kc);
  const int64_t nb = n / p.ratio;
  auto get = [&](int64_t qq) { return Proj{a.data() + qq * kc, b.data() + qq * kc}; };
  for (int64_t i = 0; i < nb; ++i)
    finish_entry_ref(p, w, pool_entry_ref(p, i, get), i, entries + i * p.dim);
  compressor_state_reset(p, state);
  for (int64_t q = std::max<int64_t>(0, n - ring); q < n; ++q) {
    std::copy(a.begin() + q * kc, a.begin() + (q + 1) * kc, state.kv + (q % ring) * kc);
    std::copy(b.begin() + q * kc, b.begin() + (q + 1) * kc, state.score + (q % ring) * kc);
  }
}

}  // namespace dsv4::kernels
