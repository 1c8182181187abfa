// Per-step metadata (runtime.md §1.1a, §2.7): built once per step from the
// requests and the block tables, read by every layer. Arrays are sized once
// to capacity (rows T_MAX, requests B_MAX); a step fills rows [0, T) and
// requests [0, B) and leaves the rest untouched.
//
// Rows are flat and token-major, request after request:
//   row_begin[r] .. row_begin[r+1]-1 are the rows of request r,
//   pos[t] = p0[r] + (t - row_begin[r]).
// Window-list length of row t (model.md §0.4.7): Wc = min(prompt_len, W) for
// prompt rows (p < prompt_len), W for later rows; the list itself is built by
// kernels/attn_select from the positions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "cache/cache_group.h"

namespace dsv4 {

// One request's share of a step: n rows at positions p0 .. p0+n-1.
struct StepRequest {
  int32_t seq = -1;            // sequence slot (cache tables)
  int64_t p0 = 0;              // positions already in the caches
  int32_t n = 0;               // rows this step (prompt chunk or 1 + drafts)
  int64_t prompt_len = 0;      // the request's total prompt length (request state)
  const int32_t* tokens = nullptr;  // n token ids
  int32_t owner = 0;           // world rank that computes the rows and holds the caches (runtime.md §6.1)
  bool cp = false;             // context-parallel prefill: rows split over the owner's TP group (§6.8)
  // cp: the chunk's slot on each TP rank j of the owner's group ([tp]; the owner's is seq).
  const int32_t* cp_slots = nullptr;
  int32_t local = -1;          // with ranks: the slot in this rank's storage (set by the runner; −1: seq)
};

struct StepCapacity {
  int32_t max_batch = 0;    // B_MAX
  int32_t max_rows = 0;     // T_MAX
  int32_t max_request_rows = 0;  // R_MAX
  int32_t max_seqs = 0;
  int64_t max_context = 0;
  int32_t window = 0;       // W (sliding_window)
  int64_t vocab_size = 0;
};

struct StepMetadata {
  explicit StepMetadata(const StepCapacity& cap);

  StepCapacity cap;
  int32_t B = 0;
  int32_t T = 0;
  std::vector<int32_t> row_begin;     // [B_MAX + 1]
  std::vector<int32_t> row_req;       // [T_MAX] request index r of row t
  std::vector<int32_t> row_seq;       // [T_MAX] storage slot of row t (StepRequest::local, or seq)
  std::vector<int32_t> row_key;       // [T_MAX] sequence slot of row t's request (decision keys)
  std::vector<int64_t> pos;           // [T_MAX] absolute position
  std::vector<int32_t> token;         // [T_MAX] token id
  std::vector<int32_t> window_len;    // [T_MAX] Wc
  std::vector<int64_t> ori_slot;      // [T_MAX] physical row of this row's window KV
};

// Checks a step against capacity and the request state before anything runs:
// B <= max_batch, T <= max_rows, 1 <= n <= max_request_rows, positions inside
// max_context, token ids inside the vocabulary, distinct admitted sequences.
// Every message names the field, the value and the limit.
Status validate_step(std::span<const StepRequest> reqs, const StepCapacity& cap);

// Fills md for a validated step. `ori` is the window-KV cache group.
void build_step_metadata(std::span<const StepRequest> reqs, const CacheGroup& ori, StepMetadata& md);

}  // namespace dsv4
