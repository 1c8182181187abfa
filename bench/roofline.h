// Bytes moved and FLOPs of the benchmarked work, counted from the config and the step's
// shape (what the kernels touch, not what the checkpoint holds), and the fractions of
// `dsv4 bench`:
//   GB/s = bytes / t;  bandwidth_fraction = GB/s / read bandwidth
//   GFLOP/s = flops / t;  compute_fraction = GFLOP/s / dot peak
//   roofline_fraction = max(bytes / bandwidth, flops / peak) / t
// (both denominators measured in the same run with the same thread count, probe.h).
//
// One layer's decode or prefill step over T rows of B requests (request r: rows at
// positions p0_r .. p0_r + n_r − 1), Flash notation (D hidden, H heads, Dh head_dim,
// Dr rope dims, Rq q_lora_rank, G o_groups, Ro o_lora_rank, F moe_intermediate_size,
// E routed experts, K per token, N hc_mult, M = (2+N)·N, Hi/Di indexer heads/dim,
// W sliding_window, r the layer's compress ratio):
//   weights read once per step, as the engine holds them (FP8: codes + one scale per
//   128x128 block; FP4: codes + one scale per 32; wo_a as stored too):
//     hc_attn_fn, hc_ffn_fn [M, N·D] f32; wq_a [Rq, D]; wq_b [H·Dh, Rq]; wkv [Dh, D];
//     wo_a [G·Ro, H·Dh/G]; wo_b [D, G·Ro]; compressor wkv, wgate [c, D] bf16
//     (r > 0; c = 2·Dh at r = 4, else Dh); indexer (r = 4) wq_b [Hi·Di, Rq],
//     weights_proj [Hi, D] bf16, its compressor [2·Di, D] x 2 bf16; gate [E, D] bf16;
//     shared expert w1, w3 [F, D], w2 [D, F]; routed experts hit by any row of the
//     step x (w1 + w2 + w3); the T embedding rows (bf16)
//   caches read per row at position p: min(p + 1, W) window rows plus the attended
//     compressed rows (r = 4: min(floor((p+1)/4), index_topk); r > 4: floor((p+1)/r)),
//     each KvRowFormat bytes; r = 4 also every visible indexer key (IndexKeyFormat)
//   FLOPs per row: 2·(out·in) of every dense matrix above, 2·K·3·F·D routed,
//     4·H·Dh per attended key (scores and values), 2·Hi·Di per indexer key
// Not counted: activations and scratch (cache-resident), norms, cache writes.
// LM head stage over T rows (hc_head, then the head): bytes V·D·2 (bf16) + hc_head_fn
// [N, N·D] f32; FLOPs 2·T·(V·D + N·N·D).
// DSpark (dspark.md §3; Lt target layers, NS stages, Rm markov_rank, γ block rows):
//   commit of T rows: the features T·|Lt|·D bf16, main_proj [D, |Lt|·D], each stage's wkv
//     [Dh, D] (dense storage);
//   round of B requests: the B·γ embedding rows; per stage the weights above (ratio 0) with
//     the experts hit, each block row attending min(W, a + 1) ring rows + γ block keys;
//     the LM head over B·γ rows (head_cost); the Markov chain: per step W2 [V, Rm] bf16 read
//     once for the B rows plus B W1 rows, 2·B·V·Rm FLOPs.
#pragma once

#include <cstdint>
#include <span>

#include "model/config.h"

namespace dsv4::bench {

struct Cost {
  double bytes = 0;
  double flops = 0;
  Cost& operator+=(const Cost& o) {
    bytes += o.bytes;
    flops += o.flops;
    return *this;
  }
};

// Bytes a kernel reads for a matrix [out, in] in the storage form.
int64_t matrix_bytes(StorageForm form, int64_t out, int64_t in);
// One matrix applied to T rows: its bytes once, 2·T·out·in FLOPs.
Cost matrix_cost(StorageForm form, int64_t out, int64_t in, int64_t T);

struct RequestRows {
  int64_t p0 = 0;  // first position
  int64_t n = 0;   // rows
};

// Layer `layer` of cfg over the step; experts_hit = distinct routed experts of the step.
Cost layer_step_cost(const ModelConfig& cfg, int layer, std::span<const RequestRows> reqs, int64_t experts_hit);
// The LM head over T rows.
Cost head_cost(const ModelConfig& cfg, int64_t T);
// DSpark commit of T context rows (every stage of cfg).
Cost dspark_commit_cost(const ModelConfig& cfg, int64_t T);
// The Markov chain of B rounds of γ drafts.
Cost markov_cost(const ModelConfig& cfg, int64_t B, int64_t gamma);
// Every stage of cfg over B rounds of γ block rows at anchor a (no head, no Markov);
// experts_hit = distinct routed experts per stage.
Cost dspark_stages_cost(const ModelConfig& cfg, int64_t B, int64_t gamma, int64_t anchor, double experts_hit);
// One dspark_propose call: the stages, the head over B·γ rows, the Markov chain.
Cost dspark_round_cost(const ModelConfig& cfg, int64_t B, int64_t gamma, int64_t anchor, double experts_hit);
// Expected distinct experts when T rows each pick K of E uniformly: E·(1 − (1 − K/E)^T).
double expected_experts_hit(int64_t n_experts, int64_t k, int64_t T);

struct Fractions {
  double gbps = 0, bandwidth_fraction = 0, gflops = 0, compute_fraction = 0, roofline_fraction = 0;
};
Fractions fractions(const Cost& cost, double seconds, double read_gbps, double peak_gflops);
// The roofline time of a cost: max(bytes / bandwidth, flops / peak), seconds (0 for a
// denominator not measured).
double roofline_seconds(const Cost& cost, double read_gbps, double peak_gflops);

}  // namespace dsv4::bench
