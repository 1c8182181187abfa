// ModelRunner's DSpark drafter (runner.h; dspark.md §3, Level A §3.10): context rows into
// per-slot rings, the stage blocks over B·γ block rows with the non-causal block attention,
// the drafter head and the Markov chain, all on the runner's pool with the engine kernels.
// The oracle is ReferenceModel::dspark_commit / dspark_propose.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/check.h"
#include "kernels/embed/embed.h"
#include "kernels/kv_path/kv_path.h"
#include "kernels/linear/linear.h"
#include "kernels/q_path/q_path.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "model/runner.h"
#include "model/runner_state.h"
#include "numeric/cache_rows.h"

namespace dsv4 {

namespace k = kernels;

namespace {
constexpr int32_t kOnePage = int32_t{1} << 30;
constexpr int32_t kPageZero = 0;
}  // namespace

Status ModelRunner::dspark_init() {
  const ModelConfig& c = cfg_;
  auto d = std::make_unique<Dspark>();
  d->ns = c.n_dspark_stages();
  d->F = static_cast<int64_t>(c.dspark->target_layer_ids.size()) * c.hidden_size;
  d->W = c.sliding_window;
  d->kv_bytes = kv_format_.bytes();
  d->list_stride = d->W + kMaxDsparkGamma;
  for (const LayerWeights& lw : w_.dspark.stages) {
    auto lc = std::make_unique<LayerCaches>();
    lc->index = lw.layer;
    lc->inv_freq = inv_main_.data();
    for (const ExpertWeights& e : lw.ffn.experts) lc->experts.push_back(k::ExpertWeights{e.w1.w, e.w3.w, e.w2.w});
    lc->shared = k::ExpertWeights{lw.ffn.shared.w1.w, lw.ffn.shared.w3.w, lw.ffn.shared.w2.w};
    d->layers.push_back(std::move(lc));
  }
  const int64_t T = limits_.max_rows, B = limits_.max_batch, S = limits_.max_seqs;
  d->rings.assign(static_cast<size_t>(S * d->ns * d->W * d->kv_bytes), 0);
  d->ring_pos.assign(static_cast<size_t>(S * d->W), -1);
  d->feat.resize(static_cast<size_t>(T * d->F));
  d->fq.resize(static_cast<size_t>(T * d->F));
  d->main_x.resize(static_cast<size_t>(T * c.hidden_size));
  d->pos.resize(static_cast<size_t>(T));
  d->keys.resize(static_cast<size_t>(std::max(B, T) * d->list_stride * d->kv_bytes));
  d->list.resize(static_cast<size_t>(T * d->list_stride));
  d->len.resize(static_cast<size_t>(T));
  d->rows.resize(static_cast<size_t>(T));
  d->m.resize(static_cast<size_t>(std::max(B, T) * c.dspark->markov_rank));
  d->beta.resize(static_cast<size_t>(std::max(B, T) * c.vocab_size));
  d->prev.resize(static_cast<size_t>(std::max(B, T)));
  d->own.resize(static_cast<size_t>(std::max(B, T)));
  d->sample_scratch.resize(static_cast<size_t>(k::sample_scratch_bytes(c.vocab_size, pool_.size()) / 8 + 1));
  ds_ = std::move(d);
  return Status();
}

Status ModelRunner::dspark_commit(std::span<const DsparkCommit> commits) {
  if (!ds_) return Status::error("dspark commit: the checkpoint has no DSpark drafter");
  Dspark& d = *ds_;
  const ModelConfig& c = cfg_;
  const int me = world_rank();
  int64_t T = 0;
  for (size_t r = 0; r < commits.size(); ++r) {
    const DsparkCommit& q = commits[r];
    if (q.owner != me) continue;  // another rank's rings
    if (q.seq < 0 || q.seq >= limits_.max_seqs || !slots_[q.seq].active)
      return Status::errorf("dspark commit {}: sequence slot {} is not active", r, q.seq);
    if (q.n < 0 || q.p0 < slots_[q.seq].floor)
      return Status::errorf("dspark commit {}: positions {} .. {} of slot {} (its start is {})", r, q.p0,
                            q.p0 + q.n - 1, q.seq, slots_[q.seq].floor);
    if (T + q.n > limits_.max_rows)
      return Status::errorf("dspark commit: {}+ rows exceed max_rows = {}", T + q.n, limits_.max_rows);
    for (int32_t i = 0; i < q.n; ++i) d.pos[static_cast<size_t>(T + i)] = q.p0 + i;
    if (q.n > 0) std::memcpy(d.feat.data() + T * d.F, q.features, sizeof(bf16) * q.n * d.F);
    T += q.n;
  }
  if (T == 0) return Status();
  const DSparkWeights& dw = w_.dspark;
  const int64_t D = c.hidden_size, Dh = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Scratch& s = *s_;
  // A18: main_x = RMSNorm(main_proj · actq(H)).
  const bf16* x = d.feat.data();
  if (dw.main_proj.actq) {
    pool_.run([&](int tid, int n) { k::actq_rows(d.feat.data(), T, d.F, d.fq.data(), tid, n); });
    x = d.fq.data();
  }
  pool_.run([&](int tid, int n) { k::linear(dw.main_proj.w, x, T, d.main_x.data(), tid, n); });
  pool_.run([&](int tid, int n) { k::rmsnorm(d.main_x.data(), dw.main_norm, d.main_x.data(), T, D, eps, tid, n); });
  // Per stage the key path at each position, packed into ring slot p mod W.
  const k::KvPathParams kp{D, static_cast<int>(Dh), static_cast<int>(c.qk_rope_head_dim), eps};
  const k::KvPathIO kio{T, d.main_x.data(), d.pos.data(), s.kv.data(), s.kvpath.data()};
  for (int st = 0; st < d.ns; ++st) {
    const AttentionWeights& aw = dw.stages[st].attn;
    const k::KvPathWeights kw{aw.wkv.w, aw.kv_norm, inv_main_.data()};
    for (int ph = 0; ph < k::kKvPathPhases; ++ph) pool_.run([&](int tid, int n) { k::kv_path(ph, kp, kw, kio, tid, n); });
    int64_t t = 0;
    for (const DsparkCommit& q : commits)
      if (q.owner == me)
        for (int32_t i = 0; i < q.n; ++i, ++t)
          kv_pack_row(kv_format_, s.kv.data() + t * Dh, d.ring(q.seq, st, (q.p0 + i) % d.W));
  }
  for (const DsparkCommit& q : commits)
    if (q.owner == me)
      for (int32_t i = 0; i < q.n; ++i) d.ring_pos[static_cast<size_t>(q.seq * d.W + (q.p0 + i) % d.W)] = q.p0 + i;
  return Status();
}

Status ModelRunner::dspark_propose(std::span<const DsparkRound> rounds, int gamma, float* lambda, int32_t* drafts,
                                   const DecisionIO& dec) {
  if (!ds_) return Status::error("dspark propose: the checkpoint has no DSpark drafter");
  Dspark& d = *ds_;
  const ModelConfig& c = cfg_;
  const int me = world_rank();
  const int64_t B = static_cast<int64_t>(rounds.size()), G = gamma, V = c.vocab_size;
  if (gamma < 1 || gamma > kMaxDsparkGamma)
    return Status::errorf("dspark propose: gamma = {} outside [1, {}]", gamma, kMaxDsparkGamma);
  if (B > limits_.max_batch || B * G > limits_.max_rows)
    return Status::errorf("dspark propose: {} rounds of {} rows exceed max_batch = {} or max_rows = {}", B, G,
                          limits_.max_batch, limits_.max_rows);
  int64_t Bo = 0;  // the rounds this rank computes (all of them on one rank)
  for (int64_t r = 0; r < B; ++r) {
    const DsparkRound& q = rounds[r];
    if (ranks_ && (q.owner < 0 || q.owner >= ranks_->g->topo.world))
      return Status::errorf("dspark propose {}: owner rank {} outside [0, {})", r, q.owner, ranks_->g->topo.world);
    if (q.seq < 0 || q.seq >= limits_.max_seqs || !slots_[q.seq].active)
      return Status::errorf("dspark propose {}: sequence slot {} is not active", r, q.seq);
    if (q.x0 < 0 || q.x0 >= V) return Status::errorf("dspark propose {}: anchor token {} outside [0, {})", r, q.x0, V);
    if (q.anchor < 0) return Status::errorf("dspark propose {}: anchor {} is negative", r, q.anchor);
    if (Status st = k::validate_sampling_params(q.sample); !st.ok())
      return st.with_context(fmt::format("dspark propose {}", r));
    if (q.owner != me) continue;
    for (int64_t p = std::max<int64_t>(0, q.anchor - d.W + 1); p <= q.anchor; ++p)
      if (d.ring_pos[static_cast<size_t>(q.seq * d.W + p % d.W)] != p)
        return Status::errorf("dspark propose {}: anchor {} needs the context row of position {} (slot {}), not "
                              "committed",
                              r, q.anchor, p, q.seq);
    d.own[Bo++] = static_cast<int32_t>(r);
  }
  if (B == 0) return Status();  // every rank sees the same rounds: all return here alike
  // Block rows (§3.4) as the step's rows: the own rounds' rows.
  const int64_t T = Bo * G;
  md_.B = static_cast<int32_t>(Bo);
  md_.T = static_cast<int32_t>(T);
  for (int64_t k = 0; k < Bo; ++k) {
    const DsparkRound& q = rounds[d.own[k]];
    md_.row_begin[k] = static_cast<int32_t>(k * G);
    for (int64_t i = 0; i < G; ++i) {
      const int64_t t = k * G + i;
      md_.row_req[t] = static_cast<int32_t>(k);
      md_.row_seq[t] = q.seq;
      md_.pos[t] = q.anchor + 1 + i;
      md_.token[t] = i == 0 ? q.x0 : static_cast<int32_t>(c.dspark->noise_token_id);
      md_.window_len[t] = 0;
    }
  }
  md_.row_begin[Bo] = static_cast<int32_t>(T);
  if (ranks_) plan_dspark_rows(rounds, gamma);
  Scratch& s = *s_;
  const k::EmbedParams ep{V, c.hidden_size, c.hc_mult};
  if (T > 0) pool_.run([&](int tid, int n) { k::embed(ep, w_.embed, md_.token.data(), T, s.Z.data(), tid, n); });
  for (int st = 0; st < d.ns; ++st)
    DSV4_RETURN_IF_ERROR(run_block(w_.dspark.stages[st], *d.layers[st], false, s.Z.data(), dec, gamma));
  // Head (§3.7) into lambda (with ranks: the own rows at their round rows), then the Markov
  // chain (§3.8, A20) row by row of the block.
  DSV4_RETURN_IF_ERROR(run_head(w_.dspark.hc_head, w_.dspark.norm, s.Z.data(), lambda, {}));
  if (Bo == 0) return Status();
  const int64_t Rm = c.dspark->markov_rank;
  const LinearWeight w2{WeightFormat::kBF16, V, Rm, w_.dspark.markov_w2, nullptr};
  for (int64_t k = 0; k < Bo; ++k) d.prev[k] = rounds[d.own[k]].x0;
  for (int64_t i = 0; i < G; ++i) {
    for (int64_t k = 0; k < Bo; ++k)
      std::memcpy(&d.m[k * Rm], w_.dspark.markov_w1 + d.prev[k] * Rm, sizeof(bf16) * Rm);
    pool_.run([&](int tid, int n) { k::linear_f32(w2, d.m.data(), Bo, d.beta.data(), tid, n); });
    pool_.run([&](int tid, int n) {
      const Range rr = split_range(Bo, tid, n);
      for (int64_t o = rr.begin; o < rr.end; ++o) {  // own round o
        const int64_t row = d.own[o] * G + i;
        float* lam = lambda + row * V;
        const float* beta = d.beta.data() + o * V;
        int32_t best = 0;
        for (int64_t v = 0; v < V; ++v) {
          lam[v] = lam[v] + beta[v];
          if (lam[v] > lam[best]) best = static_cast<int32_t>(v);
        }
        const DsparkRound& q = rounds[d.own[o]];
        if (q.sample.temperature > 0.0f) {  // drawn from λ (dspark.md §4.3): d_{i+1} at anchor + 2 + i, slot 1
          const int64_t bytes = k::sample_scratch_bytes(V, 1);
          const k::SampleRow sr{q.sample, q.anchor + 2 + i, 1};
          k::sample(lam, 1, V, &sr, &best, reinterpret_cast<char*>(d.sample_scratch.data()) + tid * bytes, bytes, 0, 1);
        }
        drafts[row] = best;
        d.prev[o] = best;
      }
    });
    if (dec.forced || dec.log)
      for (int64_t k = 0; k < Bo; ++k) {
        const DsparkRound& q = rounds[d.own[k]];
        const int64_t row = d.own[k] * G + i;
        const int32_t bi = static_cast<int32_t>(i);
        if (dec.forced)
          if (const Decision* f = dec.forced->find_dspark(true, 0, q.seq, q.anchor, bi)) drafts[row] = d.prev[k] = f->selected[0];
        if (dec.log) dec.log->push_back({false, false, 0, q.seq, q.anchor, {drafts[row]}, true, true, bi});
      }
  }
  return Status();
}

// DSpark attention of one stage (dspark.md §3.6) over blocks of `gamma` rows: per request a
// key list of its n_c ring rows in ring-slot order, then its γ transient block keys (A6,
// fp8sim_64 included), read whole by every block row.
Status ModelRunner::run_dspark_attention(const LayerWeights& lw, LayerCaches& lc, int gamma) {
  Scratch& s = *s_;
  Dspark& d = *ds_;
  const ModelConfig& c = cfg_;
  const int64_t T = md_.T, G = gamma, D = c.hidden_size, Dh = c.head_dim;
  const int H = c.num_attention_heads, Dr = static_cast<int>(c.qk_rope_head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const AttentionWeights& aw = lw.attn;
  const int64_t* pos = md_.pos.data();
  const int stage = lw.layer - c.num_hidden_layers;
  const k::QPathParams qp{D, c.q_lora_rank, H, static_cast<int>(Dh), Dr, eps};
  const k::QPathWeights qw{aw.wq_a.w, aw.q_norm, aw.wq_b.w, lc.inv_freq};
  const k::QPathIO qio{T, s.a.data(), pos, s.qr.data(), s.q.data(), s.qpath.data()};
  for (int ph = 0; ph < k::kQPathPhases; ++ph) pool_.run([&](int tid, int n) { k::q_path(ph, qp, qw, qio, tid, n); });
  const k::KvPathParams kp{D, static_cast<int>(Dh), Dr, eps};
  const k::KvPathWeights kw{aw.wkv.w, aw.kv_norm, lc.inv_freq};
  const k::KvPathIO kio{T, s.a.data(), pos, s.kv.data(), s.kvpath.data()};
  for (int ph = 0; ph < k::kKvPathPhases; ++ph) pool_.run([&](int tid, int n) { k::kv_path(ph, kp, kw, kio, tid, n); });
  // Key lists.
  const int64_t B = T / G, kb = d.kv_bytes;
  for (int64_t r = 0; r < B; ++r) {
    const int32_t seq = md_.row_seq[r * G];
    const int64_t anchor = pos[r * G] - 1, n_c = std::min<int64_t>(d.W, anchor + 1), L = n_c + G;
    uint8_t* buf = d.keys.data() + r * d.list_stride * kb;
    for (int64_t j = 0; j < n_c; ++j) std::memcpy(buf + j * kb, d.ring(seq, stage, j), static_cast<size_t>(kb));
    for (int64_t i = 0; i < G; ++i) kv_pack_row(kv_format_, s.kv.data() + (r * G + i) * Dh, buf + (n_c + i) * kb);
    for (int64_t i = 0; i < G; ++i) {
      const int64_t t = r * G + i;
      d.rows[t] = PagedBytes{buf, &kPageZero, kOnePage, 0, kb};
      for (int64_t j = 0; j < L; ++j) d.list[t * d.list_stride + j] = static_cast<int32_t>(j);
      d.len[t] = static_cast<int32_t>(L);
    }
  }
  const k::AttnList list{d.list.data(), d.list_stride, d.len.data(), d.len.data(), nullptr};
  const k::PackedAttnKeys keys{d.rows.data(), nullptr, kv_format_};
  const k::SparseAttnParams ap{H, static_cast<int>(Dh)};
  pool_.run([&](int tid, int n) {
    k::sparse_attn(ap, s.q.data(), T, list, keys, aw.attn_sink, s.o.data(), s.attn.data(), tid, n);
  });
  return run_out_proj(lw, lc);
}

}  // namespace dsv4
