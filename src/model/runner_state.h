// ModelRunner's private state (included by runner*.cc only): per-layer caches and
// compressor slots, and the step scratch, sized once from the config and Limits
// (runner_state.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/huge_pages.h"
#include "base/math.h"
#include "base/thread_pool.h"
#include "cache/cache_storage.h"
#include "kernels/compressor/compressor.h"
#include "kernels/moe_expert/moe_expert.h"
#include "model/runner.h"
#include "model/weights.h"
#include "numeric/paged_rows.h"

namespace dsv4 {

// Capacity-sized buffer that is never resized after construction. From 2 MiB on, elements
// whose zero value is all zero bits live on huge pages (base/huge_pages.h), untouched until
// Scratch::first_touch; smaller buffers and other types are value-initialized vectors.
template <class T>
struct Buf {
  static constexpr bool kHugeable = std::is_arithmetic_v<T> || std::is_same_v<T, bf16>;
  std::vector<T> v;
  T* huge = nullptr;
  size_t huge_bytes = 0;
  Buf() = default;
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() { huge_unmap(huge, huge_bytes); }
  // Returns the bytes left for first_touch (0: none).
  size_t size_to(int64_t n) {
    const size_t bytes = sizeof(T) * static_cast<size_t>(n);
    if (!kHugeable || bytes < kHugePageBytes) {
      v.assign(static_cast<size_t>(n), T{});
      return 0;
    }
    huge = static_cast<T*>(huge_map(bytes));
    if (huge == nullptr) throw std::bad_alloc();
    huge_bytes = bytes;
    return bytes;
  }
  T* data() { return huge != nullptr ? huge : v.data(); }
};

// One compressor instance of one layer: per-sequence state and the kernel views.
struct CompressorSlot {
  bool present = false;
  kernels::CompressorParams params;
  kernels::CompressorWeights weights;
  std::vector<float> storage;                 // [max_seqs, 2, κr·κc]
  std::vector<kernels::CompressorState> states;     // [max_seqs]
};

// One layer's caches (main layers, the MTP layer; a DSpark stage has expert views only).
struct LayerCaches {
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

  // Layer `index`'s views of its experts (enough for a DSpark stage).
  static std::unique_ptr<LayerCaches> views(const LayerWeights& lw, int32_t index, const float* inv_freq);
  // A main or MTP layer: its cache storage (ring_rows window rows, n_blocks blocks) and
  // compressor slots, sized for max_seqs sequences.
  static Result<std::unique_ptr<LayerCaches>> create(const ModelConfig& c, const Limits& l, const LayerWeights& lw,
                                                     int32_t index, const float* inv_freq, int64_t ring_rows,
                                                     int64_t n_blocks);
  // Both compressors' projection scratch side by side for T rows.
  int64_t compressor_scratch_floats(int64_t T) const;
};

// Step scratch at capacity (T_MAX rows), sized once by StepScratch::create.
struct StepScratch {
  Buf<bf16> X, Z;                    // [T, N·D] main / MTP streams
  Buf<float> mix, post, comb;        // [T, M], [T, N], [T, N·N]
  Buf<bf16> a, qr, q, kv, o, attn_out, y, m;
  Buf<bf16> fq;  // [T, D] actq of the MoE input rows (the experts' inputs are copies of them)
  Buf<bf16> qpath, kvpath, oproj, mtpproj;
  Buf<bf16> features;  // [T, |Lt|·D] DSpark target features of the own rows (ranks)
  Buf<float> cmp;                    // compressor projections
  Buf<kernels::CompressorEmit> emits, idx_emits;  // [T] the main and the indexer compressor's
  Buf<bf16> entries, idx_entries;                 // [T, Dh], [T, Di] (both emit in one run)
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

  std::vector<std::pair<void*, size_t>> untouched;  // huge-page buffers before first_touch
  template <class T>
  void size(Buf<T>& b, int64_t n) {
    if (const size_t bytes = b.size_to(n); bytes > 0) untouched.emplace_back(b.data(), bytes);
  }
  // Sizes b to hold `bytes` from a 64-byte boundary and returns that boundary.
  void* aligned(Buf<uint8_t>& b, int64_t bytes) {
    size(b, bytes + 64);
    void* base = b.data();
    size_t space = static_cast<size_t>(bytes + 64);
    return std::align(64, static_cast<size_t>(bytes), base, space);
  }
  // Zero-fills the huge-page buffers, each thread its share of every buffer's pages, so that
  // a page is placed by the first thread that writes it.
  void first_touch(ThreadPool& pool) {
    pool.run([&](int tid, int n) {
      for (const auto& [p, bytes] : untouched) {
        const int64_t pages = ceil_div<int64_t>(static_cast<int64_t>(bytes), int64_t{4096});
        const Range r = split_range(pages, tid, n);
        const size_t b0 = static_cast<size_t>(r.begin) * 4096, b1 = std::min(bytes, static_cast<size_t>(r.end) * 4096);
        if (b1 > b0) std::memset(static_cast<uint8_t*>(p) + b0, 0, b1 - b0);
      }
    });
    untouched.clear();
  }
  // Every buffer sized for the model and limits; compressor_floats: the largest layer's
  // compressor scratch (LayerCaches::compressor_scratch_floats).
  static std::unique_ptr<StepScratch> create(const ModelConfig& c, const Limits& l, ThreadPool& pool,
                                             int64_t compressor_floats);
};

}  // namespace dsv4
