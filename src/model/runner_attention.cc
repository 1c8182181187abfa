// The attention sub-block of ModelRunner (model.md §6, runtime.md §2.9): q and kv paths, cache
// writes, the CSA indexer, the attention lists and kernel, the output projection.
//
// Every ThreadPool::run ends in a barrier, so kernels share a run wherever each thread reads
// only what earlier runs wrote or what it wrote itself (the same split of the same rows). The
// runs of one layer (issue 38: barriers per step):
//   A  actq(a) for wq_a and wkv (one, q_path's)  rows      (in hc_pre's apply run: attention_actq)
//      [context-parallel prefill: the cache rows' inputs all-gathered, then their actq: one run]
//   B  wq_a, wkv, both compressors' projections  columns
//   C  q_norm + actq(qr) (one, for wq_b and the indexer's wq_b); kv norm, RoPE, fp8sim and the
//      window row; compressor emits
//   D  wq_b, the indexer's projections; compressor commits
//      (caller) emitted entries packed into the caches, the per-row cache views
//   E  head_rms + RoPE on q; the indexer's finish (CSA)
//   F  indexer select (CSA)
//   G  top-k merge + attention lists (HCA/SWA: E's kernels join this run)
//   H  sparse attention + inverse RoPE on o     (row, head) pairs, split alike
//   then wo_a with actq(u) on the 128-blocks of u each thread owns, and wo_b with hc_post on the
//   hidden columns each thread owns (or the TP seam, and hc_post after it).
#include <algorithm>

#include "base/check.h"
#include "base/math.h"
#include "cache/cache_storage.h"
#include "kernels/attn_select/attn_select.h"
#include "kernels/hc/hc.h"
#include "kernels/indexer/indexer.h"
#include "kernels/kv_path/kv_path.h"
#include "kernels/linear/linear.h"
#include "kernels/out_proj/out_proj.h"
#include "kernels/q_path/q_path.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "model/rank_rows.h"
#include "numeric/quant.h"
#include "model/runner.h"
#include "model/runner_state.h"
#include "model/step_decisions.h"
#include "parallel/attn_output_seam.h"

namespace dsv4 {

namespace k = kernels;

// One layer's q and kv path arguments for this step. The kv path runs over the cache rows:
// this rank's computed rows, or with context-parallel prefill (runtime.md §6.8) every row of
// the group's split chunks, whose normed inputs are all-gathered first.
struct ModelRunner::AttnArgs {
  k::QPathParams qp;
  k::QPathWeights qw;
  k::QPathIO qio;
  k::KvPathParams kp;
  k::KvPathWeights kw;
  k::KvPathIO kio;
  const StepMetadata* rows = nullptr;  // the cache rows
  float* cmp_main = nullptr;           // the compressors' projections of the cache rows
  float* cmp_idx = nullptr;
  bool cp = false;        // the cache rows are gathered (context-parallel prefill)
  bool csa = false;
  bool idx_actq = false;  // the indexer's wq_b takes actq(qr)
  const bf16* qr_q = nullptr;  // q_path's actq(qr), when idx_actq and wq_b made one
};

ModelRunner::AttnArgs ModelRunner::attn_args(const LayerWeights& lw, const LayerCaches& lc) {
  StepScratch& s = *scratch_;
  const ModelConfig& c = cfg_;
  const int64_t D = c.hidden_size, Dh = c.head_dim;
  const int Dr = static_cast<int>(c.qk_rope_head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const AttentionWeights& aw = lw.attn;
  AttnArgs x;
  x.cp = ranks_ && ranks_->has_cp;
  x.csa = lw.kind == AttentionKind::kCSA;
  x.idx_actq = x.csa && aw.indexer.wq_b.w.quantized();
  x.qp = {D, c.q_lora_rank, c.num_attention_heads, static_cast<int>(Dh), Dr, eps};
  x.qw = {aw.wq_a.w, aw.q_norm, aw.wq_b.w, lc.inv_freq};
  x.qio = {step_meta_.T, s.a.data(), step_meta_.pos.data(), s.qr.data(), s.q.data(), s.qpath.data()};
  x.rows = x.cp ? &ranks_->md_kv : &step_meta_;
  const bf16* a_kv = x.cp ? ranks_->a_kv.data() : s.a.data();
  x.kp = {D, static_cast<int>(Dh), Dr, eps};
  x.kw = {aw.wkv.w, aw.kv_norm, lc.inv_freq};
  x.kio = {x.rows->T, a_kv, x.rows->pos.data(), s.kv.data(), s.kvpath.data()};
  // wkv reads q_path's actq(a) of the same rows (run A makes it once); with context-parallel
  // prefill the kv path's rows are the gathered ones, with their own actq.
  if (!x.cp && aw.wkv.w.quantized()) x.kio.aq = k::q_path_a_quantized(x.qp, x.qw, x.qio);
  // The indexer's wq_b reads q_path's actq(qr) when wq_b makes one; else run C makes it.
  x.qr_q = x.idx_actq ? k::q_path_qr_quantized(x.qp, x.qw, x.qio) : nullptr;
  x.cmp_main = s.cmp.data();
  x.cmp_idx = x.cmp_main + (lc.main_cmp.present ? k::compressor_scratch_floats(lc.main_cmp.params, x.rows->T) : 0);
  return x;
}

// Run A, on the rows hc_pre's apply run normed (rows split alike).
void ModelRunner::attention_actq(const LayerWeights& lw, const LayerCaches& lc, int tid, int n) {
  const AttnArgs x = attn_args(lw, lc);
  k::q_path(0, x.qp, x.qw, x.qio, tid, n);
  if (!x.cp) k::kv_path(0, x.kp, x.kw, x.kio, tid, n);
}

Status ModelRunner::run_attention(const LayerWeights& lw, LayerCaches& lc, bool mtp_block,
                                  const DecisionIO& dec, bf16* X) {
  const int64_t T = step_meta_.T;
  const AttnArgs x = attn_args(lw, lc);
  if (T == 0 && !x.cp) return run_out_proj(lw, lc, false, X);  // an idle rank joins the seams only
  if (x.cp) {
    DSV4_RETURN_IF_ERROR(ranks_->gather_cp_rows(scratch_->a.data(), cfg_.hidden_size));
    if (x.kio.T > 0) pool_.run([&](int tid, int n) { k::kv_path(0, x.kp, x.kw, x.kio, tid, n); }, "attn.cp_actq");
  }
  run_projections(lw, x, lc);
  if (T == 0) return run_out_proj(lw, lc, false, X);
  build_cache_views(lw, lc);
  // The top-k merge and attn_select split rows alike: one run, unless forced picks replace the
  // merged ones in between. Logged picks are read after that run (attn_select keeps them).
  const bool merge_in_select = x.csa && !dec.forced;
  if (x.csa) run_indexer(lw, mtp_block, DecisionIO{dec.forced, nullptr}, merge_in_select);
  run_sparse_attention(lw, x, merge_in_select);
  if (x.csa && dec.log)
    apply_pick_decisions(DecisionIO{nullptr, dec.log}, DecisionSite{mtp_block, mtp_block ? 0 : lw.layer}, step_meta_,
                         scratch_->picks.data(), cfg_.index_topk, scratch_->n_picks.data());
  return run_out_proj(lw, lc, true, X);
}

// Runs B-E (E for CSA only; HCA and SWA layers run its q part with G).
void ModelRunner::run_projections(const LayerWeights& lw, const AttnArgs& x, LayerCaches& lc) {
  StepScratch& s = *scratch_;
  const int64_t T = x.qio.T, Tk = x.kio.T;
  const CompressorSlot& mc = lc.main_cmp;
  const CompressorSlot& ic = lc.idx_cmp;
  const int64_t Rq = x.qp.q_lora_rank;
  const k::CompressorStep cstep{Tk, x.rows->row_seq.data(), x.rows->pos.data()};
  const k::IndexerParams ip = indexer_params();
  const IndexerWeights& iw = lw.attn.indexer;
  pool_.run([&](int tid, int n) {  // B
    if (T > 0) k::q_path(1, x.qp, x.qw, x.qio, tid, n);
    if (Tk == 0) return;
    k::kv_path(1, x.kp, x.kw, x.kio, tid, n);
    if (mc.present) k::compressor_project(mc.params, mc.weights, x.kio.a, Tk, x.cmp_main, tid, n);
    if (ic.present) k::compressor_project(ic.params, ic.weights, x.kio.a, Tk, x.cmp_idx, tid, n);
  }, "attn.B wq_a+wkv+cmp");
  const int64_t kv_bytes = kv_format_.bytes(), Dh = x.kp.head_dim;
  pool_.run([&](int tid, int n) {  // C
    if (T > 0) {
      k::q_path(2, x.qp, x.qw, x.qio, tid, n);
      if (x.idx_actq && !x.qr_q) k::actq_rows(s.qr.data(), T, Rq, s.qr_q.data(), tid, n);
    }
    if (Tk == 0) return;
    k::kv_path(2, x.kp, x.kw, x.kio, tid, n);
    const Range r = split_range(Tk, tid, n);  // the rows this thread finished (kv_path phase 2 splits rows)
    for (int64_t t = r.begin; t < r.end; ++t)
      kv_pack_row(kv_format_, s.kv.data() + t * Dh, lc.ori.data() + x.rows->ori_slot[t] * kv_bytes);
    if (mc.present)
      k::compressor_emit(mc.params, mc.weights, cstep, mc.states.data(), x.cmp_main, s.emits.data(), s.entries.data(),
                         tid, n);
    if (ic.present)
      k::compressor_emit(ic.params, ic.weights, cstep, ic.states.data(), x.cmp_idx, s.idx_emits.data(),
                         s.idx_entries.data(), tid, n);
  }, "attn.C norms+emit");
  const bf16* qr_in = x.idx_actq ? (x.qr_q ? x.qr_q : s.qr_q.data()) : s.qr.data();
  pool_.run([&](int tid, int n) {  // D
    if (T > 0) {
      k::q_path(3, x.qp, x.qw, x.qio, tid, n);
      if (x.csa)
        k::indexer_project(ip, iw.wq_b.w, iw.weights_proj.w, qr_in, s.a.data(), T, s.qi.data(), s.omega.data(), tid, n);
    }
    if (Tk == 0) return;
    if (mc.present) k::compressor_commit(mc.params, mc.weights, cstep, mc.states.data(), x.cmp_main, tid, n);
    if (ic.present) k::compressor_commit(ic.params, ic.weights, cstep, ic.states.data(), x.cmp_idx, tid, n);
  }, "attn.D wq_b+idx_proj");
  if (mc.present) pack_entries(mc, lc.cmp, lc.cmp_page_rows, Dh, s.emits.data(), s.entries.data(), *x.rows);
  if (ic.present)
    pack_entries(ic, lc.idx, idx_page_rows_, ip.head_dim, s.idx_emits.data(), s.idx_entries.data(), *x.rows);
  if (T > 0 && x.csa)
    pool_.run([&](int tid, int n) {  // E
      k::q_path(4, x.qp, x.qw, x.qio, tid, n);
      k::indexer_finish(ip, lc.inv_freq, step_meta_.pos.data(), T, s.qi.data(), s.omega.data(), s.wgt.data(), tid, n);
    }, "attn.E head_rms+idx_finish");
}

// One compressor's emitted entries packed into the slot's blocks (entries inside a shared
// prefix-cache block are kept as cached).
void ModelRunner::pack_entries(const CompressorSlot& slot, const CacheStorage& cache, int32_t page_rows, int64_t width,
                               const k::CompressorEmit* emits, const bf16* entries, const StepMetadata& rows) {
  const int64_t n_emit = k::compressor_count_emits(rows.pos.data(), rows.T, slot.params.ratio);
  const bool indexer = slot.params.kind == k::CompressorKind::kIndexer;
  const int64_t row_bytes = indexer ? idx_format_.bytes() : kv_format_.bytes();
  for (int64_t e = 0; e < n_emit; ++e) {
    const k::CompressorEmit& em = emits[e];
    if ((em.index + 1) * slot.params.ratio <= seqs_->shared_end(em.seq)) continue;  // in a shared block: kept
    uint8_t* dst =
        PagedRowsT<uint8_t>{cache.data(), seqs_->blocks().table(em.seq).data(), page_rows, 0, row_bytes}.row(em.index);
    if (indexer) index_key_pack(idx_format_, entries + e * width, dst);
    else kv_pack_row(kv_format_, entries + e * width, dst);
  }
}

k::IndexerParams ModelRunner::indexer_params() const {
  const ModelConfig& c = cfg_;
  return {c.index_n_heads, static_cast<int>(c.index_head_dim), static_cast<int>(c.qk_rope_head_dim),
          static_cast<int>(c.index_topk)};
}

// Per-row views of this layer's paged caches.
void ModelRunner::build_cache_views(const LayerWeights& lw, const LayerCaches& lc) {
  StepScratch& s = *scratch_;
  const int64_t kv_bytes = kv_format_.bytes(), idx_bytes = idx_format_.bytes();
  const CacheGroup& window = seqs_->window();
  const CacheGroupSpec& os = window.spec();
  for (int64_t t = 0; t < step_meta_.T; ++t) {
    const int32_t seq = step_meta_.row_seq[t];
    const int32_t* blocks = seqs_->blocks().table(seq).data();
    s.win_rows.data()[t] = PagedBytes{lc.ori.data(), window.table(seq).data(), os.page_rows, os.ring_pages, kv_bytes};
    if (lw.ratio > 0) s.cmp_rows.data()[t] = PagedBytes{lc.cmp.data(), blocks, lc.cmp_page_rows, 0, kv_bytes};
    if (lw.kind == AttentionKind::kCSA)
      s.idx_rows.data()[t] = PagedBytes{lc.idx.data(), blocks, idx_page_rows_, 0, idx_bytes};
  }
}

// Run F: the lightning indexer picks the compressed entries of each row (forced and logged by dec).
void ModelRunner::run_indexer(const LayerWeights& lw, bool mtp_block, const DecisionIO& dec, bool merge_in_select) {
  StepScratch& s = *scratch_;
  const int64_t T = step_meta_.T;
  const k::IndexerParams ip = indexer_params();
  const k::IndexKeys idx_keys{s.idx_rows.data(), s.count.data(), idx_format_};
  for (int64_t t = 0; t < T; ++t)
    s.count.data()[t] = static_cast<int32_t>(k::visible_entries(step_meta_.pos[t], kCsaRatio));
  pool_.run([&](int tid, int n) {
    k::indexer_select(ip, s.qi.data(), s.wgt.data(), idx_keys, T, s.picks.data(), s.n_picks.data(), s.select_base,
                      tid, n);
  }, "attn.F idx_select");
  if (!merge_in_select)
    pool_.run([&](int tid, int n) {
      k::indexer_select_merge(ip, idx_keys, T, s.picks.data(), s.n_picks.data(), s.select_base, tid, n);
    }, "attn.F idx_merge");
  apply_pick_decisions(dec, DecisionSite{mtp_block, mtp_block ? 0 : lw.layer}, step_meta_, s.picks.data(),
                       ip.topk, s.n_picks.data());
}

// Runs G and H: the attention list (window part + compressed part: the CSA picks), the Level-A
// kernel and the inverse RoPE of its output.
void ModelRunner::run_sparse_attention(const LayerWeights& lw, const AttnArgs& x, bool merge_in_select) {
  StepScratch& s = *scratch_;
  const ModelConfig& c = cfg_;
  const int64_t T = step_meta_.T;
  const int64_t* pos = step_meta_.pos.data();
  const int64_t picks_stride = x.csa ? c.index_topk : 0;
  const int32_t* picks = x.csa ? s.picks.data() : nullptr;
  const int32_t* n_picks = x.csa ? s.n_picks.data() : nullptr;
  const k::IndexerParams ip = indexer_params();
  const k::IndexKeys idx_keys{s.idx_rows.data(), s.count.data(), idx_format_};
  k::AttnSelectParams sp;
  const bool hca = lw.kind == AttentionKind::kHCA;
  sp.kind = x.csa ? k::AttnKind::kCSA : k::AttnKind::kSWA;  // HCA: window part + dense tail
  if (hca)
    for (int64_t t = 0; t < T; ++t) s.dense.data()[t] = static_cast<int32_t>(k::visible_entries(pos[t], lw.ratio));
  sp.window = static_cast<int>(c.sliding_window);
  sp.ratio = lw.ratio;
  sp.stride = s.list_stride;
  pool_.run([&](int tid, int n) {  // G
    if (!x.csa) k::q_path(4, x.qp, x.qw, x.qio, tid, n);
    if (merge_in_select)
      k::indexer_select_merge(ip, idx_keys, T, s.picks.data(), s.n_picks.data(), s.select_base, tid, n);
    k::attn_select(sp, T, pos, step_meta_.window_len.data(), picks, picks_stride, n_picks, s.list.data(),
                   s.len.data(), tid, n);
  }, "attn.G select");
  const k::AttnList list{s.list.data(), s.list_stride, s.len.data(), step_meta_.window_len.data(),
                         hca ? s.dense.data() : nullptr};
  const k::PackedAttnKeys keys{s.win_rows.data(), lw.ratio > 0 ? s.cmp_rows.data() : nullptr, kv_format_};
  run_attention_kernel(lw, x, list, keys);
}

// Run H: the attention kernel and out_proj's phase 0 (inverse RoPE on o), both over
// (row, head) pairs split alike.
void ModelRunner::run_attention_kernel(const LayerWeights& lw, const AttnArgs& x, const k::AttnList& list,
                                       const k::PackedAttnKeys& keys) {
  StepScratch& s = *scratch_;
  const int64_t T = step_meta_.T;
  const k::SparseAttnParams ap{cfg_.num_attention_heads, static_cast<int>(cfg_.head_dim)};
  const k::OutProjParams op = out_proj_params();
  const k::OutProjWeights ow{lw.attn.wo_a.w, lw.attn.wo_b.w, x.qw.inv_freq};
  const k::OutProjIO oio{T, s.o.data(), step_meta_.pos.data(), s.attn_out.data(), s.oproj.data()};
  pool_.run([&](int tid, int n) {
    k::sparse_attn(ap, s.q.data(), T, list, keys, lw.attn.attn_sink, s.o.data(), s.attn.data(), tid, n);
    k::out_proj(0, op, ow, oio, tid, n);
  }, "attn.H sparse_attn");
}

k::OutProjParams ModelRunner::out_proj_params() const {
  const ModelConfig& c = cfg_;
  return {c.num_attention_heads, static_cast<int>(c.head_dim), static_cast<int>(c.qk_rope_head_dim), c.o_groups,
          c.o_lora_rank, c.hidden_size};
}

// Grouped output projection (derotated: out_proj's phase 0 ran with the attention kernel): on
// this rank (one rank, or tp = 1), then hc_post into the stream X in wo_b's run, or sharded
// over the TP group (parallel/attn_output_seam.h).
Status ModelRunner::run_out_proj(const LayerWeights& lw, LayerCaches& lc, bool derotated, bf16* X) {
  StepScratch& s = *scratch_;
  const int64_t T = step_meta_.T;
  const k::OutProjParams op = out_proj_params();
  const k::OutProjWeights ow{lw.attn.wo_a.w, lw.attn.wo_b.w, lc.inv_freq};
  const k::OutProjIO oio{T, s.o.data(), step_meta_.pos.data(), s.attn_out.data(), s.oproj.data()};
  if (T > 0 && !derotated) pool_.run([&](int tid, int n) { k::out_proj(0, op, ow, oio, tid, n); }, "attn.derotate");
  if (out_proj_posts()) {
    if (T == 0) return Status();
    pool_.run([&](int tid, int n) {  // wo_a and actq(u) on the whole 128-blocks of u of this thread
      const Range cols = split_aligned(op.u_width(), kActqBlock, tid, n);
      k::out_proj_wo_a_cols(op, ow, oio, cols.begin, cols.end);
    }, "attn.wo_a");
    const k::HcParams hp = hc_params();
    pool_.run([&](int tid, int n) {  // wo_b and hc_post on the hidden columns of this thread
      const Range cols = split_aligned(op.hidden, kColumnAlign, tid, n);
      k::out_proj_wo_b_cols(op, ow, oio, cols.begin, cols.end);
      k::hc_post_cols(s.attn_out.data(), X, s.post.data(), s.comb.data(), hp, T, cols.begin, cols.end, X);
    }, "attn.wo_b+post");
    return Status();
  }
  return ranks_->attn->run(*ranks_->g->tp, pool_, ranks_->out_proj[lc.index], s.o.data(), ranks_->tp_rows,
                           s.attn_out.data());
}

}  // namespace dsv4
