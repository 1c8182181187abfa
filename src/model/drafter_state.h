// The DSpark drafter's state (dspark.md §3, Level A §3.10), apart from the forward math
// ModelRunner runs on it: per sequence slot and stage a ring of W context rows (slot p mod W,
// packed like the window KV) and the position each ring slot holds; the checks and row
// layouts of a commit and of a propose round; the block attention's key lists (ring rows in
// ring-slot order, then the round's γ block keys); the Markov chain over the head's logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "cache/step_metadata.h"
#include "kernels/sample/sample.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "model/decisions.h"
#include "model/limits.h"
#include "numeric/bf16.h"
#include "numeric/cache_rows.h"
#include "numeric/paged_rows.h"

namespace dsv4 {

class SequenceState;

// Target features of positions p0 .. p0+n-1 of a slot, committed to its rings by its owner.
struct DsparkCommit {
  int32_t seq = -1;
  int64_t p0 = 0;
  int32_t n = 0;
  const bf16* features = nullptr;  // [n, |Lt|·D]
  int32_t owner = 0;
};

// One propose round: γ block rows after the anchor (token x0 at anchor + 1, then noise tokens).
struct DsparkRound {
  int32_t seq = -1;
  int64_t anchor = 0;
  int32_t x0 = 0;
  int32_t owner = 0;
  // Temperature > 0: d_k is the model.md §10.2 draw from λ_{k−1} at position anchor + 1 + k,
  // draft slot 1 (dspark.md §4.3 mode rejection); 0: the argmax chain.
  kernels::SamplingParams sample{};
};

class DrafterState {
 public:
  struct Dims {
    int n_stages = 0;        // NS
    int64_t features = 0;    // F = |Lt|·D
    int64_t hidden = 0;      // D
    int64_t window = 0;      // W (sliding_window): ring rows per stage
    KvRowFormat kv{};        // packed ring and key rows
    int64_t markov_rank = 0;  // Rm
    int64_t vocab = 0;       // V
    int32_t noise_token = 0;
  };
  DrafterState(const Dims& dims, const Limits& limits, int n_threads);

  const Dims& dims() const { return dims_; }

  // A started slot holds no context row.
  void reset(int32_t seq);
  // A fork (ModelRunner::fork_sequence): slot `to` holds a copy of slot `from`'s rings.
  void copy_slot(int32_t from, int32_t to);
  // Whether position p's context row is in the slot's rings.
  bool holds(int32_t seq, int64_t p) const { return ring_pos_[ring_index(seq, p)] == p; }

  // Commit, this rank's part (owner == me): checks each commit against its slot (active, not
  // below its floor, max_rows in all) and gathers positions into pos and features into
  // feat; returns the rows gathered. Errors name the commit.
  Result<int64_t> gather_commits(std::span<const DsparkCommit> commits, int me, const SequenceState& seqs);
  // Packs stage `stage`'s key rows kv [rows, Dh] (gather_commits' order) into the ring slots.
  void write_ring_rows(std::span<const DsparkCommit> commits, int me, int stage, const bf16* kv, int64_t Dh);
  // Records the committed positions (after every stage's rows are written).
  void mark_committed(std::span<const DsparkCommit> commits, int me);

  // Propose: checks every round (world: ranks of the job, 0 on one rank) and that this rank's
  // rounds have their context committed; returns how many rounds are this rank's (own_round).
  Result<int64_t> check_rounds(std::span<const DsparkRound> rounds, int gamma, int me, int world,
                               const SequenceState& seqs);
  // The own rounds' block rows (§3.4) as a step's rows: round k's γ rows at anchor + 1 ...
  void plan_block_rows(std::span<const DsparkRound> rounds, int64_t n_own, int gamma, StepMetadata& md) const;
  // Stage `stage`'s key lists over md's block rows (kv [T, Dh] the block keys): per round its
  // n_c = min(W, anchor + 1) ring rows in ring-slot order, then its γ block keys, every block
  // row reading the whole list.
  void build_key_lists(const StepMetadata& md, int gamma, int stage, const bf16* kv, int64_t Dh);
  kernels::AttnList key_list() const;
  kernels::PackedAttnKeys keys() const;

  // The Markov chain (§3.8, A20) over the own rounds, block row by block row: λ += β(prev)
  // (w1, w2 [V, Rm]), the draft the argmax of λ or its draw at temperature > 0, forced and
  // logged by dec. lambda [B·γ, V] holds the head's logits of the own rounds' rows.
  void markov_chain(ThreadPool& pool, const bf16* w1, const bf16* w2, std::span<const DsparkRound> rounds,
                    int64_t n_own, int gamma, float* lambda, int32_t* drafts, const DecisionIO& dec);

  // Commit buffers (ModelRunner::dspark_commit): [T, F] gathered and actq'd features,
  // [T, D] context rows, [T] positions.
  std::vector<bf16> feat, feat_q, main_x;
  std::vector<int64_t> pos;

 private:
  // A job slot of this rank as its index in the rings (Limits::local_slot).
  int32_t local(int32_t seq) const { return limits_.local_slot(seq); }
  size_t ring_index(int32_t seq, int64_t p) const { return static_cast<size_t>(seq * dims_.window + p % dims_.window); }
  uint8_t* ring_row(int32_t seq, int stage, int64_t slot) {
    return rings_.data() + ((static_cast<int64_t>(seq) * dims_.n_stages + stage) * dims_.window + slot) * row_bytes_;
  }

  Dims dims_;
  Limits limits_;
  int64_t row_bytes_ = 0;
  int64_t list_stride_ = 0;                   // W + kMaxDsparkGamma
  std::vector<uint8_t> rings_;                // [max_seqs, NS, W, row bytes]
  std::vector<int64_t> ring_pos_;             // [max_seqs, W] position held by each slot (-1: none)
  std::vector<uint8_t> key_rows_;             // [B_MAX, list_stride, row bytes] per-round key lists
  std::vector<int32_t> list_, len_;           // [T, list_stride], [T]
  std::vector<PagedBytes> rows_;              // [T]
  std::vector<bf16> markov_rows_;             // [B_MAX, Rm]
  std::vector<float> beta_;                   // [B_MAX, V]
  std::vector<int32_t> prev_;                 // [B_MAX] the previous draft of each own round
  std::vector<int32_t> own_round_;            // [B_MAX] index of each own round (all rounds on one rank)
  std::vector<uint64_t> sample_scratch_;      // drafts drawn at T > 0: sample_scratch_bytes(V, threads)
};

}  // namespace dsv4
