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
#include "model/runner_state.h"
#include "model/placement.h"
#include "parallel/attn_output_seam.h"
#include "parallel/head_seam.h"
#include "parallel/moe_seam.h"

namespace dsv4 {

namespace k = kernels;



// Bytes allocated (and touched) at start-up, dominant terms: per-row scratch (streams, q/o,
// expert work) and per-slot compressor states. Cache storage is reserved untouched and not
// counted.
double eager_bytes(const Limits& l, const ModelConfig& c) {
  const double T = l.max_rows, D = static_cast<double>(c.hidden_size), N = c.hc_mult;
  const double per_row = 2 * 2 * N * D + 2 * 2 * c.num_attention_heads * static_cast<double>(c.head_dim) +
                         4.0 * c.num_experts_per_tok * (D + 2.0 * c.moe_intermediate_size) + 8 * D;
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

ModelRunner::ModelRunner(const ModelConfig& cfg, const Weights& w, const Limits& limits)
    : cfg_(cfg), w_(w), limits_(limits), pool_(limits.n_threads), md_([&] {
        StepCapacity c;
        c.max_batch = limits.max_batch;
        c.max_rows = limits.max_rows;
        c.max_request_rows = limits.r_max();
        c.max_seqs = limits.max_seqs;
        c.max_context = limits.max_context;
        c.window = static_cast<int32_t>(cfg.sliding_window);
        c.vocab_size = cfg.vocab_size;
        return c;
      }()) {}

ModelRunner::~ModelRunner() = default;

Result<std::unique_ptr<ModelRunner>> ModelRunner::create(const ModelConfig& cfg, const Weights& w,
                                                         const Limits& limits, RankGroups* ranks) {
  Status st = validate_limits(limits);
  if (!st.ok()) return st;
  st = validate_level_a(cfg);
  if (!st.ok()) return st;
  st = validate_limits_for_model(limits, cfg);
  if (!st.ok()) return st;
  // Scratch and per-slot state are allocated here, once; limits too large for the machine
  // end in an error naming them, not in std::bad_alloc.
  try {
    std::unique_ptr<ModelRunner> r(new ModelRunner(cfg, w, limits));
    st = r->init();
    if (!st.ok()) return st;
    if (ranks && ranks->multi()) {
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
  const int64_t T = limits_.max_rows, D = c.hidden_size, N = c.hc_mult, H = c.num_attention_heads;
  const int64_t Dh = c.head_dim, Di = c.index_head_dim, Hi = c.index_n_heads;
  const int32_t P = limits_.page_rows;
  const int32_t W = static_cast<int32_t>(c.sliding_window);
  kv_format_ = KvRowFormat{static_cast<int>(Dh), static_cast<int>(c.qk_rope_head_dim)};
  idx_format_ = IndexKeyFormat{static_cast<int>(Di)};
  idx_page_rows_ = limits_.page_tokens / kCsaRatio;

  inv_main_ = rope_inv_freq_main(c);
  inv_compress_ = rope_inv_freq_compress(c);

  // Window KV: a ring per sequence spanning W - 1 + R_MAX positions (runtime.md §2.2).
  // Compressed families (CSA KV, HCA KV, indexer keys): one block table, a page per block of
  // page_tokens source positions, holding page_tokens / r rows in each family's storage
  // (runtime.md §7.1), taken from the shared pool as a sequence grows.
  for (int l = 0; l < c.num_hidden_layers; ++l) {  // the MTP layer is SWA (validated)
    const int r = c.layer_ratio(l);
    if (r > 0 && (min_ratio_ == 0 || r < min_ratio_)) min_ratio_ = r;
  }
  // With prefix caching the ring also keeps the W − 1 rows before a block end's last 4
  // positions until the step after it (3 more positions).
  const int32_t extra = limits_.prefix_blocks > 0 ? 3 : 0;
  const int32_t ring = ring_pages_for_span(W - 1 + limits_.r_max() + extra, P);
  ori_ = std::make_unique<CacheGroup>(CacheGroupSpec{"window_kv", P, ring, ring * limits_.max_seqs, 0},
                                      limits_.max_seqs);
  const int64_t blocks_per_seq = ceil_div<int64_t>(limits_.max_context, limits_.page_tokens);
  const int64_t n_blocks = limits_.cache_blocks > 0 ? limits_.cache_blocks : blocks_per_seq * limits_.max_seqs;
  if (n_blocks > INT32_MAX)
    return Status::errorf("limits: max_seqs = {} sequences of max_context = {} need {} cache blocks of page_tokens "
                          "= {}, more than {}; set cache_blocks",
                          limits_.max_seqs, limits_.max_context, n_blocks, limits_.page_tokens, INT32_MAX);
  blocks_ = std::make_unique<CacheGroup>(CacheGroupSpec{"compressed_blocks", limits_.page_tokens, 0,
                                                        static_cast<int32_t>(n_blocks), limits_.max_context},
                                         limits_.max_seqs);

  auto make_slot = [&](CompressorSlot& slot, const CompressorWeights& cw, bool indexer, const float* inv) -> Status {
    if (!cw.present) return Status();
    slot.present = true;
    slot.params = compressor_params(c, cw, indexer);
    // Rollback-safe ring (runtime.md §2.5): the κr − 1 positions before any accepted prefix
    // of the largest decode step survive its writes.
    slot.params.ring_rows = slot.params.candidates() - 1 + limits_.max_decode_rows;
    Status st = k::compressor_check_params(slot.params);
    if (!st.ok()) return st;
    slot.weights = compressor_view(cw, inv);
    const int64_t n = k::compressor_state_floats(slot.params);
    slot.storage.assign(static_cast<size_t>(2 * n * limits_.max_seqs), 0.0f);
    slot.states.resize(limits_.max_seqs);
    for (int32_t s = 0; s < limits_.max_seqs; ++s) {
      slot.states[s].kv = slot.storage.data() + 2 * n * s;
      slot.states[s].score = slot.states[s].kv + n;
    }
    return Status();
  };
  auto expert_view = [](const ExpertWeights& e) {
    k::ExpertWeights v;
    v.w1 = e.w1.w;
    v.w2 = e.w2.w;
    v.w3 = e.w3.w;
    return v;
  };

  const int64_t ori_rows = ori_->physical_rows();
  int64_t max_comp_floats = 0;
  for (int l = 0; l < c.n_layers_total(); ++l) {
    const LayerWeights& lw = c.is_mtp_layer(l) ? w_.mtp[l - c.num_hidden_layers].block : w_.layers[l];
    auto lc = std::make_unique<LayerCaches>();
    lc->index = l;
    lc->inv_freq = lw.ratio > 0 ? inv_compress_.data() : inv_main_.data();
    const std::string name = fmt::format("layer {}", l);
    auto storage = [&](CacheStorage& dst, const char* family, int64_t rows, int64_t row_bytes) -> Status {
      Result<CacheStorage> r = CacheStorage::reserve(name + " " + family, static_cast<size_t>(rows * row_bytes));
      if (!r.ok()) return r.status();
      dst = std::move(*r);
      return Status();
    };
    DSV4_RETURN_IF_ERROR(storage(lc->ori, "window KV", ori_rows, kv_format_.bytes()));
    if (lw.ratio > 0) {
      lc->cmp_page_rows = limits_.page_tokens / lw.ratio;
      DSV4_RETURN_IF_ERROR(storage(lc->cmp, lw.kind == AttentionKind::kCSA ? "CSA KV" : "HCA KV",
                                   n_blocks * lc->cmp_page_rows, kv_format_.bytes()));
    }
    if (lw.kind == AttentionKind::kCSA)
      DSV4_RETURN_IF_ERROR(storage(lc->idx, "indexer keys", n_blocks * idx_page_rows_, idx_format_.bytes()));
    DSV4_RETURN_IF_ERROR(storage(lc->tail, "prefix window rows",
                                 static_cast<int64_t>(limits_.prefix_blocks) * (W - 1), kv_format_.bytes()));
    Status st = make_slot(lc->main_cmp, lw.attn.compressor, false, lc->inv_freq);
    if (!st.ok()) return st;
    st = make_slot(lc->idx_cmp, lw.attn.indexer.compressor, true, lc->inv_freq);
    if (!st.ok()) return st;
    int64_t comp_floats = 0;  // both compressors' scratch side by side
    for (const CompressorSlot* s : {&lc->main_cmp, &lc->idx_cmp})
      if (s->present) comp_floats += k::compressor_scratch_floats(s->params, T);
    max_comp_floats = std::max(max_comp_floats, comp_floats);
    for (const ExpertWeights& e : lw.ffn.experts) lc->experts.push_back(expert_view(e));
    lc->shared = expert_view(lw.ffn.shared);
    layers_.push_back(std::move(lc));
  }

  // Scratch at capacity.
  s_ = std::make_unique<Scratch>();
  Scratch& s = *s_;
  const int64_t M = c.hc_mix(), Rq = c.q_lora_rank, E = c.n_routed_experts, K = c.num_experts_per_tok;
  s.size(s.X, T * N * D);
  s.size(s.Z, T * N * D);
  if (c.dspark) s.size(s.features, T * static_cast<int64_t>(c.dspark->target_layer_ids.size()) * D);
  s.size(s.mix, T * std::max<int64_t>(M, N));
  s.size(s.post, T * N);
  s.size(s.comb, T * N * N);
  for (Buf<bf16>* b : {&s.a, &s.attn_out, &s.y, &s.m}) s.size(*b, T * D);
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
  s.size(s.cmp, std::max<int64_t>(max_comp_floats, 1));
  s.size(s.emits, T);
  s.size(s.entries, T * std::max(Dh, Di));
  s.size(s.qr_q, T * Rq);
  s.size(s.qi, T * std::max<int64_t>(Hi * Di, 1));
  s.size(s.omega, T * std::max<int64_t>(Hi, 1));
  s.size(s.wgt, T * std::max<int64_t>(Hi, 1));
  s.size(s.picks, T * std::max<int64_t>(c.index_topk, 1));
  s.size(s.n_picks, T);
  s.size(s.count, T);
  k::IndexerParams ip{static_cast<int>(Hi), static_cast<int>(Di), static_cast<int>(c.qk_rope_head_dim),
                      static_cast<int>(c.index_topk)};
  s.select_base = s.aligned(s.select, k::indexer_select_scratch_bytes(ip, pool_.size()));
  // Attention list: window part plus the CSA picks (HCA rows read their compressed
  // entries as a dense tail, AttnList::n_dense: nothing grows with the context).
  int64_t max_cmp_list = 0;
  for (int l = 0; l < c.n_layers_total(); ++l)
    if (c.layer_ratio(l) == kCsaRatio) max_cmp_list = std::max<int64_t>(max_cmp_list, c.index_topk);
  s.list_stride = W + max_cmp_list;
  s.size(s.list, T * s.list_stride);
  s.size(s.len, T);
  s.size(s.dense, T);
  s.size(s.win_rows, T);
  s.size(s.cmp_rows, T);
  s.size(s.idx_rows, T);
  s.size(s.attn, k::sparse_attn_scratch_floats(k::SparseAttnParams{static_cast<int>(H), static_cast<int>(Dh)},
                                               pool_.size()));
  s.size(s.gate_scores, T * E);
  s.size(s.route_w, T * K);
  s.size(s.ids, T * K);
  const k::MoeExpertParams ep{D, c.moe_intermediate_size, static_cast<float>(c.swiglu_limit)};
  const k::MoeDispatchParams dp{K, 0, E, T};
  const int64_t moe_bytes = k::moe_expert_scratch_bytes(ep, dp);
  void* aligned = s.aligned(s.moe, moe_bytes);
  s.first_touch(pool_);
  s.moe_work = k::moe_expert_scratch_carve(ep, dp, aligned, moe_bytes);

  slots_.assign(limits_.max_seqs, Slot{});
  if (c.dspark) DSV4_RETURN_IF_ERROR(dspark_init());
  tail_rows_ = W - 1;
  if (limits_.prefix_blocks > 0) prefix_ = std::make_unique<PrefixCache>(limits_.page_tokens, limits_.prefix_blocks);
  return Status();
}

Status ModelRunner::start_sequence(int32_t seq) {
  if (seq < 0 || seq >= limits_.max_seqs)
    return Status::errorf("sequence slot {} outside [0, max_seqs = {})", seq, limits_.max_seqs);
  if (slots_[seq].active) return Status::errorf("sequence slot {} is already in use", seq);
  Status st = ori_->admit(seq);
  if (!st.ok()) return st;
  st = blocks_->admit(seq);
  if (!st.ok()) {
    ori_->release(seq);
    return st;
  }
  for (auto& lc : layers_)
    for (CompressorSlot* s : {&lc->main_cmp, &lc->idx_cmp})
      if (s->present) k::compressor_state_reset(s->params, s->states[seq]);
  slots_[seq] = Slot{};
  slots_[seq].active = true;
  if (ds_) std::fill_n(ds_->ring_pos.begin() + static_cast<int64_t>(seq) * ds_->W, ds_->W, int64_t{-1});
  return Status();
}

void ModelRunner::set_chain(int32_t seq, int32_t entry) {
  Slot& sl = slots_[seq];
  if (sl.chain >= 0) prefix_->release(sl.chain);
  sl.chain = entry;
  if (entry >= 0) prefix_->hold(entry);
}

void ModelRunner::copy_window_rows(int32_t seq, int32_t entry, int64_t first, int64_t n, bool to_ring, bool mtp) {
  const CacheGroupSpec& os = ori_->spec();
  const int64_t bytes = kv_format_.bytes();
  const int64_t end = first + n;  // positions [first, end) <-> tail rows [W - 1 - n, W - 1)
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (!mtp && static_cast<int>(l) >= cfg_.num_hidden_layers) continue;
    LayerCaches& lc = *layers_[l];
    const PagedRowsT<uint8_t> ring{lc.ori.data(), ori_->table(seq).data(), os.page_rows, os.ring_pages, bytes};
    for (int64_t q = first; q < end; ++q) {
      uint8_t* tail = lc.tail.data() + (static_cast<int64_t>(entry) * tail_rows_ + tail_rows_ - (end - q)) * bytes;
      if (to_ring) std::memcpy(ring.row(q), tail, static_cast<size_t>(bytes));
      else std::memcpy(tail, ring.row(q), static_cast<size_t>(bytes));
    }
  }
}

Result<int64_t> ModelRunner::start_sequence_cached(int32_t seq, const int32_t* prompt, int64_t prompt_len,
                                                   bool need_mtp) {
  DSV4_RETURN_IF_ERROR(start_sequence(seq));
  if (!prefix_ || prompt_len < 1) return int64_t{0};
  const int32_t wc = static_cast<int32_t>(std::min<int64_t>(prompt_len, cfg_.sliding_window));
  const int64_t P = limits_.page_tokens;
  const std::vector<int32_t> chain = prefix_->match(prompt, prompt_len, wc, need_mtp);
  if (chain.empty()) return int64_t{0};
  const int64_t cut = static_cast<int64_t>(chain.size()) * P;
  if (min_ratio_ > 0) {
    std::vector<int32_t> pages;
    for (int32_t id : chain) pages.push_back(prefix_->entry(id).page);
    blocks_->adopt(seq, pages);
  }
  const int64_t start = cut - kCsaRatio;  // the recomputed positions [cut − 4, cut)
  const int64_t first = std::max<int64_t>(0, start - tail_rows_);
  copy_window_rows(seq, chain.back(), first, start - first, /*to_ring=*/true, need_mtp);
  Slot& sl = slots_[seq];
  sl.length[0] = sl.length[1] = sl.high[0] = sl.high[1] = sl.floor = start;
  sl.mtp_floor = need_mtp ? 0 : start;
  sl.shared_end = cut;
  sl.next_block = static_cast<int32_t>(chain.size());
  set_chain(seq, chain.back());
  return start;
}

void ModelRunner::register_prefix(int32_t seq, const int32_t* prompt, int64_t prompt_len, bool need_mtp) {
  if (!prefix_ || !active(seq)) return;
  Slot& sl = slots_[seq];
  const int64_t P = limits_.page_tokens;
  const int32_t wc = static_cast<int32_t>(std::min<int64_t>(prompt_len, cfg_.sliding_window));
  const int64_t done = need_mtp ? std::min(sl.length[0], sl.length[1]) : sl.length[0];
  const int64_t written = need_mtp ? std::max(sl.high[0], sl.high[1]) : sl.high[0];
  // The ring holds any span of ring_rows − page_rows + 1 positions: those before the
  // newest position written are intact.
  const CacheGroupSpec& os = ori_->spec();
  const int64_t intact_from = written - (static_cast<int64_t>(os.ring_pages - 1) * os.page_rows + 1);
  for (int64_t b = sl.next_block; (b + 1) * P <= std::min(prompt_len, done); ++b) {
    const int64_t cut = (b + 1) * P;
    const int64_t start = cut - kCsaRatio;
    const int64_t first = std::max<int64_t>(0, start - tail_rows_);
    if (first < intact_from) {  // rows gone: the chain stops here
      sl.next_block = static_cast<int32_t>(prompt_len / P + 1);
      return;
    }
    const int32_t found = prefix_->find(sl.chain, prompt + b * P, wc);
    if (found >= 0 && (!need_mtp || prefix_->entry(found).mtp)) {
      prefix_->touch(found);
      set_chain(seq, found);
      sl.next_block = static_cast<int32_t>(b + 1);
      continue;
    }
    if (found >= 0) return;  // cached without MTP rows: keep it, stop this chain
    if (prefix_->full() && !evict_one()) return;  // every entry is in use: this block stays uncached
    const int32_t page = min_ratio_ > 0 ? blocks_->table(seq)[b] : -1;
    const bool mtp_rows = need_mtp && first >= sl.mtp_floor;  // its MTP rows were all computed here
    const int32_t id = prefix_->insert(sl.chain, prompt + b * P, wc, page, mtp_rows);
    if (page >= 0) blocks_->retain_page(page);
    copy_window_rows(seq, id, first, start - first, /*to_ring=*/false, need_mtp);
    sl.shared_end = std::max(sl.shared_end, cut);  // the slot never rewrites a cached block
    sl.next_block = static_cast<int32_t>(b + 1);
    set_chain(seq, id);
  }
}

int32_t ModelRunner::prefix_entries() const { return prefix_ ? prefix_->size() : 0; }

// A cached block can go when no sequence holds its page (an entry of a model without
// compressed layers has none).
bool ModelRunner::evict_one() {
  auto ev = prefix_->evict([&](int32_t page) { return page < 0 || blocks_->page_refs(page) == 1; });
  if (!ev) return false;
  if (ev->page >= 0) blocks_->free_page(ev->page);
  return true;
}

bool ModelRunner::make_free_blocks(int64_t need) {
  while (blocks_->pool().n_free() < need)
    if (!prefix_ || !evict_one()) return false;
  return true;
}

void ModelRunner::end_sequence(int32_t seq) {
  if (!active(seq)) return;
  if (prefix_) set_chain(seq, -1);
  ori_->release(seq);
  blocks_->release(seq);
  slots_[seq].active = false;
}

int64_t ModelRunner::blocks_short(int32_t seq, int64_t end) const {
  if (min_ratio_ == 0) return 0;
  const int64_t need = ceil_div<int64_t>(end, limits_.page_tokens);
  const int64_t have = seq >= 0 && active(seq) ? static_cast<int64_t>(blocks_->table(seq).size()) : 0;
  return need > have ? need - have : 0;
}

Status ModelRunner::reserve_blocks(int32_t seq, int64_t end) {
  if (!active(seq)) return Status::errorf("sequence slot {} was not started", seq);
  if (min_ratio_ == 0) return Status();
  if (end > limits_.max_context)
    return Status::errorf("{} positions exceed max_context = {}", end, limits_.max_context);
  make_free_blocks(blocks_->pages_short(seq, end));  // evicts unreferenced cached blocks if needed
  return blocks_->reserve(seq, end);
}

int64_t ModelRunner::free_blocks() const {
  if (min_ratio_ == 0) return INT64_MAX;
  int64_t n = blocks_->pool().n_free();
  if (prefix_)  // blocks only the prefix cache holds come back on demand
    n += prefix_->evictable_count([&](int32_t page) { return page < 0 || blocks_->page_refs(page) == 1; });
  return n;
}
int64_t ModelRunner::total_blocks() const { return min_ratio_ == 0 ? INT64_MAX : blocks_->pool().n_pages(); }

ModelRunner::CacheMemory ModelRunner::cache_memory() const {
  CacheMemory m;
  for (const auto& lc : layers_)
    for (const CacheStorage* s : {&lc->ori, &lc->cmp, &lc->idx, &lc->tail}) {
      m.reserved += static_cast<int64_t>(s->bytes());
      m.resident += static_cast<int64_t>(s->resident_bytes());
    }
  return m;
}

bool ModelRunner::active(int32_t seq) const { return seq >= 0 && seq < limits_.max_seqs && slots_[seq].active; }

Status ModelRunner::prepare_step(std::span<const StepRequest> reqs, bool mtp) {
  Status st = validate_step(reqs, md_.cap);
  if (!st.ok()) return st;
  const int k = mtp ? 1 : 0;
  for (size_t r = 0; r < reqs.size(); ++r) {
    const StepRequest& q = reqs[r];
    const Slot& sl = slots_[q.seq];
    if (!sl.active) return Status::errorf("sequence slot {} was not started", q.seq);
    const int64_t L = sl.length[k];
    const int64_t lo = std::max<int64_t>(sl.floor, sl.high[k] - (limits_.max_decode_rows - 1));
    if (q.p0 < lo || q.p0 > L)
      return Status::errorf(
          "request {}: p0 = {} does not continue sequence slot {}{}: {} positions cached, so p0 must "
          "be in [{}, {}] (a rollback reaches at most max_decode_rows - 1 = {} rows behind the furthest "
          "row written, and never below the slot's start)",
          r, q.p0, q.seq, mtp ? " (MTP layer)" : "", L, lo, L, limits_.max_decode_rows - 1);
  }
  // Compressed-cache blocks for positions [0, p0 + n) (the MTP layer is SWA: none).
  if (!mtp && min_ratio_ > 0) {
    int64_t need = 0;
    for (const StepRequest& q : reqs) need += blocks_->pages_short(q.seq, q.p0 + q.n);
    if (!make_free_blocks(need))
      return Status::errorf("compressed cache exhausted: the step needs {} more blocks of {} positions, {} of "
                            "cache_blocks = {} free",
                            need, limits_.page_tokens, blocks_->pool().n_free(), blocks_->pool().n_pages());
    for (const StepRequest& q : reqs) DSV4_RETURN_IF_ERROR(blocks_->reserve(q.seq, q.p0 + q.n));
  }
  if (ranks_) {
    DSV4_RETURN_IF_ERROR(plan_rank_rows(reqs));
  } else {
    build_step_metadata(reqs, *ori_, md_);
  }
  for (const StepRequest& q : reqs) {
    Slot& sl = slots_[q.seq];
    sl.length[k] = q.p0 + q.n;
    sl.high[k] = std::max(sl.high[k], q.p0 + q.n);
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
  const int64_t T = md_.T;
  if (T == 0 && !ranks_) return Status();  // with ranks, an idle rank still joins every collective
  Scratch& s = *s_;
  const k::EmbedParams ep{cfg_.vocab_size, cfg_.hidden_size, cfg_.hc_mult};
  if (T > 0) pool_.run([&](int tid, int n) { k::embed(ep, w_.embed, md_.token.data(), T, s.X.data(), tid, n); });
  // DSpark target features (dspark.md §2): each target layer's slice of the feature rows.
  const std::vector<int>* lt = features_out ? &cfg_.dspark->target_layer_ids : nullptr;
  const int64_t F = lt ? static_cast<int64_t>(lt->size()) * cfg_.hidden_size : 0;
  bf16* feat = ranks_ ? s.features.data() : features_out;
  const k::HcParams hp{cfg_.hc_mult, cfg_.hidden_size, cfg_.hc_sinkhorn_iters, static_cast<float>(cfg_.hc_eps),
                       static_cast<float>(cfg_.rms_norm_eps)};
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    DSV4_RETURN_IF_ERROR(run_block(w_.layers[l], *layers_[l], false, s.X.data(), dec));
    const auto at = lt ? std::find(lt->begin(), lt->end(), l) : std::vector<int>::const_iterator{};
    if (lt && at != lt->end() && T > 0) {
      bf16* slice = feat + (at - lt->begin()) * cfg_.hidden_size;
      pool_.run([&](int tid, int n) { k::hc_stream_mean(s.X.data(), hp, T, slice, F, tid, n); });
    }
  }
  if (lt && ranks_) {
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(features_out + ranks_->own_row[t] * F, feat + t * F, sizeof(bf16) * F);
    if (ranks_->has_cp) DSV4_RETURN_IF_ERROR(gather_cp_features(reqs, feat, F, features_out));
  }
  const int64_t ND = stream_width();
  if (xfinal_out && ranks_) {
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(xfinal_out + ranks_->own_row[t] * ND, s.X.data() + t * ND, sizeof(bf16) * ND);
  } else if (xfinal_out) {
    std::memcpy(xfinal_out, s.X.data(), sizeof(bf16) * T * ND);
  }
  // Every rank joins the sharded head when any rank wants logits (the engine always does).
  if (logits || ranks_) return run_head(w_.hc_head, w_.norm, s.X.data(), logits, head);
  return Status();
}

Status ModelRunner::forward_mtp(std::span<const StepRequest> reqs, const bf16* X, float* logits,
                                const DecisionIO& dec, HeadRows head) {
  if (w_.mtp.empty()) return Status::error(cfg_.no_mtp_reason());
  DSV4_RETURN_IF_ERROR(check_head_rows(reqs, head));
  Status st = prepare_step(reqs, true);
  if (!st.ok()) return st;
  const int64_t T = md_.T;
  if (T == 0 && !ranks_) return Status();
  Scratch& s = *s_;
  if (ranks_) {  // the own rows of X, in own-row order
    const int64_t ND = stream_width();
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(ranks_->stage.data() + t * ND, X + ranks_->own_row[t] * ND, sizeof(bf16) * ND);
    X = ranks_->stage.data();
  }
  const MtpWeights& mw = w_.mtp[0];
  const k::MtpProjParams mp{cfg_.vocab_size, cfg_.hidden_size, cfg_.hc_mult, static_cast<float>(cfg_.rms_norm_eps)};
  const k::MtpProjWeights mpw{w_.embed, mw.enorm, mw.hnorm, mw.e_proj.w, mw.h_proj.w};
  const k::MtpProjIO io{T, md_.token.data(), X, s.Z.data(), s.mtpproj.data()};
  if (T > 0)
    for (int ph = 0; ph < k::kMtpProjPhases; ++ph)
      pool_.run([&](int tid, int n) { k::mtp_proj(ph, mp, mpw, io, tid, n); });
  DSV4_RETURN_IF_ERROR(run_block(mw.block, *layers_[cfg_.num_hidden_layers], true, s.Z.data(), dec));
  if (logits || ranks_) return run_head(mw.hc_head, mw.norm, s.Z.data(), logits, head);
  return Status();
}

Status ModelRunner::run_block(const LayerWeights& lw, LayerCaches& lc, bool mtp_block, bf16* X,
                              const DecisionIO& dec, int dspark_gamma) {
  Scratch& s = *s_;
  const int64_t T = md_.T;
  const k::HcParams hp{cfg_.hc_mult, cfg_.hidden_size, cfg_.hc_sinkhorn_iters, static_cast<float>(cfg_.hc_eps),
                       static_cast<float>(cfg_.rms_norm_eps)};
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const int64_t D = cfg_.hidden_size;
  auto hc_pre = [&](const HcParams& h, const bf16* norm_w) {
    const k::HcPreWeights hw{h.fn, h.scale, h.base};
    pool_.run([&](int tid, int n) { k::hc_mix(X, h.fn, hp.n_mix(), hp, T, s.mix.data(), tid, n); });
    pool_.run([&](int tid, int n) {  // both split rows alike: each thread norms the rows it wrote
      k::hc_pre_apply(X, hw, hp, T, s.mix.data(), s.a.data(), s.post.data(), s.comb.data(), tid, n);
      k::rmsnorm(s.a.data(), norm_w, s.a.data(), T, D, eps, tid, n);
    });
  };
  auto hc_post = [&](const bf16* f) {
    pool_.run([&](int tid, int n) { k::hc_post(f, X, s.post.data(), s.comb.data(), hp, T, X, tid, n); });
  };
  if (T == 0) {  // an idle rank (several ranks): the split chunks' cache rows, the seams' collectives
    if (ranks_->has_cp) DSV4_RETURN_IF_ERROR(run_cache_writes(lw, lc, 0));
    DSV4_RETURN_IF_ERROR(run_out_proj(lw, lc));
    return run_moe(lw, lc, mtp_block, dec, dspark_gamma);
  }
  // attention sub-block: hc_pre -> attn_norm -> attention -> hc_post
  hc_pre(lw.hc_attn, lw.attn_norm);
  DSV4_RETURN_IF_ERROR(dspark_gamma > 0 ? run_dspark_attention(lw, lc, dspark_gamma)
                                        : run_attention(lw, lc, mtp_block, dec));
  hc_post(s.attn_out.data());
  // MoE sub-block: hc_pre -> ffn_norm -> MoE -> hc_post
  hc_pre(lw.hc_ffn, lw.ffn_norm);
  DSV4_RETURN_IF_ERROR(run_moe(lw, lc, mtp_block, dec, dspark_gamma));
  hc_post(s.m.data());
  return Status();
}

// Cache writes before any read (runtime.md §2.9): kv path, window KV and compressors over the
// cache rows — the computed rows, and with context-parallel prefill (runtime.md §6.8) every row
// of the group's split chunks, whose normed inputs are all-gathered first.
Status ModelRunner::run_cache_writes(const LayerWeights& lw, LayerCaches& lc, int kv_first_phase) {
  Scratch& s = *s_;
  const ModelConfig& c = cfg_;
  const int64_t D = c.hidden_size, Dh = c.head_dim, Di = c.index_head_dim;
  const int Dr = static_cast<int>(c.qk_rope_head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const bf16* a = s.a.data();
  const StepMetadata* mk = &md_;
  if (ranks_ && ranks_->has_cp) {
    DSV4_RETURN_IF_ERROR(gather_cp_rows());
    a = ranks_->a_kv.data();
    mk = &ranks_->md_kv;
  }
  const int64_t T = mk->T;
  const int64_t* pos = mk->pos.data();
  const AttentionWeights& aw = lw.attn;
  const k::KvPathParams kp{D, static_cast<int>(Dh), Dr, eps};
  const k::KvPathWeights kw{aw.wkv.w, aw.kv_norm, lc.inv_freq};
  const k::KvPathIO kio{T, a, pos, s.kv.data(), s.kvpath.data()};
  const int64_t kv_bytes = kv_format_.bytes(), idx_bytes = idx_format_.bytes();
  if (T > 0)
    for (int ph = kv_first_phase; ph < k::kKvPathPhases; ++ph)
      pool_.run([&](int tid, int n) {
        k::kv_path(ph, kp, kw, kio, tid, n);
        if (ph != k::kKvPathPhases - 1) return;
        const Range r = split_range(T, tid, n);  // the rows this thread finished (last phase splits rows)
        for (int64_t t = r.begin; t < r.end; ++t)
          kv_pack_row(kv_format_, s.kv.data() + t * Dh, lc.ori.data() + mk->ori_slot[t] * kv_bytes);
      });

  // Both compressors project in one run, each into its own part of s.cmp.
  const k::CompressorStep cstep{T, mk->row_seq.data(), pos};
  float* cmp_main = s.cmp.data();
  float* cmp_idx = cmp_main + (lc.main_cmp.present ? k::compressor_scratch_floats(lc.main_cmp.params, T) : 0);
  if (T > 0 && (lc.main_cmp.present || lc.idx_cmp.present))
    pool_.run([&](int tid, int n) {
      if (lc.main_cmp.present)
        k::compressor_project(lc.main_cmp.params, lc.main_cmp.weights, a, T, cmp_main, tid, n);
      if (lc.idx_cmp.present) k::compressor_project(lc.idx_cmp.params, lc.idx_cmp.weights, a, T, cmp_idx, tid, n);
    });
  auto compress = [&](CompressorSlot& slot, const CacheStorage& cache, int32_t page_rows, int64_t width,
                      float* scratch) {
    pool_.run([&](int tid, int n) {
      k::compressor_emit(slot.params, slot.weights, cstep, slot.states.data(), scratch, s.emits.data(),
                         s.entries.data(), tid, n);
    });
    pool_.run([&](int tid, int n) {
      k::compressor_commit(slot.params, slot.weights, cstep, slot.states.data(), scratch, tid, n);
    });
    const int64_t n_emit = k::compressor_count_emits(pos, T, slot.params.ratio);
    const bool indexer = slot.params.kind == k::CompressorKind::kIndexer;
    const int64_t row_bytes = indexer ? idx_bytes : kv_bytes;
    for (int64_t e = 0; e < n_emit; ++e) {
      const k::CompressorEmit& em = s.emits.data()[e];
      if ((em.index + 1) * slot.params.ratio <= slots_[em.seq].shared_end) continue;  // in a shared block: kept
      uint8_t* dst = PagedRowsT<uint8_t>{cache.data(), blocks_->table(em.seq).data(), page_rows, 0, row_bytes}.row(
          em.index);
      if (indexer) index_key_pack(idx_format_, s.entries.data() + e * width, dst);
      else kv_pack_row(kv_format_, s.entries.data() + e * width, dst);
    }
  };
  if (T > 0 && lc.main_cmp.present) compress(lc.main_cmp, lc.cmp, lc.cmp_page_rows, Dh, cmp_main);
  if (T > 0 && lc.idx_cmp.present) compress(lc.idx_cmp, lc.idx, idx_page_rows_, Di, cmp_idx);
  return Status();
}

Status ModelRunner::run_attention(const LayerWeights& lw, LayerCaches& lc, bool mtp_block,
                                  const DecisionIO& dec) {
  Scratch& s = *s_;
  const ModelConfig& c = cfg_;
  const int64_t T = md_.T, D = c.hidden_size, Dh = c.head_dim, Di = c.index_head_dim;
  const int H = c.num_attention_heads, Dr = static_cast<int>(c.qk_rope_head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const AttentionWeights& aw = lw.attn;
  const int64_t* pos = md_.pos.data();

  // q path (also keeps qr for the indexer) on the computed rows; then the cache writes.
  const k::QPathParams qp{D, c.q_lora_rank, H, static_cast<int>(Dh), Dr, eps};
  const k::QPathWeights qw{aw.wq_a.w, aw.q_norm, aw.wq_b.w, lc.inv_freq};
  const k::QPathIO qio{T, s.a.data(), pos, s.qr.data(), s.q.data(), s.qpath.data()};
  // The kv path's first phase (actq of the same rows, rows split alike) joins the q path's
  // when the cache rows are the computed rows.
  const bool kv_first_here = !(ranks_ && ranks_->has_cp);
  const k::KvPathParams kp{D, static_cast<int>(Dh), Dr, eps};
  const k::KvPathWeights kw{aw.wkv.w, aw.kv_norm, lc.inv_freq};
  const k::KvPathIO kio{T, s.a.data(), pos, s.kv.data(), s.kvpath.data()};
  // The indexer's actq of qr joins the phase that writes qr (rows split alike).
  const bool csa = lw.kind == AttentionKind::kCSA;
  const bool idx_actq = csa && aw.indexer.wq_b.w.quantized();
  for (int ph = 0; ph < k::kQPathPhases; ++ph)
    pool_.run([&](int tid, int n) {
      k::q_path(ph, qp, qw, qio, tid, n);
      if (ph == 0 && kv_first_here) k::kv_path(0, kp, kw, kio, tid, n);
      if (ph == 2 && idx_actq) k::actq_rows(s.qr.data(), T, c.q_lora_rank, s.qr_q.data(), tid, n);
    });
  DSV4_RETURN_IF_ERROR(run_cache_writes(lw, lc, kv_first_here ? 1 : 0));
  const int64_t kv_bytes = kv_format_.bytes(), idx_bytes = idx_format_.bytes();

  // Per-row views of this layer's paged caches.
  const CacheGroupSpec& os = ori_->spec();
  for (int64_t t = 0; t < T; ++t) {
    const int32_t seq = md_.row_seq[t];
    s.win_rows.data()[t] = PagedBytes{lc.ori.data(), ori_->table(seq).data(), os.page_rows, os.ring_pages, kv_bytes};
    if (lw.ratio > 0)
      s.cmp_rows.data()[t] = PagedBytes{lc.cmp.data(), blocks_->table(seq).data(), lc.cmp_page_rows, 0, kv_bytes};
    if (lw.kind == AttentionKind::kCSA)
      s.idx_rows.data()[t] = PagedBytes{lc.idx.data(), blocks_->table(seq).data(), idx_page_rows_, 0, idx_bytes};
  }

  // CSA: lightning indexer picks the compressed entries.
  const int32_t* picks = nullptr;
  const int32_t* n_picks = nullptr;
  int64_t picks_stride = 0;
  const k::IndexerParams ip{c.index_n_heads, static_cast<int>(Di), Dr, static_cast<int>(c.index_topk)};
  const k::IndexKeys idx_keys{s.idx_rows.data(), s.count.data(), idx_format_};
  // The top-k merge and attn_select split rows alike: one run, unless decisions are forced
  // or logged in between.
  const bool merge_in_select = lw.kind == AttentionKind::kCSA && !dec.forced && !dec.log;
  if (lw.kind == AttentionKind::kCSA) {
    const IndexerWeights& iw = aw.indexer;
    const bf16* qr_in = idx_actq ? s.qr_q.data() : s.qr.data();
    pool_.run([&](int tid, int n) {
      k::indexer_project(ip, iw.wq_b.w, iw.weights_proj.w, qr_in, s.a.data(), T, s.qi.data(), s.omega.data(), tid, n);
    });
    pool_.run([&](int tid, int n) {
      k::indexer_finish(ip, lc.inv_freq, pos, T, s.qi.data(), s.omega.data(), s.wgt.data(), tid, n);
    });
    for (int64_t t = 0; t < T; ++t) s.count.data()[t] = static_cast<int32_t>(k::visible_entries(pos[t], kCsaRatio));
    pool_.run([&](int tid, int n) {
      k::indexer_select(ip, s.qi.data(), s.wgt.data(), idx_keys, T, s.picks.data(), s.n_picks.data(),
                        s.select_base, tid, n);
    });
    if (!merge_in_select)
      pool_.run([&](int tid, int n) {
        k::indexer_select_merge(ip, idx_keys, T, s.picks.data(), s.n_picks.data(), s.select_base, tid, n);
      });
    picks_stride = c.index_topk;
    const int layer = mtp_block ? 0 : lw.layer;
    if (dec.forced)  // a forced entry has exactly n_picks ids (DecisionTable::create)
      for (int64_t t = 0; t < T; ++t)
        if (const Decision* f = dec.forced->find(mtp_block, true, layer, md_.row_seq[t], pos[t]))
          std::copy(f->selected.begin(), f->selected.end(), s.picks.data() + t * picks_stride);
    picks = s.picks.data();
    n_picks = s.n_picks.data();
    if (dec.log)
      for (int64_t t = 0; t < T; ++t)
        dec.log->push_back({mtp_block, true, layer, md_.row_seq[t], pos[t],
                            std::vector<int32_t>(picks + t * picks_stride, picks + t * picks_stride + n_picks[t])});
  }

  // Attention list (window part + compressed part) and the Level-A kernel.
  k::AttnSelectParams sp;
  const bool hca = lw.kind == AttentionKind::kHCA;
  sp.kind = lw.kind == AttentionKind::kCSA ? k::AttnKind::kCSA : k::AttnKind::kSWA;  // HCA: window part + dense tail
  if (hca)
    for (int64_t t = 0; t < T; ++t) s.dense.data()[t] = static_cast<int32_t>(k::visible_entries(pos[t], lw.ratio));
  sp.window = static_cast<int>(c.sliding_window);
  sp.ratio = lw.ratio;
  sp.stride = s.list_stride;
  pool_.run([&](int tid, int n) {
    if (merge_in_select)
      k::indexer_select_merge(ip, idx_keys, T, s.picks.data(), s.n_picks.data(), s.select_base, tid, n);
    k::attn_select(sp, T, pos, md_.window_len.data(), picks, picks_stride, n_picks, s.list.data(), s.len.data(), tid, n);
  });
  const k::AttnList list{s.list.data(), s.list_stride, s.len.data(), md_.window_len.data(),
                         hca ? s.dense.data() : nullptr};
  const k::PackedAttnKeys keys{s.win_rows.data(), lw.ratio > 0 ? s.cmp_rows.data() : nullptr, kv_format_};
  const k::SparseAttnParams ap{H, static_cast<int>(Dh)};
  pool_.run([&](int tid, int n) {
    k::sparse_attn(ap, s.q.data(), T, list, keys, aw.attn_sink, s.o.data(), s.attn.data(), tid, n);
  });

  return run_out_proj(lw, lc);
}

// De-rotation and grouped output projection: on this rank (one rank, or tp = 1), or
// sharded over the TP group (parallel/attn_output_seam.h).
Status ModelRunner::run_out_proj(const LayerWeights& lw, LayerCaches& lc) {
  Scratch& s = *s_;
  const ModelConfig& c = cfg_;
  const int64_t T = md_.T;
  const AttentionWeights& aw = lw.attn;
  const k::OutProjParams op{c.num_attention_heads, static_cast<int>(c.head_dim), static_cast<int>(c.qk_rope_head_dim),
                            c.o_groups, c.o_lora_rank, c.hidden_size};
  const k::OutProjWeights ow{aw.wo_a.w, aw.wo_b.w, lc.inv_freq};
  const k::OutProjIO oio{T, s.o.data(), md_.pos.data(), s.attn_out.data(), s.oproj.data()};
  if (!ranks_ || !ranks_->attn) {
    if (T > 0)
      for (int ph = 0; ph < k::kOutProjPhases; ++ph)
        pool_.run([&](int tid, int n) { k::out_proj(ph, op, ow, oio, tid, n); });
    return Status();
  }
  if (T > 0) pool_.run([&](int tid, int n) { k::out_proj(0, op, ow, oio, tid, n); });  // inverse RoPE
  return ranks_->attn->run(*ranks_->g->tp, pool_, ranks_->out_proj[lc.index], s.o.data(), ranks_->tp_rows,
                           s.attn_out.data());
}

Status ModelRunner::run_moe(const LayerWeights& lw, const LayerCaches& lc, bool mtp_block, const DecisionIO& dec,
                            int dspark_gamma) {
  Scratch& s = *s_;
  const ModelConfig& c = cfg_;
  const int64_t T = md_.T, E = c.n_routed_experts, K = c.num_experts_per_tok;
  if (T == 0) return ranks_ && ranks_->moe ? run_moe_seam(lc) : Status();
  const k::MoeGateParams gp{c.hidden_size, E, K, static_cast<float>(c.routed_scaling_factor)};
  k::MoeGateWeights gw;
  gw.weight = lw.ffn.gate.w;
  gw.bias = lw.ffn.bias;
  if (lw.hash) gw.tid2eid = k::Tid2Eid{lw.ffn.tid2eid.data(), false, c.vocab_size};
  pool_.run([&](int tid, int n) { k::moe_gate_scores(s.a.data(), gw, gp, T, s.gate_scores.data(), tid, n); });
  pool_.run([&](int tid, int n) {
    k::moe_gate_route(s.gate_scores.data(), gw, md_.token.data(), gp, T, s.ids.data(), s.route_w.data(), tid, n);
  });
  const int layer = mtp_block ? 0 : lw.layer;
  // A DSpark stage's block row t is row t mod γ of its round (rounds of γ rows), anchor pos − 1 − row.
  const int stage = dspark_gamma > 0 ? lw.layer - c.num_hidden_layers : 0;
  auto ds_row = [&](int64_t t) { return static_cast<int32_t>(t % dspark_gamma); };
  auto find = [&](int64_t t) {
    return dspark_gamma > 0
               ? dec.forced->find_dspark(false, stage, md_.row_seq[t], md_.pos[t] - 1 - ds_row(t), ds_row(t))
               : dec.forced->find(mtp_block, false, layer, md_.row_seq[t], md_.pos[t]);
  };
  if (dec.forced)
    for (int64_t t = 0; t < T; ++t)
      if (const Decision* f = find(t)) {
        std::copy(f->selected.begin(), f->selected.end(), s.ids.data() + t * K);
        k::moe_route_weights(s.gate_scores.data() + t * E, s.ids.data() + t * K, gp, s.route_w.data() + t * K);
      }
  if (dec.log)
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> sel(s.ids.data() + t * K, s.ids.data() + (t + 1) * K);
      if (dspark_gamma > 0)
        dec.log->push_back(
            {false, false, stage, md_.row_seq[t], md_.pos[t] - 1 - ds_row(t), std::move(sel), true, false, ds_row(t)});
      else
        dec.log->push_back({mtp_block, false, layer, md_.row_seq[t], md_.pos[t], std::move(sel)});
    }
  if (ranks_ && ranks_->moe) return run_moe_seam(lc);
  const k::MoeExpertParams ep{c.hidden_size, c.moe_intermediate_size, static_cast<float>(c.swiglu_limit)};
  const k::MoeDispatchParams dp{K, 0, E, limits_.max_rows};
  k::moe_dispatch_build(s.ids.data(), T, dp, &s.moe_work);
  const k::MoeWork& mw = s.moe_work;
  pool_.run([&](int tid, int n) { k::moe_experts_in(s.a.data(), lc.experts.data(), lc.shared, ep, dp, mw, tid, n); });
  pool_.run([&](int tid, int n) { k::moe_experts_up(lc.experts.data(), lc.shared, ep, dp, mw, tid, n); });
  pool_.run([&](int tid, int n) {
    k::moe_experts_act(s.route_w.data(), lc.experts.data(), lc.shared, ep, dp, mw, tid, n);
  });
  pool_.run([&](int tid, int n) { k::moe_experts_down(lc.experts.data(), lc.shared, ep, dp, mw, tid, n); });
  const k::MoeCombineParams cp{c.hidden_size, K};
  pool_.run([&](int tid, int n) {
    k::moe_combine(mw.x, mw.slot_entry, s.ids.data(), k::shared_out(mw, ep), cp, T, s.m.data(), tid, n);
  });
  return Status();
}

// HeadRows on one rank: the listed rows of the final stack X are moved to its first rows
// (ascending, so no row is overwritten before it moves) and the head runs on those only.
// With ranks: every own row goes through the sharded head; the listed ones are written.
Status ModelRunner::run_head(const HcParams& hc, const bf16* norm, bf16* X, float* logits, HeadRows head) {
  Scratch& s = *s_;
  int64_t T = md_.T;
  const int64_t D = cfg_.hidden_size, V = cfg_.vocab_size;
  const int32_t* out_row = ranks_ ? ranks_->own_row.data() : nullptr;
  if (head.rows != nullptr && !ranks_) {
    const int64_t ND = stream_width();
    for (int64_t i = 0; i < head.n; ++i)
      if (head.rows[i] != i) std::memcpy(X + i * ND, X + head.rows[i] * ND, sizeof(bf16) * ND);
    T = head.n;
    if (T == 0) return Status();
  } else if (head.rows != nullptr) {
    std::vector<int32_t>& at = ranks_->head_of_step;
    std::fill(at.begin(), at.end(), -1);
    for (int64_t i = 0; i < head.n; ++i) at[head.rows[i]] = static_cast<int32_t>(i);
    for (int64_t t = 0; t < T; ++t) ranks_->head_out_row[t] = at[ranks_->own_row[t]];
    out_row = ranks_->head_out_row.data();
  }
  const k::HcParams hp{cfg_.hc_mult, D, cfg_.hc_sinkhorn_iters, static_cast<float>(cfg_.hc_eps),
                       static_cast<float>(cfg_.rms_norm_eps)};
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
