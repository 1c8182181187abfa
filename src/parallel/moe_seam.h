// Expert-parallel MoE over an EP group of P ranks (runtime.md §6.9). Rank e holds routed
// experts [e·E/P, (e+1)·E/P) and the shared expert; each rank gates its own rows.
//   batch     [own rows | received rows]: the caller writes its own rows' ffn_norm output,
//             router ids and route weights into the seam's batch (rows(), ids(), route_w())
//   counts    all-to-all of (rows, routes) per peer
//   dispatch  a row goes once to every other rank holding one of its experts: its bf16
//             ffn_norm output, its K expert ids and K route weights (three all-to-alls, each
//             received straight after the own rows of the batch)
//   shared    the shared expert on the own rows, while counts (phases in, up) and dispatch
//             (act, down) are in flight; progress polled between phases (kernels/moe_expert.h)
//   experts   one grouped pass of the local experts over the whole batch: each local expert's
//             weights are read once per step
//   combine   every computed output of a received row goes back to its owner, which adds
//             the routed outputs in ascending expert id, then the shared expert (A13)
// Every expert output is a whole row computed on one rank (a row's result does not depend on
// the other rows of its pass) and the owner's sum order is fixed by expert id, so the result is
// the one-rank result bit for bit, overlap on or off. Only real rows are sent; a rank with no
// rows still joins the collectives. Copies (copied_bytes): the dispatch pack (sent rows) and the
// combine pack (outputs of received rows), exactly the bytes sent to peers.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/moe_expert/moe_expert.h"
#include "numeric/bf16.h"
#include "parallel/communicator.h"
#include "parallel/moe_routing.h"
#include "parallel/seam_time.h"

namespace dsv4 {

struct MoeSeamParams {
  kernels::MoeExpertParams expert;  // D, F, swiglu limit
  int64_t n_experts = 0;            // E (routed)
  int64_t top_k = 0;                // K
  int64_t capacity = 0;             // most rows of the whole EP group in a step
};

class MoeSeam {
 public:
  MoeSeam(const MoeSeamParams& p, int ep, int ep_rank);

  // The batch: rows [capacity, D], ids [capacity, K], route_w [capacity, K]; the caller writes
  // its T own rows first (ffn_norm output, router ids and weights).
  bf16* rows() { return batch_f_.data(); }
  int32_t* ids() { return batch_ids_.data(); }
  float* route_w() { return batch_w_.data(); }
  // The batch's T own rows through the MoE; experts [E/P] the local experts (global id
  // ep_rank·E/P + i); m [T, D] out.
  Status run(Communicator& ep, ThreadPool& pool, int64_t T, const kernels::ExpertWeights* experts,
             const kernels::ExpertWeights& shared, bf16* m);
  // The last run's counts toward each peer (0 toward this rank: its own rows stay here).
  const MoeRouting& routing() const { return routing_; }
  // Bytes this rank sent since construction: counts, dispatch payload, combine.
  int64_t counts_bytes = 0, dispatch_bytes = 0, combine_bytes = 0;
  int64_t copied_bytes = 0;  // staging memcpy since construction (header)
  SeamTime time;
  bool overlap = true;  // off: counts and dispatch are waited for before the work they could hide

 private:
  // Stages of run, in order.
  void pack_dispatch(int64_t T);
  Status start_counts(Communicator& ep);
  Status finish_counts(int64_t T, int64_t& R, int64_t& back_rows);
  Status start_dispatch(Communicator& ep, int64_t T);
  Status wait_dispatch();
  // Phases [first, last] of the shared expert on the own rows, a progress poke after each.
  void shared_phases(ThreadPool& pool, int first, int last, const kernels::ExpertWeights& shared);
  void run_experts(ThreadPool& pool, const kernels::ExpertWeights* experts, const kernels::ExpertWeights& shared,
                   int64_t rows);
  Status return_outputs(Communicator& ep, int64_t T, int64_t R, int64_t back_rows);
  void combine_own_rows(ThreadPool& pool, int64_t T, bf16* m);
  void poke();
  int owner(int32_t expert) const { return static_cast<int>(expert / n_local_); }  // EP rank holding it

  MoeSeamParams p_;
  int ep_, rank_;
  int64_t n_local_, send_cap_;
  kernels::MoeDispatchParams dispatch_, shared_only_;  // shared_only_: no routed experts
  std::vector<bf16> batch_f_, send_f_, back_send_;
  std::vector<int32_t> batch_ids_, send_ids_, route_row_;
  std::vector<float> batch_w_, send_w_;
  // The routed pass; its buffer also holds the returned outputs at rows back_row0_.. of
  // work_.x, so that one route_row table addresses both in the combine.
  std::vector<uint8_t> work_buf_, shared_buf_;
  kernels::MoeWork work_, shared_work_;
  int64_t back_row0_ = 0;
  std::vector<int64_t> counts_send_, counts_recv_, send_rows_, recv_rows_, cursor_;
  InFlight counts_, dispatch_f_, dispatch_ids_, dispatch_w_;
  MoeRouting routing_;
};

}  // namespace dsv4
