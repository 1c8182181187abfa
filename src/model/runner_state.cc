// ModelRunner's per-layer caches and step scratch, sized once from the config and Limits.
#include "model/runner_state.h"

#include <string>

#include <fmt/format.h>

#include "kernels/indexer/indexer.h"
#include "kernels/kv_path/kv_path.h"
#include "kernels/mtp_proj/mtp_proj.h"
#include "kernels/out_proj/out_proj.h"
#include "kernels/q_path/q_path.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "model/kernel_params.h"

namespace dsv4 {

namespace k = kernels;

namespace {

k::ExpertWeights expert_view(const ExpertWeights& e) {
  k::ExpertWeights v;
  v.w1 = e.w1.w;
  v.w2 = e.w2.w;
  v.w3 = e.w3.w;
  return v;
}

// One compressor's per-sequence states; rollback-safe ring (runtime.md §2.5): the κr − 1
// positions before any accepted prefix of the largest decode step survive its writes.
Status make_compressor_slot(CompressorSlot& slot, const ModelConfig& c, const Limits& l, const CompressorWeights& cw,
                            bool indexer, const float* inv) {
  if (!cw.present) return Status();
  slot.present = true;
  slot.params = compressor_params(c, cw, indexer);
  slot.params.ring_rows = slot.params.candidates() - 1 + l.max_decode_rows;
  DSV4_RETURN_IF_ERROR(k::compressor_check_params(slot.params));
  slot.weights = compressor_view(cw, inv);
  const int64_t n = k::compressor_state_floats(slot.params);
  slot.storage.assign(static_cast<size_t>(2 * n * l.max_seqs), 0.0f);
  slot.states.resize(l.max_seqs);
  for (int32_t s = 0; s < l.max_seqs; ++s) {
    slot.states[s].kv = slot.storage.data() + 2 * n * s;
    slot.states[s].score = slot.states[s].kv + n;
  }
  return Status();
}

Status reserve_storage(CacheStorage& dst, const std::string& name, int64_t rows, int64_t row_bytes) {
  Result<CacheStorage> r = CacheStorage::reserve(name, static_cast<size_t>(rows * row_bytes));
  if (!r.ok()) return r.status();
  dst = std::move(*r);
  return Status();
}

}  // namespace

std::unique_ptr<LayerCaches> LayerCaches::views(const LayerWeights& lw, int32_t index, const float* inv_freq) {
  auto lc = std::make_unique<LayerCaches>();
  lc->index = index;
  lc->inv_freq = inv_freq;
  for (const ExpertWeights& e : lw.ffn.experts) lc->experts.push_back(expert_view(e));
  lc->shared = expert_view(lw.ffn.shared);
  return lc;
}

Result<std::unique_ptr<LayerCaches>> LayerCaches::create(const ModelConfig& c, const Limits& l,
                                                         const LayerWeights& lw, int32_t index,
                                                         const float* inv_freq, int64_t ring_rows, int64_t n_blocks) {
  std::unique_ptr<LayerCaches> lc = views(lw, index, inv_freq);
  const int64_t kv_bytes = KvRowFormat{static_cast<int>(c.head_dim), static_cast<int>(c.qk_rope_head_dim)}.bytes();
  const int64_t idx_bytes = IndexKeyFormat{static_cast<int>(c.index_head_dim)}.bytes();
  const std::string name = fmt::format("layer {} ", index);
  DSV4_RETURN_IF_ERROR(reserve_storage(lc->ori, name + "window KV", ring_rows, kv_bytes));
  if (lw.ratio > 0) {
    lc->cmp_page_rows = l.page_tokens / lw.ratio;
    DSV4_RETURN_IF_ERROR(reserve_storage(lc->cmp, name + (lw.kind == AttentionKind::kCSA ? "CSA KV" : "HCA KV"),
                                         n_blocks * lc->cmp_page_rows, kv_bytes));
  }
  if (lw.kind == AttentionKind::kCSA)
    DSV4_RETURN_IF_ERROR(
        reserve_storage(lc->idx, name + "indexer keys", n_blocks * (l.page_tokens / kCsaRatio), idx_bytes));
  DSV4_RETURN_IF_ERROR(reserve_storage(lc->tail, name + "prefix window rows",
                                       static_cast<int64_t>(l.prefix_blocks) * (c.sliding_window - 1), kv_bytes));
  DSV4_RETURN_IF_ERROR(make_compressor_slot(lc->main_cmp, c, l, lw.attn.compressor, false, inv_freq));
  DSV4_RETURN_IF_ERROR(make_compressor_slot(lc->idx_cmp, c, l, lw.attn.indexer.compressor, true, inv_freq));
  return lc;
}

int64_t LayerCaches::compressor_scratch_floats(int64_t T) const {
  int64_t n = 0;
  for (const CompressorSlot* s : {&main_cmp, &idx_cmp})
    if (s->present) n += k::compressor_scratch_floats(s->params, T);
  return n;
}

std::unique_ptr<StepScratch> StepScratch::create(const ModelConfig& c, const Limits& l, ThreadPool& pool,
                                                 int64_t compressor_floats) {
  auto scratch = std::make_unique<StepScratch>();
  StepScratch& s = *scratch;
  const int64_t T = l.max_rows, D = c.hidden_size, N = c.hc_mult, H = c.num_attention_heads;
  const int64_t Dh = c.head_dim, Di = c.index_head_dim, Hi = c.index_n_heads;
  const int64_t M = c.hc_mix(), Rq = c.q_lora_rank, E = c.n_routed_experts, K = c.num_experts_per_tok;
  // Streams and the attention sub-block.
  s.size(s.X, T * N * D);
  s.size(s.Z, T * N * D);
  if (c.dspark) s.size(s.features, T * static_cast<int64_t>(c.dspark->target_layer_ids.size()) * D);
  s.size(s.mix, T * std::max<int64_t>(M, N));
  s.size(s.post, T * N);
  s.size(s.comb, T * N * N);
  for (Buf<bf16>* b : {&s.a, &s.attn_out, &s.y, &s.m, &s.fq}) s.size(*b, T * D);
  s.size(s.qr, T * Rq);
  s.size(s.q, T * H * Dh);
  s.size(s.o, T * H * Dh);
  s.size(s.kv, T * Dh);
  k::QPathParams qp{D, Rq, static_cast<int>(H), static_cast<int>(Dh), static_cast<int>(c.qk_rope_head_dim),
                    static_cast<float>(c.rms_norm_eps)};
  s.size(s.qpath, k::q_path_scratch_elems(qp, T));
  k::KvPathParams kp{D, static_cast<int>(Dh), static_cast<int>(c.qk_rope_head_dim), static_cast<float>(c.rms_norm_eps)};
  s.size(s.kvpath, k::kv_path_scratch_elems(kp, T));
  k::OutProjParams op{static_cast<int>(H), static_cast<int>(Dh), static_cast<int>(c.qk_rope_head_dim), c.o_groups,
                      c.o_lora_rank, D};
  s.size(s.oproj, k::out_proj_scratch_elems(op, T));
  k::MtpProjParams mp{c.vocab_size, D, c.hc_mult, static_cast<float>(c.rms_norm_eps)};
  s.size(s.mtpproj, k::mtp_proj_scratch_elems(mp, T));
  // Compressors and the indexer.
  s.size(s.cmp, std::max<int64_t>(compressor_floats, 1));
  s.size(s.emits, T);
  s.size(s.idx_emits, T);
  s.size(s.entries, T * Dh);
  s.size(s.idx_entries, T * std::max<int64_t>(Di, 1));
  s.size(s.qr_q, T * Rq);
  s.size(s.qi, T * std::max<int64_t>(Hi * Di, 1));
  s.size(s.omega, T * std::max<int64_t>(Hi, 1));
  s.size(s.wgt, T * std::max<int64_t>(Hi, 1));
  s.size(s.picks, T * std::max<int64_t>(c.index_topk, 1));
  s.size(s.n_picks, T);
  s.size(s.count, T);
  k::IndexerParams ip{static_cast<int>(Hi), static_cast<int>(Di), static_cast<int>(c.qk_rope_head_dim),
                      static_cast<int>(c.index_topk)};
  s.select_base = s.aligned(s.select, k::indexer_select_scratch_bytes(ip, pool.size()));
  // Attention list: window part plus the CSA picks (HCA rows read their compressed
  // entries as a dense tail, AttnList::n_dense: nothing grows with the context).
  int64_t max_cmp_list = 0;
  for (int i = 0; i < c.n_layers_total(); ++i)
    if (c.layer_ratio(i) == kCsaRatio) max_cmp_list = std::max<int64_t>(max_cmp_list, c.index_topk);
  s.list_stride = c.sliding_window + max_cmp_list;
  s.size(s.list, T * s.list_stride);
  s.size(s.len, T);
  s.size(s.dense, T);
  s.size(s.win_rows, T);
  s.size(s.cmp_rows, T);
  s.size(s.idx_rows, T);
  s.size(s.attn, k::sparse_attn_scratch_floats(k::SparseAttnParams{static_cast<int>(H), static_cast<int>(Dh)},
                                               pool.size()));
  // MoE.
  s.size(s.gate_scores, T * E);
  s.size(s.route_w, T * K);
  s.size(s.ids, T * K);
  const k::MoeExpertParams ep{D, c.moe_intermediate_size, static_cast<float>(c.swiglu_limit)};
  const k::MoeDispatchParams dp{K, 0, E, T};
  const int64_t moe_bytes = k::moe_expert_scratch_bytes(ep, dp);
  void* aligned = s.aligned(s.moe, moe_bytes);
  s.first_touch(pool);
  s.moe_work = k::moe_expert_scratch_carve(ep, dp, aligned, moe_bytes);
  return scratch;
}

}  // namespace dsv4
