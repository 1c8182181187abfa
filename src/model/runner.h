// ModelRunner: the Level-A forward of DeepSeek-V4 over one step of T rows from
// B requests (model.md §2, §12; runtime.md §1-§2), with paged caches and one
// plan: every scratch buffer and cache pool is sized once from Limits at
// construction; a step allocates nothing and runs any B in [0, B_MAX].
//
//   forward(reqs):  embed -> L blocks -> Xfinal -> hc_head -> norm -> head
//   forward_mtp(reqs, X): mtp_proj(embed(t_{p+1}), Xfinal_p) -> MTP block ->
//                   MTP hc_head -> MTP norm -> head
// Each request contributes n rows at positions p0 .. p0+n-1 (a prompt chunk or
// 1 + drafts); prefill and decode are the same call. Caches are written by
// absolute position, so rows later rejected by verification need no rollback
// (runtime.md §3.1): window and compressor-state rings span the rows the next step
// reads after any partial acceptance (runtime.md §2.1, §2.5).
// The runner computes the rows; its other state is in units of its own: the sequence slots,
// block tables, rollback bounds and prefix cache (model/sequence_state.h), the DSpark
// drafter's rings (model/drafter_state.h), the rows of several ranks and their seams
// (model/rank_rows.h), the per-layer caches and step scratch (runner_state.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "cache/cache_group.h"
#include "cache/prefix_cache.h"
#include "cache/step_metadata.h"
#include "kernels/compressor/compressor.h"
#include "kernels/sample/sample.h"
#include "model/config.h"
#include "model/decisions.h"
#include "model/drafter_state.h"
#include "model/limits.h"
#include "model/sequence_state.h"
#include "model/weights.h"
#include "numeric/bf16.h"
#include "numeric/cache_rows.h"
#include "numeric/paged_rows.h"
#include "parallel/rank_groups.h"
#include "parallel/seam_time.h"

namespace dsv4 {

// Limits the model constrains: max_context <= max_position_embeddings, page_tokens a
// multiple of every compress ratio. Errors name the limit.
Status validate_limits_for_model(const Limits& l, const ModelConfig& cfg);

// The rows of a step whose logits are computed (the LM head runs on these rows only): step
// rows in strictly ascending order; logits row i holds step row rows[i]. rows == nullptr:
// every row, logits row t = step row t (teacher-forced logits). Each computed row's logits
// equal the all-rows call's bit for bit (every head kernel is row-invariant).
struct HeadRows {
  const int32_t* rows = nullptr;
  int64_t n = 0;
};

namespace kernels {
struct AttnList;
struct HcParams;
struct IndexerParams;
struct OutProjParams;
struct PackedAttnKeys;
}  // namespace kernels
class CacheStorage;
class RankRows;
struct CompressorSlot;
struct LayerCaches;
struct StepScratch;

class ModelRunner {
 public:
  // ranks: the job's communicators when several ranks share each step (runtime.md §6):
  // every rank computes only the rows of the requests it owns (StepRequest::owner); the
  // output projection, the routed experts and the LM head are sharded over the ranks
  // (parallel/*_seam.h). nullptr: one rank.
  //
  // Sequence slots are the job's: rank r holds slots [r·max_seqs, (r+1)·max_seqs), each with
  // cache storage on r only (Limits::max_seqs and cache_blocks are per rank). Every rank keeps
  // a ledger of every rank's slots, block tables and prefix index (SequenceState), identical
  // on all ranks since every rank sees the same calls; only its own ledger has storage.
  static Result<std::unique_ptr<ModelRunner>> create(const ModelConfig& cfg, const Weights& w,
                                                     const Limits& limits, RankGroups* ranks = nullptr);
  ~ModelRunner();

  const ModelConfig& config() const { return cfg_; }
  const Limits& limits() const { return limits_; }

  // Sequence slots: start resets the compressor states and allocates the
  // window rings; end frees every page of the slot. A started slot's first rows
  // are at p0 = 0; later steps continue at p0 in [L − (S_MAX − 1), L], L the
  // positions already cached (a p0 < L rolls back rejected draft rows).
  // The slot's rank (Limits::slot_rank) holds its caches; its prefix chains are that rank's,
  // in the namespace `salt` (GenerationRequest::cache_salt; blocks it registers go there too).
  Status start_sequence(int32_t seq, std::string_view salt = {});
  void end_sequence(int32_t seq);
  bool active(int32_t seq) const;
  // Several choices of one prompt (runtime/scheduler.h): starts slot `child` as a copy of slot
  // `parent`, which holds positions [0, end): the window rings, compressor states and DSpark
  // rings copied, the compressed-cache pages of whole blocks before end shared by reference,
  // the rows of the block holding end copied to a new page. The child continues at p0 = end
  // and computes exactly what the parent would. With ranks every rank forks alike (the
  // bookkeeping is replicated; only the owner's copied rows are ever read).
  Status fork_sequence(int32_t parent, int32_t child, int64_t end);

  // Prefix caching (runtime.md §7.1; Limits::prefix_blocks > 0). start_sequence_cached
  // starts a slot for a prompt and reuses the longest chain of cached blocks that prefixes
  // it (same tokens, same Wc = min(prompt_len, W)): their compressed-cache pages join the
  // slot's table (shared, never written), the window-KV rows before the cut are copied in,
  // and the returned position p = cut − 4 is where the caller starts feeding the prompt
  // (0 without a hit): the last 4 positions before the cut are recomputed so that the
  // ratio-4 compressor states hold them (the states are never snapshotted); their
  // compressed entries are not written again. Results equal a cold run bit for bit.
  // need_mtp: the caller runs the MTP layer, so blocks must carry its window rows. With ranks
  // a cached block's rows live on the owner that computed it: a sequence hits only its owner's
  // blocks (cached_prefix_blocks counts them, for the choice of owner).
  // salt: the prefix cache's namespace (chains of other salts are never hit).
  Result<int64_t> start_sequence_cached(int32_t seq, const int32_t* prompt, int64_t prompt_len, bool need_mtp,
                                        std::string_view salt);
  int64_t cached_prefix_blocks(int32_t owner, const int32_t* prompt, int64_t prompt_len, bool need_mtp,
                               std::string_view salt) const;
  // Registers the blocks of the slot's prompt that are complete in the caches (main and,
  // when need_mtp, MTP layer) and not registered yet. Call after each step of a prompt;
  // blocks whose window rows already left the ring are skipped (the chain stops there).
  void register_prefix(int32_t seq, const int32_t* prompt, int64_t prompt_len, bool need_mtp);
  int32_t prefix_entries() const;  // this rank's

  // Main model over one step. logits [T, V] for every row, or [head.n, V] for the rows head
  // lists (nullptr: none);
  // xfinal_out [T, N, D] bf16 copy of the final HC stack (nullptr: none). With ranks, every
  // rank passes the whole step; only the rows of its own requests are computed and written
  // (rows are numbered over the whole step). A request with StepRequest::cp (context-parallel
  // prefill, runtime.md §6.8) is split over its owner's TP group: TP rank j computes rows
  // share_of(n, j, tp) and every rank of the group writes the whole chunk to its caches (the
  // normed rows are all-gathered per layer) in its slot StepRequest::cp_slots[j], so each keeps
  // the request's caches while its prompt is prefilled that way; all its prompt chunks must be
  // split, its decode rows not.
  // dec.forced replaces the decisions it lists (keyed by sequence slot and position);
  // dec.log receives every decision the step used, forced or not, in execution order.
  // head: the rows whose logits are written (HeadRows; with ranks, a listed row this rank does
  // not compute is left unwritten).
  // features_out (a DSpark checkpoint; nullptr: none): the target features H(p) [T, |Lt|·D]
  // of every row (dspark.md §2, A17), written like xfinal_out.
  Status forward(std::span<const StepRequest> reqs, float* logits, bf16* xfinal_out,
                 const DecisionIO& dec = {}, HeadRows head = {}, bf16* features_out = nullptr);
  // MTP layer: request r's rows are positions p0..p0+n-1 with tokens = the
  // NEXT tokens t_{p+1}; X [T, N, D] holds Xfinal_p of every row (with ranks: of the own rows).
  Status forward_mtp(std::span<const StepRequest> reqs, const bf16* X, float* logits,
                     const DecisionIO& dec = {}, HeadRows head = {});

  // The DSpark drafter (dspark.md §3, Level A §3.10) on the runner's pool and kernels; one
  // prepared program for any number of requests, one rank or several (below). Per sequence
  // slot and stage a ring of W context rows, slot p mod W, packed like the window KV.
  // dspark_commit: per listed slot the target features [n, |Lt|·D] (rows of
  //   ModelRunner::forward's features_out) of positions p0 .. p0+n-1 -> main_proj, main_norm,
  //   each stage's key path -> the rings, all slots in one pass. Commits never go below the
  //   slot's start.
  // dspark_propose: one round per listed slot, γ block rows each (anchor token x0 at anchor+1,
  //   then the noise token): the stages with the non-causal block attention over [ring rows in
  //   ring-slot order, block keys], the drafter head, the Markov chain. lambda [B·γ, V] (the
  //   corrected logits λ, also the base-logit scratch), drafts [B·γ]. Every context position
  //   max(0, anchor-W+1) .. anchor must have been committed (else an error naming it). B·γ <=
  //   max_rows, γ <= kMaxDsparkGamma. Allocates nothing.
  // With ranks every rank passes every commit and round: a slot's rings live on its owner
  // (StepRequest::owner), which commits and proposes for it; the stage blocks and the head run
  // through the seams as the target's do, so every rank joins each propose call. Row r·γ + i
  // of lambda / drafts is written on round r's owner only.
  using DsparkCommit = dsv4::DsparkCommit;  // model/drafter_state.h
  using DsparkRound = dsv4::DsparkRound;
  Status dspark_commit(std::span<const DsparkCommit> commits);
  // The first position a slot's rings can hold: its start (0, or a prefix hit's first fed
  // position, runtime.md §7.1). A round at anchor a needs max(0, a − W + 1) at or above it, so
  // after a hit proposals wait until W rows are committed (dspark.md §4.9).
  int64_t dspark_context_start(int32_t seq) const { return ledger(seq).floor(local_slot(seq)); }
  // dec: the drafter's decisions (decisions.h, block "dspark"): the stages' routed experts and
  // the drafts, forced (a forced draft continues the Markov chain) and logged.
  Status dspark_propose(std::span<const DsparkRound> rounds, int gamma, float* lambda, int32_t* drafts,
                        const DecisionIO& dec = {});

  // Cache demand, for the scheduler: compressed-cache blocks (page_tokens positions each,
  // one page in every compressed family) a sequence needs in addition to hold positions
  // [0, end) (a new sequence: seq = -1), the blocks free now on a rank and in all (per rank).
  int64_t blocks_short(int32_t seq, int64_t end) const;
  int64_t free_blocks(int32_t rank = 0) const;
  // Takes the blocks a started sequence needs for positions [0, end) now (admission
  // reserves a prompt's blocks so that later admissions see them taken).
  Status reserve_blocks(int32_t seq, int64_t end);
  int64_t total_blocks() const;
  // Bytes of cache storage reserved (address space) and resident now, all layers.
  struct CacheMemory {
    int64_t reserved = 0, resident = 0;
  };
  CacheMemory cache_memory() const;

  int64_t vocab_size() const { return cfg_.vocab_size; }
  // With ranks: the world rank, and the collective bytes this rank sent per seam since the
  // last reset (the deployment plan's quantities).
  int world_rank() const { return rank_; }
  int32_t job_slots() const { return limits_.max_seqs * world_; }  // sequence slots of all ranks
  struct SeamBytes {
    int64_t attn_a2a = 0, o_reduce = 0, moe_counts = 0, moe_dispatch = 0, moe_combine = 0, head_gather = 0,
            head_logits = 0;
    int64_t cp_gather = 0;  // context-parallel prefill: normed rows of split chunks (runtime.md §6.8)
    // Bytes the attention-output and MoE seams memcpy'd into send layouts: the MoE dispatch and
    // combine packs (parallel/moe_seam.h); the attention output seam sends from its producers'
    // layouts (attn_output_seam.h).
    int64_t copied = 0;
  };
  SeamBytes seam_bytes() const;
  // Wall time per seam since the last reset_seam_bytes (parallel/seam_time.h).
  struct SeamTimes {
    SeamTime attn, moe, head;
  };
  SeamTimes seam_times() const;
  void reset_seam_bytes();  // and the times
  int64_t stream_width() const { return cfg_.hc_mult * cfg_.hidden_size; }  // N·D
  // The runner's workers, for per-row work after the forward (sampling); run() calls counted.
  ThreadPool& pool() { return pool_; }

 private:
  ModelRunner(const ModelConfig& cfg, const Weights& w, const Limits& limits, int world, int rank);
  Status init();
  Status init_layers();
  Status init_ranks(RankGroups* ranks);
  Status prepare_step(std::span<const StepRequest> reqs, bool mtp);
  // A job slot's ledger and its slot there.
  SequenceState& ledger(int32_t seq) const { return *ledgers_[static_cast<size_t>(limits_.slot_rank(seq))]; }
  int32_t local_slot(int32_t seq) const { return limits_.local_slot(seq); }
  bool own_slot(int32_t seq) const { return limits_.slot_rank(seq) == rank_; }
  Status check_slot(int32_t seq) const;  // inside [0, job_slots())
  // The step's requests per ledger, in its local slots (a split chunk once per TP rank).
  Status route_to_ledgers(std::span<const StepRequest> reqs);
  Status check_head_rows(std::span<const StepRequest> reqs, HeadRows head) const;
  // Stages of forward: the final stack and the DSpark features out (with ranks: own rows to
  // their step rows).
  Status write_forward_outputs(std::span<const StepRequest> reqs, const bf16* feat, int64_t F, bf16* features_out,
                               bf16* xfinal_out);
  // dspark_gamma > 0: a DSpark stage over blocks of that many rows (run_dspark_attention).
  Status run_block(const LayerWeights& lw, LayerCaches& lc, bool mtp_block, bf16* X, const DecisionIO& dec,
                   int dspark_gamma = 0);
  // The attention sub-block (runner_attention.cc lists its runs). attention_actq: its run A,
  // inside hc_pre's apply run.
  struct AttnArgs;
  AttnArgs attn_args(const LayerWeights& lw, const LayerCaches& lc);
  void attention_actq(const LayerWeights& lw, const LayerCaches& lc, int tid, int n);
  // X: the stream hc_post adds the attention output to (out_proj_posts: in wo_b's run).
  Status run_attention(const LayerWeights& lw, LayerCaches& lc, bool mtp_block, const DecisionIO& dec, bf16* X);
  void run_projections(const LayerWeights& lw, const AttnArgs& x, LayerCaches& lc);
  void pack_entries(const CompressorSlot& slot, const CacheStorage& cache, int32_t page_rows, int64_t width,
                    const kernels::CompressorEmit* emits, const bf16* entries, const StepMetadata& rows);
  void build_cache_views(const LayerWeights& lw, const LayerCaches& lc);
  // CSA; merge_in_select: the top-k merge is left to run_sparse_attention's first run.
  void run_indexer(const LayerWeights& lw, bool mtp_block, const DecisionIO& dec, bool merge_in_select);
  void run_sparse_attention(const LayerWeights& lw, const AttnArgs& x, bool merge_in_select);
  void run_attention_kernel(const LayerWeights& lw, const AttnArgs& x, const kernels::AttnList& list,
                            const kernels::PackedAttnKeys& keys);
  kernels::IndexerParams indexer_params() const;
  kernels::OutProjParams out_proj_params() const;
  // derotated: out_proj's phase 0 already ran (with the attention kernel).
  Status run_out_proj(const LayerWeights& lw, LayerCaches& lc, bool derotated, bf16* X);
  // Whether wo_b (one rank, or no TP seam) and the routed experts' down projection (no EP seam)
  // run with the sub-block's hc_post, each thread on its own hidden columns.
  bool out_proj_posts() const;
  bool moe_posts() const;
  static constexpr int64_t kColumnAlign = 64;  // hidden columns per unit of that split
  kernels::HcParams hc_params() const;
  // dspark_gamma > 0: a DSpark stage, its decisions keyed by (stage, anchor, block row).
  // X: the stream hc_post adds the MoE output to (moe_posts: in the down projection's run).
  Status run_moe(const LayerWeights& lw, const LayerCaches& lc, bool mtp_block, const DecisionIO& dec,
                 int dspark_gamma, bf16* X);
  // The MoE sub-block's inputs: ffn_norm output a [T, D], router ids [T, K] and weights [T, K]
  // (the step scratch, or an EP seam's batch).
  struct MoeRows {
    bf16* a;
    int32_t* ids;
    float* route_w;
  };
  MoeRows moe_rows();
  Status run_moe_seam(const LayerCaches& lc);
  Status run_head(const HcParams& hc, const bf16* norm, bf16* X, float* logits, HeadRows head);
  // DSpark (runner_dspark.cc).
  Status dspark_init();
  Status run_dspark_attention(const LayerWeights& lw, LayerCaches& lc, int gamma, bf16* X);

  const ModelConfig& cfg_;
  const Weights& w_;
  Limits limits_;
  ThreadPool pool_;
  int world_ = 1, rank_ = 0;
  // Per rank: slots, block tables, rollback bounds, prefix cache; seqs_ is this rank's (the
  // step metadata's row_seq are its local slots).
  std::vector<std::unique_ptr<SequenceState>> ledgers_;
  SequenceState* seqs_ = nullptr;
  std::vector<std::vector<StepRequest>> ledger_reqs_;  // [world][B_MAX] route_to_ledgers
  std::vector<std::unique_ptr<LayerCaches>> layers_;  // main layers, then MTP layers
  std::unique_ptr<StepScratch> scratch_;
  std::unique_ptr<RankRows> ranks_;  // several ranks (model/rank_rows.h); nullptr: one rank
  StepMetadata step_meta_;           // the rows this rank computes in the current call
  std::unique_ptr<DrafterState> drafter_;                    // a DSpark checkpoint's drafter
  std::vector<std::unique_ptr<LayerCaches>> dspark_layers_;  // per stage: expert views, main RoPE
  std::vector<float> inv_main_, inv_compress_;               // RoPE tables of both profiles
  KvRowFormat kv_format_;      // window and compressed KV rows
  IndexKeyFormat idx_format_;  // indexer keys
  int32_t idx_page_rows_ = 0;  // indexer-key rows per block: page_tokens / 4
};

}  // namespace dsv4
