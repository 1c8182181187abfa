// Attention index list per row (model.md §0.4.7, §6.4, §7.4, §7.5; runtime.md
// §2.6-§2.7): the ordered list of keys the sparse attention kernel (§0.4.6)
// walks in blocks of 64 consecutive entries. Row t at position p = pos[t]:
//   w0 = max(0, p − W + 1)
//   entries j = 0 .. Wc−1        window part: key position w0 + j if w0 + j ≤ p, else −1
//   entries j = Wc, Wc+1, …      compressed part:
//     SWA: none
//     HCA: entry Wc + i = i for i = 0 .. n(p)−1, n(p) = ⌊(p+1)/r⌋ (ascending; every
//          entry with i·r + r − 1 ≤ p)
//     CSA: entry Wc + k = the k-th indexer pick (indexer_topk order: descending bf16
//          score, exact ties → lower entry index)
// Wc (the window-part length) is per-row step metadata (runtime.md §2.7):
// min(prompt_len, W) for a row of the prompt, W for every later row. It must satisfy
// min(p+1, W) ≤ Wc ≤ W so that every window key of the row lies in the window part.
//
// List layout (AttnList; consumed by sparse_attn):
//   entries [T, stride] int32; row t uses entries[t·stride + j], j < len[t].
//   Two index spaces split by list position: j < n_win[t] (= Wc) holds absolute
//   window key positions, j ≥ n_win[t] holds compressed entry indices (rows of the
//   sequence's compressed KV cache). −1 is an empty entry in either part (window
//   slots of a short sequence; the compressed part has none).
//   Entries [len[t], stride) of a row are left untouched.
#pragma once

#include <cstdint>

namespace dsv4::kernels {

enum class AttnKind { kSWA, kHCA, kCSA };

struct AttnSelectParams {
  AttnKind kind = AttnKind::kSWA;
  int window = 0;      // W (sliding_window)
  int ratio = 0;       // r (compress ratio of the layer); used by HCA only
  int64_t stride = 0;  // list capacity per row; ≥ W + the most compressed entries a row can have
};

// Read-only view of the per-row lists (what sparse_attn takes).
struct AttnList {
  const int32_t* entries = nullptr;  // [T, stride]
  int64_t stride = 0;
  const int32_t* len = nullptr;    // [T] entries in row t's list
  const int32_t* n_win = nullptr;  // [T] Wc: entries [0, Wc) are window positions
  // Optional dense tail [T] (HCA without a list, runtime.md §7.2): after the len[t] listed
  // entries come compressed entries 0, 1, …, n_dense[t] − 1 at list positions len[t] + i.
  // An HCA row's list is then its window part (kind kSWA, len = Wc) and n_dense = n(p):
  // the same sequence of keys as the kHCA list, with no per-row storage of O(context).
  const int32_t* n_dense = nullptr;
};

// Number of compressed entries visible at position p for ratio r: ⌊(p+1)/r⌋ (§7.4).
constexpr int64_t visible_entries(int64_t p, int r) { return (p + 1) / r; }

// Inputs for T rows: pos [T], wc [T] (Wc per row); CSA only: picks [T, picks_stride]
// (indexer_topk output) with n_picks [T] valid picks per row (null for SWA/HCA).
// Outputs: list [T, stride], len [T].
void attn_select_ref(const AttnSelectParams& p, int64_t T, const int64_t* pos, const int32_t* wc,
                     const int32_t* picks, int64_t picks_stride, const int32_t* n_picks,
                     int32_t* list, int32_t* len);
void attn_select(const AttnSelectParams& p, int64_t T, const int64_t* pos, const int32_t* wc,
                 const int32_t* picks, int64_t picks_stride, const int32_t* n_picks, int32_t* list,
                 int32_t* len, int tid, int nthreads);

}  // namespace dsv4::kernels
