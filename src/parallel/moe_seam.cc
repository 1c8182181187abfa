#include "parallel/moe_seam.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "base/check.h"
#include "kernels/moe_combine/moe_combine.h"

namespace dsv4 {

namespace k = kernels;

namespace {

// Slot k of a row is the first to hold its expert id (a hash row may repeat one, model.md §9.1).
bool first_of_id(const int32_t* row_ids, int64_t k) {
  for (int64_t j = 0; j < k; ++j)
    if (row_ids[j] == row_ids[k]) return false;
  return true;
}

}  // namespace

MoeSeam::MoeSeam(const MoeSeamParams& p, int ep, int ep_rank) : p_(p), ep_(ep), rank_(ep_rank) {
  const int64_t T = p.capacity, K = p.top_k, D = p.expert.hidden;
  n_local_ = p.n_experts / ep;
  payload_bytes_ = D * 2 + K * 8;
  dispatch_ = k::MoeDispatchParams{K, rank_ * n_local_, n_local_, T};
  // A row goes to at most min(K, P − 1) other ranks; the group's rows never exceed T.
  send_cap_ = T * std::max<int64_t>(1, std::min<int64_t>(K, ep - 1));
  send_.resize(static_cast<size_t>(send_cap_ * payload_bytes_));
  recv_.resize(static_cast<size_t>(T * payload_bytes_));
  const int64_t bytes = k::moe_expert_scratch_bytes(p.expert, dispatch_);
  work_buf_.resize(static_cast<size_t>(bytes + 64));
  void* base = work_buf_.data();
  size_t space = work_buf_.size();
  work_ = k::moe_expert_scratch_carve(p.expert, dispatch_, std::align(64, static_cast<size_t>(bytes), base, space),
                                      bytes);
  f_.resize(static_cast<size_t>(T * D));
  ids_.resize(static_cast<size_t>(T * K));
  w_.resize(static_cast<size_t>(T * K));
  combine_.resize(static_cast<size_t>(T * K * D));
  back_send_.resize(static_cast<size_t>(T * K * D));
  back_recv_.resize(static_cast<size_t>(T * K * D));
  for (auto* v : {&counts_send_, &counts_recv_}) v->resize(static_cast<size_t>(2 * ep));
  for (auto* v : {&send_rows_, &recv_rows_, &cursor_, &routing_.rows_to, &routing_.routes_to})
    v->resize(static_cast<size_t>(ep));
}

Status MoeSeam::run(Communicator& ep, ThreadPool& pool, const bf16* f, const int32_t* ids, const float* route_w,
                    int64_t T, const k::ExpertWeights* experts, const k::ExpertWeights& shared, bf16* m) {
  if (ep.size() != ep_ || ep.rank() != rank_)
    return Status::errorf("MoE seam: built for rank {} of {}, called on rank {} of {}", rank_, ep_, ep.rank(),
                          ep.size());
  pack_dispatch(f, ids, route_w, T);
  int64_t R = 0, back_rows = 0;
  DSV4_RETURN_IF_ERROR(exchange_counts(ep, T, R, back_rows));
  const int64_t mark = ep.total_sent();
  DSV4_RETURN_IF_ERROR(ep.all_to_all_rows(send_.data(), routing_.rows_to, recv_.data(), recv_rows_, payload_bytes_));
  dispatch_bytes += ep.total_sent() - mark;
  gather_batch(f, ids, route_w, T, R);
  run_experts(pool, experts, shared, T, R);
  DSV4_RETURN_IF_ERROR(return_outputs(ep, T, R, back_rows));
  combine_own_rows(pool, ids, T, m);
  return Status();
}

// Counts and the dispatch payload, peer after peer, rows ascending.
void MoeSeam::pack_dispatch(const bf16* f, const int32_t* ids, const float* route_w, int64_t T) {
  const int64_t K = p_.top_k, D = p_.expert.hidden;
  std::fill(routing_.rows_to.begin(), routing_.rows_to.end(), 0);
  std::fill(routing_.routes_to.begin(), routing_.routes_to.end(), 0);
  int64_t sent = 0;
  for (int d = 0; d < ep_; ++d) {
    if (d == rank_) continue;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t* row = ids + t * K;
      int64_t routes = 0;
      for (int64_t j = 0; j < K; ++j) routes += owner(row[j]) == d && first_of_id(row, j);
      if (routes == 0) continue;
      DSV4_CHECK(sent < send_cap_, "MoE seam: dispatch exceeds the capacity {}", send_cap_);
      uint8_t* dst = send_.data() + sent * payload_bytes_;
      std::memcpy(dst, f + t * D, 2 * D);
      std::memcpy(dst + 2 * D, row, 4 * K);
      std::memcpy(dst + 2 * D + 4 * K, route_w + t * K, 4 * K);
      ++sent;
      ++routing_.rows_to[d];
      routing_.routes_to[d] += routes;
    }
  }
}

// All-to-all of (rows, routes) per peer: R rows will arrive, back_rows outputs go back.
Status MoeSeam::exchange_counts(Communicator& ep, int64_t T, int64_t& R, int64_t& back_rows) {
  for (int d = 0; d < ep_; ++d) {
    counts_send_[2 * d] = routing_.rows_to[d];
    counts_send_[2 * d + 1] = routing_.routes_to[d];
    send_rows_[d] = 1;
  }
  const int64_t mark = ep.total_sent();
  DSV4_RETURN_IF_ERROR(ep.all_to_all_rows(counts_send_.data(), send_rows_, counts_recv_.data(), send_rows_, 16));
  counts_bytes += ep.total_sent() - mark;
  R = back_rows = 0;
  for (int q = 0; q < ep_; ++q) {
    recv_rows_[q] = counts_recv_[2 * q];
    R += recv_rows_[q];
    back_rows += counts_recv_[2 * q + 1];
  }
  // The EP group's rows never exceed the step's (capacity); a broken invariant must not leave
  // the peers waiting in the next collective, so it ends the process (and the job).
  DSV4_CHECK(T + R <= p_.capacity, "MoE seam: {} own and {} received rows exceed the capacity {}", T, R,
             p_.capacity);
  return Status();
}

// The expert batch: own rows (shared expert too), then received rows.
void MoeSeam::gather_batch(const bf16* f, const int32_t* ids, const float* route_w, int64_t T, int64_t R) {
  const int64_t K = p_.top_k, D = p_.expert.hidden;
  std::memcpy(f_.data(), f, sizeof(bf16) * T * D);
  std::memcpy(ids_.data(), ids, sizeof(int32_t) * T * K);
  std::memcpy(w_.data(), route_w, sizeof(float) * T * K);
  for (int64_t j = 0; j < R; ++j) {
    const uint8_t* src = recv_.data() + j * payload_bytes_;
    std::memcpy(f_.data() + (T + j) * D, src, 2 * D);
    std::memcpy(ids_.data() + (T + j) * K, src + 2 * D, 4 * K);
    std::memcpy(w_.data() + (T + j) * K, src + 2 * D + 4 * K, 4 * K);
  }
}

// One grouped expert pass over [T own rows | R received rows] (the shared expert on the own rows).
void MoeSeam::run_experts(ThreadPool& pool, const k::ExpertWeights* experts, const k::ExpertWeights& shared,
                          int64_t T, int64_t R) {
  k::moe_dispatch_build(ids_.data(), T + R, dispatch_, &work_, T);
  const k::MoeWork& mw = work_;
  pool.run([&](int tid, int n) { k::moe_experts_in(f_.data(), experts, shared, p_.expert, dispatch_, mw, tid, n); });
  pool.run([&](int tid, int n) { k::moe_experts_up(experts, shared, p_.expert, dispatch_, mw, tid, n); });
  pool.run([&](int tid, int n) { k::moe_experts_act(w_.data(), experts, shared, p_.expert, dispatch_, mw, tid, n); });
  pool.run([&](int tid, int n) { k::moe_experts_down(experts, shared, p_.expert, dispatch_, mw, tid, n); });
}

// Combine: received rows' outputs back to their owners, in (row, slot) order.
Status MoeSeam::return_outputs(Communicator& ep, int64_t T, int64_t R, int64_t back_rows) {
  const int64_t K = p_.top_k, D = p_.expert.hidden;
  const k::MoeWork& mw = work_;
  int64_t b = 0;
  for (int64_t j = 0; j < R; ++j) {
    const int64_t row = T + j;
    for (int64_t s = 0; s < K; ++s) {
      const int32_t e = mw.slot_entry[row * K + s];
      if (e < 0 || !first_of_id(ids_.data() + row * K, s)) continue;
      std::memcpy(back_send_.data() + b * D, mw.x + e * D, sizeof(bf16) * D);
      ++b;
    }
  }
  DSV4_CHECK(b == back_rows, "MoE seam: {} expert outputs to return, peers announced {}", b, back_rows);
  for (int q = 0; q < ep_; ++q) send_rows_[q] = counts_recv_[2 * q + 1];
  const int64_t mark = ep.total_sent();
  DSV4_RETURN_IF_ERROR(
      ep.all_to_all_rows(back_send_.data(), send_rows_, back_recv_.data(), routing_.routes_to, sizeof(bf16) * D));
  combine_bytes += ep.total_sent() - mark;
  return Status();
}

// Own rows: every distinct route's output in its slot row, then the fixed-order sum (A13).
void MoeSeam::combine_own_rows(ThreadPool& pool, const int32_t* ids, int64_t T, bf16* m) {
  const int64_t K = p_.top_k, D = p_.expert.hidden;
  const k::MoeWork& mw = work_;
  int64_t off = 0;
  for (int d = 0; d < ep_; ++d) {
    cursor_[d] = off;
    off += routing_.routes_to[d];
  }
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* row = ids + t * K;
    for (int64_t s = 0; s < K; ++s) {
      if (!first_of_id(row, s)) continue;
      const int d = owner(row[s]);
      const bf16* src = d == rank_ ? mw.x + mw.slot_entry[t * K + s] * D : back_recv_.data() + cursor_[d]++ * D;
      std::memcpy(combine_.data() + (t * K + s) * D, src, sizeof(bf16) * D);
    }
  }
  const k::MoeCombineParams cp{D, K};
  const bf16* shared_out = k::shared_out(mw, p_.expert);
  pool.run([&](int tid, int n) { k::moe_combine(combine_.data(), nullptr, ids, shared_out, cp, T, m, tid, n); });
}

}  // namespace dsv4
