// Level-B forward (float_forward.h). One function per operator of model.md, each over all
// rows of the call; row t is position t. Shapes: T rows, D hidden, N hc_mult, H heads,
// Dh head_dim, Dr qk_rope_head_dim, Rq q_lora_rank, Hi/Di indexer heads/dim, E experts,
// V vocab. The hyper-connection stack of a row is stored flat, [N·D] stream-major.
#include "oracle/float_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <utility>

#include "base/check.h"
#include "base/math.h"
#include "numeric/bf16.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/ue8m0.h"

namespace dsv4 {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Row-major fp32 matrix [rows, cols].
struct Mat {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> v;

  Mat() = default;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c), 0.0f) {}
  float* row(int64_t i) { return v.data() + i * cols; }
  const float* row(int64_t i) const { return v.data() + i * cols; }
};

// ---------------------------------------------------------------- fp32 element-wise helpers

// Σ a_i·b_i in fp32: eight interleaved partial sums combined in a fixed tree, then the tail.
// The order depends on n only.
float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) +
         tail;
}

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }
float silu(float g) { return g / (1.0f + std::exp(-g)); }
float softplus(float z) { return z > 20.0f ? z : std::log1p(std::exp(z)); }  // torch semantics

// urms(x) = 1/sqrt(mean(x²) + ε) (model.md §3.4).
float urms(const float* x, int64_t n, float eps) {
  return 1.0f / std::sqrt(dot(x, x, n) / static_cast<float>(n) + eps);
}

// Ordering key of a score: NaN (only from non-finite weights) sorts last.
float order_key(float s) { return std::isnan(s) ? kNegInf : s; }

// The k largest of score[0..n) in descending order, exact ties -> lower index.
std::vector<int32_t> top_k(const std::vector<float>& score, int64_t k) {
  std::vector<int32_t> idx(score.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    const float sa = order_key(score[a]), sb = order_key(score[b]);
    return sa > sb || (sa == sb && a < b);
  });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

// ------------------------------------------------------------------- weights and linears

// Row o of W [out, in], dequantized exactly to fp32 (checkpoint.md §4.1–§4.3).
void dequant_row(const LinearWeight& w, int64_t o, float* out) {
  const int64_t in = w.in;
  switch (w.format) {
    case WeightFormat::kBF16: {  // stored rows or tiles (LinearWeight::bf16_tiles)
      const bf16* d = static_cast<const bf16*>(w.data);
      for (int64_t i = 0; i < in; ++i) out[i] = d[bf16_offset(w, o, i)].to_float();
      return;
    }
    case WeightFormat::kF32:
      std::memcpy(out, static_cast<const float*>(w.data) + o * in, sizeof(float) * in);
      return;
    case WeightFormat::kFP8: {  // codes [out, in], scale [ceil(out/128), ceil(in/128)]
      const uint8_t* s = w.scale + (o / 128) * ceil_div<int64_t>(in, 128);
      for (int64_t i0 = 0; i0 < in; i0 += 128) {
        const float scale = ue8m0_decode(s[i0 / 128]);
        for (int64_t i = i0; i < std::min(in, i0 + 128); ++i) out[i] = e4m3_decode(fp8_code(w, o, i)) * scale;
      }
      return;
    }
    case WeightFormat::kFP4: {  // codes and scales in either layout (numeric/linear_weight.h)
      for (int64_t i0 = 0; i0 < in; i0 += 32) {
        const float scale = ue8m0_decode(fp4_scale(w, o, i0));
        for (int64_t i = i0; i < i0 + 32; ++i) out[i] = e2m1_decode(fp4_code(w, o, i)) * scale;
      }
      return;
    }
  }
  DSV4_CHECK(false, "unknown weight format");
}

// y = W·x per row; with `groups` > 1 the block-diagonal form of model.md §6.6: output row o
// of group g = o / (out/groups) reads the input slice [g·in, (g+1)·in).
// x [T, groups·in] -> [T, out]. W is dequantized 64 rows at a time.
Mat linear(const Linear& W, const Mat& x, int64_t groups = 1) {
  const int64_t in = W.w.in, out = W.w.out;
  DSV4_CHECK(x.cols == groups * in && out % groups == 0, "linear [{}, {}] x{} on width {}", out,
             in, groups, x.cols);
  Mat y(x.rows, out);
  if (x.rows == 0) return y;
  constexpr int64_t kRowBlock = 64;
  const int64_t rows_per_group = out / groups;
  std::vector<float> wb(static_cast<size_t>(kRowBlock * in));
  for (int64_t o0 = 0; o0 < out; o0 += kRowBlock) {
    const int64_t o1 = std::min(out, o0 + kRowBlock);
    for (int64_t o = o0; o < o1; ++o) dequant_row(W.w, o, wb.data() + (o - o0) * in);
    for (int64_t t = 0; t < x.rows; ++t)
      for (int64_t o = o0; o < o1; ++o)
        y.row(t)[o] = dot(wb.data() + (o - o0) * in, x.row(t) + (o / rows_per_group) * in, in);
  }
  return y;
}

// RMSNorm (model.md §3.3) of every row: y = w ⊙ x · urms(x). x [T, n] -> [T, n].
Mat rmsnorm(const Mat& x, const bf16* w, float eps) {
  Mat y(x.rows, x.cols);
  for (int64_t t = 0; t < x.rows; ++t) {
    const float r = urms(x.row(t), x.cols, eps);
    for (int64_t i = 0; i < x.cols; ++i) y.row(t)[i] = w[i].to_float() * (x.row(t)[i] * r);
  }
  return y;
}

// -------------------------------------------------------------------------------- RoPE

// cos/sin of one profile (model.md §4.1) for positions 0..n_pos-1: inv[i] formed in double
// and rounded to fp32, angle = fp32(p)·inv[i] (one fp32 multiply), cos/sin of that angle.
struct RopeTable {
  int64_t dr = 0;               // Dr
  std::vector<float> cos, sin;  // [n_pos, Dr/2]
};

RopeTable make_rope_table(const ModelConfig& cfg, bool compress, int64_t n_pos) {
  RopeTable rt;
  rt.dr = cfg.qk_rope_head_dim;
  const int64_t half = rt.dr / 2;
  const double dr = static_cast<double>(rt.dr);
  const double theta = compress ? cfg.compress_rope_theta : cfg.rope_theta;
  double lo = 0, hi = 0;
  if (compress) {  // YaRN ramp bounds
    const RopeScaling& ys = cfg.rope_scaling;
    auto c = [&](double beta) {
      return dr * std::log(static_cast<double>(ys.original_max_position_embeddings) /
                           (2.0 * std::numbers::pi * beta)) /
             (2.0 * std::log(theta));
    };
    lo = std::max(std::floor(c(ys.beta_fast)), 0.0);
    hi = std::min(std::ceil(c(ys.beta_slow)), dr - 1.0);
    if (lo == hi) hi += 0.001;
  }
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(theta, 2.0 * static_cast<double>(i) / dr);
    if (compress) {
      const double ramp = std::clamp((static_cast<double>(i) - lo) / (hi - lo), 0.0, 1.0);
      f = f / cfg.rope_scaling.factor * ramp + f * (1.0 - ramp);
    }
    inv[i] = static_cast<float>(f);
  }
  rt.cos.resize(static_cast<size_t>(n_pos * half));
  rt.sin.resize(static_cast<size_t>(n_pos * half));
  for (int64_t p = 0; p < n_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv[i];
      rt.cos[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      rt.sin[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  return rt;
}

// Rotates the last Dr dims of v [len] at position p, adjacent pairs (model.md §4.2);
// inverse: sin -> −sin.
void rope_apply(const RopeTable& rt, float* v, int64_t len, int64_t p, bool inverse) {
  const int64_t half = rt.dr / 2;
  float* r = v + len - rt.dr;
  for (int64_t i = 0; i < half; ++i) {
    const float c = rt.cos[p * half + i];
    const float s = inverse ? -rt.sin[p * half + i] : rt.sin[p * half + i];
    const float a = r[2 * i], b = r[2 * i + 1];
    r[2 * i] = a * c - b * s;
    r[2 * i + 1] = a * s + b * c;
  }
}

// ---------------------------------------------------------------- hyper-connections (§5)

struct HcMix {
  Mat y;                    // [T, D] mixed sub-block input
  std::vector<float> post;  // [T, N]
  std::vector<float> comb;  // [T, N, N], comb[j][k]: source j, destination k
};

// HcPre (model.md §5.1): pre/post gates and the Sinkhorn-normalized comb matrix from the
// flattened stack, y = Σ_k pre_k·X_k. X [T, N·D].
HcMix hc_pre(const ModelConfig& cfg, const HcParams& hc, const Mat& X) {
  const int64_t N = cfg.hc_mult, D = cfg.hidden_size, M = cfg.hc_mix();
  const float eps = static_cast<float>(cfg.rms_norm_eps), heps = static_cast<float>(cfg.hc_eps);
  HcMix out{Mat(X.rows, D), std::vector<float>(static_cast<size_t>(X.rows * N)),
            std::vector<float>(static_cast<size_t>(X.rows * N * N))};
  std::vector<float> m(static_cast<size_t>(M)), pre(static_cast<size_t>(N));
  for (int64_t t = 0; t < X.rows; ++t) {
    const float* x = X.row(t);
    const float rho = urms(x, N * D, eps);
    for (int64_t i = 0; i < M; ++i) m[i] = dot(hc.fn + i * N * D, x, N * D) * rho;
    float* post = out.post.data() + t * N;
    float* C = out.comb.data() + t * N * N;
    for (int64_t k = 0; k < N; ++k) {
      pre[k] = sigmoid(m[k] * hc.scale[0] + hc.base[k]) + heps;
      post[k] = 2.0f * sigmoid(m[N + k] * hc.scale[1] + hc.base[N + k]);
    }
    for (int64_t j = 0; j < N; ++j) {  // row softmax of the comb logits, + εh
      float* Cj = C + j * N;
      float mx = kNegInf;
      for (int64_t k = 0; k < N; ++k) {
        Cj[k] = m[2 * N + j * N + k] * hc.scale[2] + hc.base[2 * N + j * N + k];
        mx = std::max(mx, Cj[k]);
      }
      float sum = 0.0f;
      for (int64_t k = 0; k < N; ++k) sum += (Cj[k] = std::exp(Cj[k] - mx));
      for (int64_t k = 0; k < N; ++k) Cj[k] = Cj[k] / sum + heps;
    }
    auto normalize_columns = [&] {
      for (int64_t k = 0; k < N; ++k) {
        float s = 0.0f;
        for (int64_t j = 0; j < N; ++j) s += C[j * N + k];
        for (int64_t j = 0; j < N; ++j) C[j * N + k] /= s + heps;
      }
    };
    normalize_columns();
    for (int it = 1; it < cfg.hc_sinkhorn_iters; ++it) {
      for (int64_t j = 0; j < N; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < N; ++k) s += C[j * N + k];
        for (int64_t k = 0; k < N; ++k) C[j * N + k] /= s + heps;
      }
      normalize_columns();
    }
    float* y = out.y.row(t);
    for (int64_t d = 0; d < D; ++d) {
      float s = 0.0f;
      for (int64_t k = 0; k < N; ++k) s += pre[k] * x[k * D + d];
      y[d] = s;
    }
  }
  return out;
}

// HcPost (model.md §5.2): X'_k = post_k·f + Σ_j comb[j][k]·X_j, streams kept in fp32.
void hc_post(const ModelConfig& cfg, const Mat& f, const HcMix& mix, Mat& X) {
  const int64_t N = cfg.hc_mult, D = cfg.hidden_size;
  std::vector<float> next(static_cast<size_t>(N * D));
  for (int64_t t = 0; t < X.rows; ++t) {
    const float* x = X.row(t);
    const float* post = mix.post.data() + t * N;
    const float* C = mix.comb.data() + t * N * N;
    for (int64_t k = 0; k < N; ++k)
      for (int64_t d = 0; d < D; ++d) {
        float s = 0.0f;
        for (int64_t j = 0; j < N; ++j) s += C[j * N + k] * x[j * D + d];
        next[k * D + d] = post[k] * f.row(t)[d] + s;
      }
    std::copy(next.begin(), next.end(), X.row(t));
  }
}

// HcHead (model.md §5.3): y = Σ_k pre_k·X_k with pre from hc_head_fn. X [T, N·D] -> [T, D].
Mat hc_head(const ModelConfig& cfg, const HcParams& hc, const Mat& X) {
  const int64_t N = cfg.hc_mult, D = cfg.hidden_size;
  const float eps = static_cast<float>(cfg.rms_norm_eps), heps = static_cast<float>(cfg.hc_eps);
  Mat y(X.rows, D);
  std::vector<float> pre(static_cast<size_t>(N));
  for (int64_t t = 0; t < X.rows; ++t) {
    const float* x = X.row(t);
    const float rho = urms(x, N * D, eps);
    for (int64_t k = 0; k < N; ++k)
      pre[k] = sigmoid(dot(hc.fn + k * N * D, x, N * D) * rho * hc.scale[0] + hc.base[k]) + heps;
    for (int64_t d = 0; d < D; ++d) {
      float s = 0.0f;
      for (int64_t k = 0; k < N; ++k) s += pre[k] * x[k * D + d];
      y.row(t)[d] = s;
    }
  }
  return y;
}

// ----------------------------------------------------------------------- attention (§6–§8)

// Compressed entries E_i for every complete block, i < ⌊T/r⌋ (model.md §7.2–§7.3): per
// channel a softmax over the block's gate logits B (+ ape[p mod r]) pools the values A; with
// overlap (r = 4) the previous block's first-half columns join as r more candidates. Then
// RMSNorm and RoPE at position i·r. a [T, D] -> [⌊T/r⌋, dim].
Mat compress(const ModelConfig& cfg, const CompressorWeights& cw, const Mat& a,
             const RopeTable& rope) {
  const int64_t r = cw.ratio, dim = cw.dim, width = cw.width;
  const bool overlap = r == kCsaRatio;
  DSV4_CHECK(width == (overlap ? 2 : 1) * dim, "compressor width {} dim {}", width, dim);
  const Mat A = linear(cw.wkv, a);  // [T, width]
  Mat B = linear(cw.wgate, a);      // [T, width]
  for (int64_t p = 0; p < B.rows; ++p)
    for (int64_t c = 0; c < width; ++c) B.row(p)[c] += cw.ape[(p % r) * width + c];

  const int64_t nb = a.rows / r;
  Mat P(nb, dim);
  std::vector<std::pair<float, float>> cand;  // (logit, value)
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t ch = 0; ch < dim; ++ch) {
      cand.clear();
      if (overlap && i > 0)
        for (int64_t j = (i - 1) * r; j < i * r; ++j) cand.emplace_back(B.row(j)[ch], A.row(j)[ch]);
      const int64_t col = overlap ? dim + ch : ch;
      for (int64_t j = i * r; j < (i + 1) * r; ++j) cand.emplace_back(B.row(j)[col], A.row(j)[col]);
      float mx = kNegInf;
      for (const auto& [logit, value] : cand) mx = std::max(mx, logit);
      float sum = 0.0f, pooled = 0.0f;
      for (const auto& [logit, value] : cand) {
        const float e = std::exp(logit - mx);
        sum += e;
        pooled += e * value;
      }
      P.row(i)[ch] = pooled / sum;
    }
  Mat E = rmsnorm(P, cw.norm, static_cast<float>(cfg.rms_norm_eps));
  for (int64_t i = 0; i < nb; ++i) rope_apply(rope, E.row(i), dim, i * r, false);
  return E;
}

// Lightning indexer (model.md §8): for every row p, the min(Ki, n(p)) visible index entries
// (n(p) = ⌊(p+1)/4⌋) with the largest score Σ_h σi·ω_h·relu(qi_h · J_i), descending, ties
// -> lower index. No Hadamard (it cancels in fp32 dot products) and no FP4 simulation.
std::vector<std::vector<int32_t>> indexer_topk(const ModelConfig& cfg, const IndexerWeights& iw,
                                               const Mat& a, const Mat& qr,
                                               const RopeTable& rope) {
  const int64_t Hi = cfg.index_n_heads, Di = cfg.index_head_dim, r = iw.compressor.ratio;
  const float sigma_i = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Di)) /
                                           std::sqrt(static_cast<double>(Hi)));
  const Mat J = compress(cfg, iw.compressor, a, rope);  // [⌊T/4⌋, Di]
  Mat qi = linear(iw.wq_b, qr);                         // [T, Hi·Di]
  const Mat omega = linear(iw.weights_proj, a);         // [T, Hi]
  std::vector<std::vector<int32_t>> picks(static_cast<size_t>(a.rows));
  std::vector<float> score;
  for (int64_t p = 0; p < a.rows; ++p) {
    for (int64_t h = 0; h < Hi; ++h) rope_apply(rope, qi.row(p) + h * Di, Di, p, false);
    const int64_t n_vis = (p + 1) / r;
    score.assign(static_cast<size_t>(n_vis), 0.0f);
    for (int64_t i = 0; i < n_vis; ++i) {
      float s = 0.0f;
      for (int64_t h = 0; h < Hi; ++h) {
        const float d = dot(qi.row(p) + h * Di, J.row(i), Di);
        s += omega.row(p)[h] * sigma_i * std::max(d, 0.0f);
      }
      score[i] = s;
    }
    picks[p] = top_k(score, std::min<int64_t>(cfg.index_topk, n_vis));
  }
  return picks;
}

// One query head over its candidate keys (model.md §6.5): s_j = σa·q·K_j, softmax over
// [s, sink] with the sink column dropped, o = Σ_j p_j·K_j (values = keys).
void attend_head(const float* q, const std::vector<const float*>& keys, int64_t dh, float scale,
                 float sink, float* o) {
  std::vector<float> s(keys.size());
  float mx = sink;  // the maximum may include the sink at Level B
  for (size_t j = 0; j < keys.size(); ++j) {
    s[j] = dot(q, keys[j], dh) * scale;
    mx = std::max(mx, s[j]);
  }
  float z = std::exp(sink - mx);
  std::fill(o, o + dh, 0.0f);
  for (size_t j = 0; j < keys.size(); ++j) {
    const float e = std::exp(s[j] - mx);
    z += e;
    for (int64_t d = 0; d < dh; ++d) o[d] += e * keys[j][d];
  }
  for (int64_t d = 0; d < dh; ++d) o[d] /= z;
}

// Applies forced decisions and records the one used per row.
// In a DSpark stage (dspark >= 0 is the anchor), `layer` is the stage and pos the block row.
struct DecisionLog {
  std::vector<Decision>* out = nullptr;
  const DecisionTable* forced = nullptr;
  bool mtp = false;
  int layer = 0;
  int64_t dspark_anchor = -1;
  // Replaces `selected` by the forced decision of (idx, pos), if any.
  void force(bool idx, int64_t pos, std::vector<int32_t>& selected) const {
    if (forced == nullptr) return;
    const Decision* d = dspark_anchor >= 0
                            ? forced->find_dspark(false, layer, 0, dspark_anchor, static_cast<int32_t>(pos))
                            : forced->find(mtp, idx, layer, 0, pos);
    if (d) selected = d->selected;
  }
  void add(bool idx, int64_t pos, std::vector<int32_t> selected) const {
    Decision d{mtp, idx, layer, 0, pos, std::move(selected)};
    if (dspark_anchor >= 0) {
      d.dspark = true;
      d.pos = dspark_anchor;
      d.row = static_cast<int32_t>(pos);
    }
    out->push_back(std::move(d));
  }
};

// Query path (model.md §6.1) of rows at positions pos0, pos0+1, ...: q [T, H·Dh] with the
// per-head RMS and RoPE; `qr` receives the normalized low-rank query [T, Rq] (the indexer's).
Mat query_path(const ModelConfig& cfg, const AttentionWeights& aw, const Mat& a,
               const RopeTable& rope, int64_t pos0, Mat* qr_out) {
  const int64_t H = cfg.num_attention_heads, Dh = cfg.head_dim;
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  Mat qr = rmsnorm(linear(aw.wq_a, a), aw.q_norm, eps);  // [T, Rq]
  Mat q = linear(aw.wq_b, qr);                           // [T, H·Dh]
  for (int64_t t = 0; t < a.rows; ++t)
    for (int64_t h = 0; h < H; ++h) {
      float* qh = q.row(t) + h * Dh;
      const float r = urms(qh, Dh, eps);
      for (int64_t d = 0; d < Dh; ++d) qh[d] *= r;
      rope_apply(rope, qh, Dh, pos0 + t, false);
    }
  if (qr_out) *qr_out = std::move(qr);
  return q;
}

// Key/value path (model.md §6.2) of rows at positions pos0, pos0+1, ...: [T, Dh].
Mat key_path(const ModelConfig& cfg, const AttentionWeights& aw, const Mat& a,
             const RopeTable& rope, int64_t pos0) {
  Mat kv = rmsnorm(linear(aw.wkv, a), aw.kv_norm, static_cast<float>(cfg.rms_norm_eps));
  for (int64_t t = 0; t < a.rows; ++t) rope_apply(rope, kv.row(t), cfg.head_dim, pos0 + t, false);
  return kv;
}

// Attention of row t (position pos0 + t) over `keys` for every head, then de-rotation
// (model.md §6.5–§6.6), into o.row(t).
void attend_row(const ModelConfig& cfg, const AttentionWeights& aw, const Mat& q, int64_t t,
                int64_t pos, const std::vector<const float*>& keys, const RopeTable& rope, Mat& o) {
  const int64_t H = cfg.num_attention_heads, Dh = cfg.head_dim;
  const float sigma_a = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  for (int64_t h = 0; h < H; ++h) {
    float* oh = o.row(t) + h * Dh;
    attend_head(q.row(t) + h * Dh, keys, Dh, sigma_a, aw.attn_sink[h], oh);
    rope_apply(rope, oh, Dh, pos, true);
  }
}

// Grouped output projection (model.md §6.6): o [T, H·Dh] -> [T, D].
Mat output_path(const ModelConfig& cfg, const AttentionWeights& aw, const Mat& o) {
  const Mat u = linear(aw.wo_a, o, cfg.o_groups);  // [T, G·Ro]
  return linear(aw.wo_b, u);                       // [T, D]
}

// Attention_l (model.md §6): query path (per-head RMS and RoPE), key/value path, candidate
// set S(p) = window ∪ Cmp(p) (SWA: none; HCA: every visible entry; CSA: indexer top-k),
// sparse attention with sink, de-rotation, grouped wo_a, wo_b. a [T, D] -> [T, D].
Mat attention(const ModelConfig& cfg, const LayerWeights& lw, const Mat& a, const RopeTable& rope,
              const DecisionLog& log) {
  const AttentionWeights& aw = lw.attn;
  const int64_t T = a.rows, H = cfg.num_attention_heads, Dh = cfg.head_dim;
  const int64_t W = cfg.sliding_window;

  Mat qr;
  const Mat q = query_path(cfg, aw, a, rope, 0, &qr);  // [T, H·Dh]
  const Mat kv = key_path(cfg, aw, a, rope, 0);         // [T, Dh]: key and value of position t

  // Compressed entries (§7) and, for CSA, the indexer's picks (§8).
  Mat cmp;  // [⌊T/r⌋, Dh]
  std::vector<std::vector<int32_t>> picks;
  if (lw.kind != AttentionKind::kSWA) cmp = compress(cfg, aw.compressor, a, rope);
  if (lw.kind == AttentionKind::kCSA) {
    picks = indexer_topk(cfg, aw.indexer, a, qr, rope);
    for (int64_t p = 0; p < T; ++p) {
      log.force(true, p, picks[p]);
      log.add(true, p, picks[p]);
    }
  }

  // Sparse attention over S(p) (§6.3–§6.5), then de-rotation (§6.6).
  Mat o(T, H * Dh);
  std::vector<const float*> keys;
  for (int64_t p = 0; p < T; ++p) {
    keys.clear();
    for (int64_t j = std::max<int64_t>(0, p - W + 1); j <= p; ++j) keys.push_back(kv.row(j));
    if (lw.kind == AttentionKind::kHCA)
      for (int64_t i = 0; i < (p + 1) / lw.ratio; ++i) keys.push_back(cmp.row(i));
    if (lw.kind == AttentionKind::kCSA)
      for (int32_t i : picks[p]) keys.push_back(cmp.row(i));
    attend_row(cfg, aw, q, p, p, keys, rope, o);
  }
  return output_path(cfg, aw, o);
}

// ------------------------------------------------------------------------------- MoE (§9)

// SwiGLU expert with clamp (model.md §9.2): h = silu(min(g, L))·clamp(u, −L, L), scaled per
// row by `row_weight` (routed experts; empty for the shared expert), out = w2·h.
// x [R, D] -> [R, D].
Mat expert(const ModelConfig& cfg, const ExpertWeights& ew, const Mat& x,
           const std::vector<float>& row_weight) {
  const float lim = static_cast<float>(cfg.swiglu_limit);
  const Mat g = linear(ew.w1, x);  // [R, F]
  Mat h = linear(ew.w3, x);        // [R, F]
  for (int64_t t = 0; t < h.rows; ++t)
    for (int64_t i = 0; i < h.cols; ++i) {
      float gi = g.row(t)[i], ui = h.row(t)[i];
      if (lim > 0.0f) {
        gi = std::min(gi, lim);
        ui = std::clamp(ui, -lim, lim);
      }
      float hi = silu(gi) * ui;
      if (!row_weight.empty()) hi *= row_weight[t];
      h.row(t)[i] = hi;
    }
  return linear(ew.w2, h);
}

// MoE_l (model.md §9): router (sqrtsoftplus scores; hash layers select tid2eid[token], score
// layers the K largest s_e + bias_e; weights s/Σs · routed_scaling_factor), the routed
// experts each applied once per token, summed in ascending expert id, then the shared
// expert. f [T, D], tok [T] -> [T, D].
Mat moe(const ModelConfig& cfg, const LayerWeights& lw, const Mat& f,
        const std::vector<int32_t>& tok, const DecisionLog& log) {
  const MoeWeights& mw = lw.ffn;
  const int64_t T = f.rows, D = cfg.hidden_size, E = cfg.n_routed_experts;
  const int64_t K = cfg.num_experts_per_tok;
  const float rsf = static_cast<float>(cfg.routed_scaling_factor);

  // Router (§9.1): per expert, the rows that selected it and their weights.
  const Mat logits = linear(mw.gate, f);  // [T, E]
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(E));
  std::vector<std::vector<float>> weight_of(static_cast<size_t>(E));
  std::vector<float> s(static_cast<size_t>(E)), key(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      s[e] = std::sqrt(softplus(logits.row(t)[e]));
      key[e] = lw.hash ? s[e] : s[e] + mw.bias[e];
    }
    std::vector<int32_t> sel;
    if (lw.hash)
      sel.assign(mw.tid2eid.begin() + tok[t] * K, mw.tid2eid.begin() + (tok[t] + 1) * K);
    else
      sel = top_k(key, K);
    log.force(false, t, sel);
    float sum = 0.0f;
    for (int32_t e : sel) sum += s[e];
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = sel[k];
      if (!rows_of[e].empty() && rows_of[e].back() == t) continue;  // repeated id: once
      rows_of[e].push_back(t);
      weight_of[e].push_back(s[e] / sum * rsf);
    }
    log.add(false, t, std::move(sel));
  }

  // Routed experts (§9.2) and combine (§9.3).
  Mat y(T, D);
  for (int64_t e = 0; e < E; ++e) {
    if (rows_of[e].empty()) continue;
    Mat xe(static_cast<int64_t>(rows_of[e].size()), D);
    for (int64_t i = 0; i < xe.rows; ++i) std::copy_n(f.row(rows_of[e][i]), D, xe.row(i));
    const Mat oe = expert(cfg, mw.experts[e], xe, weight_of[e]);
    for (int64_t i = 0; i < xe.rows; ++i)
      for (int64_t d = 0; d < D; ++d) y.row(rows_of[e][i])[d] += oe.row(i)[d];
  }
  if (cfg.n_shared_experts > 0) {
    const Mat sh = expert(cfg, mw.shared, f, {});
    for (size_t i = 0; i < y.v.size(); ++i) y.v[i] += sh.v[i];
  }
  return y;
}

// ------------------------------------------------------------------------------ the model

struct RopeTables {
  RopeTable main;      // rope_theta, no YaRN: ratio-0 layers
  RopeTable compress;  // compress_rope_theta with YaRN: compressed layers
  const RopeTable& of(const LayerWeights& lw) const { return lw.ratio == 0 ? main : compress; }
};

// Block_l (model.md §2.2) on the streams X [T, N·D], in place, with `attend` mapping the
// attention input a [T, D] to the attention output [T, D]. tok [T] (hash routing).
template <class Attend>
void block_with(const ModelConfig& cfg, const LayerWeights& lw, Mat& X,
                const std::vector<int32_t>& tok, const DecisionLog& log, Attend&& attend) {
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  HcMix mix = hc_pre(cfg, lw.hc_attn, X);
  const Mat a = rmsnorm(mix.y, lw.attn_norm, eps);
  const Mat o = attend(a);
  hc_post(cfg, o, mix, X);

  mix = hc_pre(cfg, lw.hc_ffn, X);
  const Mat f = rmsnorm(mix.y, lw.ffn_norm, eps);
  const Mat m = moe(cfg, lw, f, tok, log);
  hc_post(cfg, m, mix, X);
}

// A target block: Attention_l over the rows of the call (positions 0..T-1).
void block(const ModelConfig& cfg, const LayerWeights& lw, Mat& X, const std::vector<int32_t>& tok,
           const RopeTables& ropes, const DecisionLog& log) {
  block_with(cfg, lw, X, tok, log,
             [&](const Mat& a) { return attention(cfg, lw, a, ropes.of(lw), log); });
}

// logits = head · RMSNorm(HcHead(X); norm) (model.md §5.3, §10.1). X [T, N·D] -> [T, V].
std::vector<float> lm_logits(const ModelConfig& cfg, const HcParams& hc, const bf16* norm,
                             const Linear& head, const Mat& X) {
  const Mat y = rmsnorm(hc_head(cfg, hc, X), norm, static_cast<float>(cfg.rms_norm_eps));
  return linear(head, y).v;
}

// X [T, N·D]: every stream of row t is embed[tok[t]] (model.md §3.1).
Mat embed_streams(const ModelConfig& cfg, const bf16* embed, const std::vector<int32_t>& tok) {
  const int64_t N = cfg.hc_mult, D = cfg.hidden_size;
  Mat X(static_cast<int64_t>(tok.size()), N * D);
  for (int64_t t = 0; t < X.rows; ++t)
    for (int64_t k = 0; k < N; ++k)
      for (int64_t d = 0; d < D; ++d) X.row(t)[k * D + d] = embed[tok[t] * D + d].to_float();
  return X;
}

// MTP input (model.md §11), rows p = 0..T-1 with next[p] = t_{p+1}:
// Z_k = e_proj·RMSNorm(embed[next]; enorm) + h_proj·RMSNorm(Xfinal_p[k]; hnorm).
// Xfinal [≥T, N·D] -> [T, N·D].
Mat mtp_input(const ModelConfig& cfg, const bf16* embed, const MtpWeights& mw, const Mat& Xfinal,
              const std::vector<int32_t>& next) {
  const int64_t N = cfg.hc_mult, D = cfg.hidden_size, T = static_cast<int64_t>(next.size());
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  Mat e(T, D), streams(T * N, D);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t d = 0; d < D; ++d) e.row(t)[d] = embed[next[t] * D + d].to_float();
    std::copy_n(Xfinal.row(t), N * D, streams.row(t * N));
  }
  const Mat ep = linear(mw.e_proj, rmsnorm(e, mw.enorm, eps));        // [T, D]
  const Mat hp = linear(mw.h_proj, rmsnorm(streams, mw.hnorm, eps));  // [T·N, D]
  Mat Z(T, N * D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < N; ++k)
      for (int64_t d = 0; d < D; ++d) Z.row(t)[k * D + d] = ep.row(t)[d] + hp.row(t * N + k)[d];
  return Z;
}

// The main model's final streams Xfinal [n, N·D] (model.md §2.1). With `features`, also the
// DSpark target features H [n, |Lt|·D] (dspark.md §2): per target layer, ascending, the fp32
// mean of the N streams of the layer's output stack.
Mat main_streams(const ModelConfig& cfg, const Weights& w, const std::vector<int32_t>& tokens,
                 const RopeTables& ropes, std::vector<Decision>* decisions,
                 const DecisionTable* forced, Mat* features) {
  const int64_t N = cfg.hc_mult, D = cfg.hidden_size;
  Mat X = embed_streams(cfg, w.embed, tokens);  // [n, N·D]
  const std::vector<int>* lt = features ? &cfg.dspark->target_layer_ids : nullptr;
  if (features) *features = Mat(X.rows, static_cast<int64_t>(lt->size()) * D);
  const float inv_n = 1.0f / static_cast<float>(N);
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    block(cfg, w.layers[l], X, tokens, ropes, DecisionLog{decisions, forced, false, l});
    if (!features) continue;
    const auto at = std::find(lt->begin(), lt->end(), l);
    if (at == lt->end()) continue;
    const int64_t off = (at - lt->begin()) * D;
    for (int64_t t = 0; t < X.rows; ++t)
      for (int64_t d = 0; d < D; ++d) {
        float sum = 0.0f;
        for (int64_t k = 0; k < N; ++k) sum += X.row(t)[k * D + d];
        features->row(t)[off + d] = sum * inv_n;
      }
  }
  return X;
}

// DSpark attention of one stage (dspark.md §3.6) for the γ block rows a [γ, D] at positions
// pos0 = anchor + 1 ...: every row attends, without a causal mask, to the context keys `ctx`
// (the committed window, any order at Level B) and to all γ block keys.
Mat dspark_attention(const ModelConfig& cfg, const LayerWeights& lw, const Mat& a,
                     const std::vector<const float*>& ctx, int64_t pos0, const RopeTable& rope) {
  const AttentionWeights& aw = lw.attn;
  const Mat q = query_path(cfg, aw, a, rope, pos0, nullptr);
  const Mat k = key_path(cfg, aw, a, rope, pos0);  // transient block keys
  std::vector<const float*> keys = ctx;
  for (int64_t i = 0; i < a.rows; ++i) keys.push_back(k.row(i));
  Mat o(a.rows, cfg.num_attention_heads * cfg.head_dim);
  for (int64_t i = 0; i < a.rows; ++i) attend_row(cfg, aw, q, i, pos0 + i, keys, rope, o);
  return output_path(cfg, aw, o);
}

}  // namespace

Result<FloatDsparkOutput> float_dspark(const ModelConfig& cfg, const Weights& w,
                                       const std::vector<int32_t>& tokens, int gamma,
                                       const DecisionTable* forced) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (!w.dspark.present || !cfg.dspark)
    return Status::error("float_dspark: the checkpoint has no DSpark drafter (config.json has no "
                         "dspark_* fields; dspark.md §1.3)");
  if (n < 2) return Status::errorf("float_dspark: needs at least 2 tokens (an anchor after the "
                                   "first committed position), got {}", n);
  if (gamma < 1 || gamma > kMaxDsparkGamma)
    return Status::errorf("float_dspark: gamma = {} must lie in [1, {}]", gamma, kMaxDsparkGamma);
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg.vocab_size)
      return Status::errorf("float_dspark: tokens[{}] = {} outside [0, vocab_size = {})", i,
                            tokens[i], cfg.vocab_size);
  const DSparkWeights& dw = w.dspark;
  const int64_t V = cfg.vocab_size, G = gamma, W = cfg.sliding_window;
  const int64_t Rm = cfg.dspark->markov_rank, NS = static_cast<int64_t>(dw.stages.size());
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  const RopeTables ropes{make_rope_table(cfg, false, n + G), make_rope_table(cfg, true, n + G)};

  FloatDsparkOutput out;
  out.n_anchors = n - 1;
  std::vector<Decision>& decisions = out.decisions;
  out.gamma = G;
  out.vocab = V;
  out.logits.resize(static_cast<size_t>((n - 1) * G * V));
  out.drafts.resize(static_cast<size_t>((n - 1) * G));

  // Target features of every position (whole-sequence prefill), context rows (§3.2) and each
  // stage's context keys (§3.3), main RoPE profile: stages are ratio 0.
  Mat H;
  main_streams(cfg, w, tokens, ropes, &decisions, forced, &H);
  const Mat main_x = rmsnorm(linear(dw.main_proj, H), dw.main_norm, eps);  // [n, D]
  std::vector<Mat> ctx_keys;
  for (int64_t s = 0; s < NS; ++s)
    ctx_keys.push_back(key_path(cfg, dw.stages[s].attn, main_x, ropes.main, 0));

  // W2 [V, Rm] in fp32 once.
  std::vector<float> w2(static_cast<size_t>(V * Rm)), m(static_cast<size_t>(Rm));
  for (int64_t i = 0; i < V * Rm; ++i) w2[i] = dw.markov_w2[i].to_float();

  std::vector<const float*> ctx;
  for (int64_t a = 0; a + 1 < n; ++a) {
    // Block input (§3.4): the anchor token t_{a+1}, then γ-1 noise tokens.
    std::vector<int32_t> u(static_cast<size_t>(G), static_cast<int32_t>(cfg.dspark->noise_token_id));
    u[0] = tokens[a + 1];
    Mat Z = embed_streams(cfg, w.embed, u);
    for (int64_t s = 0; s < NS; ++s) {
      ctx.clear();
      for (int64_t p = std::max<int64_t>(0, a - W + 1); p <= a; ++p) ctx.push_back(ctx_keys[s].row(p));
      const LayerWeights& lw = dw.stages[s];
      block_with(cfg, lw, Z, u, DecisionLog{&decisions, forced, false, static_cast<int>(s), a},
                 [&](const Mat& x) { return dspark_attention(cfg, lw, x, ctx, a + 1, ropes.main); });
    }
    // Head (§3.7) and Markov chain (§3.8).
    const std::vector<float> U = lm_logits(cfg, dw.hc_head, dw.norm, w.head, Z);  // [G, V]
    int32_t prev = tokens[a + 1];
    for (int64_t i = 0; i < G; ++i) {
      for (int64_t r = 0; r < Rm; ++r) m[r] = dw.markov_w1[prev * Rm + r].to_float();
      float* lam = out.logits.data() + ((a * G) + i) * V;
      int32_t best = 0;
      for (int64_t v = 0; v < V; ++v) {
        lam[v] = U[i * V + v] + dot(m.data(), w2.data() + v * Rm, Rm);
        if (order_key(lam[v]) > order_key(lam[best])) best = static_cast<int32_t>(v);
      }
      if (forced)
        if (const Decision* d = forced->find_dspark(true, 0, 0, a, static_cast<int32_t>(i))) best = d->selected[0];
      decisions.push_back(Decision{false, false, 0, 0, a, {best}, true, true, static_cast<int32_t>(i)});
      out.drafts[a * G + i] = best;
      prev = best;
    }
  }
  return out;
}

Result<FloatForwardOutput> float_forward(const ModelConfig& cfg, const Weights& w,
                                         const std::vector<int32_t>& tokens, bool mtp,
                                         const DecisionTable* forced) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::error("float_forward: tokens: empty sequence");
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg.vocab_size)
      return Status::errorf("float_forward: tokens[{}] = {} outside [0, vocab_size = {})", i,
                            tokens[i], cfg.vocab_size);
  if (mtp && w.mtp.empty())
    return Status::errorf("float_forward: mtp requested, but {}", cfg.no_mtp_reason());
  DSV4_CHECK(static_cast<int>(w.layers.size()) == cfg.num_hidden_layers, "{} layers, config {}",
             w.layers.size(), cfg.num_hidden_layers);

  FloatForwardOutput out;
  out.n_tokens = n;
  out.vocab = cfg.vocab_size;
  const RopeTables ropes{make_rope_table(cfg, false, n), make_rope_table(cfg, true, n)};

  // Main model (§2.1).
  const Mat X = main_streams(cfg, w, tokens, ropes, &out.decisions, forced, nullptr);
  out.logits = lm_logits(cfg, w.hc_head, w.norm, w.head, X);

  // MTP layer (§11): rows p = 0..n-2 from Xfinal_p and t_{p+1}.
  if (mtp) {
    const MtpWeights& mw = w.mtp[0];
    const std::vector<int32_t> next(tokens.begin() + 1, tokens.end());
    Mat Z = mtp_input(cfg, w.embed, mw, X, next);
    block(cfg, mw.block, Z, next, ropes, DecisionLog{&out.decisions, forced, true, 0});
    out.mtp_logits = lm_logits(cfg, mw.hc_head, mw.norm, w.head, Z);
  }
  return out;
}

}  // namespace dsv4
