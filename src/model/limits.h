// Deployment limits (not model config): they fix every scratch buffer and
// cache pool once at start-up (runtime.md §1.2). A step outside them is
// rejected before any kernel runs, with an error naming the limit.
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/status.h"

namespace dsv4 {

struct Limits {
  // With ranks max_batch and max_rows bound the whole step (every rank's rows), max_seqs,
  // cache_blocks and prefix_blocks each rank's storage (runtime.md §6.1).
  int32_t max_batch = 16;        // B_MAX: requests per step
  int32_t max_rows = 64;         // T_MAX: rows per step (all requests)
  int32_t max_decode_rows = 2;   // S_MAX: 1 + drafts per decode request
  int32_t max_chunk = 32;        // largest prefill chunk of one request
  int32_t max_seqs = 32;         // live sequences (cache slots) per rank
  int64_t max_context = 1024;    // positions per sequence
  int32_t n_threads = 1;
  int32_t page_rows = 16;        // positions per window-KV ring page
  int32_t page_tokens = 128;     // source positions per compressed-cache page (block); a multiple
                                 // of every compress ratio (runtime.md §7.1 P_src)
  int64_t cache_blocks = 0;      // compressed-cache pages shared by a rank's sequences (each holds
                                 // the CSA, HCA and indexer rows of one block); 0 = max_seqs at max_context
  int32_t prefix_blocks = 0;     // prefix-cache entries (prompt blocks of page_tokens); 0 = off

  // R_MAX: most rows one request contributes to a step (runtime.md §2.1).
  int32_t r_max() const { return std::max(max_decode_rows, max_chunk); }

  // Sequence slots are the job's: rank r holds slots [r·max_seqs, (r+1)·max_seqs), slot s at
  // index local_slot(s) of its rank's storage (one rank: s itself).
  int32_t slot_rank(int32_t seq) const { return seq / max_seqs; }
  int32_t local_slot(int32_t seq) const { return seq % max_seqs; }
  int32_t job_slot(int32_t rank, int32_t local) const { return rank * max_seqs + local; }
};

// world: the ranks sharing each step (a step's requests take slots on every rank).
inline Status validate_limits(const Limits& l, int world = 1) {
  auto positive = [](const char* name, int64_t v) -> Status {
    return v > 0 ? Status() : Status::errorf("limit {} = {} must be positive", name, v);
  };
  for (auto [n, v] : {std::pair<const char*, int64_t>{"max_batch", l.max_batch},
                      {"max_rows", l.max_rows}, {"max_decode_rows", l.max_decode_rows},
                      {"max_chunk", l.max_chunk}, {"max_seqs", l.max_seqs},
                      {"max_context", l.max_context}, {"n_threads", l.n_threads}}) {
    Status s = positive(n, v);
    if (!s.ok()) return s;
  }
  if (l.max_chunk > l.max_rows)
    return Status::errorf("limit max_chunk = {} exceeds max_rows = {}", l.max_chunk, l.max_rows);
  if (l.max_decode_rows > l.max_rows)
    return Status::errorf("limit max_decode_rows = {} exceeds max_rows = {}", l.max_decode_rows, l.max_rows);
  if (l.page_rows < 1 || l.page_tokens < 1 || l.cache_blocks < 0)
    return Status::errorf("limits page_rows = {} and page_tokens = {} must be positive and cache_blocks = {} "
                          "not negative", l.page_rows, l.page_tokens, l.cache_blocks);
  if (l.prefix_blocks < 0) return Status::errorf("limit prefix_blocks = {} must not be negative", l.prefix_blocks);
  if (l.cache_blocks > INT32_MAX)
    return Status::errorf("limit cache_blocks = {} exceeds {}", l.cache_blocks, INT32_MAX);
  if (l.max_batch > static_cast<int64_t>(l.max_seqs) * world)
    return Status::errorf("limit max_batch = {} exceeds max_seqs = {} slots on each of {} ranks", l.max_batch,
                          l.max_seqs, world);
  return Status();
}

}  // namespace dsv4
