// Whole-model Level-A reference (reference_model.h): plain loops over requests and rows,
// every operator a `_ref` kernel, every cache a plain array by absolute index.
#include "oracle/reference_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "base/check.h"
#include "kernels/attn_select/attn_select.h"
#include "kernels/compressor/compressor.h"
#include "kernels/embed/embed.h"
#include "kernels/hc/hc.h"
#include "kernels/indexer/indexer.h"
#include "kernels/kv_path/kv_path.h"
#include "kernels/linear/linear.h"
#include "kernels/lm_head/lm_head.h"
#include "kernels/moe_combine/moe_combine.h"
#include "kernels/moe_expert/moe_expert.h"
#include "kernels/moe_gate/moe_gate.h"
#include "kernels/mtp_proj/mtp_proj.h"
#include "kernels/out_proj/out_proj.h"
#include "kernels/q_path/q_path.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "model/kernel_params.h"
#include "numeric/paged_rows.h"

namespace dsv4 {

namespace k = kernels;

namespace {

// A plain array seen through the kernels' paged view: one page that holds every row.
constexpr int32_t kOnePage = int32_t{1} << 30;
constexpr int32_t kPageZero = 0;

PagedRows plain_rows(const std::vector<bf16>& v, int64_t width) {
  return PagedRows{v.data(), &kPageZero, kOnePage, 0, width};
}

// Grows v to at least `rows` rows of `width` (new rows zero).
template <class T>
void ensure_rows(std::vector<T>& v, int64_t rows, int64_t width) {
  if (static_cast<int64_t>(v.size()) < rows * width) v.resize(static_cast<size_t>(rows * width), T{});
}

float key_gap(const std::vector<int32_t>& a, const std::vector<int32_t>& b, const auto& key, float* scale) {
  float gap = 0.0f;
  *scale = 0.0f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const float ka = key(a[i]), kb = key(b[i]);
    gap = std::max(gap, std::fabs(ka - kb));
    *scale = std::max({*scale, std::fabs(ka), std::fabs(kb)});
  }
  return gap;
}

}  // namespace

// The state a Sequence keeps per layer (named: Sequence is a member of a class with linkage).
namespace reference_state {

// A and B (ape included) of every position of one compressor, [positions, κc] each.
struct CompressorInputs {
  std::vector<float> A, B;
};

struct LayerState {
  std::vector<bf16> win;  // [positions, Dh] window KV by absolute position
  std::vector<bf16> cmp;  // [entries, Dh] compressed KV
  std::vector<bf16> idx;  // [entries, Di] indexer keys
  CompressorInputs main_in, idx_in;
};

}  // namespace reference_state

namespace {

using reference_state::CompressorInputs;
using reference_state::LayerState;

// The streaming compressor over one request's rows, one row at a time: the state is rebuilt
// from the stored A/B of the κr − 1 positions before the row, the row runs through
// compressor_ref, its own A/B are stored, an emitted entry goes to cache row `index`.
void compress_rows(const ModelConfig& cfg, const CompressorWeights& cw, bool indexer, const float* inv,
                   const bf16* a, const std::vector<int64_t>& pos, CompressorInputs& in, std::vector<bf16>& cache) {
  const k::CompressorParams p = compressor_params(cfg, cw, indexer);
  const k::CompressorWeights w = compressor_view(cw, inv);
  const int64_t kr = p.state_rows(), kc = p.proj_dim(), D = cfg.hidden_size, c = p.dim;
  std::vector<float> kv(static_cast<size_t>(kr * kc)), score(static_cast<size_t>(kr * kc));
  const k::CompressorState st{kv.data(), score.data()};
  std::vector<bf16> entry(static_cast<size_t>(c));
  const int32_t seq0 = 0;
  for (size_t i = 0; i < pos.size(); ++i) {
    const int64_t q = pos[i];
    k::compressor_state_reset(p, st);
    for (int64_t r = std::max<int64_t>(0, q - kr + 1); r < q; ++r) {
      std::copy_n(in.A.data() + r * kc, kc, kv.data() + (r % kr) * kc);
      std::copy_n(in.B.data() + r * kc, kc, score.data() + (r % kr) * kc);
    }
    const k::CompressorStep step{1, &seq0, &q};
    k::CompressorEmit emit;
    const int64_t n_emit = k::compressor_ref(p, w, a + static_cast<int64_t>(i) * D, step, &st, &emit, entry.data());
    ensure_rows(in.A, q + 1, kc);
    ensure_rows(in.B, q + 1, kc);
    std::copy_n(kv.data() + (q % kr) * kc, kc, in.A.data() + q * kc);
    std::copy_n(score.data() + (q % kr) * kc, kc, in.B.data() + q * kc);
    if (n_emit > 0) {
      ensure_rows(cache, emit.index + 1, c);
      std::copy(entry.begin(), entry.end(), cache.begin() + emit.index * c);
    }
  }
}

}  // namespace

struct ReferenceModel::Sequence {
  int64_t length = 0;      // positions the main model has seen
  int64_t mtp_length = 0;  // positions the MTP layer has seen
  std::vector<reference_state::LayerState> layers;  // main layers, then the MTP layers
  // DSpark: per stage the context rows c_s(p) [positions, Dh] by absolute position, and which
  // positions are committed.
  std::vector<std::vector<bf16>> dspark_ctx;
  std::vector<bool> dspark_committed;
};

// One request's rows in this step.
struct ReferenceModel::Request {
  int32_t seq = 0;
  int64_t T = 0;
  std::vector<int64_t> pos;  // [T]
  const int32_t* tokens = nullptr;
  int64_t prompt_len = 0;
  int64_t dspark_anchor = -1;  // a DSpark round's anchor (then decisions are keyed by stage, anchor, row)
  int dspark_stage = 0;
};

ReferenceModel::Request ReferenceModel::request_of(const StepRequest& q) {
  Request rq{q.seq, q.n, std::vector<int64_t>(static_cast<size_t>(q.n)), q.tokens, q.prompt_len};
  for (int64_t i = 0; i < q.n; ++i) rq.pos[i] = q.p0 + i;
  return rq;
}

ReferenceModel::ReferenceModel(const ModelConfig& cfg, const Weights& w) : cfg_(cfg), w_(w) {}
ReferenceModel::~ReferenceModel() = default;

Result<std::unique_ptr<ReferenceModel>> ReferenceModel::create(const ModelConfig& cfg, const Weights& w) {
  DSV4_RETURN_IF_ERROR(validate_level_a(cfg));
  std::unique_ptr<ReferenceModel> m(new ReferenceModel(cfg, w));
  m->inv_main_ = rope_inv_freq_main(cfg);
  m->inv_compress_ = rope_inv_freq_compress(cfg);
  return m;
}

Status ReferenceModel::start_sequence(int32_t seq) {
  if (seqs_.count(seq)) return Status::errorf("sequence slot {} is already in use", seq);
  auto s = std::make_unique<Sequence>();
  s->layers.resize(static_cast<size_t>(cfg_.n_layers_total()));
  seqs_[seq] = std::move(s);
  return Status();
}

void ReferenceModel::end_sequence(int32_t seq) { seqs_.erase(seq); }

Status ReferenceModel::check_step(std::span<const StepRequest> reqs, bool mtp) const {
  for (size_t r = 0; r < reqs.size(); ++r) {
    const StepRequest& q = reqs[r];
    auto it = seqs_.find(q.seq);
    if (it == seqs_.end()) return Status::errorf("request {}: sequence slot {} was not started", r, q.seq);
    for (size_t j = 0; j < r; ++j)
      if (reqs[j].seq == q.seq) return Status::errorf("request {}: sequence slot {} twice in one step", r, q.seq);
    const int64_t seen = mtp ? it->second->mtp_length : it->second->length;
    if (q.n < 1) return Status::errorf("request {}: n = {} must be at least 1", r, q.n);
    if (q.p0 < 0 || q.p0 > seen)
      return Status::errorf("request {}: p0 = {} outside [0, {}] (positions seen)", r, q.p0, seen);
    if (q.prompt_len < 1) return Status::errorf("request {}: prompt_len = {} must be at least 1", r, q.prompt_len);
    Status st = k::validate_token_ids(q.tokens, q.n, cfg_.vocab_size);
    if (!st.ok()) return st.with_context(fmt::format("request {}", r));
  }
  return Status();
}

Status ReferenceModel::forward(std::span<const StepRequest> reqs, float* logits, bf16* xfinal_out,
                               const DecisionIO& dec, bf16* features_out) {
  if (features_out && !cfg_.dspark) return Status::error("target features requested, but the checkpoint has no DSpark drafter");
  DSV4_RETURN_IF_ERROR(check_step(reqs, false));
  const int64_t ND = stream_width(), V = cfg_.vocab_size;
  int64_t row = 0;
  for (const StepRequest& q : reqs) {
    Sequence& sq = *seqs_.at(q.seq);
    const Request rq = request_of(q);
    std::vector<bf16> X(static_cast<size_t>(q.n * ND));
    k::embed_ref(k::EmbedParams{V, cfg_.hidden_size, cfg_.hc_mult}, w_.embed, q.tokens, q.n, X.data());
    for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
      run_block(w_.layers[l], false, sq, rq, X.data(), dec);
      if (features_out) stream_means(l, X.data(), q.n, features_out + row * feature_width());
    }
    if (xfinal_out) std::copy(X.begin(), X.end(), xfinal_out + row * ND);
    if (logits) head(w_.hc_head, w_.norm, X.data(), q.n, logits + row * V);
    sq.length = std::max(sq.length, q.p0 + q.n);
    row += q.n;
  }
  return Status();
}

Status ReferenceModel::forward_mtp(std::span<const StepRequest> reqs, const bf16* X, float* logits,
                                   const DecisionIO& dec) {
  if (w_.mtp.empty()) return Status::error(cfg_.no_mtp_reason());
  DSV4_RETURN_IF_ERROR(check_step(reqs, true));
  const int64_t ND = stream_width(), V = cfg_.vocab_size;
  const MtpWeights& mw = w_.mtp[0];
  int64_t row = 0;
  for (const StepRequest& q : reqs) {
    Sequence& sq = *seqs_.at(q.seq);
    const Request rq = request_of(q);
    std::vector<bf16> Z(static_cast<size_t>(q.n * ND));
    const k::MtpProjParams mp{V, cfg_.hidden_size, cfg_.hc_mult, static_cast<float>(cfg_.rms_norm_eps)};
    const k::MtpProjWeights mpw{w_.embed, mw.enorm, mw.hnorm, mw.e_proj.w, mw.h_proj.w};
    k::mtp_proj_ref(mp, mpw, q.tokens, X + row * ND, q.n, Z.data());
    run_block(mw.block, true, sq, rq, Z.data(), dec);
    if (logits) head(mw.hc_head, mw.norm, Z.data(), q.n, logits + row * V);
    sq.mtp_length = std::max(sq.mtp_length, q.p0 + q.n);
    row += q.n;
  }
  return Status();
}

void ReferenceModel::run_block(const LayerWeights& lw, bool mtp_block, Sequence& sq, const Request& rq, bf16* X,
                               const DecisionIO& dec) {
  run_block_with(lw, mtp_block, rq, X, dec,
                 [&](const bf16* a, bf16* out) { attention(lw, mtp_block, sq, rq, a, out, dec); });
}

void ReferenceModel::run_block_with(const LayerWeights& lw, bool mtp_block, const Request& rq, bf16* X,
                                    const DecisionIO& dec, const std::function<void(const bf16*, bf16*)>& attend) {
  const int64_t T = rq.T, D = cfg_.hidden_size, N = cfg_.hc_mult;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const k::HcParams hp{N, D, cfg_.hc_sinkhorn_iters, static_cast<float>(cfg_.hc_eps), eps};
  std::vector<bf16> a(static_cast<size_t>(T * D)), out(static_cast<size_t>(T * D));
  std::vector<float> post(static_cast<size_t>(T * N)), comb(static_cast<size_t>(T * N * N));
  // attention sub-block
  k::hc_pre_ref(X, k::HcPreWeights{lw.hc_attn.fn, lw.hc_attn.scale, lw.hc_attn.base}, hp, T, a.data(), post.data(),
                comb.data());
  k::rmsnorm_ref(a.data(), lw.attn_norm, a.data(), T, D, eps);
  attend(a.data(), out.data());
  k::hc_post_ref(out.data(), X, post.data(), comb.data(), hp, T, X);
  // MoE sub-block
  k::hc_pre_ref(X, k::HcPreWeights{lw.hc_ffn.fn, lw.hc_ffn.scale, lw.hc_ffn.base}, hp, T, a.data(), post.data(),
                comb.data());
  k::rmsnorm_ref(a.data(), lw.ffn_norm, a.data(), T, D, eps);
  moe(lw, mtp_block, rq, a.data(), out.data(), dec);
  k::hc_post_ref(out.data(), X, post.data(), comb.data(), hp, T, X);
}

void ReferenceModel::attention(const LayerWeights& lw, bool mtp_block, Sequence& sq, const Request& rq,
                               const bf16* a, bf16* out, const DecisionIO& dec) {
  const ModelConfig& c = cfg_;
  const AttentionWeights& aw = lw.attn;
  const int64_t T = rq.T, D = c.hidden_size, Dh = c.head_dim, Di = c.index_head_dim, Rq = c.q_lora_rank;
  const int H = c.num_attention_heads, Dr = static_cast<int>(c.qk_rope_head_dim), Ki = static_cast<int>(c.index_topk);
  const int W = static_cast<int>(c.sliding_window);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t* pos = rq.pos.data();
  const int64_t p_end = pos[T - 1] + 1;
  const float* inv = lw.ratio > 0 ? inv_compress_.data() : inv_main_.data();
  const int layer = mtp_block ? 0 : lw.layer;
  LayerState& ls = sq.layers[static_cast<size_t>(lw.layer)];

  // q path (qr also feeds the indexer) and kv path; every cache write before any read.
  std::vector<bf16> qr(static_cast<size_t>(T * Rq)), q(static_cast<size_t>(T * H * Dh)), kv(static_cast<size_t>(T * Dh));
  k::q_path_ref(k::QPathParams{D, Rq, H, static_cast<int>(Dh), Dr, eps}, k::QPathWeights{aw.wq_a.w, aw.q_norm, aw.wq_b.w, inv},
                a, T, pos, qr.data(), q.data());
  k::kv_path_ref(k::KvPathParams{D, static_cast<int>(Dh), Dr, eps}, k::KvPathWeights{aw.wkv.w, aw.kv_norm, inv}, a, T,
                 pos, kv.data());
  ensure_rows(ls.win, p_end, Dh);
  for (int64_t t = 0; t < T; ++t) std::copy_n(kv.data() + t * Dh, Dh, ls.win.data() + pos[t] * Dh);
  if (aw.compressor.present) compress_rows(c, aw.compressor, false, inv, a, rq.pos, ls.main_in, ls.cmp);
  if (aw.indexer.present) compress_rows(c, aw.indexer.compressor, true, inv, a, rq.pos, ls.idx_in, ls.idx);

  // CSA: the lightning indexer's picks, then forced decisions.
  std::vector<int32_t> picks, n_picks;
  if (lw.kind == AttentionKind::kCSA) {
    const IndexerWeights& iw = aw.indexer;
    const k::IndexerParams ip{c.index_n_heads, static_cast<int>(Di), Dr, Ki};
    std::vector<bf16> qi(static_cast<size_t>(T * c.index_n_heads * Di)), wgt(static_cast<size_t>(T * c.index_n_heads));
    k::indexer_queries_ref(ip, iw.wq_b.w, qr.data(), T, inv, pos, qi.data());
    k::indexer_weights_ref(ip, iw.weights_proj.w, a, T, wgt.data());
    std::vector<int32_t> count(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) count[t] = static_cast<int32_t>(k::visible_entries(pos[t], kCsaRatio));
    const int64_t stride = std::max<int64_t>(1, *std::max_element(count.begin(), count.end()));
    const std::vector<PagedRows> rows(static_cast<size_t>(T), plain_rows(ls.idx, Di));
    std::vector<bf16> scores(static_cast<size_t>(T * stride));
    k::indexer_scores_ref(ip, qi.data(), wgt.data(), k::IndexEntries{rows.data(), count.data()}, T, scores.data(),
                          stride);
    picks.assign(static_cast<size_t>(T * Ki), -1);
    n_picks.assign(static_cast<size_t>(T), 0);
    k::indexer_topk_ref(ip, scores.data(), stride, count.data(), T, picks.data(), n_picks.data());
    for (int64_t t = 0; t < T; ++t) {
      int32_t* row = picks.data() + t * Ki;
      const Decision* f = dec.forced ? dec.forced->find(mtp_block, true, layer, rq.seq, pos[t]) : nullptr;
      if (f) {
        std::vector<int32_t> own(row, row + n_picks[t]);
        if (own != f->selected) {
          ForcedDifference d{*f, own, 0.0f, 0.0f};
          d.gap = key_gap(own, f->selected, [&](int32_t e) { return scores[t * stride + e].to_float(); }, &d.scale);
          differences_.push_back(std::move(d));
        }
        std::copy(f->selected.begin(), f->selected.end(), row);
      }
      if (dec.log) dec.log->push_back({mtp_block, true, layer, rq.seq, pos[t], std::vector<int32_t>(row, row + n_picks[t])});
    }
  }

  // Attention list: window part of Wc entries (min(prompt_len, W) for prompt rows, W later;
  // model.md §0.4.7), then the compressed part.
  int64_t max_cmp = 0;
  if (lw.kind == AttentionKind::kHCA) max_cmp = k::visible_entries(pos[T - 1], lw.ratio);
  if (lw.kind == AttentionKind::kCSA) max_cmp = Ki;
  k::AttnSelectParams sp;
  sp.kind = lw.kind == AttentionKind::kSWA ? k::AttnKind::kSWA
            : lw.kind == AttentionKind::kHCA ? k::AttnKind::kHCA : k::AttnKind::kCSA;
  sp.window = W;
  sp.ratio = lw.ratio;
  sp.stride = W + max_cmp;
  std::vector<int32_t> wc(static_cast<size_t>(T)), list(static_cast<size_t>(T * sp.stride)), len(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    wc[t] = pos[t] < rq.prompt_len ? static_cast<int32_t>(std::min<int64_t>(rq.prompt_len, W)) : W;
  const bool csa = lw.kind == AttentionKind::kCSA;
  k::attn_select_ref(sp, T, pos, wc.data(), csa ? picks.data() : nullptr, Ki, csa ? n_picks.data() : nullptr,
                     list.data(), len.data());
  const std::vector<PagedRows> win(static_cast<size_t>(T), plain_rows(ls.win, Dh));
  const std::vector<PagedRows> cmp(static_cast<size_t>(T), plain_rows(ls.cmp, Dh));
  std::vector<bf16> o(static_cast<size_t>(T * H * Dh));
  k::sparse_attn_ref(k::SparseAttnParams{H, static_cast<int>(Dh)}, q.data(), T,
                     k::AttnList{list.data(), sp.stride, len.data(), wc.data()},
                     k::AttnKeys{win.data(), lw.ratio > 0 ? cmp.data() : nullptr}, aw.attn_sink, o.data());

  // De-rotation and grouped output projection.
  const k::OutProjParams op{H, static_cast<int>(Dh), Dr, c.o_groups, c.o_lora_rank, D};
  k::out_proj_ref(op, k::OutProjWeights{aw.wo_a.w, aw.wo_b.w, inv}, o.data(), T, pos, out);
}

void ReferenceModel::moe(const LayerWeights& lw, bool mtp_block, const Request& rq, const bf16* f, bf16* out,
                         const DecisionIO& dec) {
  const ModelConfig& c = cfg_;
  const int64_t T = rq.T, D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const int layer = mtp_block ? 0 : lw.layer;
  const k::MoeGateParams gp{D, E, K, static_cast<float>(c.routed_scaling_factor)};
  k::MoeGateWeights gw;
  gw.weight = lw.ffn.gate.w;
  gw.bias = lw.ffn.bias;
  if (lw.hash) gw.tid2eid = k::Tid2Eid{lw.ffn.tid2eid.data(), false, c.vocab_size};
  std::vector<float> scores(static_cast<size_t>(T * E)), weights(static_cast<size_t>(T * K));
  std::vector<int32_t> ids(static_cast<size_t>(T * K));
  k::moe_gate_scores_ref(f, gw, gp, T, scores.data());
  k::moe_gate_route_ref(scores.data(), gw, rq.tokens, gp, T, ids.data(), weights.data());
  for (int64_t t = 0; t < T; ++t) {
    int32_t* sel = ids.data() + t * K;
    const float* s = scores.data() + t * E;
    const bool ds = rq.dspark_anchor >= 0;
    const Decision* fd = !dec.forced ? nullptr
                         : ds ? dec.forced->find_dspark(false, rq.dspark_stage, rq.seq, rq.dspark_anchor, static_cast<int32_t>(t))
                              : dec.forced->find(mtp_block, false, layer, rq.seq, rq.pos[t]);
    if (fd) {
      std::vector<int32_t> own(sel, sel + K);
      if (own != fd->selected) {
        ForcedDifference d{*fd, own, 0.0f, 0.0f};
        const auto key = [&](int32_t e) { return lw.hash ? std::numeric_limits<float>::infinity() : s[e] + lw.ffn.bias[e]; };
        d.gap = key_gap(own, fd->selected, key, &d.scale);
        if (lw.hash) d.gap = std::numeric_limits<float>::infinity();
        differences_.push_back(std::move(d));
      }
      // Route weights of the forced ids (model.md §9.1): normalized over the K slots in order.
      std::copy(fd->selected.begin(), fd->selected.end(), sel);
      float sum = 0.0f;
      for (int64_t j = 0; j < K; ++j) sum = sum + s[sel[j]];
      for (int64_t j = 0; j < K; ++j) weights[t * K + j] = (s[sel[j]] / sum) * gp.routed_scaling_factor;
    }
    if (dec.log && ds)
      dec.log->push_back({false, false, rq.dspark_stage, rq.seq, rq.dspark_anchor, std::vector<int32_t>(sel, sel + K),
                          true, false, static_cast<int32_t>(t)});
    else if (dec.log)
      dec.log->push_back({mtp_block, false, layer, rq.seq, rq.pos[t], std::vector<int32_t>(sel, sel + K)});
  }

  // Routed experts: each expert once on the rows that chose it (a repeated id once per row,
  // with its first slot's weight), its output row placed at that slot; the shared expert on
  // every row; then the Level-A combine.
  const k::MoeExpertParams ep{D, c.moe_intermediate_size, static_cast<float>(c.swiglu_limit)};
  auto view = [](const ExpertWeights& e) { return k::ExpertWeights{e.w1.w, e.w3.w, e.w2.w}; };
  std::vector<bf16> routed(static_cast<size_t>(T * K * D)), shared(static_cast<size_t>(T * D));
  for (int32_t e = 0; e < E; ++e) {
    std::vector<int64_t> slots;  // t·K + j of the rows routed to e
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < K; ++j)
        if (ids[t * K + j] == e) {
          slots.push_back(t * K + j);
          break;
        }
    if (slots.empty()) continue;
    const int64_t n = static_cast<int64_t>(slots.size());
    std::vector<bf16> x(static_cast<size_t>(n * D)), y(static_cast<size_t>(n * D));
    std::vector<float> wk(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(f + slots[i] / K * D, D, x.begin() + i * D);
      wk[i] = weights[slots[i]];
    }
    k::moe_expert_ref(view(lw.ffn.experts[e]), ep, x.data(), n, wk.data(), y.data());
    for (int64_t i = 0; i < n; ++i) std::copy_n(y.begin() + i * D, D, routed.begin() + slots[i] * D);
  }
  k::moe_expert_ref(view(lw.ffn.shared), ep, f, T, nullptr, shared.data());
  k::moe_combine_ref(routed.data(), nullptr, ids.data(), shared.data(), k::MoeCombineParams{D, K}, T, out);
}

void ReferenceModel::head(const HcParams& hc, const bf16* norm, const bf16* X, int64_t T, float* logits) const {
  const int64_t D = cfg_.hidden_size, V = cfg_.vocab_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const k::HcParams hp{cfg_.hc_mult, D, cfg_.hc_sinkhorn_iters, static_cast<float>(cfg_.hc_eps), eps};
  std::vector<bf16> y(static_cast<size_t>(T * D));
  k::hc_head_ref(X, k::HcHeadWeights{hc.fn, hc.scale, hc.base}, hp, T, y.data());
  k::rmsnorm_ref(y.data(), norm, y.data(), T, D, eps);
  k::lm_head_ref(k::LmHeadParams{0, V, V}, w_.head.w, y.data(), T, logits);
}

// ------------------------------------------------------------------------------------------
// The DSpark drafter (dspark.md §2-§3.8, §3.10): target feature means (A17), context rows
// (A18), the stage blocks with the non-causal block attention over [context rows in ring-slot
// order, block keys] (A19), head and Markov chain (A20). Context rows by absolute position.
int64_t ReferenceModel::feature_width() const {
  return cfg_.dspark ? static_cast<int64_t>(cfg_.dspark->target_layer_ids.size()) * cfg_.hidden_size : 0;
}

void ReferenceModel::stream_means(int l, const bf16* X, int64_t T, bf16* features) const {
  const std::vector<int>& lt = cfg_.dspark->target_layer_ids;
  const auto at = std::find(lt.begin(), lt.end(), l);
  if (at == lt.end()) return;
  const int64_t D = cfg_.hidden_size, off = (at - lt.begin()) * D;
  const k::HcParams hp{cfg_.hc_mult, D, cfg_.hc_sinkhorn_iters, static_cast<float>(cfg_.hc_eps),
                       static_cast<float>(cfg_.rms_norm_eps)};
  k::hc_stream_mean_ref(X, hp, T, features + off, feature_width());
}

Status ReferenceModel::dspark_commit(int32_t seq, int64_t p0, int64_t n, const bf16* features) {
  if (!w_.dspark.present) return Status::error("the checkpoint has no DSpark drafter");
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return Status::errorf("dspark commit: sequence slot {} was not started", seq);
  if (p0 < 0 || n < 0) return Status::errorf("dspark commit: p0 = {}, n = {} must be non-negative", p0, n);
  Sequence& sq = *it->second;
  const DSparkWeights& dw = w_.dspark;
  const int64_t D = cfg_.hidden_size, Dh = cfg_.head_dim, NS = static_cast<int64_t>(dw.stages.size());
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  // A18: main_x = RMSNorm(main_proj · H) once, then per stage the key path at p.
  std::vector<bf16> main_x(static_cast<size_t>(n * D)), c(static_cast<size_t>(n * Dh));
  k::linear_ref(dw.main_proj.w, features, n, main_x.data(), dw.main_proj.actq);
  k::rmsnorm_ref(main_x.data(), dw.main_norm, main_x.data(), n, D, eps);
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[i] = p0 + i;
  sq.dspark_ctx.resize(static_cast<size_t>(NS));
  for (int64_t s = 0; s < NS; ++s) {
    const AttentionWeights& aw = dw.stages[s].attn;
    k::kv_path_ref(k::KvPathParams{D, static_cast<int>(Dh), static_cast<int>(cfg_.qk_rope_head_dim), eps},
                   k::KvPathWeights{aw.wkv.w, aw.kv_norm, inv_main_.data()}, main_x.data(), n, pos.data(), c.data());
    std::vector<bf16>& rows = sq.dspark_ctx[s];
    if (static_cast<int64_t>(rows.size()) < (p0 + n) * Dh) rows.resize(static_cast<size_t>((p0 + n) * Dh));
    std::copy(c.begin(), c.end(), rows.begin() + p0 * Dh);
  }
  if (static_cast<int64_t>(sq.dspark_committed.size()) < p0 + n) sq.dspark_committed.resize(static_cast<size_t>(p0 + n));
  for (int64_t i = 0; i < n; ++i) sq.dspark_committed[p0 + i] = true;
  return Status();
}

// DSpark attention of one stage (dspark.md §3.6) for the block rows a [γ, D]: keys = the
// n_ctx context rows `ctx` (ring-slot order) followed by the γ transient block keys; every
// row reads the whole list (no causal mask).
void ReferenceModel::dspark_attention(const LayerWeights& lw, const std::vector<bf16>& ctx, int64_t n_ctx,
                                      const Request& rq, const bf16* a, bf16* out) {
  const ModelConfig& c = cfg_;
  const AttentionWeights& aw = lw.attn;
  const int64_t T = rq.T, D = c.hidden_size, Dh = c.head_dim, Rq = c.q_lora_rank;
  const int H = c.num_attention_heads, Dr = static_cast<int>(c.qk_rope_head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t* pos = rq.pos.data();
  std::vector<bf16> qr(static_cast<size_t>(T * Rq)), q(static_cast<size_t>(T * H * Dh));
  k::q_path_ref(k::QPathParams{D, Rq, H, static_cast<int>(Dh), Dr, eps},
                k::QPathWeights{aw.wq_a.w, aw.q_norm, aw.wq_b.w, inv_main_.data()}, a, T, pos, qr.data(), q.data());
  // Keys: context rows, then the block keys (A6 with fp8sim_64, a choice of dspark.md §8).
  const int64_t L = n_ctx + T;
  std::vector<bf16> keys(static_cast<size_t>(L * Dh));
  std::copy_n(ctx.begin(), n_ctx * Dh, keys.begin());
  k::kv_path_ref(k::KvPathParams{D, static_cast<int>(Dh), Dr, eps}, k::KvPathWeights{aw.wkv.w, aw.kv_norm, inv_main_.data()},
                 a, T, pos, keys.data() + n_ctx * Dh);
  std::vector<int32_t> list(static_cast<size_t>(T * L)), len(static_cast<size_t>(T), static_cast<int32_t>(L));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < L; ++j) list[t * L + j] = static_cast<int32_t>(j);
  const PagedRows rows{keys.data(), &kPageZero, kOnePage, 0, Dh};
  const std::vector<PagedRows> win(static_cast<size_t>(T), rows);
  std::vector<bf16> o(static_cast<size_t>(T * H * Dh));
  k::sparse_attn_ref(k::SparseAttnParams{H, static_cast<int>(Dh)}, q.data(), T,
                     k::AttnList{list.data(), L, len.data(), len.data()}, k::AttnKeys{win.data(), nullptr},
                     aw.attn_sink, o.data());
  const k::OutProjParams op{H, static_cast<int>(Dh), Dr, c.o_groups, c.o_lora_rank, D};
  k::out_proj_ref(op, k::OutProjWeights{aw.wo_a.w, aw.wo_b.w, inv_main_.data()}, o.data(), T, pos, out);
}

Status ReferenceModel::dspark_propose(int32_t seq, int64_t a, int32_t x0, int gamma, float* lambda, int32_t* drafts,
                                      const DecisionIO& dec) {
  if (!w_.dspark.present) return Status::error("the checkpoint has no DSpark drafter");
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return Status::errorf("dspark propose: sequence slot {} was not started", seq);
  if (gamma < 1) return Status::errorf("dspark propose: gamma = {} must be at least 1", gamma);
  if (x0 < 0 || x0 >= cfg_.vocab_size)
    return Status::errorf("dspark propose: anchor token {} outside [0, vocab_size = {})", x0, cfg_.vocab_size);
  Sequence& sq = *it->second;
  const DSparkWeights& dw = w_.dspark;
  const int64_t W = cfg_.sliding_window, Dh = cfg_.head_dim, D = cfg_.hidden_size, N = cfg_.hc_mult;
  const int64_t V = cfg_.vocab_size, Rm = cfg_.dspark->markov_rank, G = gamma;
  const int64_t n_ctx = std::min<int64_t>(W, a + 1);
  for (int64_t p = a + 1 - n_ctx; p <= a; ++p)
    if (p < 0 || p >= static_cast<int64_t>(sq.dspark_committed.size()) || !sq.dspark_committed[p])
      return Status::errorf("dspark propose: anchor {} needs the context row of position {}, not committed", a, p);

  // Block rows (§3.4): anchor token, then γ-1 noise tokens, at positions a+1 ...
  std::vector<int32_t> u(static_cast<size_t>(G), static_cast<int32_t>(cfg_.dspark->noise_token_id));
  u[0] = x0;
  Request rq{seq, G, std::vector<int64_t>(static_cast<size_t>(G)), u.data(), 1, a, 0};
  for (int64_t i = 0; i < G; ++i) rq.pos[i] = a + 1 + i;
  std::vector<bf16> Z(static_cast<size_t>(G * N * D));
  k::embed_ref(k::EmbedParams{V, D, cfg_.hc_mult}, w_.embed, u.data(), G, Z.data());
  // Context list in ring-slot order (§3.6): slot j holds the position p ≡ j (mod W) of the window.
  std::vector<bf16> ctx(static_cast<size_t>(n_ctx * Dh));
  for (size_t s = 0; s < dw.stages.size(); ++s) {
    int64_t e = 0;
    for (int64_t j = 0; j < std::min(W, a + 1); ++j) {
      const int64_t lo = a + 1 - n_ctx;  // window [lo, a]; the p ≡ j (mod W) in it
      const int64_t p = lo + ((j - lo % W) % W + W) % W;
      std::copy_n(sq.dspark_ctx[s].begin() + p * Dh, Dh, ctx.begin() + (e++) * Dh);
    }
    const LayerWeights& lw = dw.stages[s];
    rq.dspark_stage = static_cast<int>(s);
    run_block_with(lw, false, rq, Z.data(), dec,
                   [&](const bf16* x, bf16* out) { dspark_attention(lw, ctx, n_ctx, rq, x, out); });
  }
  // Head (§3.7, A20) and the Markov chain (§3.8).
  std::vector<float> U(static_cast<size_t>(G * V)), lam(static_cast<size_t>(V));
  head(dw.hc_head, dw.norm, Z.data(), G, U.data());
  int32_t prev = x0;
  for (int64_t i = 0; i < G; ++i) {
    const bf16* m = dw.markov_w1 + prev * Rm;
    int32_t best = 0;
    for (int64_t v = 0; v < V; ++v) {
      const bf16* w2 = dw.markov_w2 + v * Rm;
      float beta = 0.0f;
      for (int64_t r = 0; r < Rm; ++r) beta += m[r].to_float() * w2[r].to_float();
      lam[v] = U[i * V + v] + beta;
      if (lam[v] > lam[best] || (std::isnan(lam[best]) && !std::isnan(lam[v]))) best = static_cast<int32_t>(v);
    }
    if (lambda) std::copy(lam.begin(), lam.end(), lambda + i * V);
    if (dec.forced)
      if (const Decision* d = dec.forced->find_dspark(true, 0, seq, a, static_cast<int32_t>(i))) best = d->selected[0];
    if (dec.log) dec.log->push_back({false, false, 0, seq, a, {best}, true, true, static_cast<int32_t>(i)});
    drafts[i] = best;
    prev = best;
  }
  return Status();
}

}  // namespace dsv4
