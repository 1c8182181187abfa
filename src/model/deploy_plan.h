// Deployment on paper: for a dp × tp deployment with the routed experts over ep ranks
// (runtime.md §6.1), per rank the resident weights (model/placement.h), the caches of the
// sequences it owns (model/cache_bytes.h), and the bytes each collective of one decode step
// sends to other ranks (§6.5–§6.10); per host the sum of its ranks and the bytes it sends to
// other hosts; the largest batch × context that fits; the projected decode step ("the whole
// plan" below).
//
// Notation: a TP group of G ranks, rank r holding t_r rows of the step, group_t = Σ_q t_q;
// H = num_attention_heads, Dh = head_dim, G_o = o_groups, D = hidden_size, V = vocab_size,
// K = num_experts_per_tok, E = n_routed_experts over an EP group of P ranks (expert x on EP
// rank x / (E/P)). Bytes rank r sends to other ranks (never to itself), per block forward:
//   attn_a2a(r)     = t_r · (G−1)/G · H · Dh · 2          bf16 head groups to their O-A rank
//   o_reduce(r)     = (group_t − t_r) · (G_o/G) · D · 4   fp32 per-group partials to the owners
//   moe_counts(r)   = (P−1) · 16                          two int64 per peer: rows, routes
//   moe_dispatch(r) = Σ_{d≠r} rows_{r→d} · (D·2 + K·8)    a row once per destination rank:
//                                                         bf16 row, K int32 ids, K fp32 weights
//   moe_combine(r)  = Σ_{d≠r} routes_{d→r} · D · 2        each expert output row back to its owner
// and per LM head run:
//   head_gather(r)  = t_r · D · 2 · (G−1)                 all-gather of the final normed rows
//   head_logits(r)  = (group_t − t_r) · (V/G) · 4         vocab-shard logits to the row owners
// rows_{r→d}: rank r's rows with at least one route to an expert of rank d; routes_{d→r}:
// distinct (row, expert) routes of rank d's rows to experts of rank r. Hash-routed layers
// count like score-routed ones (a hash row repeating an id routes to that expert once).
//
// A decode step: each DP group runs B requests, spread over its G ranks in contiguous shares
// (rank r owns share_of(B, r, G) of them); each request has 1 row, or with MTP 2 rows
// (anchor + draft) in the main forward and 1 row in the MTP forward. Per step:
// num_hidden_layers main block forwards and 1 LM head run; with MTP also 1 MTP block forward
// and 1 MTP head run.
//
// The MoE terms depend on routing; planned steps give two figures:
//   kUniform  each row's K distinct experts uniformly random among E: a row touches a given
//             other rank with P(touch) = 1 − C(E − E/P, K) / C(E, K) and sends it K/P routes
//             on average (expectation, rounded to whole bytes per forward);
//   kWorst    every route remote: each row touches min(K, P−1) other ranks and its K routes
//             are spread evenly over the P−1 peers (the most bytes in total; skewed routing
//             can still load one rank more).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/bench_fractions.h"
#include "model/config.h"
#include "model/placement.h"
#include "parallel/moe_routing.h"
#include "parallel/topology.h"

namespace dsv4 {

// --- one seam each, over the step's row counts -------------------------------------------
// rows: [G] rows of each rank of the TP group; r: the sending rank's index in it.
int64_t attn_a2a_bytes(const ModelConfig& cfg, std::span<const int64_t> rows, int r);
int64_t o_reduce_bytes(const ModelConfig& cfg, std::span<const int64_t> rows, int r);
int64_t head_gather_bytes(const ModelConfig& cfg, std::span<const int64_t> rows, int r);
int64_t head_logits_bytes(const ModelConfig& cfg, std::span<const int64_t> rows, int r);
int64_t moe_counts_bytes(int ep);

// Counts of the expert ids expert_ids [T, K] (ids in [0, n_experts)) over ep ranks.
MoeRouting count_routing(std::span<const int32_t> expert_ids, int n_experts_per_tok, int n_experts, int ep);
// routing: this rank's counts; r: its EP rank.
int64_t moe_dispatch_bytes(const ModelConfig& cfg, const MoeRouting& routing, int r);
// group: [P] the counts of every rank of the EP group; r: the sending EP rank.
int64_t moe_combine_bytes(const ModelConfig& cfg, std::span<const MoeRouting> group, int r);

// --- planned MoE traffic ------------------------------------------------------------------
enum class RoutingCase { kUniform, kWorst };
// P(a row touches a given other rank of P) for K distinct experts uniform among E.
double touch_probability(int n_experts, int ep, int n_experts_per_tok);
// ep_rows: [P] rows of every rank of the EP group; r: the sending EP rank.
int64_t moe_dispatch_bytes(const ModelConfig& cfg, std::span<const int64_t> ep_rows, int r, RoutingCase c);
int64_t moe_combine_bytes(const ModelConfig& cfg, std::span<const int64_t> ep_rows, int r, RoutingCase c);

// --- one rank's step ----------------------------------------------------------------------
struct StepCollectiveBytes {
  int64_t attn_a2a = 0, o_reduce = 0, moe_counts = 0, moe_dispatch = 0, moe_combine = 0;
  int64_t head_gather = 0, head_logits = 0;
  int64_t total() const;
  StepCollectiveBytes& operator+=(const StepCollectiveBytes& o);
  bool operator==(const StepCollectiveBytes&) const = default;
};
StepCollectiveBytes operator*(int64_t n, const StepCollectiveBytes& b);

// One block forward of rank t.rank: tp_rows [tp] rows of its TP group's ranks, ep_rows [ep]
// rows of its EP group's ranks. Attention terms need tp > 1, MoE terms ep > 1.
StepCollectiveBytes block_collective_bytes(const ModelConfig& cfg, const Topology& t,
                                           std::span<const int64_t> tp_rows, std::span<const int64_t> ep_rows,
                                           RoutingCase c);
// One LM head run of rank t.rank over tp_rows.
StepCollectiveBytes head_collective_bytes(const ModelConfig& cfg, const Topology& t,
                                          std::span<const int64_t> tp_rows);

// --- caches -------------------------------------------------------------------------------
// Cache bytes of one sequence of `context` positions (packed storage): every growing family
// holds floor(context / ratio) rows per layer; every ring family (window KV, compressor
// states) is counted at sliding_window rows. (The engine's rings span W − 1 + R_MAX window
// positions and κr − 1 + S_MAX state positions, κr = 8 for CSA, 128 for HCA: this plan is
// a few rows short for the window and HCA states and generous for the CSA states.)
struct SequenceCacheBytes {
  int64_t growing = 0, ring = 0;
  int64_t total() const { return growing + ring; }
};
SequenceCacheBytes sequence_cache_bytes(const ModelConfig& cfg, int64_t context);

// --- what a decode step reads -------------------------------------------------------------
// Weight bytes a rank reads in one decode step, by how they scale: `owned` (the replicated
// weights but the embedding table: attention, compressors, indexer, gate, shared expert,
// norms, hc) is applied to the rank's own rows and read when it has any; `sharded` (its
// wo_a / wo_b / LM head shards) is applied to its TP group's rows and read when the group
// has any; `embed_row` is read once per own row; the routed experts held by the fraction a
// step hits. The draft block (layers past num_hidden_layers) is read only with --mtp.
struct RankReadWeights {
  int64_t owned = 0, sharded = 0, embed_row = 0, experts = 0;
  int64_t draft_owned = 0, draft_sharded = 0, draft_experts = 0;
};
RankReadWeights rank_read_weights(const ModelConfig& cfg, const Topology& t);
// Expected fraction of the routed experts that T rows hit, each picking K of E uniformly:
// 1 − (1 − K/E)^T.
double experts_hit_fraction(const ModelConfig& cfg, int64_t rows);
// Cache bytes one request's decode row reads at `context` positions, per layer: min(C, W)
// window rows, CSA min(floor(C/4), index_topk) KV rows and floor(C/4) indexer keys, HCA
// floor(C/ratio) KV rows (as bench/roofline.h counts them); the draft block's window only
// with mtp. Compressor states (written each step, read back once per compressed row) are
// not counted.
int64_t cache_read_bytes(const ModelConfig& cfg, int64_t context, bool mtp);

// --- the whole plan -----------------------------------------------------------------------
// Hosts: the world's ranks fill `hosts` hosts in rank order, world / hosts ranks each (hosts
// must divide the world); a host holds the sum of its ranks' weights and caches. Collectives
// between ranks of one host go through shared memory and count as free; bytes sent to ranks
// on other hosts cross the interconnect. A seam sized by the sender (attn_a2a, head_gather,
// moe_counts, moe_dispatch) splits evenly over its group's peers, one sized by the receiver's
// rows (o_reduce, head_logits, moe_combine) in proportion to those rows.
//
// Decode projection at B requests per DP group, 1 token per request per step (with --mtp
// each accepted draft adds one), memory-bound; every host waits for the slowest at the
// collectives:
//   t_step = max over hosts h of  read_h / (bandwidth · f(B)) + sent_h / interconnect
//   read_h = Σ_{ranks r on h} [T_r > 0] owned_r + [T_tp > 0] sharded_r + embed_row_r · T_r
//            + experts_r · hit(T_ep) + requests_r · cache_read(C)
//   (T_r: r's rows, T_tp: its TP group's, T_ep: its EP group's; the draft block likewise)
//   sent_h = Σ_{ranks r on h} bytes r sends to other hosts (uniform routing)
//   tokens/s per request = 1 / t_step;  in all = dp · B / t_step
// f(B) = 1, or with --bench the measured bandwidth fraction at the nearest benchmarked B
// (model/bench_fractions.h). Collective latency is not counted.
struct PlanOptions {
  int tp = 1, dp = 1, ep = 0;   // ep 0: the world (dp · tp)
  int64_t batch = 1;            // requests per DP group per step
  int64_t context = 0;          // positions per sequence
  bool mtp = false;
  int hosts = 1;
  double mem_per_host_gib = 256;
  double bandwidth_gbps = 200;     // memory read bandwidth per host, GB/s
  double interconnect_gbps = 25;   // bytes a host sends to other hosts, GB/s
  std::optional<BenchFractions> bench;
};

struct RankPlan {
  int rank = 0;
  int64_t requests = 0, rows = 0;  // owned requests; rows in the main forward
  RankWeights weights;
  int64_t cache_bytes = 0;         // requests · SequenceCacheBytes::total()
  StepCollectiveBytes uniform, worst;
  int64_t resident() const { return weights.total() + cache_bytes; }
};

struct HostPlan {
  int host = 0, first_rank = 0, n_ranks = 0;
  int64_t weights = 0, caches = 0;  // Σ over its ranks
  double sent_uniform = 0, sent_worst = 0;  // collective bytes per step to other hosts
  int64_t resident() const { return weights + caches; }
};

struct DecodeProjection {
  int64_t batch = 0;        // requests per DP group
  int host = 0;             // the slowest host
  double read_bytes = 0, sent_bytes = 0;  // the slowest host's
  double memory_s = 0, network_s = 0;     // read / bandwidth, sent / interconnect
  double fraction = 1;
  int64_t bench_batch = 0;  // the benchmarked B whose fraction applies (0: none)
  double step_s() const { return memory_s / fraction + network_s; }
};

struct DeployPlan {
  Topology topology;  // rank 0's; the world, tp, dp, ep
  PlanOptions options;
  SequenceCacheBytes sequence;
  int block_forwards = 0, head_runs = 0;  // per step
  std::vector<RankPlan> ranks;            // [world]
  std::vector<HostPlan> hosts;            // [hosts]
  // Largest requests per DP group at options.context, and largest context at options.batch,
  // with every host within mem_per_host_gib (0: not even 1).
  int64_t max_batch = 0, max_context = 0;
  std::vector<DecodeProjection> projections;  // at kProjectedBatches
};

inline constexpr int64_t kProjectedBatches[] = {1, 8, 64};

// Checks the options (batch, context against max_position_embeddings, hosts dividing the
// world, memory, bandwidths, --mtp against num_nextn_predict_layers), the topology
// (make_topology) and the model's constraints on it (validate_topology); errors name the flag
// or field.
Result<DeployPlan> plan_deployment(const ModelConfig& cfg, const PlanOptions& opt);

// The plan as text: a header, one block per set of ranks with equal figures, the hosts, the
// fit and the decode projection with its formula.
std::string deploy_plan_text(const ModelConfig& cfg, const DeployPlan& plan);

}  // namespace dsv4
