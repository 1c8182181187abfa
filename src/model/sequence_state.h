// The runner's sequence state (runtime.md §2.1, §3.1, §7.1): per sequence slot its window-KV
// ring and compressed-cache block table, the positions its steps wrote (the rollback bounds
// a step's p0 must respect), and the prefix cache's registrations and hits. It owns no
// model data: the window rows a hit copies live in the layers' storage, named once per
// layer (add_window_layer).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cache/cache_group.h"
#include "cache/prefix_cache.h"
#include "cache/step_metadata.h"
#include "model/limits.h"

namespace dsv4 {

class SequenceState {
 public:
  // window: W (sliding_window); min_ratio: the smallest non-zero compress ratio of the main
  // layers (0: no compressed families, so no blocks); row_bytes: a packed window-KV row.
  // Errors name the limits whose block count overflows.
  static Result<std::unique_ptr<SequenceState>> create(const Limits& limits, int32_t window, int min_ratio,
                                                       int64_t row_bytes);

  // One layer's window-KV ring storage [window().physical_rows(), row] and prefix-tail
  // storage [prefix_blocks · (W − 1), row]; mtp: the MTP layer (its rows are copied only for
  // callers that run it).
  void add_window_layer(uint8_t* ring, uint8_t* tail, bool mtp);

  const CacheGroup& window() const { return *window_; }  // the window-KV rings
  const CacheGroup& blocks() const { return *blocks_; }  // the compressed families' block tables

  // Slots: start admits the ring and an empty block table for a sequence owned by `owner`
  // (the rank computing its rows: its prefix chains start at that rank's root, in the
  // namespace `salt`: PrefixCache); end frees every page.
  Status start(int32_t seq, int32_t owner = 0, std::string_view salt = {});
  void end(int32_t seq);
  bool active(int32_t seq) const { return seq >= 0 && seq < limits_.max_seqs && slots_[seq].active; }
  // The first position a slot holds: 0, or a prefix hit's first fed position.
  int64_t floor(int32_t seq) const { return slots_[seq].floor; }
  // Positions [0, shared_end) have their compressed entries in shared pages (never written).
  int64_t shared_end(int32_t seq) const { return slots_[seq].shared_end; }

  // Prefix cache (ModelRunner::start_sequence_cached, register_prefix). reuse_prefix: on a
  // started slot, adopts the longest cached chain prefixing the prompt and returns the first
  // position to feed (0 without a hit).
  Result<int64_t> reuse_prefix(int32_t seq, const int32_t* prompt, int64_t prompt_len, bool need_mtp);
  // Whole blocks of the prompt cached on `owner`'s chains in namespace `salt` (no entry marked used).
  int64_t cached_prefix_blocks(int32_t owner, const int32_t* prompt, int64_t prompt_len, bool need_mtp,
                               std::string_view salt) const;
  void register_prefix(int32_t seq, const int32_t* prompt, int64_t prompt_len, bool need_mtp);
  int32_t prefix_entries() const { return prefix_ ? prefix_->size() : 0; }

  // A fork (ModelRunner::fork_sequence): starts slot `child` as a copy of active slot `parent`,
  // which holds positions [0, end): the window rings copied, the compressed-cache pages of
  // whole blocks before end shared by reference (never written by either: they hold no
  // position at or after end), the block holding end, when begun, a new page whose rows the
  // caller copies. Returns that (parent page, child page), or (-1, -1) when there is none. The
  // child never registers prefix blocks (its parent does).
  Result<std::pair<int32_t, int32_t>> fork(int32_t parent, int32_t child, int64_t end);

  // A step over reqs (mtp: the MTP layer's positions): check_step verifies each request
  // continues its slot within the rollback window and takes the compressed-cache blocks the
  // step needs (evicting unheld cached blocks first); advance records the positions written.
  Status check_step(std::span<const StepRequest> reqs, bool mtp);
  void advance(std::span<const StepRequest> reqs, bool mtp);

  // Cache demand (ModelRunner::blocks_short and friends).
  int64_t blocks_short(int32_t seq, int64_t end) const;
  int64_t free_blocks() const;
  Status reserve_blocks(int32_t seq, int64_t end);
  int64_t total_blocks() const;

 private:
  // Index 0: main model, 1: MTP layer.
  struct Slot {
    bool active = false;
    // Positions [0, length) written by the last step, and the furthest written + 1
    // (rejected rows included): a step's rows continue the slot, p0 in
    // [max(floor, high − (S_MAX − 1)), length] (runtime.md §3.1 rollback window), so
    // rollbacks stay within what the rings hold.
    int64_t length[2] = {0, 0}, high[2] = {0, 0};
    int64_t floor = 0;  // lowest start: 0, or a prefix hit's start
    // Prefix cache: positions whose compressed entries live in shared pages (never written
    // by this slot), MTP window rows below mtp_floor were not copied by a hit, the entry the
    // slot's next block chains onto (held), that block's index, and whether the chain
    // stopped (the window rows of its next block left the ring).
    int64_t shared_end = 0, mtp_floor = 0;
    int32_t root = -1;  // PrefixCache::root(owner)
    std::string salt;   // the prefix cache's namespace of its chains
    int32_t chain = -1, next_block = 0;
    bool chain_closed = false;
  };
  struct WindowLayer {
    uint8_t* ring = nullptr;
    uint8_t* tail = nullptr;
    bool mtp = false;
  };

  SequenceState(const Limits& limits, int32_t window, int min_ratio, int64_t row_bytes);
  void set_chain(int32_t seq, int32_t entry);
  bool evict_one();  // drops the LRU cached block nobody else holds; false if none
  bool make_free_blocks(int64_t need);
  // Window rows of positions [first, first + n) between the slot's ring and the last n of
  // an entry's W − 1 tail rows.
  void copy_window_rows(int32_t seq, int32_t entry, int64_t first, int64_t n, bool to_ring, bool mtp);
  // Caches block b of the slot's prompt (a new entry, or the one already cached); false: the
  // chain stops here for now.
  bool register_block(int32_t seq, int64_t b, const int32_t* prompt, int32_t wc, bool need_mtp);

  Limits limits_;
  int min_ratio_ = 0;
  int32_t window_rows_ = 0;  // W
  int32_t tail_rows_ = 0;    // W − 1
  int64_t row_bytes_ = 0;
  std::unique_ptr<CacheGroup> window_;  // window KV ring (every layer + MTP)
  std::unique_ptr<CacheGroup> blocks_;  // compressed families' block table (growing, page_tokens positions)
  std::vector<Slot> slots_;
  std::unique_ptr<PrefixCache> prefix_;  // nullptr: prefix caching off
  std::vector<WindowLayer> layers_;
};

}  // namespace dsv4
