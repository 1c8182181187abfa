#include "parallel/attn_output_seam.h"

#include <algorithm>
#include <cstring>

#include "kernels/linear/linear.h"
#include "parallel/fixed_order.h"
#include "parallel/weight_shard.h"

namespace dsv4 {

namespace k = kernels;

Result<OutProjShard> make_out_proj_shard(const k::OutProjParams& p, const LinearWeight& wo_a,
                                         const LinearWeight& wo_b, int tp, int tp_rank) {
  if (tp < 1 || p.o_groups % tp != 0)
    return Status::errorf("--tp {} does not divide o_groups = {}", tp, p.o_groups);
  if (tp > 1 && p.o_lora_rank % 128 != 0)
    return Status::errorf("o_lora_rank = {} must be a multiple of 128 with --tp {}", p.o_lora_rank, tp);
  if (wo_a.out != p.u_width() || wo_a.in != p.group_in() || wo_b.out != p.hidden || wo_b.in != p.u_width())
    return Status::errorf("output projection shapes wo_a [{}, {}], wo_b [{}, {}] do not match the config", wo_a.out,
                          wo_a.in, wo_b.out, wo_b.in);
  const int64_t gl = p.o_groups / tp, k0 = tp_rank * gl * p.o_lora_rank, k1 = k0 + gl * p.o_lora_rank;
  OutProjShard s;
  Result<LinearWeight> a = row_shard(wo_a, k0, k1);
  if (!a.ok()) return a.status().with_context("wo_a");
  s.wo_a = *a;
  Result<LinearWeight> b = column_shard_copy(wo_b, k0, k1, s.storage);
  if (!b.ok()) return b.status().with_context("wo_b");
  s.wo_b = *b;
  return s;
}

AttnOutputSeam::AttnOutputSeam(const k::OutProjParams& p, int tp, int tp_rank, int64_t capacity)
    : p_(p), tp_(tp), rank_(tp_rank), capacity_(capacity), n_local_(p.o_groups / tp) {
  const int64_t hd = int64_t{p.n_heads} * p.head_dim, ul = n_local_ * p.o_lora_rank;
  x_.resize(static_cast<size_t>(capacity * hd / tp));
  u_.resize(static_cast<size_t>(capacity * ul));
  uq_.resize(static_cast<size_t>(capacity * ul));
  partial_.resize(static_cast<size_t>(n_local_ * capacity * p.hidden));
  reduce_.resize(static_cast<size_t>(reduce_scatter_scratch_floats(p.o_groups, tp, capacity, p.hidden)));
  acc_.resize(static_cast<size_t>(capacity * p.hidden));
}

Status AttnOutputSeam::run(Communicator& tp, ThreadPool& pool, const OutProjShard& w, const bf16* o,
                           std::span<const int64_t> rows, bf16* out) {
  if (tp.size() != tp_ || tp.rank() != rank_ || static_cast<int>(rows.size()) != tp_)
    return Status::errorf("attention output seam: built for rank {} of {}, called on rank {} of {} with {} counts",
                          rank_, tp_, tp.rank(), tp.size(), rows.size());
  int64_t group_t = 0;
  for (int64_t r : rows) group_t += r;
  if (group_t > capacity_)
    return Status::errorf("attention output seam: {} rows in the TP group exceed the capacity {}", group_t, capacity_);
  const int64_t T = rows[rank_], hd = int64_t{p_.n_heads} * p_.head_dim, slice = hd / tp_;
  const int64_t Din = p_.group_in(), Ro = p_.o_lora_rank, ul = n_local_ * Ro, D = p_.hidden;

  SeamTimer total(&time.total);
  // 1 all-to-all of head groups: to rank d, each own row's slice of d's heads, sent from o's
  // own layout [T, H·Dh] (a strided send: no pack).
  int64_t mark = tp.total_sent();
  {
    SeamTimer exposed(&time.exposed);
    const int64_t row = slice * static_cast<int64_t>(sizeof(bf16));
    DSV4_RETURN_IF_ERROR(tp.all_to_all_strided(o, T, hd * static_cast<int64_t>(sizeof(bf16)), row, x_.data(), rows,
                                               row));
  }
  a2a_bytes += tp.total_sent() - mark;

  // 2-4 local groups over all group rows (none: still join the reduce-scatter).
  const bf16* x = x_.data();
  if (group_t > 0) pool.run([&](int tid, int n) {
    for (int64_t lg = 0; lg < n_local_; ++lg) {
      k::LinearSlice s;
      s.o0 = lg * Ro;
      s.o1 = s.o0 + Ro;
      s.x_stride = slice;
      s.y_stride = ul;
      k::linear_slice(w.wo_a, s, x + lg * Din, group_t, u_.data() + s.o0, tid, n);
    }
  });
  const bool q = w.wo_b.quantized();
  if (q && group_t > 0) pool.run([&](int tid, int n) { k::actq_rows(u_.data(), group_t, ul, uq_.data(), tid, n); });
  const bf16* ub = q ? uq_.data() : u_.data();
  if (group_t > 0) pool.run([&](int tid, int n) {
    for (int64_t lg = 0; lg < n_local_; ++lg) {
      k::LinearSlice s;
      s.k0 = lg * Ro;
      s.k1 = s.k0 + Ro;
      s.x_stride = ul;
      s.y_stride = n_local_ * D;  // [group_t, G_l, D]: the reduce-scatter's send layout
      k::linear_slice(w.wo_b, s, ub, group_t, partial_.data() + lg * D, tid, n);
    }
  });

  // 5 owners sum the group partials in ascending group order, then one bf16 cast.
  mark = tp.total_sent();
  {
    SeamTimer exposed(&time.exposed);
    DSV4_RETURN_IF_ERROR(reduce_scatter_fixed_order(tp, p_.o_groups, partial_.data(), rows, D, acc_.data(),
                                                    reduce_.data()));
  }
  reduce_bytes += tp.total_sent() - mark;
  const float* acc = acc_.data();
  pool.run([&](int tid, int n) {
    const int64_t per = (T + n - 1) / n, t0 = tid * per, t1 = std::min(T, t0 + per);
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t j = 0; j < D; ++j) out[t * D + j] = bf16::from_float(acc[t * D + j]);
  });
  return Status();
}

}  // namespace dsv4
