#include "parallel/head_seam.h"

#include <cstring>

#include "kernels/lm_head/lm_head.h"

namespace dsv4 {

HeadSeam::HeadSeam(int64_t hidden, int64_t vocab, int tp, int tp_rank, int64_t capacity)
    : D_(hidden), V_(vocab), Vs_(vocab / tp), tp_(tp), rank_(tp_rank), capacity_(capacity) {
  all_.resize(static_cast<size_t>(capacity * hidden));
  shard_.resize(static_cast<size_t>(capacity * Vs_));
  recv_.resize(static_cast<size_t>(capacity * Vs_ * tp));
  recv_rows_.resize(static_cast<size_t>(tp));
}

Status HeadSeam::run(Communicator& tp, ThreadPool& pool, const LinearWeight& head, const bf16* y,
                     std::span<const int64_t> rows, const int32_t* out_row, float* logits) {
  if (tp.size() != tp_ || tp.rank() != rank_ || static_cast<int>(rows.size()) != tp_ || V_ % tp_ != 0)
    return Status::errorf("LM head seam: built for rank {} of {}, called on rank {} of {}", rank_, tp_, tp.rank(),
                          tp.size());
  int64_t group_t = 0;
  for (int64_t r : rows) group_t += r;
  if (group_t > capacity_)
    return Status::errorf("LM head seam: {} rows in the TP group exceed the capacity {}", group_t, capacity_);
  SeamTimer total(&time.total);
  const int64_t T = rows[rank_];
  int64_t mark = tp.total_sent();
  {
    SeamTimer exposed(&time.exposed);
    DSV4_RETURN_IF_ERROR(tp.all_gather_rows(y, rows, D_ * sizeof(bf16), all_.data()));
  }
  gather_bytes += tp.total_sent() - mark;
  const kernels::LmHeadParams lp{rank_ * Vs_, (rank_ + 1) * Vs_, Vs_};
  if (group_t > 0)
    pool.run([&](int tid, int n) { kernels::lm_head(lp, head, all_.data(), group_t, shard_.data(), tid, n); });
  for (int q = 0; q < tp_; ++q) recv_rows_[q] = T;
  mark = tp.total_sent();
  {
    SeamTimer exposed(&time.exposed);
    DSV4_RETURN_IF_ERROR(tp.all_to_all_rows(shard_.data(), rows, recv_.data(), recv_rows_, Vs_ * sizeof(float)));
  }
  logits_bytes += tp.total_sent() - mark;
  if (logits)
    for (int q = 0; q < tp_; ++q)
      for (int64_t t = 0; t < T; ++t)
        if (out_row[t] >= 0)
          std::memcpy(logits + out_row[t] * V_ + q * Vs_, recv_.data() + (q * T + t) * Vs_, sizeof(float) * Vs_);
  return Status();
}

}  // namespace dsv4
