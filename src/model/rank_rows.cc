#include "model/rank_rows.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "model/placement.h"

namespace dsv4 {

namespace k = kernels;

Result<std::unique_ptr<RankRows>> RankRows::create(const ModelConfig& c, const Weights& w, const Limits& limits,
                                                   RankGroups* g, const StepCapacity& cap) {
  const Topology& t = g->topo;
  DSV4_RETURN_IF_ERROR(validate_topology(c, t));
  std::unique_ptr<RankRows> R(new RankRows(cap, limits));
  R->g = g;
  const int64_t T = limits.max_rows;
  const k::OutProjParams op{c.num_attention_heads, static_cast<int>(c.head_dim), static_cast<int>(c.qk_rope_head_dim),
                            c.o_groups, c.o_lora_rank, c.hidden_size};
  if (t.tp > 1) {
    for (int l = 0; l < c.n_checkpoint_layers(); ++l) {  // main layers, then MTP layers or DSpark stages
      const int extra = l - c.num_hidden_layers;
      const LayerWeights& lw = c.is_mtp_layer(l)      ? w.mtp[extra].block
                               : c.is_dspark_stage(l) ? w.dspark.stages[extra]
                                                      : w.layers[l];
      Result<OutProjShard> sh = make_out_proj_shard(op, lw.attn.wo_a.w, lw.attn.wo_b.w, t.tp, t.tp_rank());
      if (!sh.ok()) return sh.status().with_context(fmt::format("layer {}", l));
      R->out_proj.push_back(std::move(*sh));
    }
    R->attn = std::make_unique<AttnOutputSeam>(op, t.tp, t.tp_rank(), T);
  }
  if (t.ep > 1) {
    MoeSeamParams mp;
    mp.expert = k::MoeExpertParams{c.hidden_size, c.moe_intermediate_size, static_cast<float>(c.swiglu_limit)};
    mp.n_experts = c.n_routed_experts;
    mp.top_k = c.num_experts_per_tok;
    mp.capacity = T;
    R->moe = std::make_unique<MoeSeam>(mp, t.ep, t.ep_rank());
    R->moe->overlap = g->overlap;
  }
  R->head = std::make_unique<HeadSeam>(c.hidden_size, c.vocab_size, t.tp, t.tp_rank(), T);
  R->own_.reserve(limits.max_batch);
  R->cache_.reserve(limits.max_batch);
  R->cp_chunks_.reserve(limits.max_batch);
  R->own_row.resize(T);
  R->head_of_step_.resize(T);
  R->head_out_row_.resize(T);
  R->tp_rows.resize(t.tp);
  R->cp_rows_.resize(t.tp);
  R->gather_cursor_.resize(t.tp);
  R->gathered_.resize(static_cast<size_t>(T * c.hidden_size));
  R->a_kv.resize(static_cast<size_t>(T * c.hidden_size));
  R->stage_.resize(static_cast<size_t>(T * c.hc_mult * c.hidden_size));
  if (c.dspark) R->feat_gathered_.resize(static_cast<size_t>(T * c.dspark->target_layer_ids.size() * c.hidden_size));
  return R;
}

ModelRunner::SeamBytes RankRows::seam_bytes() const {
  ModelRunner::SeamBytes b;
  if (attn) {
    b.attn_a2a = attn->a2a_bytes;
    b.o_reduce = attn->reduce_bytes;
  }
  if (moe) {
    b.moe_counts = moe->counts_bytes;
    b.moe_dispatch = moe->dispatch_bytes;
    b.moe_combine = moe->combine_bytes;
  }
  b.head_gather = head->gather_bytes;
  b.head_logits = head->logits_bytes;
  b.cp_gather = cp_gather_bytes_;
  b.copied = moe ? moe->copied_bytes : 0;  // the attention output seam copies nothing
  return b;
}

ModelRunner::SeamTimes RankRows::seam_times() const {
  ModelRunner::SeamTimes t;
  if (attn) t.attn = attn->time;
  if (moe) t.moe = moe->time;
  t.head = head->time;
  return t;
}

void RankRows::reset_seam_bytes() {
  if (attn) {
    attn->a2a_bytes = attn->reduce_bytes = 0;
    attn->time = SeamTime{};
  }
  if (moe) {
    moe->counts_bytes = moe->dispatch_bytes = moe->combine_bytes = moe->copied_bytes = 0;
    moe->time = SeamTime{};
  }
  head->gather_bytes = head->logits_bytes = 0;
  head->time = SeamTime{};
  cp_gather_bytes_ = 0;
}

Status RankRows::plan_step(std::span<const StepRequest> reqs, const CacheGroup& window, StepMetadata& own_rows) {
  const Topology& t = g->topo;
  own_.clear();
  cache_.clear();
  cp_chunks_.clear();
  std::fill(tp_rows.begin(), tp_rows.end(), 0);
  std::fill(cp_rows_.begin(), cp_rows_.end(), 0);
  for (const StepRequest& q : reqs)
    if (q.owner < 0 || q.owner >= t.world)
      return Status::errorf("request for sequence slot {}: owner rank {} outside [0, {})", q.seq, q.owner, t.world);
  plan_split(reqs, plan_unsplit(reqs));
  has_cp = !cp_chunks_.empty();
  build_step_metadata(own_, window, own_rows);
  build_step_metadata(cache_, window, md_kv);
  return Status();
}

// Unsplit requests: computed by their owner, first. Returns the own rows so far.
int32_t RankRows::plan_unsplit(std::span<const StepRequest> reqs) {
  const Topology& t = g->topo;
  int32_t row = 0, local = 0;
  for (const StepRequest& q : reqs) {
    const bool mine = q.owner / t.tp == t.dp_group();
    if (!(q.cp && mine)) {
      if (mine) tp_rows[q.owner % t.tp] += q.n;
      if (q.owner == t.rank) {
        StepRequest here = q;
        here.local = limits_.local_slot(q.seq);
        own_.push_back(here);
        cache_.push_back(here);
        for (int32_t i = 0; i < q.n; ++i) own_row[local++] = row + i;
      }
    }
    row += q.n;
  }
  n_unsplit_ = local;
  return local;
}

// Split chunks of the group (runtime.md §6.8): TP rank j computes rows share_of(n, j, tp);
// every rank writes the whole chunk to its caches.
void RankRows::plan_split(std::span<const StepRequest> reqs, int32_t local) {
  const Topology& t = g->topo;
  int32_t row = 0;
  for (const StepRequest& q : reqs) {
    if (q.cp && q.owner / t.tp == t.dp_group()) {
      StepRequest here = q;  // in this rank's slot
      here.local = limits_.local_slot(q.cp_slots ? q.cp_slots[t.tp_rank()] : q.seq);
      for (int j = 0; j < t.tp; ++j) {
        const Share sh = share_of(q.n, j, t.tp);
        tp_rows[j] += sh.size();
        cp_rows_[j] += sh.size();
        if (j == t.tp_rank() && sh.size() > 0) {
          StepRequest part = here;
          part.p0 = q.p0 + sh.begin;
          part.n = static_cast<int32_t>(sh.size());
          part.tokens = q.tokens + sh.begin;
          own_.push_back(part);
          for (int32_t i = 0; i < part.n; ++i) own_row[local++] = row + static_cast<int32_t>(sh.begin) + i;
        }
      }
      cache_.push_back(here);
      cp_chunks_.push_back(q.n);
    }
    row += q.n;
  }
}

void RankRows::plan_dspark(std::span<const DsparkRound> rounds, int gamma) {
  const Topology& t = g->topo;
  std::fill(tp_rows.begin(), tp_rows.end(), 0);
  int32_t local = 0;
  for (size_t r = 0; r < rounds.size(); ++r) {
    const int32_t o = rounds[r].owner;
    if (o / t.tp == t.dp_group()) tp_rows[o % t.tp] += gamma;
    if (o == t.rank)
      for (int32_t i = 0; i < gamma; ++i) own_row[local++] = static_cast<int32_t>(r) * gamma + i;
  }
  n_unsplit_ = local;
  has_cp = false;
  cp_chunks_.clear();
}

void RankRows::start_gather_cursors() {
  int64_t off = 0;
  for (int q = 0; q < g->topo.tp; ++q) {
    gather_cursor_[q] = off;
    off += cp_rows_[q];
  }
}

// The split chunks' rows are the last of every TP rank's computed rows; after the gather the
// cache rows are this rank's unsplit rows, then each split chunk whole, in position order.
Status RankRows::gather_cp_rows(const bf16* a, int64_t D) {
  const int tp = g->topo.tp;
  Communicator& comm = *g->tp;
  const int64_t mark = comm.total_sent();
  DSV4_RETURN_IF_ERROR(comm.all_gather_rows(a + n_unsplit_ * D, cp_rows_, D * sizeof(bf16), gathered_.data()));
  cp_gather_bytes_ += comm.total_sent() - mark;
  std::memcpy(a_kv.data(), a, sizeof(bf16) * n_unsplit_ * D);
  int64_t dst = n_unsplit_;
  start_gather_cursors();
  for (int32_t n : cp_chunks_)
    for (int q = 0; q < tp; ++q) {
      const int64_t m = share_of(n, q, tp).size();
      std::memcpy(a_kv.data() + dst * D, gathered_.data() + gather_cursor_[q] * D, sizeof(bf16) * m * D);
      gather_cursor_[q] += m;
      dst += m;
    }
  return Status();
}

// DSpark target features of the group's split chunks (dspark.md §2 with runtime.md §6.8):
// each TP rank computed its shares; after the all-gather every rank of the group holds every
// row of each chunk at its step row of features_out (the owner commits them to its rings).
Status RankRows::gather_cp_features(std::span<const StepRequest> reqs, const bf16* feat, int64_t F,
                                    bf16* features_out) {
  const Topology& t = g->topo;
  const int tp = t.tp;
  Communicator& comm = *g->tp;
  const int64_t mark = comm.total_sent();
  DSV4_RETURN_IF_ERROR(comm.all_gather_rows(feat + n_unsplit_ * F, cp_rows_, F * sizeof(bf16), feat_gathered_.data()));
  cp_gather_bytes_ += comm.total_sent() - mark;
  start_gather_cursors();
  int64_t row = 0;
  for (const StepRequest& q : reqs) {
    if (q.cp && q.owner / tp == t.dp_group())
      for (int j = 0; j < tp; ++j) {
        const Share sh = share_of(q.n, j, tp);
        std::memcpy(features_out + (row + sh.begin) * F, feat_gathered_.data() + gather_cursor_[j] * F,
                    sizeof(bf16) * sh.size() * F);
        gather_cursor_[j] += sh.size();
      }
    row += q.n;
  }
  return Status();
}

void RankRows::scatter_own_rows(const bf16* src, int64_t width, int64_t T, bf16* dst) const {
  for (int64_t t = 0; t < T; ++t) std::memcpy(dst + own_row[t] * width, src + t * width, sizeof(bf16) * width);
}

const bf16* RankRows::gather_own_rows(const bf16* X, int64_t width, int64_t T) {
  for (int64_t t = 0; t < T; ++t) std::memcpy(stage_.data() + t * width, X + own_row[t] * width, sizeof(bf16) * width);
  return stage_.data();
}

const int32_t* RankRows::head_out_rows(const int32_t* rows, int64_t n, int64_t T) {
  if (rows == nullptr) return own_row.data();
  std::fill(head_of_step_.begin(), head_of_step_.end(), -1);
  for (int64_t i = 0; i < n; ++i) head_of_step_[rows[i]] = static_cast<int32_t>(i);
  for (int64_t t = 0; t < T; ++t) head_out_row_[t] = head_of_step_[own_row[t]];
  return head_out_row_.data();
}

}  // namespace dsv4
