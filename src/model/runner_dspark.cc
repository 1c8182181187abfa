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
#include "model/rank_rows.h"
#include "model/runner_state.h"
#include "numeric/cache_rows.h"

namespace dsv4 {

namespace k = kernels;

Status ModelRunner::dspark_init() {
  const ModelConfig& c = cfg_;
  DrafterState::Dims dims;
  dims.n_stages = c.n_dspark_stages();
  dims.features = static_cast<int64_t>(c.dspark->target_layer_ids.size()) * c.hidden_size;
  dims.hidden = c.hidden_size;
  dims.window = c.sliding_window;
  dims.kv = kv_format_;
  dims.markov_rank = c.dspark->markov_rank;
  dims.vocab = c.vocab_size;
  dims.noise_token = static_cast<int32_t>(c.dspark->noise_token_id);
  for (const LayerWeights& lw : w_.dspark.stages)
    dspark_layers_.push_back(LayerCaches::views(lw, lw.layer, inv_main_.data()));
  drafter_ = std::make_unique<DrafterState>(dims, limits_, pool_.size());
  return Status();
}

Status ModelRunner::dspark_commit(std::span<const DsparkCommit> commits) {
  if (!drafter_) return Status::error("dspark commit: the checkpoint has no DSpark drafter");
  DrafterState& d = *drafter_;
  const int me = world_rank();
  Result<int64_t> rows = d.gather_commits(commits, me, *seqs_);
  if (!rows.ok()) return rows.status();
  const int64_t T = *rows;
  if (T == 0) return Status();
  const DSparkWeights& dw = w_.dspark;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const int64_t F = d.dims().features;
  // A18: main_x = RMSNorm(main_proj · actq(H)).
  const bf16* x = d.feat.data();
  if (dw.main_proj.actq) {
    pool_.run([&](int tid, int n) { k::actq_rows(d.feat.data(), T, F, d.feat_q.data(), tid, n); });
    x = d.feat_q.data();
  }
  pool_.run([&](int tid, int n) { k::linear(dw.main_proj.w, x, T, d.main_x.data(), tid, n); });
  pool_.run([&](int tid, int n) {
    k::rmsnorm(d.main_x.data(), dw.main_norm, d.main_x.data(), T, cfg_.hidden_size, eps, tid, n);
  });
  // Per stage the key path at each position, packed into ring slot p mod W.
  StepScratch& s = *scratch_;
  const int64_t Dh = cfg_.head_dim;
  const k::KvPathParams kp{cfg_.hidden_size, static_cast<int>(Dh), static_cast<int>(cfg_.qk_rope_head_dim), eps};
  const k::KvPathIO kio{T, d.main_x.data(), d.pos.data(), s.kv.data(), s.kvpath.data()};
  for (int st = 0; st < d.dims().n_stages; ++st) {
    const AttentionWeights& aw = dw.stages[st].attn;
    const k::KvPathWeights kw{aw.wkv.w, aw.kv_norm, inv_main_.data()};
    for (int ph = 0; ph < k::kKvPathPhases; ++ph)
      pool_.run([&](int tid, int n) { k::kv_path(ph, kp, kw, kio, tid, n); });
    d.write_ring_rows(commits, me, st, s.kv.data(), Dh);
  }
  d.mark_committed(commits, me);
  return Status();
}

Status ModelRunner::dspark_propose(std::span<const DsparkRound> rounds, int gamma, float* lambda, int32_t* drafts,
                                   const DecisionIO& dec) {
  if (!drafter_) return Status::error("dspark propose: the checkpoint has no DSpark drafter");
  DrafterState& d = *drafter_;
  Result<int64_t> n_own = d.check_rounds(rounds, gamma, world_rank(), ranks_ ? ranks_->g->topo.world : 0, *seqs_);
  if (!n_own.ok()) return n_own.status();
  if (rounds.empty()) return Status();  // every rank sees the same rounds: all return here alike
  // Block rows (§3.4) as the step's rows: the own rounds' rows.
  d.plan_block_rows(rounds, *n_own, gamma, step_meta_);
  if (ranks_) ranks_->plan_dspark(rounds, gamma);
  StepScratch& s = *scratch_;
  const int64_t T = step_meta_.T;
  const k::EmbedParams ep{cfg_.vocab_size, cfg_.hidden_size, cfg_.hc_mult};
  if (T > 0)
    pool_.run([&](int tid, int n) { k::embed(ep, w_.embed, step_meta_.token.data(), T, s.Z.data(), tid, n); });
  for (int st = 0; st < d.dims().n_stages; ++st)
    DSV4_RETURN_IF_ERROR(run_block(w_.dspark.stages[st], *dspark_layers_[st], false, s.Z.data(), dec, gamma));
  // Head (§3.7) into lambda (with ranks: the own rows at their round rows), then the Markov
  // chain (§3.8, A20) row by row of the block.
  DSV4_RETURN_IF_ERROR(run_head(w_.dspark.hc_head, w_.dspark.norm, s.Z.data(), lambda, {}));
  if (*n_own == 0) return Status();
  d.markov_chain(pool_, w_.dspark.markov_w1, w_.dspark.markov_w2, rounds, *n_own, gamma, lambda, drafts, dec);
  return Status();
}

// DSpark attention of one stage (dspark.md §3.6) over blocks of `gamma` rows: per request a
// key list of its n_c ring rows in ring-slot order, then its γ transient block keys (A6,
// fp8sim_64 included), read whole by every block row.
Status ModelRunner::run_dspark_attention(const LayerWeights& lw, LayerCaches& lc, int gamma, bf16* X) {
  StepScratch& s = *scratch_;
  const ModelConfig& c = cfg_;
  const int64_t T = step_meta_.T, D = c.hidden_size, Dh = c.head_dim;
  const int H = c.num_attention_heads, Dr = static_cast<int>(c.qk_rope_head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const AttentionWeights& aw = lw.attn;
  const int64_t* pos = step_meta_.pos.data();
  const k::QPathParams qp{D, c.q_lora_rank, H, static_cast<int>(Dh), Dr, eps};
  const k::QPathWeights qw{aw.wq_a.w, aw.q_norm, aw.wq_b.w, lc.inv_freq};
  const k::QPathIO qio{T, s.a.data(), pos, s.qr.data(), s.q.data(), s.qpath.data()};
  const k::KvPathParams kp{D, static_cast<int>(Dh), Dr, eps};
  const k::KvPathWeights kw{aw.wkv.w, aw.kv_norm, lc.inv_freq};
  const k::KvPathIO kio{T, s.a.data(), pos, s.kv.data(), s.kvpath.data()};
  // The kv path's phases split like the q path's first three (rows, columns, rows): one run each.
  static_assert(k::kKvPathPhases <= k::kQPathPhases);
  for (int ph = 0; ph < k::kQPathPhases; ++ph)
    pool_.run([&](int tid, int n) {
      k::q_path(ph, qp, qw, qio, tid, n);
      if (ph < k::kKvPathPhases) k::kv_path(ph, kp, kw, kio, tid, n);
    });
  drafter_->build_key_lists(step_meta_, gamma, lw.layer - c.num_hidden_layers, s.kv.data(), Dh);
  const k::AttnList list = drafter_->key_list();
  const k::PackedAttnKeys keys = drafter_->keys();
  const k::SparseAttnParams ap{H, static_cast<int>(Dh)};
  pool_.run([&](int tid, int n) {
    k::sparse_attn(ap, s.q.data(), T, list, keys, aw.attn_sink, s.o.data(), s.attn.data(), tid, n);
  });
  return run_out_proj(lw, lc, false, X);
}

}  // namespace dsv4
