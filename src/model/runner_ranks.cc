// ModelRunner on several ranks (runtime.md §6): the seams and weight shards, which rows a
// rank computes and which it writes to its caches, context-parallel prefill's row gather,
// expert-parallel MoE, and the bytes each seam sent.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "model/placement.h"
#include "model/runner.h"
#include "model/runner_state.h"

namespace dsv4 {

namespace k = kernels;

Status ModelRunner::init_ranks(RankGroups* g) {
  const ModelConfig& c = cfg_;
  const Topology& t = g->topo;
  DSV4_RETURN_IF_ERROR(validate_topology(c, t));
  if (limits_.prefix_blocks > 0)
    return Status::errorf("prefix_blocks = {} needs a single rank (a cached block lives on the rank that computed it)",
                          limits_.prefix_blocks);
  ranks_ = std::make_unique<Ranks>(md_.cap);
  Ranks& R = *ranks_;
  R.g = g;
  const int64_t T = limits_.max_rows;
  const k::OutProjParams op{c.num_attention_heads, static_cast<int>(c.head_dim), static_cast<int>(c.qk_rope_head_dim),
                            c.o_groups, c.o_lora_rank, c.hidden_size};
  if (t.tp > 1) {
    for (int l = 0; l < c.n_checkpoint_layers(); ++l) {  // main layers, then MTP layers or DSpark stages
      const int extra = l - c.num_hidden_layers;
      const LayerWeights& lw = c.is_mtp_layer(l)      ? w_.mtp[extra].block
                               : c.is_dspark_stage(l) ? w_.dspark.stages[extra]
                                                      : w_.layers[l];
      Result<OutProjShard> sh = make_out_proj_shard(op, lw.attn.wo_a.w, lw.attn.wo_b.w, t.tp, t.tp_rank());
      if (!sh.ok()) return sh.status().with_context(fmt::format("layer {}", l));
      R.out_proj.push_back(std::move(*sh));
    }
    R.attn = std::make_unique<AttnOutputSeam>(op, t.tp, t.tp_rank(), T);
  }
  if (t.ep > 1) {
    MoeSeamParams mp;
    mp.expert = k::MoeExpertParams{c.hidden_size, c.moe_intermediate_size, static_cast<float>(c.swiglu_limit)};
    mp.n_experts = c.n_routed_experts;
    mp.top_k = c.num_experts_per_tok;
    mp.capacity = T;
    R.moe = std::make_unique<MoeSeam>(mp, t.ep, t.ep_rank());
  }
  R.head = std::make_unique<HeadSeam>(c.hidden_size, c.vocab_size, t.tp, t.tp_rank(), T);
  R.own.reserve(limits_.max_batch);
  R.cache.reserve(limits_.max_batch);
  R.cp_chunks.reserve(limits_.max_batch);
  R.own_row.resize(T);
  R.head_of_step.resize(T);
  R.head_out_row.resize(T);
  R.tp_rows.resize(t.tp);
  R.cp_rows.resize(t.tp);
  R.cp_cursor.resize(t.tp);
  R.gathered.resize(static_cast<size_t>(T * c.hidden_size));
  R.a_kv.resize(static_cast<size_t>(T * c.hidden_size));
  R.stage.resize(static_cast<size_t>(T * stream_width()));
  if (c.dspark) R.feat_gathered.resize(static_cast<size_t>(T * c.dspark->target_layer_ids.size() * c.hidden_size));
  return Status();
}

int ModelRunner::world_rank() const { return ranks_ ? ranks_->g->topo.rank : 0; }

ModelRunner::SeamBytes ModelRunner::seam_bytes() const {
  SeamBytes b;
  if (!ranks_) return b;
  if (const AttnOutputSeam* a = ranks_->attn.get()) {
    b.attn_a2a = a->a2a_bytes;
    b.o_reduce = a->reduce_bytes;
  }
  if (const MoeSeam* m = ranks_->moe.get()) {
    b.moe_counts = m->counts_bytes;
    b.moe_dispatch = m->dispatch_bytes;
    b.moe_combine = m->combine_bytes;
  }
  b.head_gather = ranks_->head->gather_bytes;
  b.head_logits = ranks_->head->logits_bytes;
  b.cp_gather = ranks_->cp_gather_bytes;
  return b;
}

void ModelRunner::reset_seam_bytes() {
  if (!ranks_) return;
  if (AttnOutputSeam* a = ranks_->attn.get()) a->a2a_bytes = a->reduce_bytes = 0;
  if (MoeSeam* m = ranks_->moe.get()) m->counts_bytes = m->dispatch_bytes = m->combine_bytes = 0;
  ranks_->head->gather_bytes = ranks_->head->logits_bytes = 0;
  ranks_->cp_gather_bytes = 0;
}

// The rows this rank computes (own unsplit requests first, then its shares of the group's
// split chunks), the cache rows it writes, and every TP rank's counts for the seams.
Status ModelRunner::plan_rank_rows(std::span<const StepRequest> reqs) {
  Ranks& R = *ranks_;
  const Topology& t = R.g->topo;
  R.own.clear();
  R.cache.clear();
  R.cp_chunks.clear();
  std::fill(R.tp_rows.begin(), R.tp_rows.end(), 0);
  std::fill(R.cp_rows.begin(), R.cp_rows.end(), 0);
  for (const StepRequest& q : reqs)
    if (q.owner < 0 || q.owner >= t.world)
      return Status::errorf("request for sequence slot {}: owner rank {} outside [0, {})", q.seq, q.owner, t.world);
  // Unsplit requests: computed by their owner, first.
  int32_t row = 0, local = 0;
  for (const StepRequest& q : reqs) {
    const bool mine = q.owner / t.tp == t.dp_group();
    if (!(q.cp && mine)) {
      if (mine) R.tp_rows[q.owner % t.tp] += q.n;
      if (q.owner == t.rank) {
        R.own.push_back(q);
        R.cache.push_back(q);
        for (int32_t i = 0; i < q.n; ++i) R.own_row[local++] = row + i;
      }
    }
    row += q.n;
  }
  R.n_unsplit = local;
  // Split chunks of the group (runtime.md §6.8): TP rank j computes rows share_of(n, j, tp);
  // every rank writes the whole chunk to its caches.
  row = 0;
  for (const StepRequest& q : reqs) {
    if (q.cp && q.owner / t.tp == t.dp_group()) {
      for (int j = 0; j < t.tp; ++j) {
        const Share sh = share_of(q.n, j, t.tp);
        R.tp_rows[j] += sh.size();
        R.cp_rows[j] += sh.size();
        if (j == t.tp_rank() && sh.size() > 0) {
          StepRequest part = q;
          part.p0 = q.p0 + sh.begin;
          part.n = static_cast<int32_t>(sh.size());
          part.tokens = q.tokens + sh.begin;
          R.own.push_back(part);
          for (int32_t i = 0; i < part.n; ++i) R.own_row[local++] = row + static_cast<int32_t>(sh.begin) + i;
        }
      }
      R.cache.push_back(q);
      R.cp_chunks.push_back(q.n);
    }
    row += q.n;
  }
  R.has_cp = !R.cp_chunks.empty();
  build_step_metadata(R.own, *ori_, md_);
  build_step_metadata(R.cache, *ori_, R.md_kv);
  return Status();
}

// Context-parallel prefill (runtime.md §6.8): every TP rank's slices of the split chunks
// (the last rows of its computed rows) all-gathered, then laid out as the cache rows: this
// rank's unsplit rows, then each split chunk whole, in position order.
Status ModelRunner::gather_cp_rows() {
  Ranks& R = *ranks_;
  Scratch& s = *s_;
  const int64_t D = cfg_.hidden_size;
  const int tp = R.g->topo.tp;
  Communicator& comm = *R.g->tp;
  const int64_t mark = comm.total_sent();
  DSV4_RETURN_IF_ERROR(
      comm.all_gather_rows(s.a.data() + R.n_unsplit * D, R.cp_rows, D * sizeof(bf16), R.gathered.data()));
  R.cp_gather_bytes += comm.total_sent() - mark;
  std::memcpy(R.a_kv.data(), s.a.data(), sizeof(bf16) * R.n_unsplit * D);
  int64_t dst = R.n_unsplit;
  std::vector<int64_t>& src = R.cp_cursor;  // each TP rank's next gathered row
  int64_t off = 0;
  for (int q = 0; q < tp; ++q) {
    src[q] = off;
    off += R.cp_rows[q];
  }
  for (int32_t n : R.cp_chunks)
    for (int q = 0; q < tp; ++q) {
      const int64_t m = share_of(n, q, tp).size();
      std::memcpy(R.a_kv.data() + dst * D, R.gathered.data() + src[q] * D, sizeof(bf16) * m * D);
      src[q] += m;
      dst += m;
    }
  return Status();
}

// DSpark target features of the group's split chunks (dspark.md §2 with runtime.md §6.8):
// each TP rank computed its shares; after the all-gather every rank of the group holds every
// row of each chunk at its step row of features_out (the owner commits them to its rings).
Status ModelRunner::gather_cp_features(std::span<const StepRequest> reqs, const bf16* feat, int64_t F,
                                       bf16* features_out) {
  Ranks& R = *ranks_;
  const Topology& t = R.g->topo;
  const int tp = t.tp;
  Communicator& comm = *R.g->tp;
  const int64_t mark = comm.total_sent();
  DSV4_RETURN_IF_ERROR(
      comm.all_gather_rows(feat + R.n_unsplit * F, R.cp_rows, F * sizeof(bf16), R.feat_gathered.data()));
  R.cp_gather_bytes += comm.total_sent() - mark;
  std::vector<int64_t>& src = R.cp_cursor;  // each TP rank's next gathered row
  int64_t off = 0;
  for (int q = 0; q < tp; ++q) {
    src[q] = off;
    off += R.cp_rows[q];
  }
  int64_t row = 0;
  for (const StepRequest& q : reqs) {
    if (q.cp && q.owner / tp == t.dp_group())
      for (int j = 0; j < tp; ++j) {
        const Share sh = share_of(q.n, j, tp);
        std::memcpy(features_out + (row + sh.begin) * F, R.feat_gathered.data() + src[j] * F,
                    sizeof(bf16) * sh.size() * F);
        src[j] += sh.size();
      }
    row += q.n;
  }
  return Status();
}

// A DSpark round's block rows with ranks: the rounds this rank owns are its rows (rows
// numbered over all rounds, γ per round), every TP rank's counts for the seams; no split chunks.
void ModelRunner::plan_dspark_rows(std::span<const DsparkRound> rounds, int gamma) {
  Ranks& R = *ranks_;
  const Topology& t = R.g->topo;
  std::fill(R.tp_rows.begin(), R.tp_rows.end(), 0);
  int32_t local = 0;
  for (size_t r = 0; r < rounds.size(); ++r) {
    const int32_t o = rounds[r].owner;
    if (o / t.tp == t.dp_group()) R.tp_rows[o % t.tp] += gamma;
    if (o == t.rank)
      for (int32_t i = 0; i < gamma; ++i) R.own_row[local++] = static_cast<int32_t>(r) * gamma + i;
  }
  R.n_unsplit = local;
  R.has_cp = false;
  R.cp_chunks.clear();
}

// Expert-parallel MoE over the EP group (parallel/moe_seam.h): local experts
// [ep_rank·E/ep, (ep_rank+1)·E/ep).
Status ModelRunner::run_moe_seam(const LayerCaches& lc) {
  Scratch& s = *s_;
  const Topology& t = ranks_->g->topo;
  const int64_t first = cfg_.n_routed_experts / t.ep * t.ep_rank();
  return ranks_->moe->run(*ranks_->g->ep, pool_, s.a.data(), s.ids.data(), s.route_w.data(), md_.T,
                          lc.experts.data() + first, lc.shared, s.m.data());
}

}  // namespace dsv4
