// ModelRunner's private state (included by runner*.cc only): per-layer caches and
// compressor slots, step scratch sized once from Limits, and the ranks' seams and rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/cache_storage.h"
#include "kernels/compressor/compressor.h"
#include "kernels/moe_expert/moe_expert.h"
#include "model/runner.h"
#include "parallel/attn_output_seam.h"
#include "parallel/head_seam.h"
#include "parallel/moe_seam.h"

namespace dsv4 {

// Capacity-sized buffer that is never resized after construction.
template <class T>
struct Buf {
  std::vector<T> v;
  void size_to(int64_t n) { v.assign(static_cast<size_t>(n), T{}); }
  T* data() { return v.data(); }
};

// Sizes b to hold `bytes` from a 64-byte boundary and returns that boundary.
inline void* aligned_scratch(Buf<uint8_t>& b, int64_t bytes) {
  b.size_to(bytes + 64);
  void* base = b.data();
  size_t space = static_cast<size_t>(bytes + 64);
  return std::align(64, static_cast<size_t>(bytes), base, space);
}

// One compressor instance of one layer: per-sequence state and the kernel views.
struct CompressorSlot {
  bool present = false;
  kernels::CompressorParams params;
  kernels::CompressorWeights weights;
  std::vector<float> storage;                 // [max_seqs, 2, κr·κc]
  std::vector<kernels::CompressorState> states;     // [max_seqs]
};

struct ModelRunner::LayerCaches {
  // Packed rows (numeric/cache_rows.h): the exact FP8 / FP4 images, decoded by the kernels.
  // Reserved, untouched until written (cache/cache_storage.h).
  CacheStorage ori;   // [ring pages · page_rows, kv row] window KV
  CacheStorage cmp;   // [blocks · page_tokens / r, kv row] compressed KV (ratio r > 0)
  CacheStorage idx;   // [blocks · page_tokens / 4, index key row] indexer keys (CSA)
  CacheStorage tail;  // [prefix entries · (W − 1), kv row] window rows before each cached cut
  int32_t index = 0;          // layer index (main layers, then MTP)
  int32_t cmp_page_rows = 0;  // compressed entries per block: page_tokens / r
  CompressorSlot main_cmp;
  CompressorSlot idx_cmp;
  std::vector<kernels::ExpertWeights> experts;
  kernels::ExpertWeights shared;
  const float* inv_freq = nullptr;
};

struct ModelRunner::Scratch {
  Buf<bf16> X, Z;                    // [T, N·D] main / MTP streams
  Buf<float> mix, post, comb;        // [T, M], [T, N], [T, N·N]
  Buf<bf16> a, qr, q, kv, o, attn_out, y, m;
  Buf<bf16> qpath, kvpath, oproj, mtpproj;
  Buf<float> cmp;                    // compressor projections
  Buf<kernels::CompressorEmit> emits;      // [T]
  Buf<bf16> entries;                 // [T, max(Dh, Di)]
  Buf<bf16> qr_q, qi, omega, wgt;
  Buf<int32_t> picks, n_picks, count;
  Buf<uint8_t> select;               // indexer_select scratch (64-byte aligned at select_base)
  void* select_base = nullptr;
  Buf<int32_t> list, len, dense;
  int64_t list_stride = 0;
  Buf<PagedBytes> win_rows, cmp_rows, idx_rows;
  Buf<float> attn;
  Buf<float> gate_scores, route_w;   // [T, E], [T, K]
  Buf<int32_t> ids;                  // [T, K]
  Buf<uint8_t> moe;                  // expert work
  kernels::MoeWork moe_work;

};

// Several ranks (runtime.md §6): the seams, this rank's weight shards, and the step's own rows.
struct ModelRunner::Ranks {
  RankGroups* g = nullptr;
  std::vector<OutProjShard> out_proj;       // per layer (main, then MTP) when tp > 1
  std::unique_ptr<AttnOutputSeam> attn;     // tp > 1
  std::unique_ptr<MoeSeam> moe;             // ep > 1
  std::unique_ptr<HeadSeam> head;
  std::vector<StepRequest> own;             // [B_MAX] the requests this rank owns, in step order
  std::vector<int32_t> own_row;             // [T_MAX] step row of own row t
  std::vector<int64_t> tp_rows;             // [tp] rows of each TP rank of the group
  std::vector<bf16> stage;                  // [T_MAX, N·D] own rows of an MTP input
  // Context-parallel prefill (StepRequest::cp): the group's split chunks.
  bool has_cp = false;                      // the group has split chunks this step
  int64_t n_unsplit = 0;                    // computed rows of unsplit requests (they come first)
  std::vector<int64_t> cp_rows;             // [tp] split-chunk rows each TP rank computes
  std::vector<int64_t> cp_cursor;           // [tp]
  std::vector<int32_t> cp_chunks;           // [B_MAX] rows of each split chunk, in step order
  std::vector<StepRequest> cache;           // [B_MAX] the cache-row requests
  StepMetadata md_kv;                       // the cache rows
  std::vector<bf16> gathered, a_kv;         // [T_MAX, D]
  // HeadRows of a step: logits row of each step row (−1: not listed), then of each own row.
  std::vector<int32_t> head_of_step, head_out_row;  // [T_MAX]
  int64_t cp_gather_bytes = 0;
  explicit Ranks(const StepCapacity& cap) : md_kv(cap) {}
};

}  // namespace dsv4
