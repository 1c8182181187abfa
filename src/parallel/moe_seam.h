// Expert-parallel MoE over an EP group of P ranks (runtime.md §6.9). Rank e holds routed
// experts [e·E/P, (e+1)·E/P) and the shared expert; each rank gates its own rows.
//   counts    all-to-all of (rows, routes) per peer
//   dispatch  a row goes once to every other rank holding one of its experts: its bf16
//             ffn_norm output, its K expert ids and K route weights
//   experts   one grouped expert pass over [own rows | received rows] (kernels/moe_expert.h):
//             the local experts on every row, the shared expert on the own rows only
//   combine   every computed output of a received row goes back to its owner, which adds
//             the routed outputs in ascending expert id, then the shared expert (A13)
// Every expert output is a whole row computed on one rank and the owner's sum order is fixed
// by expert id, so the result is the one-rank result bit for bit. Only real rows are sent;
// a rank with no rows still joins the three collectives.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/moe_expert/moe_expert.h"
#include "numeric/bf16.h"
#include "parallel/communicator.h"
#include "parallel/moe_routing.h"

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

  // f [T, D] ffn_norm output, ids [T, K], route_w [T, K] of the own rows; experts [E/P] the
  // local experts (global id ep_rank·E/P + i); m [T, D] out.
  Status run(Communicator& ep, ThreadPool& pool, const bf16* f, const int32_t* ids, const float* route_w, int64_t T,
             const kernels::ExpertWeights* experts, const kernels::ExpertWeights& shared, bf16* m);
  // The last run's counts toward each peer (0 toward this rank: its own rows stay here).
  const MoeRouting& routing() const { return routing_; }
  // Bytes this rank sent since construction: counts, dispatch payload, combine.
  int64_t counts_bytes = 0, dispatch_bytes = 0, combine_bytes = 0;

 private:
  // Stages of run, in order.
  void pack_dispatch(const bf16* f, const int32_t* ids, const float* route_w, int64_t T);
  Status exchange_counts(Communicator& ep, int64_t T, int64_t& R, int64_t& back_rows);
  void gather_batch(const bf16* f, const int32_t* ids, const float* route_w, int64_t T, int64_t R);
  void run_experts(ThreadPool& pool, const kernels::ExpertWeights* experts, const kernels::ExpertWeights& shared,
                   int64_t T, int64_t R);
  Status return_outputs(Communicator& ep, int64_t T, int64_t R, int64_t back_rows);
  void combine_own_rows(ThreadPool& pool, const int32_t* ids, int64_t T, bf16* m);
  int owner(int32_t expert) const { return static_cast<int>(expert / n_local_); }  // EP rank holding it

  MoeSeamParams p_;
  int ep_, rank_;
  int64_t n_local_, payload_bytes_, send_cap_;
  kernels::MoeDispatchParams dispatch_;
  std::vector<uint8_t> send_, recv_, work_buf_;
  kernels::MoeWork work_;
  std::vector<bf16> f_, combine_, back_send_, back_recv_;
  std::vector<int32_t> ids_;
  std::vector<float> w_;
  std::vector<int64_t> counts_send_, counts_recv_, send_rows_, recv_rows_, cursor_;
  MoeRouting routing_;
};

}  // namespace dsv4
