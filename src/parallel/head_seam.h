// Vocabulary-sharded LM head over a TP group of G ranks (runtime.md §6.10): rank r holds
// head rows [r·V/G, (r+1)·V/G).
//   all-gather  the owners' final normed rows y  ->  Y [group_t, D], rank-major
//   project     logits of the shard for every group row (kernels/lm_head.h)
//   all-to-all  each owner gets its rows' logits from every shard, over the full vocabulary
// Every logit is one whole dot product on the rank holding its row: the one-rank bits.
// No overlap: the gathered rows are hc_head's output (final norm included), so no hc_head work
// is left once the gather can start; the only independent work, the own rows' logits, would
// read the head shard twice (own rows, then the peers'), costing more than the gather hides.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "numeric/bf16.h"
#include "numeric/linear_weight.h"
#include "parallel/communicator.h"
#include "parallel/seam_time.h"

namespace dsv4 {

class HeadSeam {
 public:
  // capacity: the most rows of one TP group in a step.
  HeadSeam(int64_t hidden, int64_t vocab, int tp, int tp_rank, int64_t capacity);

  // y [rows[tp_rank], D]; own row t's logits go to logits + out_row[t]·V (full vocabulary;
  // out_row[t] < 0: nowhere; logits nullptr: none, the rank still joins the collectives).
  Status run(Communicator& tp, ThreadPool& pool, const LinearWeight& head, const bf16* y,
             std::span<const int64_t> rows, const int32_t* out_row, float* logits);
  // Bytes this rank sent since construction: hidden-row all-gather, logits all-to-all.
  int64_t gather_bytes = 0, logits_bytes = 0;
  SeamTime time;

 private:
  int64_t D_, V_, Vs_;
  int tp_, rank_;
  int64_t capacity_;
  std::vector<bf16> all_;
  std::vector<float> shard_, recv_;
  std::vector<int64_t> recv_rows_;
};

}  // namespace dsv4
