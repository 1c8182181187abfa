// Several ranks sharing each step (runtime.md §6): the seams and this rank's weight shards,
// and per call the rows this rank computes (own unsplit requests first, then its shares of
// its group's context-parallel split chunks, §6.8), the rows it writes to its caches, and
// every TP rank's row counts the seams need. Own row t is step row own_row[t].
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "cache/cache_group.h"
#include "cache/step_metadata.h"
#include "model/drafter_state.h"
#include "model/runner.h"
#include "parallel/attn_output_seam.h"
#include "parallel/head_seam.h"
#include "parallel/moe_seam.h"
#include "parallel/rank_groups.h"

namespace dsv4 {

class RankRows {
 public:
  // The topology's checks (model/placement.h; no prefix cache), the output-projection shards
  // (tp > 1) of every checkpoint layer, the seams.
  static Result<std::unique_ptr<RankRows>> create(const ModelConfig& cfg, const Weights& w, const Limits& limits,
                                                  RankGroups* groups, const StepCapacity& cap);

  // A forward step: this rank's computed rows into own_rows, the cache rows into md_kv, both
  // in this rank's storage slots (StepRequest::local; a split chunk's: cp_slots[tp_rank]). Errors name
  // a request whose owner is outside the world.
  Status plan_step(std::span<const StepRequest> reqs, const CacheGroup& window, StepMetadata& own_rows);
  // DSpark rounds of γ block rows (numbered over all rounds): the rounds this rank owns; no
  // split chunks.
  void plan_dspark(std::span<const DsparkRound> rounds, int gamma);

  // Context-parallel prefill: every TP rank's slices of the split chunks of the normed rows a
  // [own rows, D] all-gathered into a_kv, laid out as the cache rows.
  Status gather_cp_rows(const bf16* a, int64_t D);
  // The split chunks' DSpark features feat [own rows, F] all-gathered into features_out at
  // their step rows.
  Status gather_cp_features(std::span<const StepRequest> reqs, const bf16* feat, int64_t F, bf16* features_out);
  // Own rows [T, width] of src to their step rows of dst; the own rows of step rows X to stage.
  void scatter_own_rows(const bf16* src, int64_t width, int64_t T, bf16* dst) const;
  const bf16* gather_own_rows(const bf16* X, int64_t width, int64_t T);
  // The logits row of each own row (−1: not written) for the head rows listed (ascending
  // step rows; nullptr: every own row at its step row).
  const int32_t* head_out_rows(const int32_t* rows, int64_t n, int64_t T);

  ModelRunner::SeamBytes seam_bytes() const;
  ModelRunner::SeamTimes seam_times() const;
  void reset_seam_bytes();

  RankGroups* g = nullptr;
  std::vector<OutProjShard> out_proj;    // per layer (main, then MTP or DSpark) when tp > 1
  std::unique_ptr<AttnOutputSeam> attn;  // tp > 1
  std::unique_ptr<MoeSeam> moe;          // ep > 1
  std::unique_ptr<HeadSeam> head;
  std::vector<int32_t> own_row;          // [T_MAX] step row of own row t
  std::vector<int64_t> tp_rows;          // [tp] rows of each TP rank of the group
  bool has_cp = false;                   // the group has split chunks this step
  StepMetadata md_kv;                    // the cache rows
  std::vector<bf16> a_kv;                // [T_MAX, D] normed inputs of the cache rows

 private:
  RankRows(const StepCapacity& cap, const Limits& limits) : md_kv(cap), limits_(limits) {}
  // Own requests not split, then this rank's shares of the group's split chunks.
  int32_t plan_unsplit(std::span<const StepRequest> reqs);
  void plan_split(std::span<const StepRequest> reqs, int32_t local);
  void start_gather_cursors();  // each TP rank's first gathered row

  std::vector<StepRequest> own_;         // [B_MAX] the requests this rank owns, in step order
  std::vector<StepRequest> cache_;       // [B_MAX] the cache-row requests
  std::vector<bf16> stage_;              // [T_MAX, N·D] own rows of an MTP input
  int64_t n_unsplit_ = 0;                // computed rows of unsplit requests (they come first)
  std::vector<int64_t> cp_rows_;         // [tp] split-chunk rows each TP rank computes
  std::vector<int64_t> gather_cursor_;   // [tp] each TP rank's next row in a gathered buffer
  std::vector<int32_t> cp_chunks_;       // [B_MAX] rows of each split chunk, in step order
  std::vector<bf16> gathered_;           // [T_MAX, D]
  std::vector<bf16> feat_gathered_;      // [T_MAX, |Lt|·D] split chunks' DSpark features
  // Head rows: logits row of each step row (−1: not listed), then of each own row.
  std::vector<int32_t> head_of_step_, head_out_row_;  // [T_MAX]
  int64_t cp_gather_bytes_ = 0;
  Limits limits_;  // own_ and cache_ hold this rank's local slots (Limits::local_slot)
};

}  // namespace dsv4
