#include "model/sequence_state.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "base/check.h"
#include "base/math.h"
#include "model/config.h"
#include "numeric/paged_rows.h"

namespace dsv4 {

namespace {

// Compressed-cache blocks of the shared pool: cache_blocks, or max_seqs sequences at max_context.
int64_t n_cache_blocks(const Limits& l) {
  return l.cache_blocks > 0 ? l.cache_blocks : ceil_div<int64_t>(l.max_context, l.page_tokens) * l.max_seqs;
}

}  // namespace

Result<std::unique_ptr<SequenceState>> SequenceState::create(const Limits& limits, int32_t window, int min_ratio,
                                                             int64_t row_bytes) {
  const int64_t n_blocks = n_cache_blocks(limits);
  if (n_blocks > INT32_MAX)
    return Status::errorf("limits: max_seqs = {} sequences of max_context = {} need {} cache blocks of page_tokens "
                          "= {}, more than {}; set cache_blocks",
                          limits.max_seqs, limits.max_context, n_blocks, limits.page_tokens, INT32_MAX);
  return std::unique_ptr<SequenceState>(new SequenceState(limits, window, min_ratio, row_bytes));
}

// Window KV: a ring per sequence spanning W - 1 + R_MAX positions (runtime.md §2.2); with
// prefix caching it also keeps the W − 1 rows before a block end's last 4 positions until the
// step after it (3 more positions). Compressed families (CSA KV, HCA KV, indexer keys): one
// block table, a page per block of page_tokens source positions (runtime.md §7.1), taken from
// the shared pool as a sequence grows.
SequenceState::SequenceState(const Limits& limits, int32_t window, int min_ratio, int64_t row_bytes)
    : limits_(limits), min_ratio_(min_ratio), window_rows_(window), tail_rows_(window - 1), row_bytes_(row_bytes) {
  const int32_t P = limits.page_rows;
  const int32_t extra = limits.prefix_blocks > 0 ? 3 : 0;
  const int32_t ring = ring_pages_for_span(window - 1 + limits.r_max() + extra, P);
  window_ = std::make_unique<CacheGroup>(CacheGroupSpec{"window_kv", P, ring, ring * limits.max_seqs, 0},
                                         limits.max_seqs);
  blocks_ = std::make_unique<CacheGroup>(CacheGroupSpec{"compressed_blocks", limits.page_tokens, 0,
                                                        static_cast<int32_t>(n_cache_blocks(limits)),
                                                        limits.max_context},
                                         limits.max_seqs);
  slots_.assign(limits.max_seqs, Slot{});
  if (limits.prefix_blocks > 0) prefix_ = std::make_unique<PrefixCache>(limits.page_tokens, limits.prefix_blocks);
}

void SequenceState::add_window_layer(uint8_t* ring, uint8_t* tail, bool mtp) { layers_.push_back({ring, tail, mtp}); }

Status SequenceState::start(int32_t seq, int32_t owner, std::string_view salt) {
  if (seq < 0 || seq >= limits_.max_seqs)
    return Status::errorf("sequence slot {} outside [0, max_seqs = {})", seq, limits_.max_seqs);
  if (slots_[seq].active) return Status::errorf("sequence slot {} is already in use", seq);
  Status st = window_->admit(seq);
  if (!st.ok()) return st;
  st = blocks_->admit(seq);
  if (!st.ok()) {
    window_->release(seq);
    return st;
  }
  slots_[seq] = Slot{};
  slots_[seq].active = true;
  slots_[seq].root = slots_[seq].chain = PrefixCache::root(owner);
  slots_[seq].salt.assign(salt);
  return Status();
}

void SequenceState::end(int32_t seq) {
  if (!active(seq)) return;
  if (prefix_) set_chain(seq, slots_[seq].root);
  window_->release(seq);
  blocks_->release(seq);
  slots_[seq].active = false;
}

Result<std::pair<int32_t, int32_t>> SequenceState::fork(int32_t parent, int32_t child, int64_t end) {
  DSV4_CHECK(active(parent) && slots_[parent].length[0] == end, "fork of slot {} at {}", parent, end);
  DSV4_RETURN_IF_ERROR(start(child));
  const CacheGroupSpec& os = window_->spec();
  const size_t page_bytes = static_cast<size_t>(os.page_rows * row_bytes_);
  for (const WindowLayer& layer : layers_)
    for (int32_t i = 0; i < os.ring_pages; ++i)
      std::memcpy(layer.ring + window_->table(child)[i] * page_bytes, layer.ring + window_->table(parent)[i] * page_bytes,
                  page_bytes);
  Slot& sl = slots_[child];
  sl = slots_[parent];
  sl.chain = sl.root;
  sl.chain_closed = true;
  std::pair<int32_t, int32_t> partial{-1, -1};
  if (min_ratio_ > 0) {
    const int64_t P = limits_.page_tokens, whole = end / P;
    const std::vector<int32_t>& from = blocks_->table(parent);
    blocks_->adopt(child, std::vector<int32_t>(from.begin(), from.begin() + whole));
    sl.shared_end = whole * P;
    if (end % P != 0) {
      Status st = reserve_blocks(child, end);
      if (!st.ok()) {
        this->end(child);
        return st;
      }
      partial = {from[whole], blocks_->table(child)[whole]};
    }
  }
  return partial;
}

void SequenceState::set_chain(int32_t seq, int32_t entry) {
  Slot& sl = slots_[seq];
  if (sl.chain >= 0) prefix_->release(sl.chain);
  sl.chain = entry;
  if (entry >= 0) prefix_->hold(entry);
}

void SequenceState::copy_window_rows(int32_t seq, int32_t entry, int64_t first, int64_t n, bool to_ring, bool mtp) {
  const CacheGroupSpec& os = window_->spec();
  const int64_t bytes = row_bytes_;
  const int64_t end = first + n;  // positions [first, end) <-> tail rows [W - 1 - n, W - 1)
  for (const WindowLayer& layer : layers_) {
    if (!mtp && layer.mtp) continue;
    const PagedRowsT<uint8_t> ring{layer.ring, window_->table(seq).data(), os.page_rows, os.ring_pages, bytes};
    for (int64_t q = first; q < end; ++q) {
      uint8_t* tail = layer.tail + (static_cast<int64_t>(entry) * tail_rows_ + tail_rows_ - (end - q)) * bytes;
      if (to_ring) std::memcpy(ring.row(q), tail, static_cast<size_t>(bytes));
      else std::memcpy(tail, ring.row(q), static_cast<size_t>(bytes));
    }
  }
}

Result<int64_t> SequenceState::reuse_prefix(int32_t seq, const int32_t* prompt, int64_t prompt_len, bool need_mtp) {
  if (!prefix_ || prompt_len < 1) return int64_t{0};
  const int32_t wc = static_cast<int32_t>(std::min<int64_t>(prompt_len, window_rows_));
  const int64_t P = limits_.page_tokens;
  const std::vector<int32_t> chain = prefix_->match(slots_[seq].root, prompt, prompt_len, wc, need_mtp,
                                                    slots_[seq].salt);
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

int64_t SequenceState::cached_prefix_blocks(int32_t owner, const int32_t* prompt, int64_t prompt_len,
                                            bool need_mtp, std::string_view salt) const {
  if (!prefix_ || prompt_len < 1) return 0;
  const int32_t wc = static_cast<int32_t>(std::min<int64_t>(prompt_len, window_rows_));
  return prefix_->cached_blocks(PrefixCache::root(owner), prompt, prompt_len, wc, need_mtp, salt);
}

void SequenceState::register_prefix(int32_t seq, const int32_t* prompt, int64_t prompt_len, bool need_mtp) {
  if (!prefix_ || !active(seq)) return;
  Slot& sl = slots_[seq];
  const int64_t P = limits_.page_tokens;
  const int32_t wc = static_cast<int32_t>(std::min<int64_t>(prompt_len, window_rows_));
  const int64_t done = need_mtp ? std::min(sl.length[0], sl.length[1]) : sl.length[0];
  const int64_t written = need_mtp ? std::max(sl.high[0], sl.high[1]) : sl.high[0];
  // The ring holds any span of ring_rows − page_rows + 1 positions: those before the
  // newest position written are intact.
  const CacheGroupSpec& os = window_->spec();
  const int64_t intact_from = written - (static_cast<int64_t>(os.ring_pages - 1) * os.page_rows + 1);
  for (int64_t b = sl.next_block; !sl.chain_closed && (b + 1) * P <= std::min(prompt_len, done); ++b) {
    const int64_t first = std::max<int64_t>(0, (b + 1) * P - kCsaRatio - tail_rows_);
    if (first < intact_from) {  // rows gone: the chain stops here
      sl.chain_closed = true;
      return;
    }
    if (!register_block(seq, b, prompt, wc, need_mtp)) return;
  }
}

bool SequenceState::register_block(int32_t seq, int64_t b, const int32_t* prompt, int32_t wc, bool need_mtp) {
  Slot& sl = slots_[seq];
  const int64_t P = limits_.page_tokens;
  const int64_t cut = (b + 1) * P;
  const int64_t start = cut - kCsaRatio;
  const int64_t first = std::max<int64_t>(0, start - tail_rows_);
  const int32_t found = prefix_->find(sl.chain, prompt + b * P, wc, sl.salt);
  if (found >= 0 && (!need_mtp || prefix_->entry(found).mtp)) {
    prefix_->touch(found);
    set_chain(seq, found);
    sl.next_block = static_cast<int32_t>(b + 1);
    return true;
  }
  if (found >= 0) return false;                  // cached without MTP rows: keep it, stop this chain
  if (prefix_->full() && !evict_one()) return false;  // every entry is in use: this block stays uncached
  const int32_t page = min_ratio_ > 0 ? blocks_->table(seq)[b] : -1;
  const bool mtp_rows = need_mtp && first >= sl.mtp_floor;  // its MTP rows were all computed here
  const int32_t id = prefix_->insert(sl.chain, prompt + b * P, wc, page, mtp_rows, sl.salt);
  if (page >= 0) blocks_->retain_page(page);
  copy_window_rows(seq, id, first, start - first, /*to_ring=*/false, need_mtp);
  sl.shared_end = std::max(sl.shared_end, cut);  // the slot never rewrites a cached block
  sl.next_block = static_cast<int32_t>(b + 1);
  set_chain(seq, id);
  return true;
}

// A cached block can go when no sequence holds its page (an entry of a model without
// compressed layers has none).
bool SequenceState::evict_one() {
  auto ev = prefix_->evict([&](int32_t page) { return page < 0 || blocks_->page_refs(page) == 1; });
  if (!ev) return false;
  if (ev->page >= 0) blocks_->free_page(ev->page);
  return true;
}

bool SequenceState::make_free_blocks(int64_t need) {
  while (blocks_->pool().n_free() < need)
    if (!prefix_ || !evict_one()) return false;
  return true;
}

Status SequenceState::check_step(std::span<const StepRequest> reqs, bool mtp) {
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
  if (mtp || min_ratio_ == 0) return Status();
  int64_t need = 0;
  for (const StepRequest& q : reqs) need += blocks_->pages_short(q.seq, q.p0 + q.n);
  if (!make_free_blocks(need))
    return Status::errorf("compressed cache exhausted: the step needs {} more blocks of {} positions, {} of "
                          "cache_blocks = {} free",
                          need, limits_.page_tokens, blocks_->pool().n_free(), blocks_->pool().n_pages());
  for (const StepRequest& q : reqs) DSV4_RETURN_IF_ERROR(blocks_->reserve(q.seq, q.p0 + q.n));
  return Status();
}

void SequenceState::advance(std::span<const StepRequest> reqs, bool mtp) {
  const int k = mtp ? 1 : 0;
  for (const StepRequest& q : reqs) {
    Slot& sl = slots_[q.seq];
    sl.length[k] = q.p0 + q.n;
    sl.high[k] = std::max(sl.high[k], q.p0 + q.n);
  }
}

int64_t SequenceState::blocks_short(int32_t seq, int64_t end) const {
  if (min_ratio_ == 0) return 0;
  const int64_t need = ceil_div<int64_t>(end, limits_.page_tokens);
  const int64_t have = seq >= 0 && active(seq) ? static_cast<int64_t>(blocks_->table(seq).size()) : 0;
  return need > have ? need - have : 0;
}

Status SequenceState::reserve_blocks(int32_t seq, int64_t end) {
  if (!active(seq)) return Status::errorf("sequence slot {} was not started", seq);
  if (min_ratio_ == 0) return Status();
  if (end > limits_.max_context)
    return Status::errorf("{} positions exceed max_context = {}", end, limits_.max_context);
  make_free_blocks(blocks_->pages_short(seq, end));  // evicts unreferenced cached blocks if needed
  return blocks_->reserve(seq, end);
}

int64_t SequenceState::free_blocks() const {
  if (min_ratio_ == 0) return INT64_MAX;
  int64_t n = blocks_->pool().n_free();
  if (prefix_)  // blocks only the prefix cache holds come back on demand
    n += prefix_->evictable_count([&](int32_t page) { return page < 0 || blocks_->page_refs(page) == 1; });
  return n;
}

int64_t SequenceState::total_blocks() const { return min_ratio_ == 0 ? INT64_MAX : blocks_->pool().n_pages(); }

}  // namespace dsv4
