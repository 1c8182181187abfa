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
  dispatch_ = k::MoeDispatchParams{K, rank_ * n_local_, n_local_, T};
  shared_only_ = k::MoeDispatchParams{0, 0, 0, T};
  // A row goes to at most min(K, P − 1) other ranks; the group's rows never exceed T.
  send_cap_ = T * std::max<int64_t>(1, std::min<int64_t>(K, ep - 1));
  batch_f_.resize(static_cast<size_t>(T * D));
  batch_ids_.resize(static_cast<size_t>(T * K));
  batch_w_.resize(static_cast<size_t>(T * K));
  send_f_.resize(static_cast<size_t>(send_cap_ * D));
  send_ids_.resize(static_cast<size_t>(send_cap_ * K));
  send_w_.resize(static_cast<size_t>(send_cap_ * K));
  auto carve = [&](std::vector<uint8_t>& buf, const k::MoeDispatchParams& d, int64_t n) {
    void* base = buf.data();
    size_t space = buf.size();
    return k::moe_expert_scratch_carve(p.expert, d, std::align(64, static_cast<size_t>(n), base, space), n);
  };
  const int64_t shared_bytes = k::moe_expert_scratch_bytes(p.expert, shared_only_);
  shared_buf_.resize(static_cast<size_t>(shared_bytes + 64));
  shared_work_ = carve(shared_buf_, shared_only_, shared_bytes);
  // The returned outputs (at most T·K rows) follow the routed pass's scratch, at a whole row of work_.x.
  const int64_t bytes = k::moe_expert_scratch_bytes(p.expert, dispatch_), row_bytes = 2 * D;
  work_buf_.resize(static_cast<size_t>(64 + bytes + row_bytes + T * K * row_bytes));
  work_ = carve(work_buf_, dispatch_, bytes);
  const int64_t x_off = reinterpret_cast<uint8_t*>(work_.x) - work_buf_.data();
  const int64_t end = reinterpret_cast<uint8_t*>(work_.expert_begin) - work_buf_.data() + bytes;
  back_row0_ = (end - x_off + row_bytes - 1) / row_bytes;
  DSV4_CHECK(x_off + (back_row0_ + T * K) * row_bytes <= static_cast<int64_t>(work_buf_.size()),
             "MoE seam: returned outputs past the buffer");
  back_send_.resize(static_cast<size_t>(T * K * D));
  route_row_.resize(static_cast<size_t>(T * K));
  for (auto* v : {&counts_send_, &counts_recv_}) v->resize(static_cast<size_t>(2 * ep));
  for (auto* v : {&send_rows_, &recv_rows_, &cursor_, &routing_.rows_to, &routing_.routes_to})
    v->resize(static_cast<size_t>(ep));
}

Status MoeSeam::run(Communicator& ep, ThreadPool& pool, int64_t T, const k::ExpertWeights* experts,
                    const k::ExpertWeights& shared, bf16* m) {
  if (ep.size() != ep_ || ep.rank() != rank_)
    return Status::errorf("MoE seam: built for rank {} of {}, called on rank {} of {}", rank_, ep_, ep.rank(),
                          ep.size());
  if (T < 0 || T > p_.capacity) return Status::errorf("MoE seam: {} rows outside [0, {}]", T, p_.capacity);
  SeamTimer total(&time.total);
  pack_dispatch(T);
  int64_t R = 0, back_rows = 0;
  DSV4_RETURN_IF_ERROR(start_counts(ep));
  if (!overlap) DSV4_RETURN_IF_ERROR(finish_counts(T, R, back_rows));
  k::moe_dispatch_build(batch_ids_.data(), T, shared_only_, &shared_work_, T);
  shared_phases(pool, 0, 1, shared);  // counts in flight
  if (overlap) DSV4_RETURN_IF_ERROR(finish_counts(T, R, back_rows));
  DSV4_RETURN_IF_ERROR(start_dispatch(ep, T));
  if (!overlap) DSV4_RETURN_IF_ERROR(wait_dispatch());
  shared_phases(pool, 2, 3, shared);  // dispatch in flight
  DSV4_RETURN_IF_ERROR(wait_dispatch());
  run_experts(pool, experts, shared, T + R);
  DSV4_RETURN_IF_ERROR(return_outputs(ep, T, R, back_rows));
  combine_own_rows(pool, T, m);
  return Status();
}

// The three dispatch send layouts, peer after peer, rows ascending.
void MoeSeam::pack_dispatch(int64_t T) {
  const int64_t K = p_.top_k, D = p_.expert.hidden;
  std::fill(routing_.rows_to.begin(), routing_.rows_to.end(), 0);
  std::fill(routing_.routes_to.begin(), routing_.routes_to.end(), 0);
  int64_t sent = 0;
  for (int d = 0; d < ep_; ++d) {
    if (d == rank_) continue;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t* row = batch_ids_.data() + t * K;
      int64_t routes = 0;
      for (int64_t j = 0; j < K; ++j) routes += owner(row[j]) == d && first_of_id(row, j);
      if (routes == 0) continue;
      DSV4_CHECK(sent < send_cap_, "MoE seam: dispatch exceeds the capacity {}", send_cap_);
      std::memcpy(send_f_.data() + sent * D, batch_f_.data() + t * D, sizeof(bf16) * D);
      std::memcpy(send_ids_.data() + sent * K, row, sizeof(int32_t) * K);
      std::memcpy(send_w_.data() + sent * K, batch_w_.data() + t * K, sizeof(float) * K);
      ++sent;
      ++routing_.rows_to[d];
      routing_.routes_to[d] += routes;
    }
  }
  copied_bytes += sent * (2 * D + 8 * K);
}

// All-to-all of (rows, routes) per peer: R rows will arrive, back_rows outputs go back.
Status MoeSeam::start_counts(Communicator& ep) {
  for (int d = 0; d < ep_; ++d) {
    counts_send_[2 * d] = routing_.rows_to[d];
    counts_send_[2 * d + 1] = routing_.routes_to[d];
    send_rows_[d] = 1;
  }
  const int64_t mark = ep.total_sent();
  DSV4_RETURN_IF_ERROR(
      ep.start_all_to_all_rows(counts_send_.data(), send_rows_, counts_recv_.data(), send_rows_, 16, counts_.handle()));
  counts_.started(time);
  counts_bytes += ep.total_sent() - mark;
  return Status();
}

Status MoeSeam::finish_counts(int64_t T, int64_t& R, int64_t& back_rows) {
  DSV4_RETURN_IF_ERROR(counts_.finish(time));
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

// Rows, ids and route weights to the expert ranks, received after the batch's own rows.
Status MoeSeam::start_dispatch(Communicator& ep, int64_t T) {
  const int64_t K = p_.top_k, D = p_.expert.hidden;
  const int64_t mark = ep.total_sent();
  DSV4_RETURN_IF_ERROR(ep.start_all_to_all_rows(send_f_.data(), routing_.rows_to, batch_f_.data() + T * D,
                                                recv_rows_, sizeof(bf16) * D, dispatch_f_.handle()));
  DSV4_RETURN_IF_ERROR(ep.start_all_to_all_rows(send_ids_.data(), routing_.rows_to, batch_ids_.data() + T * K,
                                                recv_rows_, sizeof(int32_t) * K, dispatch_ids_.handle()));
  DSV4_RETURN_IF_ERROR(ep.start_all_to_all_rows(send_w_.data(), routing_.rows_to, batch_w_.data() + T * K,
                                                recv_rows_, sizeof(float) * K, dispatch_w_.handle()));
  for (InFlight* c : {&dispatch_f_, &dispatch_ids_, &dispatch_w_}) c->started(time);
  dispatch_bytes += ep.total_sent() - mark;
  return Status();
}

Status MoeSeam::wait_dispatch() {
  DSV4_RETURN_IF_ERROR(dispatch_f_.finish(time));
  DSV4_RETURN_IF_ERROR(dispatch_ids_.finish(time));
  return dispatch_w_.finish(time);
}

void MoeSeam::poke() {
  counts_.poke(time);
  dispatch_f_.poke(time);
  dispatch_ids_.poke(time);
  dispatch_w_.poke(time);
}

void MoeSeam::shared_phases(ThreadPool& pool, int first, int last, const k::ExpertWeights& shared) {
  const k::MoeWork& mw = shared_work_;
  if (mw.T == 0) return;
  const k::MoeDispatchParams& d = shared_only_;
  const bf16* f = batch_f_.data();
  for (int ph = first; ph <= last; ++ph) {
    pool.run([&](int tid, int n) {
      switch (ph) {
        case 0: k::moe_experts_in(f, nullptr, shared, p_.expert, d, mw, tid, n); break;
        case 1: k::moe_experts_up(nullptr, shared, p_.expert, d, mw, tid, n); break;
        case 2: k::moe_experts_act(nullptr, nullptr, shared, p_.expert, d, mw, tid, n); break;
        default: k::moe_experts_down(nullptr, shared, p_.expert, d, mw, tid, n); break;
      }
    });
    poke();
  }
}

// The local experts over [T own rows | R received rows] (no shared expert).
void MoeSeam::run_experts(ThreadPool& pool, const k::ExpertWeights* experts, const k::ExpertWeights& shared,
                          int64_t rows) {
  k::moe_dispatch_build(batch_ids_.data(), rows, dispatch_, &work_, 0);
  if (rows == 0) return;
  const k::MoeWork& mw = work_;
  const bf16* f = batch_f_.data();
  const float* w = batch_w_.data();
  pool.run([&](int tid, int n) { k::moe_experts_in(f, experts, shared, p_.expert, dispatch_, mw, tid, n); });
  pool.run([&](int tid, int n) { k::moe_experts_up(experts, shared, p_.expert, dispatch_, mw, tid, n); });
  pool.run([&](int tid, int n) { k::moe_experts_act(w, experts, shared, p_.expert, dispatch_, mw, tid, n); });
  pool.run([&](int tid, int n) { k::moe_experts_down(experts, shared, p_.expert, dispatch_, mw, tid, n); });
}

// Combine: received rows' outputs back to their owners, in (row, slot) order.
Status MoeSeam::return_outputs(Communicator& ep, int64_t T, int64_t R, int64_t back_rows) {
  const int64_t K = p_.top_k, D = p_.expert.hidden;
  const k::MoeWork& mw = work_;
  int64_t b = 0;
  for (int64_t row = T; row < T + R; ++row) {
    for (int64_t s = 0; s < K; ++s) {
      const int32_t e = mw.slot_entry[row * K + s];
      if (e < 0 || !first_of_id(batch_ids_.data() + row * K, s)) continue;
      std::memcpy(back_send_.data() + b * D, mw.x + e * D, sizeof(bf16) * D);
      ++b;
    }
  }
  copied_bytes += b * 2 * D;
  DSV4_CHECK(b == back_rows, "MoE seam: {} expert outputs to return, peers announced {}", b, back_rows);
  for (int q = 0; q < ep_; ++q) send_rows_[q] = counts_recv_[2 * q + 1];
  const int64_t mark = ep.total_sent();
  {
    SeamTimer exposed(&time.exposed);
    DSV4_RETURN_IF_ERROR(ep.all_to_all_rows(back_send_.data(), send_rows_, work_.x + back_row0_ * D,
                                            routing_.routes_to, sizeof(bf16) * D));
  }
  combine_bytes += ep.total_sent() - mark;
  return Status();
}

// Own rows: the row of every distinct route's output (computed here or returned), then the
// fixed-order sum (A13).
void MoeSeam::combine_own_rows(ThreadPool& pool, int64_t T, bf16* m) {
  const int64_t K = p_.top_k, D = p_.expert.hidden;
  int64_t off = back_row0_;
  for (int d = 0; d < ep_; ++d) {
    cursor_[d] = off;
    off += routing_.routes_to[d];
  }
  const int32_t* ids = batch_ids_.data();
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* row = ids + t * K;
    for (int64_t s = 0; s < K; ++s) {
      int32_t& r = route_row_[t * K + s];
      if (!first_of_id(row, s)) {
        r = 0;  // a repeated id: the kernel reads its first slot's row
        continue;
      }
      const int d = owner(row[s]);
      r = d == rank_ ? work_.slot_entry[t * K + s] : static_cast<int32_t>(cursor_[d]++);
    }
  }
  const k::MoeCombineParams cp{D, K};
  const bf16* shared_out = k::shared_out(shared_work_, p_.expert);
  const bf16* routed = work_.x;
  pool.run([&](int tid, int n) { k::moe_combine(routed, route_row_.data(), ids, shared_out, cp, T, m, tid, n); });
}

}  // namespace dsv4
