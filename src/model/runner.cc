#include "model/runner.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "base/check.h"
#include "base/cpu.h"
#include "base/math.h"
#include "cache/cache_storage.h"
#include "kernels/attn_select/attn_select.h"
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
#include "model/rank_rows.h"
#include "model/runner_state.h"
#include "model/step_decisions.h"
#include "numeric/quant.h"
#include "model/placement.h"
#include "parallel/attn_output_seam.h"
#include "parallel/head_seam.h"
#include "parallel/moe_seam.h"

namespace dsv4 {

namespace k = kernels;

namespace {

// Whether the experts' inputs on one rank are copies of StepScratch::fq (actq per token row,
// run_block) rather than moe_experts_in's run: rows that actq can take.
bool experts_read_fq(const ModelConfig& c) { return c.hidden_size % kActqBlock == 0; }

}  // namespace



// Bytes allocated (and touched) at start-up, dominant terms: per-row scratch (streams, q/o,
// expert work) and per-slot compressor states. Cache storage is reserved untouched and not
// counted.
double eager_bytes(const Limits& l, const ModelConfig& c) {
  const double T = l.max_rows, D = static_cast<double>(c.hidden_size), N = c.hc_mult;
  const double per_row = 2 * 2 * N * D + 2 * 2 * c.num_attention_heads * static_cast<double>(c.head_dim) +
                         4.0 * c.num_experts_per_tok * (D + 2.0 * c.moe_intermediate_size) + 10 * D;
  double per_seq = 0;
  for (int i = 0; i < c.n_layers_total(); ++i) {
    const int r = c.layer_ratio(i);
    if (r <= 0) continue;
    const int kappa = r == kCsaRatio ? 2 : 1;
    const double ring = kappa * r - 1 + l.max_decode_rows;
    per_seq += 2 * 4 * ring * kappa * static_cast<double>(c.head_dim);
    if (r == kCsaRatio) per_seq += 2 * 4 * ring * kappa * static_cast<double>(c.index_head_dim);
  }
  return T * per_row + static_cast<double>(l.max_seqs) * per_seq;
}

Status validate_limits_for_model(const Limits& l, const ModelConfig& cfg) {
  if (l.prefix_blocks > 0 && l.page_tokens < kCsaRatio)
    return Status::errorf("limit page_tokens = {} must be at least {} with the prefix cache (a hit recomputes the "
                          "last {} positions before its cut)",
                          l.page_tokens, kCsaRatio, kCsaRatio);
  const double eager = eager_bytes(l, cfg);
  const double ram = static_cast<double>(physical_memory_bytes());
  if (ram > 0 && eager > ram)
    return Status::errorf("limits need about {:.1f} GiB at start-up (max_rows = {}, max_seqs = {}), more than this "
                          "machine's {:.1f} GiB of memory",
                          eager / (1 << 30), l.max_rows, l.max_seqs, ram / (1 << 30));
  if (l.max_context > cfg.max_position_embeddings)
    return Status::errorf("limit max_context = {} exceeds the model's max_position_embeddings = {}", l.max_context,
                          cfg.max_position_embeddings);
  for (int i = 0; i < cfg.n_layers_total(); ++i) {
    const int r = cfg.layer_ratio(i);
    if (r > 0 && l.page_tokens % r != 0)
      return Status::errorf("limit page_tokens = {} must be a multiple of every compress ratio (layer {} has {})",
                            l.page_tokens, i, r);
  }
  return Status();
}

namespace {

StepCapacity step_capacity(const Limits& limits, const ModelConfig& cfg, int world) {
  StepCapacity c;
  c.max_batch = limits.max_batch;
  c.max_rows = limits.max_rows;
  c.max_request_rows = limits.r_max();
  c.max_seqs = limits.max_seqs * world;  // the job's slots
  c.max_context = limits.max_context;
  c.window = static_cast<int32_t>(cfg.sliding_window);
  c.vocab_size = cfg.vocab_size;
  return c;
}

}  // namespace

ModelRunner::ModelRunner(const ModelConfig& cfg, const Weights& w, const Limits& limits, int world, int rank)
    : cfg_(cfg),
      w_(w),
      limits_(limits),
      pool_(limits.n_threads),
      world_(world),
      rank_(rank),
      step_meta_(step_capacity(limits, cfg, world)) {}

ModelRunner::~ModelRunner() = default;

Result<std::unique_ptr<ModelRunner>> ModelRunner::create(const ModelConfig& cfg, const Weights& w,
                                                         const Limits& limits, RankGroups* ranks) {
  const bool multi = ranks && ranks->multi();
  const int world = multi ? ranks->topo.world : 1;
  Status st = validate_limits(limits, world);
  if (!st.ok()) return st;
  st = validate_level_a(cfg);
  if (!st.ok()) return st;
  st = validate_limits_for_model(limits, cfg);
  if (!st.ok()) return st;
  // Scratch and per-slot state are allocated here, once; limits too large for the machine
  // end in an error naming them, not in std::bad_alloc.
  try {
    std::unique_ptr<ModelRunner> r(new ModelRunner(cfg, w, limits, world, multi ? ranks->topo.rank : 0));
    st = r->init();
    if (!st.ok()) return st;
    if (multi) {
      st = r->init_ranks(ranks);
      if (!st.ok()) return st;
    }
    return r;
  } catch (const std::bad_alloc&) {
    return Status::errorf("limits too large for this machine's memory: max_seqs = {}, max_batch = {}, max_rows = {}, "
                          "max_decode_rows = {}, max_chunk = {} (scratch and per-sequence state are allocated at "
                          "start-up)",
                          limits.max_seqs, limits.max_batch, limits.max_rows, limits.max_decode_rows, limits.max_chunk);
  } catch (const std::length_error&) {
    return Status::errorf("limits too large: max_seqs = {}, max_rows = {} overflow a buffer size", limits.max_seqs,
                          limits.max_rows);
  }
}

Status ModelRunner::init() {
  const ModelConfig& c = cfg_;
  kv_format_ = KvRowFormat{static_cast<int>(c.head_dim), static_cast<int>(c.qk_rope_head_dim)};
  idx_format_ = IndexKeyFormat{static_cast<int>(c.index_head_dim)};
  idx_page_rows_ = limits_.page_tokens / kCsaRatio;
  inv_main_ = rope_inv_freq_main(c);
  inv_compress_ = rope_inv_freq_compress(c);
  int min_ratio = 0;  // smallest non-zero compress ratio of the main layers (0: none)
  for (int l = 0; l < c.num_hidden_layers; ++l) {  // the MTP layer is SWA (validated)
    const int r = c.layer_ratio(l);
    if (r > 0 && (min_ratio == 0 || r < min_ratio)) min_ratio = r;
  }
  for (int r = 0; r < world_; ++r) {
    Result<std::unique_ptr<SequenceState>> seqs =
        SequenceState::create(limits_, static_cast<int32_t>(c.sliding_window), min_ratio, kv_format_.bytes());
    if (!seqs.ok()) return seqs.status();
    ledgers_.push_back(std::move(*seqs));
  }
  seqs_ = ledgers_[static_cast<size_t>(rank_)].get();
  if (world_ > 1) ledger_reqs_.assign(static_cast<size_t>(world_), {});
  for (auto& l : ledger_reqs_) l.reserve(static_cast<size_t>(limits_.max_batch));
  DSV4_RETURN_IF_ERROR(init_layers());
  int64_t compressor_floats = 0;  // the largest layer's, both compressors side by side
  for (const auto& lc : layers_)
    compressor_floats = std::max(compressor_floats, lc->compressor_scratch_floats(limits_.max_rows));
  scratch_ = StepScratch::create(c, limits_, pool_, compressor_floats);
  if (c.dspark) DSV4_RETURN_IF_ERROR(dspark_init());
  return Status();
}

// Per layer (main, then MTP) its cache storage and compressor slots; the window rows join
// the sequence state (prefix hits copy them).
Status ModelRunner::init_layers() {
  const ModelConfig& c = cfg_;
  const int64_t ring_rows = seqs_->window().physical_rows(), n_blocks = seqs_->blocks().pool().n_pages();
  for (int l = 0; l < c.n_layers_total(); ++l) {
    const LayerWeights& lw = c.is_mtp_layer(l) ? w_.mtp[l - c.num_hidden_layers].block : w_.layers[l];
    const float* inv_freq = lw.ratio > 0 ? inv_compress_.data() : inv_main_.data();
    Result<std::unique_ptr<LayerCaches>> lc = LayerCaches::create(c, limits_, lw, l, inv_freq, ring_rows, n_blocks);
    if (!lc.ok()) return lc.status();
    seqs_->add_window_layer((*lc)->ori.data(), (*lc)->tail.data(), l >= c.num_hidden_layers);
    layers_.push_back(std::move(*lc));
  }
  return Status();
}

Status ModelRunner::check_slot(int32_t seq) const {
  if (seq < 0 || seq >= job_slots())
    return Status::errorf("sequence slot {} outside [0, {}) ({} ranks of max_seqs = {})", seq, job_slots(), world_,
                          limits_.max_seqs);
  return Status();
}

Status ModelRunner::start_sequence(int32_t seq, std::string_view salt) {
  DSV4_RETURN_IF_ERROR(check_slot(seq));
  const int32_t s = local_slot(seq);
  DSV4_RETURN_IF_ERROR(ledger(seq).start(s, limits_.slot_rank(seq), salt));
  if (!own_slot(seq)) return Status();
  for (auto& lc : layers_)
    for (CompressorSlot* c : {&lc->main_cmp, &lc->idx_cmp})
      if (c->present) k::compressor_state_reset(c->params, c->states[s]);
  if (drafter_) drafter_->reset(s);
  return Status();
}

Status ModelRunner::fork_sequence(int32_t parent, int32_t child, int64_t end) {
  DSV4_RETURN_IF_ERROR(check_slot(parent));
  DSV4_RETURN_IF_ERROR(check_slot(child));
  if (limits_.slot_rank(parent) != limits_.slot_rank(child))
    return Status::errorf("fork of slot {} into slot {}: the slots are on different ranks", parent, child);
  const int32_t lp = local_slot(parent), lc_slot = local_slot(child);
  Result<std::pair<int32_t, int32_t>> partial = ledger(parent).fork(lp, lc_slot, end);
  if (!partial.ok()) return partial.status();
  if (!own_slot(parent)) return Status();  // another rank's slots: bookkeeping only
  const auto [from, to] = *partial;
  const int64_t kv_bytes = kv_format_.bytes(), idx_bytes = idx_format_.bytes();
  for (auto& lc : layers_) {
    if (from >= 0 && lc->cmp_page_rows > 0) {
      const int64_t page = lc->cmp_page_rows * kv_bytes;
      std::memcpy(lc->cmp.data() + to * page, lc->cmp.data() + from * page, static_cast<size_t>(page));
    }
    if (from >= 0 && lc->idx.bytes() > 0) {
      const int64_t page = idx_page_rows_ * idx_bytes;
      std::memcpy(lc->idx.data() + to * page, lc->idx.data() + from * page, static_cast<size_t>(page));
    }
    for (CompressorSlot* s : {&lc->main_cmp, &lc->idx_cmp})
      if (s->present) {
        const int64_t n = k::compressor_state_floats(s->params);
        std::copy_n(s->states[lp].kv, n, s->states[lc_slot].kv);
        std::copy_n(s->states[lp].score, n, s->states[lc_slot].score);
      }
  }
  if (drafter_) drafter_->copy_slot(lp, lc_slot);
  return Status();
}

Result<int64_t> ModelRunner::start_sequence_cached(int32_t seq, const int32_t* prompt, int64_t prompt_len,
                                                   bool need_mtp, std::string_view salt) {
  DSV4_RETURN_IF_ERROR(start_sequence(seq, salt));
  return ledger(seq).reuse_prefix(local_slot(seq), prompt, prompt_len, need_mtp);
}

int64_t ModelRunner::cached_prefix_blocks(int32_t owner, const int32_t* prompt, int64_t prompt_len,
                                          bool need_mtp, std::string_view salt) const {
  if (owner < 0 || owner >= world_) return 0;
  return ledgers_[static_cast<size_t>(owner)]->cached_prefix_blocks(owner, prompt, prompt_len, need_mtp, salt);
}

void ModelRunner::register_prefix(int32_t seq, const int32_t* prompt, int64_t prompt_len, bool need_mtp) {
  if (check_slot(seq).ok()) ledger(seq).register_prefix(local_slot(seq), prompt, prompt_len, need_mtp);
}

int32_t ModelRunner::prefix_entries() const { return seqs_->prefix_entries(); }
void ModelRunner::end_sequence(int32_t seq) {
  if (check_slot(seq).ok()) ledger(seq).end(local_slot(seq));
}
bool ModelRunner::active(int32_t seq) const { return check_slot(seq).ok() && ledger(seq).active(local_slot(seq)); }
int64_t ModelRunner::blocks_short(int32_t seq, int64_t end) const {
  if (seq < 0 || !check_slot(seq).ok()) return seqs_->blocks_short(-1, end);
  return ledger(seq).blocks_short(local_slot(seq), end);
}
Status ModelRunner::reserve_blocks(int32_t seq, int64_t end) {
  DSV4_RETURN_IF_ERROR(check_slot(seq));
  return ledger(seq).reserve_blocks(local_slot(seq), end);
}
int64_t ModelRunner::free_blocks(int32_t rank) const {
  return rank >= 0 && rank < world_ ? ledgers_[static_cast<size_t>(rank)]->free_blocks() : 0;
}
int64_t ModelRunner::total_blocks() const { return seqs_->total_blocks(); }

ModelRunner::CacheMemory ModelRunner::cache_memory() const {
  CacheMemory m;
  for (const auto& lc : layers_)
    for (const CacheStorage* s : {&lc->ori, &lc->cmp, &lc->idx, &lc->tail}) {
      m.reserved += static_cast<int64_t>(s->bytes());
      m.resident += static_cast<int64_t>(s->resident_bytes());
    }
  return m;
}

Status ModelRunner::prepare_step(std::span<const StepRequest> reqs, bool mtp) {
  DSV4_RETURN_IF_ERROR(validate_step(reqs, step_meta_.cap));
  if (!ranks_) {
    DSV4_RETURN_IF_ERROR(seqs_->check_step(reqs, mtp));
    build_step_metadata(reqs, seqs_->window(), step_meta_);
    seqs_->advance(reqs, mtp);
    return Status();
  }
  DSV4_RETURN_IF_ERROR(route_to_ledgers(reqs));
  for (int r = 0; r < world_; ++r) {
    Status st = ledgers_[static_cast<size_t>(r)]->check_step(ledger_reqs_[static_cast<size_t>(r)], mtp);
    if (!st.ok()) return st.with_context(fmt::format("rank {}", r));
  }
  DSV4_RETURN_IF_ERROR(ranks_->plan_step(reqs, seqs_->window(), step_meta_));
  for (int r = 0; r < world_; ++r) ledgers_[static_cast<size_t>(r)]->advance(ledger_reqs_[static_cast<size_t>(r)], mtp);
  return Status();
}

// A request's rows go to its slot's rank; a split chunk's to each TP rank of the owner's
// group in its slot there (runtime.md §6.8).
Status ModelRunner::route_to_ledgers(std::span<const StepRequest> reqs) {
  const int tp = ranks_->g->topo.tp;
  for (auto& l : ledger_reqs_) l.clear();
  for (size_t i = 0; i < reqs.size(); ++i) {
    const StepRequest& q = reqs[i];
    if (limits_.slot_rank(q.seq) != q.owner)
      return Status::errorf("request {}: sequence slot {} is rank {}'s, not its owner {}'s", i, q.seq,
                            limits_.slot_rank(q.seq), q.owner);
    const bool split = q.cp && tp > 1;
    if (split && q.cp_slots == nullptr)
      return Status::errorf("request {}: a context-parallel chunk without slots on its TP group", i);
    for (int j = 0; j < (split ? tp : 1); ++j) {
      const int32_t slot = split ? q.cp_slots[j] : q.seq;
      const int rank = split ? q.owner / tp * tp + j : q.owner;
      if (split && rank == q.owner && slot != q.seq)
        return Status::errorf("request {}: its owner's context-parallel slot {} is not its slot {}", i, slot, q.seq);
      if (limits_.slot_rank(slot) != rank || !check_slot(slot).ok())
        return Status::errorf("request {}: slot {} of TP rank {} is not rank {}'s", i, slot, j, rank);
      StepRequest local = q;
      local.seq = local_slot(slot);
      ledger_reqs_[static_cast<size_t>(rank)].push_back(local);
    }
  }
  return Status();
}

Status ModelRunner::check_head_rows(std::span<const StepRequest> reqs, HeadRows head) const {
  if (head.rows == nullptr) return Status();
  int64_t T = 0;
  for (const StepRequest& q : reqs) T += q.n;
  for (int64_t i = 0; i < head.n; ++i) {
    const int32_t r = head.rows[i];
    if (r < 0 || r >= T || (i > 0 && r <= head.rows[i - 1]))
      return Status::errorf("head rows: row {} at index {} is outside the step's {} rows or not above the previous "
                            "one",
                            r, i, T);
  }
  return Status();
}

Status ModelRunner::forward(std::span<const StepRequest> reqs, float* logits, bf16* xfinal_out,
                            const DecisionIO& dec, HeadRows head, bf16* features_out) {
  DSV4_RETURN_IF_ERROR(check_head_rows(reqs, head));
  if (features_out && !cfg_.dspark)
    return Status::error("target features requested, but the checkpoint has no DSpark drafter");
  Status st = prepare_step(reqs, false);
  if (!st.ok()) return st;
  const int64_t T = step_meta_.T;
  if (T == 0 && !ranks_) return Status();  // with ranks, an idle rank still joins every collective
  StepScratch& s = *scratch_;
  const k::EmbedParams ep{cfg_.vocab_size, cfg_.hidden_size, cfg_.hc_mult};
  if (T > 0)
    pool_.run([&](int tid, int n) { k::embed(ep, w_.embed, step_meta_.token.data(), T, s.X.data(), tid, n); }, "embed");
  // DSpark target features (dspark.md §2): each target layer's slice of the feature rows.
  const std::vector<int>* lt = features_out ? &cfg_.dspark->target_layer_ids : nullptr;
  const int64_t F = lt ? static_cast<int64_t>(lt->size()) * cfg_.hidden_size : 0;
  bf16* feat = ranks_ ? s.features.data() : features_out;
  const k::HcParams hp = hc_params();
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    DSV4_RETURN_IF_ERROR(run_block(w_.layers[l], *layers_[l], false, s.X.data(), dec));
    const auto at = lt ? std::find(lt->begin(), lt->end(), l) : std::vector<int>::const_iterator{};
    if (lt && at != lt->end() && T > 0) {
      bf16* slice = feat + (at - lt->begin()) * cfg_.hidden_size;
      pool_.run([&](int tid, int n) { k::hc_stream_mean(s.X.data(), hp, T, slice, F, tid, n); });
    }
  }
  DSV4_RETURN_IF_ERROR(write_forward_outputs(reqs, lt ? feat : nullptr, F, features_out, xfinal_out));
  // Every rank joins the sharded head when any rank wants logits (the engine always does).
  if (logits || ranks_) return run_head(w_.hc_head, w_.norm, s.X.data(), logits, head);
  return Status();
}

// With ranks, the own rows go to their step rows, and the group's split chunks' features are
// gathered; on one rank features_out was written in place.
Status ModelRunner::write_forward_outputs(std::span<const StepRequest> reqs, const bf16* feat, int64_t F,
                                          bf16* features_out, bf16* xfinal_out) {
  const int64_t T = step_meta_.T, ND = stream_width();
  const bf16* X = scratch_->X.data();
  if (feat && ranks_) {
    ranks_->scatter_own_rows(feat, F, T, features_out);
    if (ranks_->has_cp) DSV4_RETURN_IF_ERROR(ranks_->gather_cp_features(reqs, feat, F, features_out));
  }
  if (xfinal_out && ranks_) {
    ranks_->scatter_own_rows(X, ND, T, xfinal_out);
  } else if (xfinal_out) {
    std::memcpy(xfinal_out, X, sizeof(bf16) * T * ND);
  }
  return Status();
}

Status ModelRunner::forward_mtp(std::span<const StepRequest> reqs, const bf16* X, float* logits,
                                const DecisionIO& dec, HeadRows head) {
  if (w_.mtp.empty()) return Status::error(cfg_.no_mtp_reason());
  DSV4_RETURN_IF_ERROR(check_head_rows(reqs, head));
  Status st = prepare_step(reqs, true);
  if (!st.ok()) return st;
  const int64_t T = step_meta_.T;
  if (T == 0 && !ranks_) return Status();
  StepScratch& s = *scratch_;
  if (ranks_) X = ranks_->gather_own_rows(X, stream_width(), T);  // the own rows of X, in own-row order
  const MtpWeights& mw = w_.mtp[0];
  const k::MtpProjParams mp{cfg_.vocab_size, cfg_.hidden_size, cfg_.hc_mult, static_cast<float>(cfg_.rms_norm_eps)};
  const k::MtpProjWeights mpw{w_.embed, mw.enorm, mw.hnorm, mw.e_proj.w, mw.h_proj.w};
  const k::MtpProjIO io{T, step_meta_.token.data(), X, s.Z.data(), s.mtpproj.data()};
  if (T > 0)
    for (int ph = 0; ph < k::kMtpProjPhases; ++ph)
      pool_.run([&](int tid, int n) { k::mtp_proj(ph, mp, mpw, io, tid, n); });
  DSV4_RETURN_IF_ERROR(run_block(mw.block, *layers_[cfg_.num_hidden_layers], true, s.Z.data(), dec));
  if (logits || ranks_) return run_head(mw.hc_head, mw.norm, s.Z.data(), logits, head);
  return Status();
}

Status ModelRunner::run_block(const LayerWeights& lw, LayerCaches& lc, bool mtp_block, bf16* X,
                              const DecisionIO& dec, int dspark_gamma) {
  StepScratch& s = *scratch_;
  const int64_t T = step_meta_.T;
  const k::HcParams hp = hc_params();
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const int64_t D = cfg_.hidden_size;
  // a [T, D] out; then(tid, n): more work on the rows each thread normed (rows split alike).
  // names: the runs' names in a RunProfile (hc_mix, then apply).
  auto hc_pre = [&](const HcParams& h, const bf16* norm_w, bf16* a, const char* const* names, auto&& then) {
    const k::HcPreWeights hw{h.fn, h.scale, h.base};
    pool_.run([&](int tid, int n) { k::hc_mix(X, h.fn, hp.n_mix(), hp, T, s.mix.data(), tid, n); }, names[0]);
    pool_.run(
        [&](int tid, int n) {  // all split rows alike: each thread norms the rows it wrote
          k::hc_pre_apply(X, hw, hp, T, s.mix.data(), a, s.post.data(), s.comb.data(), tid, n);
          k::rmsnorm(a, norm_w, a, T, D, eps, tid, n);
          then(tid, n);
        },
        names[1]);
  };
  auto hc_post = [&](const bf16* f) {
    pool_.run([&](int tid, int n) { k::hc_post(f, X, s.post.data(), s.comb.data(), hp, T, X, tid, n); }, "hc_post");
  };
  if (T == 0) {  // an idle rank (several ranks): the split chunks' cache rows, the seams' collectives
    DSV4_RETURN_IF_ERROR(run_attention(lw, lc, mtp_block, dec, X));
    return run_moe(lw, lc, mtp_block, dec, dspark_gamma, X);
  }
  // attention sub-block: hc_pre -> attn_norm -> attention -> hc_post (run A of the attention
  // in hc_pre's apply run, runner_attention.cc)
  static constexpr const char* kAttnPre[] = {"attn.hc_mix", "attn.hc_pre+A"};
  hc_pre(lw.hc_attn, lw.attn_norm, s.a.data(), kAttnPre, [&](int tid, int n) {
    if (dspark_gamma == 0) attention_actq(lw, lc, tid, n);
  });
  DSV4_RETURN_IF_ERROR(dspark_gamma > 0 ? run_dspark_attention(lw, lc, dspark_gamma, X)
                                        : run_attention(lw, lc, mtp_block, dec, X));
  if (!out_proj_posts()) hc_post(s.attn_out.data());
  // MoE sub-block: hc_pre -> ffn_norm -> MoE -> hc_post
  static constexpr const char* kFfnPre[] = {"ffn.hc_mix", "ffn.hc_pre+actq"};
  hc_pre(lw.hc_ffn, lw.ffn_norm, moe_rows().a, kFfnPre, [&](int tid, int n) {  // the experts' actq per token row
    if (moe_posts() && experts_read_fq(cfg_)) k::actq_rows(s.a.data(), T, D, s.fq.data(), tid, n);
  });
  DSV4_RETURN_IF_ERROR(run_moe(lw, lc, mtp_block, dec, dspark_gamma, X));
  if (!moe_posts()) hc_post(s.m.data());
  return Status();
}

bool ModelRunner::out_proj_posts() const { return !ranks_ || !ranks_->attn; }
bool ModelRunner::moe_posts() const { return !ranks_ || !ranks_->moe; }

kernels::HcParams ModelRunner::hc_params() const {
  return {cfg_.hc_mult, cfg_.hidden_size, cfg_.hc_sinkhorn_iters, static_cast<float>(cfg_.hc_eps),
          static_cast<float>(cfg_.rms_norm_eps)};
}

// The MoE sub-block's runs on one rank (each ThreadPool::run ends in a barrier): gate scores
// (experts split), routes (rows split); then, the dispatch and the experts' input copies on the
// caller, up with the activation (F columns split), down with combine and hc_post (hidden
// columns split). With an EP seam: the seam (parallel/moe_seam.h), then hc_post in run_block.
Status ModelRunner::run_moe(const LayerWeights& lw, const LayerCaches& lc, bool mtp_block, const DecisionIO& dec,
                            int dspark_gamma, bf16* X) {
  StepScratch& s = *scratch_;
  const ModelConfig& c = cfg_;
  const int64_t T = step_meta_.T, E = c.n_routed_experts, K = c.num_experts_per_tok;
  if (T == 0) return ranks_ && ranks_->moe ? run_moe_seam(lc) : Status();
  const k::MoeGateParams gp{c.hidden_size, E, K, static_cast<float>(c.routed_scaling_factor)};
  k::MoeGateWeights gw;
  gw.weight = lw.ffn.gate.w;
  gw.bias = lw.ffn.bias;
  if (lw.hash) gw.tid2eid = k::Tid2Eid{lw.ffn.tid2eid.data(), false, c.vocab_size};
  const MoeRows io = moe_rows();
  pool_.run([&](int tid, int n) { k::moe_gate_scores(io.a, gw, gp, T, s.gate_scores.data(), tid, n); },
            "moe.gate");
  pool_.run(
      [&](int tid, int n) {
        k::moe_gate_route(s.gate_scores.data(), gw, step_meta_.token.data(), gp, T, io.ids, io.route_w, tid, n);
      },
      "moe.route");
  if (dec.forced || dec.log) {
    const int stage = dspark_gamma > 0 ? lw.layer - c.num_hidden_layers : 0;
    apply_route_decisions(dec, DecisionSite{mtp_block, mtp_block ? 0 : lw.layer, dspark_gamma, stage}, step_meta_, gp,
                          s.gate_scores.data(), io.ids, io.route_w);
  }
  if (ranks_ && ranks_->moe) return run_moe_seam(lc);
  const k::MoeExpertParams ep{c.hidden_size, c.moe_intermediate_size, static_cast<float>(c.swiglu_limit)};
  const k::MoeDispatchParams dp{K, 0, E, limits_.max_rows};
  k::moe_dispatch_build(s.ids.data(), T, dp, &s.moe_work);
  const k::MoeWork& mw = s.moe_work;
  if (experts_read_fq(c))  // actq ran per token row with ffn_norm (run_block): copies only
    k::moe_experts_gather(s.a.data(), s.fq.data(), lc.experts.data(), lc.shared, ep, dp, &s.moe_work);
  else
    pool_.run([&](int tid, int n) { k::moe_experts_in(s.a.data(), lc.experts.data(), lc.shared, ep, dp, mw, tid, n); },
              "moe.in");
  pool_.run(
      [&](int tid, int n) {  // up and the activation on the whole 128-blocks of F of this thread
        const Range cols = split_aligned(ep.moe_intermediate_size, kActqBlock, tid, n);
        k::moe_experts_up_act_cols(s.route_w.data(), lc.experts.data(), lc.shared, ep, dp, mw, cols.begin, cols.end);
      },
      "moe.up+act");
  const k::MoeCombineParams cp{c.hidden_size, K};
  const k::HcParams hp = hc_params();
  pool_.run(
      [&](int tid, int n) {  // down, combine and hc_post on the hidden columns of this thread
        const Range cols = split_aligned(c.hidden_size, kColumnAlign, tid, n);
        k::moe_experts_down_cols(lc.experts.data(), lc.shared, ep, dp, mw, cols.begin, cols.end);
        k::moe_combine_cols(mw.x, mw.slot_entry, s.ids.data(), k::shared_out(mw, ep), cp, T, cols.begin, cols.end,
                            s.m.data());
        k::hc_post_cols(s.m.data(), X, s.post.data(), s.comb.data(), hp, T, cols.begin, cols.end, X);
      },
      "moe.down+post");
  return Status();
}

// HeadRows on one rank: the listed rows of the final stack X are moved to its first rows
// (ascending, so no row is overwritten before it moves) and the head runs on those only.
// With ranks: every own row goes through the sharded head; the listed ones are written.
Status ModelRunner::run_head(const HcParams& hc, const bf16* norm, bf16* X, float* logits, HeadRows head) {
  StepScratch& s = *scratch_;
  int64_t T = step_meta_.T;
  const int64_t D = cfg_.hidden_size, V = cfg_.vocab_size;
  const int32_t* out_row = ranks_ ? ranks_->head_out_rows(head.rows, head.n, T) : nullptr;
  if (head.rows != nullptr && !ranks_) {
    const int64_t ND = stream_width();
    for (int64_t i = 0; i < head.n; ++i)
      if (head.rows[i] != i) std::memcpy(X + i * ND, X + head.rows[i] * ND, sizeof(bf16) * ND);
    T = head.n;
    if (T == 0) return Status();
  }
  const k::HcParams hp = hc_params();
  const k::HcHeadWeights hw{hc.fn, hc.scale, hc.base};
  if (T > 0) {  // an idle rank (several ranks) only joins the head's collectives
    pool_.run([&](int tid, int n) { k::hc_mix(X, hc.fn, cfg_.hc_mult, hp, T, s.mix.data(), tid, n); });
    pool_.run([&](int tid, int n) {  // both split rows alike
      k::hc_head_apply(X, hw, hp, T, s.mix.data(), s.y.data(), tid, n);
      k::rmsnorm(s.y.data(), norm, s.y.data(), T, D, static_cast<float>(cfg_.rms_norm_eps), tid, n);
    });
  }
  if (ranks_)  // vocabulary-sharded (parallel/head_seam.h); rows land at their step rows
    return ranks_->head->run(*ranks_->g->tp, pool_, w_.head.w, s.y.data(), ranks_->tp_rows, out_row, logits);
  const k::LmHeadParams lp{0, V, V};
  pool_.run([&](int tid, int n) { k::lm_head(lp, w_.head.w, s.y.data(), T, logits, tid, n); });
  return Status();
}

}  // namespace dsv4
