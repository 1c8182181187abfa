// Engine lightning indexer. Selection: the (row, entry) pairs of the call are split
// in contiguous ranges over threads; a thread converts its row's queries to fp32
// once and each tile of 64 packed keys to a transposed fp32 tile, so the dot loops run
// across entries with the reference's per-score order (ascending k, then heads), and
// feeds the tile's bf16 scores into a bounded heap of the best Ki (no score buffer).
#include <immintrin.h>

#include <algorithm>
#include <functional>

#include "base/check.h"
#include "base/math.h"
#include "kernels/hadamard/hadamard.h"
#include "kernels/indexer/indexer.h"
#include "kernels/indexer/indexer_finish_tile.h"
#include "kernels/indexer/indexer_tile.h"
#include "kernels/linear/linear.h"
#include "kernels/rope/rope.h"
#include "numeric/quant.h"

namespace dsv4::kernels {
namespace {

using indexer_tile::kScoreTile;

IsaChoice g_isa("indexer");

indexer_tile::ScoreTileFn tile_fn(Isa isa) {
  switch (isa) {
    case Isa::kAvx2: return indexer_tile::score_tile_avx2();
    case Isa::kAvx512:
    case Isa::kAvx512Bf16: return indexer_tile::score_tile_avx512();
    default: return indexer_tile::score_tile_impl;
  }
}

indexer_finish_tile::HeadsFn finish_fn(Isa isa) {
  switch (isa) {
    case Isa::kAvx2: return indexer_finish_tile::heads_avx2();
    case Isa::kAvx512:
    case Isa::kAvx512Bf16: return indexer_finish_tile::heads_avx512();
    default: return indexer_finish_tile::heads_portable;
  }
}

// Rank of (score, entry): larger ranks first; exact ties go to the lower entry index.
inline uint64_t rank_of(bf16 score, int64_t entry) {
  return (static_cast<uint64_t>(indexer_score_key(score)) << 32) | (0xffffffffu - static_cast<uint32_t>(entry));
}
inline int32_t entry_of(uint64_t rank) { return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(rank)); }

// Per-thread scratch, carved from one block: fp32 tiles, then the heap and the two
// partial lists (first and last row of the thread's range, when shared with another
// thread), then the merge buffer.
struct SelectScratch {
  float* jt;       // [Di, 64] transposed keys
  float* qf;       // [Hi, Di]
  float* wf;       // [Hi]
  float* dv;       // [2, 64]
  float* sc;       // [64]
  float* kr;       // [64, Di] a tile's keys, decoded row by row
  uint64_t* heap;  // [Ki]
  uint64_t* part;  // [2, Ki]
  int64_t* part_info;  // [2, 2]: row, size
  uint64_t* merge;     // [nthreads, Ki]
};

int64_t floats_per_thread(const IndexerParams& p) {
  const int64_t Hi = p.n_heads, Di = p.head_dim;
  return (2 * Di * kScoreTile + Hi * Di + Hi + 3 * kScoreTile + 15) / 16 * 16;
}
int64_t bytes_per_thread(const IndexerParams& p, int nthreads) {
  const int64_t K = std::max(p.topk, 1);
  const int64_t bytes = floats_per_thread(p) * 4 + (K + 2 * K + static_cast<int64_t>(nthreads) * K) * 8 + 4 * 8;
  return (bytes + 63) / 64 * 64;  // each thread's block starts on its own cache line
}

SelectScratch carve(const IndexerParams& p, void* base, int tid, int nthreads) {
  const int64_t Hi = p.n_heads, Di = p.head_dim, K = std::max(p.topk, 1);
  auto* b = static_cast<uint8_t*>(base) + bytes_per_thread(p, nthreads) * tid;
  SelectScratch s;
  float* f = reinterpret_cast<float*>(b);
  s.jt = f;
  s.qf = s.jt + Di * kScoreTile;
  s.wf = s.qf + Hi * Di;
  s.dv = s.wf + Hi;
  s.sc = s.dv + 2 * kScoreTile;
  s.kr = s.sc + kScoreTile;
  auto* u = reinterpret_cast<uint64_t*>(b + floats_per_thread(p) * 4);
  s.heap = u;
  s.part = u + K;
  s.part_info = reinterpret_cast<int64_t*>(s.part + 2 * K);
  s.merge = reinterpret_cast<uint64_t*>(s.part_info + 4);
  return s;
}

// The (row, entry) pairs of thread j: [begin, end) of the concatenation of all rows' entries.
struct Work {
  int64_t total = 0;
  Range of(int j, int nthreads) const { return split_range(total, j, nthreads); }
};
Work total_work(const IndexKeys& keys, int64_t T) {
  Work w;
  for (int64_t t = 0; t < T; ++t) w.total += keys.count[t];
  return w;
}

// Tile of nb packed keys [i0, i0 + nb) of row t as fp32 (the exact e2m1 × ue8m0 values),
// transposed into s.jt [Di, 64]: each key decoded contiguously into s.kr [64, Di] (rows
// past nb zero), then 4 × 4 blocks transposed in registers.
void decode_tile(const IndexKeys& keys, int64_t t, int64_t i0, int nb, const SelectScratch& s) {
  const int Di = keys.format.dim;
  const int nb4 = (nb + 3) & ~3;
  for (int j = 0; j < nb; ++j) index_key_unpack(keys.format, keys.rows[t].row(i0 + j), s.kr + j * Di);
  for (int j = nb; j < nb4; ++j) std::fill_n(s.kr + j * Di, Di, 0.0f);
  for (int j = 0; j < nb4; j += 4) {
    const float* r0 = s.kr + j * Di;
    for (int k = 0; k < Di; k += 4) {
      __m128 a = _mm_loadu_ps(r0 + k), b = _mm_loadu_ps(r0 + Di + k);
      __m128 c = _mm_loadu_ps(r0 + 2 * Di + k), d = _mm_loadu_ps(r0 + 3 * Di + k);
      _MM_TRANSPOSE4_PS(a, b, c, d);
      float* o = s.jt + static_cast<int64_t>(k) * kScoreTile + j;
      _mm_storeu_ps(o, a);
      _mm_storeu_ps(o + kScoreTile, b);
      _mm_storeu_ps(o + 2 * kScoreTile, c);
      _mm_storeu_ps(o + 3 * kScoreTile, d);
    }
  }
}

// Descending ranks -> picks row (ids, then −1 up to Ki), n_picks.
void write_picks(const IndexerParams& p, uint64_t* ranks, int64_t n, int32_t* picks, int32_t* n_picks) {
  std::sort(ranks, ranks + n, std::greater<uint64_t>());
  for (int64_t i = 0; i < n; ++i) picks[i] = entry_of(ranks[i]);
  for (int64_t i = n; i < p.topk; ++i) picks[i] = -1;
  *n_picks = static_cast<int32_t>(n);
}

}  // namespace

void indexer_project(const IndexerParams& p, const LinearWeight& wq_b,
                     const LinearWeight& weights_proj, const bf16* qr_in, const bf16* a,
                     int64_t T, bf16* qi, bf16* omega, int tid, int nthreads) {
  DSV4_CHECK(wq_b.out == static_cast<int64_t>(p.n_heads) * p.head_dim, "indexer.wq_b out {}",
             wq_b.out);
  DSV4_CHECK(weights_proj.out == p.n_heads && !weights_proj.quantized(),
             "indexer.weights_proj must be a BF16/F32 [{}, D] weight", p.n_heads);
  linear(wq_b, qr_in, T, qi, tid, nthreads);
  linear(weights_proj, a, T, omega, tid, nthreads);
}

void indexer_finish(const IndexerParams& p, const float* inv_freq, const int64_t* pos, int64_t T,
                    bf16* qi, const bf16* omega, bf16* wgt, int tid, int nthreads) {
  const int Hi = p.n_heads, Di = p.head_dim;
  DSV4_CHECK(p.rope_dim % 2 == 0 && p.rope_dim <= kRopeMaxDim && p.rope_dim <= Di, "rope_dim {} (max {}, head {})",
             p.rope_dim, kRopeMaxDim, Di);
  const indexer_finish_tile::HeadsFn finish = finish_fn(indexer_isa());
  const float scale = hadamard_scale(Di);
  // (row, head) pairs split (one row has Hi of them: both threads work at T = 1); RoPE tables
  // once per run of a row's heads.
  const Range units = split_range(T * Hi, tid, nthreads);
  for_row_runs(units, Hi, [&](int64_t t, int64_t h0, int64_t h1) {
    float cs[kRopeMaxDim / 2], sn[kRopeMaxDim / 2];
    rope_tables(inv_freq, p.rope_dim, pos[t], /*inverse=*/false, cs, sn);
    finish(qi + (t * Hi + h0) * Di, h1 - h0, Di, p.rope_dim, cs, sn, scale);
  });
  const float wscale = indexer_weight_scale(p);
  for (int64_t i = units.begin; i < units.end; ++i) wgt[i] = bf16::from_float(omega[i].to_float() * wscale);
}

void set_indexer_isa(Isa isa) { g_isa.set(isa); }
Isa indexer_isa() { return g_isa.get(); }

int64_t indexer_select_scratch_bytes(const IndexerParams& p, int nthreads) {
  return bytes_per_thread(p, nthreads) * nthreads;
}

void indexer_select(const IndexerParams& p, const bf16* qi, const bf16* wgt, const IndexKeys& keys,
                    int64_t T, int32_t* picks, int32_t* n_picks, void* scratch, int tid, int nthreads) {
  const int Hi = p.n_heads, Di = p.head_dim;
  const int64_t K = p.topk;
  const indexer_tile::ScoreTileFn score_tile = tile_fn(indexer_isa());
  SelectScratch s = carve(p, scratch, tid, nthreads);
  s.part_info[0] = s.part_info[2] = -1;  // no partial lists yet
  const Work work = total_work(keys, T);
  const Range mine = work.of(tid, nthreads);
  int64_t off = 0;
  for (int64_t t = 0; t < T && off < mine.end; off += keys.count[t], ++t) {
    const int64_t n = keys.count[t];
    const int64_t lo = std::max(mine.begin, off) - off;
    const int64_t hi = std::min(mine.end, off + n) - off;
    if (lo >= hi) continue;
    for (int64_t i = 0; i < static_cast<int64_t>(Hi) * Di; ++i) s.qf[i] = qi[t * Hi * Di + i].to_float();
    for (int h = 0; h < Hi; ++h) s.wf[h] = wgt[t * Hi + h].to_float();
    int64_t size = 0;  // heap entries (a min-heap under std::greater: front = worst kept)
    for (int64_t i0 = lo; i0 < hi; i0 += kScoreTile) {
      const int nb = static_cast<int>(std::min<int64_t>(kScoreTile, hi - i0));
      decode_tile(keys, t, i0, nb, s);
      score_tile(s.qf, s.wf, s.jt, Hi, Di, nb, s.dv, s.sc);
      for (int j = 0; j < nb; ++j) {
        const uint64_t r = rank_of(bf16::from_float(s.sc[j]), i0 + j);
        if (size < K) {
          s.heap[size++] = r;
          std::push_heap(s.heap, s.heap + size, std::greater<uint64_t>());
        } else if (r > s.heap[0]) {
          std::pop_heap(s.heap, s.heap + size, std::greater<uint64_t>());
          s.heap[size - 1] = r;
          std::push_heap(s.heap, s.heap + size, std::greater<uint64_t>());
        }
      }
    }
    if (lo == 0 && hi == n) {  // the whole row is this thread's
      write_picks(p, s.heap, size, picks + t * K, n_picks + t);
    } else {  // shared with a neighbour: the first or the last row of the range
      const int slot = off + lo == mine.begin ? 0 : 1;
      std::copy_n(s.heap, size, s.part + slot * K);
      s.part_info[2 * slot] = t;
      s.part_info[2 * slot + 1] = size;
    }
  }
}

void indexer_select_merge(const IndexerParams& p, const IndexKeys& keys, int64_t T, int32_t* picks,
                          int32_t* n_picks, void* scratch, int tid, int nthreads) {
  const int64_t K = p.topk;
  SelectScratch mine_s = carve(p, scratch, tid, nthreads);
  const Work work = total_work(keys, T);
  const Range rows = split_range(T, tid, nthreads);
  int64_t off = 0;
  for (int64_t t = 0; t < rows.begin; ++t) off += keys.count[t];
  for (int64_t t = rows.begin; t < rows.end; off += keys.count[t], ++t) {
    const int64_t n = keys.count[t];
    if (n == 0) {
      write_picks(p, nullptr, 0, picks + t * K, n_picks + t);
      continue;
    }
    // Threads whose range meets [off, off + n); the row was finished in phase 4 iff one.
    int j0 = 0;
    while (work.of(j0, nthreads).end <= off) ++j0;
    if (work.of(j0, nthreads).end >= off + n) continue;
    int64_t m = 0;
    for (int j = j0; j < nthreads && work.of(j, nthreads).begin < off + n; ++j) {
      if (work.of(j, nthreads).size() == 0) continue;
      const SelectScratch other = carve(p, scratch, j, nthreads);
      for (int slot = 0; slot < 2; ++slot)
        if (other.part_info[2 * slot] == t) {
          const int64_t sz = other.part_info[2 * slot + 1];
          std::copy_n(other.part + slot * K, sz, mine_s.merge + m);
          m += sz;
        }
    }
    std::sort(mine_s.merge, mine_s.merge + m, std::greater<uint64_t>());
    write_picks(p, mine_s.merge, std::min<int64_t>(m, K), picks + t * K, n_picks + t);
  }
}

}  // namespace dsv4::kernels
