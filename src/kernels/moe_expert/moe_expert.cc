// Engine experts: dispatch by counting sort, then the four phases of moe_expert.h over all local
// experts and the shared expert at once (one ThreadPool::run per phase for the whole layer).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/math.h"
#include "kernels/linear/linear.h"
#include "kernels/moe_expert/moe_expert.h"
#include "numeric/quant.h"

namespace dsv4::kernels {
namespace {

// fn(weights, r0, n) on every local expert's entry rows [r0, r0 + n) (ascending), then on
// the shared expert's rows.
template <class Fn>
void for_each_expert_rows(const ExpertWeights* experts, const ExpertWeights& shared, const MoeDispatchParams& d,
                          const MoeWork& w, Fn&& fn) {
  for (int64_t i = 0; i < d.n_local; ++i) {
    const int64_t r0 = w.expert_begin[i], n = w.expert_begin[i + 1] - r0;
    if (n > 0) fn(experts[i], r0, n);
  }
  if (w.shared_rows > 0) fn(shared, w.n_entries, w.shared_rows);
}


constexpr int64_t kAlign = 64;

int64_t aligned(int64_t bytes) { return ceil_div(bytes, kAlign) * kAlign; }
int64_t act_rows(const MoeDispatchParams& d) { return d.capacity * (d.num_experts_per_tok + 1); }

void check_shapes(const ExpertWeights& w, const MoeExpertParams& p) {
  const int64_t D = p.hidden, F = p.moe_intermediate_size;
  DSV4_CHECK(w.w1.out == F && w.w1.in == D && w.w3.out == F && w.w3.in == D && w.w2.out == D &&
                 w.w2.in == F,
             "expert shapes w1 [{}, {}] w3 [{}, {}] w2 [{}, {}] for D={} F={}", w.w1.out, w.w1.in,
             w.w3.out, w.w3.in, w.w2.out, w.w2.in, D, F);
  DSV4_CHECK(w.w1.quantized() == w.w3.quantized(), "w1 and w3 must share actq (one input)");
}

// Weights of activation row r: a routed entry's expert, or the shared expert.
const ExpertWeights& weights_of_row(int64_t r, const ExpertWeights* experts,
                                    const ExpertWeights& shared, const MoeDispatchParams& d,
                                    const MoeWork& w) {
  if (r >= w.n_entries) return shared;
  const int32_t* b = w.expert_begin;
  const int64_t i = std::upper_bound(b, b + d.n_local + 1, static_cast<int32_t>(r)) - b - 1;
  return experts[i];
}

// Source row t of activation row r.
int64_t source_row(int64_t r, const MoeDispatchParams& d, const MoeWork& w) {
  return r < w.n_entries ? w.entry_slot[r] / d.num_experts_per_tok : r - w.n_entries;
}

// Input rows [r0, r0 + n) of one expert's group: in place (moe_experts_gather) for the shared
// expert and one-entry experts, else x.
const bf16* group_input(const ExpertWeights& e, int64_t r0, int64_t n, int64_t D, const MoeDispatchParams& d,
                        const MoeWork& w) {
  const bf16* in_place = e.w1.quantized() ? w.in_q : w.in_f;
  if (in_place && (r0 >= w.n_entries || n == 1)) return in_place + source_row(r0, d, w) * D;
  return w.x + r0 * D;
}

}  // namespace

int64_t moe_expert_scratch_bytes(const MoeExpertParams& p, const MoeDispatchParams& d) {
  const int64_t slots = d.capacity * d.num_experts_per_tok, R = act_rows(d);
  return aligned((d.n_local + 1) * 4) + 2 * aligned(slots * 4) + aligned(R * p.hidden * 2) +
         2 * aligned(R * p.moe_intermediate_size * 2);
}

MoeWork moe_expert_scratch_carve(const MoeExpertParams& p, const MoeDispatchParams& d, void* buf,
                                 int64_t bytes) {
  DSV4_CHECK(bytes >= moe_expert_scratch_bytes(p, d), "MoE scratch {} bytes, needs {}", bytes,
             moe_expert_scratch_bytes(p, d));
  DSV4_CHECK(reinterpret_cast<uintptr_t>(buf) % kAlign == 0, "MoE scratch not 64-byte aligned");
  char* c = static_cast<char*>(buf);
  const int64_t slots = d.capacity * d.num_experts_per_tok, R = act_rows(d);
  MoeWork w;
  w.expert_begin = reinterpret_cast<int32_t*>(c);
  c += aligned((d.n_local + 1) * 4);
  w.entry_slot = reinterpret_cast<int32_t*>(c);
  c += aligned(slots * 4);
  w.slot_entry = reinterpret_cast<int32_t*>(c);
  c += aligned(slots * 4);
  w.x = reinterpret_cast<bf16*>(c);
  c += aligned(R * p.hidden * 2);
  w.g = reinterpret_cast<bf16*>(c);
  c += aligned(R * p.moe_intermediate_size * 2);
  w.u = reinterpret_cast<bf16*>(c);
  return w;
}

void moe_dispatch_build(const int32_t* ids, int64_t T, const MoeDispatchParams& d, MoeWork* w,
                        int64_t shared_rows) {
  const int64_t K = d.num_experts_per_tok, E = d.n_local;
  DSV4_CHECK(T >= 0 && T <= d.capacity, "MoE rows {} exceed the capacity {}", T, d.capacity);
  int32_t* b = w->expert_begin;
  // First slot of row t holding the id of slot k (k itself unless the row repeats the id).
  auto first_slot = [&](int64_t t, int64_t k) {
    for (int64_t j = 0; j < k; ++j)
      if (ids[t * K + j] == ids[t * K + k]) return j;
    return k;
  };
  std::fill(b, b + E + 1, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t i = ids[t * K + k] - d.expert_first;
      if (i >= 0 && i < E && first_slot(t, k) == k) ++b[i + 1];
    }
  // b[i + 1] = start of expert i; the fill below advances it to the start of i + 1.
  int32_t run = 0;
  for (int64_t i = 0; i < E; ++i) {
    const int32_t c = b[i + 1];
    b[i + 1] = run;
    run += c;
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t slot = t * K + k, i = ids[slot] - d.expert_first, j = first_slot(t, k);
      if (j != k) {
        w->slot_entry[slot] = w->slot_entry[t * K + j];
      } else if (i >= 0 && i < E) {
        const int32_t r = b[i + 1]++;
        w->entry_slot[r] = static_cast<int32_t>(slot);
        w->slot_entry[slot] = r;
      } else {
        w->slot_entry[slot] = -1;
      }
    }
  w->T = T;
  w->in_q = nullptr;
  w->in_f = nullptr;
  w->shared_rows = shared_rows < 0 ? T : std::min(shared_rows, T);
  w->n_entries = run;
}

void moe_experts_in(const bf16* f, const ExpertWeights* experts, const ExpertWeights& shared,
                    const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w, int tid,
                    int nthreads) {
  const int64_t D = p.hidden;
  const Range r = split_range(w.n_entries + w.shared_rows, tid, nthreads);
  for (int64_t row = r.begin; row < r.end; ++row) {
    const bf16* src = f + source_row(row, d, w) * D;
    bf16* dst = w.x + row * D;
    if (weights_of_row(row, experts, shared, d, w).w1.quantized())
      actq_rows(src, 1, D, dst, 0, 1);
    else
      std::memcpy(dst, src, D * sizeof(bf16));
  }
}

void moe_experts_gather(const bf16* f, const bf16* fq, const ExpertWeights* experts, const ExpertWeights& shared,
                        const MoeExpertParams& p, const MoeDispatchParams& d, MoeWork* w) {
  const int64_t D = p.hidden;
  w->in_q = fq;
  w->in_f = f;
  for_each_expert_rows(experts, shared, d, *w, [&](const ExpertWeights& e, int64_t r0, int64_t n) {
    if (group_input(e, r0, n, D, d, *w) != w->x + r0 * D) return;  // read in place
    const bf16* src = e.w1.quantized() ? fq : f;
    for (int64_t row = r0; row < r0 + n; ++row)
      std::memcpy(w->x + row * D, src + source_row(row, d, *w) * D, D * sizeof(bf16));
  });
}

void moe_experts_up(const ExpertWeights* experts, const ExpertWeights& shared,
                    const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w, int tid,
                    int nthreads) {
  const int64_t D = p.hidden, F = p.moe_intermediate_size;
  auto up = [&](const ExpertWeights& e, int64_t r0, int64_t n) {
    check_shapes(e, p);
    const bf16* x = group_input(e, r0, n, D, d, w);
    linear(e.w1, x, n, w.g + r0 * F, tid, nthreads);
    linear(e.w3, x, n, w.u + r0 * F, tid, nthreads);
  };
  for_each_expert_rows(experts, shared, d, w, up);
}

namespace {

// The activation of row `row` on columns [f0, f1) (f0 a multiple of kActqBlock; f1 too or F):
// clamp, silu, route weight, bf16(h) into g, then the w2 input into u (actq per 128 block).
void act_row(const float* route_weights, const ExpertWeights* experts, const ExpertWeights& shared,
             const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w, int64_t row, int64_t f0,
             int64_t f1) {
  const int64_t F = p.moe_intermediate_size;
  const float L = p.swiglu_limit;
  bf16* g = w.g + row * F;
  const bf16* u = w.u + row * F;
  const bool routed = row < w.n_entries;
  const float wk = routed ? route_weights[w.entry_slot[row]] : 1.0f;
  for (int64_t i = f0; i < f1; ++i) {
    float gv = g[i].to_float(), uv = u[i].to_float();
    if (L > 0.0f) {
      uv = std::min(std::max(uv, -L), L);
      gv = std::min(gv, L);
    }
    const float silu = gv / (1.0f + std::exp(-gv));
    float h = silu * uv;
    if (routed) h = wk * h;
    g[i] = bf16::from_float(h);  // bf16(h) replaces g
  }
  bf16* w2_in = w.u + row * F;
  if (weights_of_row(row, experts, shared, d, w).w2.quantized())
    actq_rows(g + f0, 1, f1 - f0, w2_in + f0, 0, 1);
  else
    std::memcpy(w2_in + f0, g + f0, (f1 - f0) * sizeof(bf16));
}

}  // namespace

void moe_experts_act(const float* route_weights, const ExpertWeights* experts,
                     const ExpertWeights& shared, const MoeExpertParams& p,
                     const MoeDispatchParams& d, const MoeWork& w, int tid, int nthreads) {
  const Range r = split_range(w.n_entries + w.shared_rows, tid, nthreads);
  for (int64_t row = r.begin; row < r.end; ++row)
    act_row(route_weights, experts, shared, p, d, w, row, 0, p.moe_intermediate_size);
}

void moe_experts_up_act_cols(const float* route_weights, const ExpertWeights* experts, const ExpertWeights& shared,
                             const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w, int64_t f0,
                             int64_t f1) {
  const int64_t D = p.hidden, F = p.moe_intermediate_size;
  DSV4_CHECK(f0 % kActqBlock == 0 && (f1 % kActqBlock == 0 || f1 == F) && f0 <= f1 && f1 <= F,
             "expert columns [{}, {}) of {} are not whole {}-blocks", f0, f1, F, kActqBlock);
  if (f0 >= f1) return;
  LinearSlice s;
  s.o0 = f0;
  s.o1 = f1;
  s.y_stride = F;
  auto up = [&](const ExpertWeights& e, int64_t r0, int64_t n) {
    check_shapes(e, p);
    const bf16* x = group_input(e, r0, n, D, d, w);
    linear_slice(e.w1, s, x, n, w.g + r0 * F + f0, 0, 1);
    linear_slice(e.w3, s, x, n, w.u + r0 * F + f0, 0, 1);
  };
  for_each_expert_rows(experts, shared, d, w, up);
  for (int64_t row = 0; row < w.n_entries + w.shared_rows; ++row)
    act_row(route_weights, experts, shared, p, d, w, row, f0, f1);
}

void moe_experts_down(const ExpertWeights* experts, const ExpertWeights& shared,
                      const MoeExpertParams& p, const MoeDispatchParams& d, const MoeWork& w,
                      int tid, int nthreads) {
  const int64_t D = p.hidden, F = p.moe_intermediate_size;
  for_each_expert_rows(experts, shared, d, w, [&](const ExpertWeights& e, int64_t r0, int64_t n) {
    linear(e.w2, w.u + r0 * F, n, w.x + r0 * D, tid, nthreads);
  });
}

void moe_experts_down_cols(const ExpertWeights* experts, const ExpertWeights& shared, const MoeExpertParams& p,
                           const MoeDispatchParams& d, const MoeWork& w, int64_t o0, int64_t o1) {
  const int64_t D = p.hidden, F = p.moe_intermediate_size;
  if (o0 >= o1) return;
  LinearSlice s;
  s.o0 = o0;
  s.o1 = o1;
  s.y_stride = D;
  for_each_expert_rows(experts, shared, d, w, [&](const ExpertWeights& e, int64_t r0, int64_t n) {
    linear_slice(e.w2, s, w.u + r0 * F, n, w.x + r0 * D + o0, 0, 1);
  });
}

}  // namespace dsv4::kernels
