#include "model/drafter_state.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/math.h"
#include "kernels/linear/linear.h"
#include "model/config.h"
#include "model/sequence_state.h"

namespace dsv4 {

namespace k = kernels;

namespace {
constexpr int32_t kOnePage = int32_t{1} << 30;
constexpr int32_t kPageZero = 0;
}  // namespace

DrafterState::DrafterState(const Dims& dims, const Limits& limits, int n_threads)
    : dims_(dims), limits_(limits), row_bytes_(dims.kv.bytes()), list_stride_(dims.window + kMaxDsparkGamma) {
  const int64_t T = limits.max_rows, B = limits.max_batch, S = limits.max_seqs;
  const int64_t rows = std::max(B, T);
  rings_.assign(static_cast<size_t>(S * dims.n_stages * dims.window * row_bytes_), 0);
  ring_pos_.assign(static_cast<size_t>(S * dims.window), -1);
  feat.resize(static_cast<size_t>(T * dims.features));
  feat_q.resize(static_cast<size_t>(T * dims.features));
  main_x.resize(static_cast<size_t>(T * dims.hidden));
  pos.resize(static_cast<size_t>(T));
  key_rows_.resize(static_cast<size_t>(rows * list_stride_ * row_bytes_));
  list_.resize(static_cast<size_t>(T * list_stride_));
  len_.resize(static_cast<size_t>(T));
  rows_.resize(static_cast<size_t>(T));
  markov_rows_.resize(static_cast<size_t>(rows * dims.markov_rank));
  beta_.resize(static_cast<size_t>(rows * dims.vocab));
  prev_.resize(static_cast<size_t>(rows));
  own_round_.resize(static_cast<size_t>(rows));
  sample_scratch_.resize(static_cast<size_t>(k::sample_scratch_bytes(dims.vocab, n_threads) / 8 + 1));
}

void DrafterState::reset(int32_t seq) {
  std::fill_n(ring_pos_.begin() + static_cast<int64_t>(seq) * dims_.window, dims_.window, int64_t{-1});
}

void DrafterState::copy_slot(int32_t from, int32_t to) {
  const int64_t W = dims_.window, ring = dims_.n_stages * W * row_bytes_;
  std::copy_n(ring_pos_.begin() + from * W, W, ring_pos_.begin() + to * W);
  std::copy_n(rings_.begin() + from * ring, ring, rings_.begin() + to * ring);
}

Result<int64_t> DrafterState::gather_commits(std::span<const DsparkCommit> commits, int me,
                                             const SequenceState& seqs) {
  const int64_t F = dims_.features;
  int64_t T = 0;
  for (size_t r = 0; r < commits.size(); ++r) {
    const DsparkCommit& q = commits[r];
    if (q.owner != me) continue;  // another rank's rings
    const int32_t s = local(q.seq);
    if (q.seq < 0 || limits_.slot_rank(q.seq) != me || !seqs.active(s))
      return Status::errorf("dspark commit {}: sequence slot {} is not active on rank {}", r, q.seq, me);
    if (q.n < 0 || q.p0 < seqs.floor(s))
      return Status::errorf("dspark commit {}: positions {} .. {} of slot {} (its start is {})", r, q.p0,
                            q.p0 + q.n - 1, q.seq, seqs.floor(s));
    if (T + q.n > limits_.max_rows)
      return Status::errorf("dspark commit: {}+ rows exceed max_rows = {}", T + q.n, limits_.max_rows);
    for (int32_t i = 0; i < q.n; ++i) pos[static_cast<size_t>(T + i)] = q.p0 + i;
    if (q.n > 0) std::memcpy(feat.data() + T * F, q.features, sizeof(bf16) * q.n * F);
    T += q.n;
  }
  return T;
}

void DrafterState::write_ring_rows(std::span<const DsparkCommit> commits, int me, int stage, const bf16* kv,
                                   int64_t Dh) {
  int64_t t = 0;
  for (const DsparkCommit& q : commits)
    if (q.owner == me)
      for (int32_t i = 0; i < q.n; ++i, ++t)
        kv_pack_row(dims_.kv, kv + t * Dh, ring_row(local(q.seq), stage, (q.p0 + i) % dims_.window));
}

void DrafterState::mark_committed(std::span<const DsparkCommit> commits, int me) {
  for (const DsparkCommit& q : commits)
    if (q.owner == me)
      for (int32_t i = 0; i < q.n; ++i) ring_pos_[ring_index(local(q.seq), q.p0 + i)] = q.p0 + i;
}

Result<int64_t> DrafterState::check_rounds(std::span<const DsparkRound> rounds, int gamma, int me, int world,
                                           const SequenceState& seqs) {
  const int64_t B = static_cast<int64_t>(rounds.size()), G = gamma, V = dims_.vocab;
  if (gamma < 1 || gamma > kMaxDsparkGamma)
    return Status::errorf("dspark propose: gamma = {} outside [1, {}]", gamma, kMaxDsparkGamma);
  if (B > limits_.max_batch || B * G > limits_.max_rows)
    return Status::errorf("dspark propose: {} rounds of {} rows exceed max_batch = {} or max_rows = {}", B, G,
                          limits_.max_batch, limits_.max_rows);
  const int64_t slots = static_cast<int64_t>(limits_.max_seqs) * std::max(world, 1);
  int64_t n_own = 0;
  for (int64_t r = 0; r < B; ++r) {
    const DsparkRound& q = rounds[r];
    if (world > 0 && (q.owner < 0 || q.owner >= world))
      return Status::errorf("dspark propose {}: owner rank {} outside [0, {})", r, q.owner, world);
    if (q.seq < 0 || q.seq >= slots || limits_.slot_rank(q.seq) != (world > 0 ? q.owner : 0))
      return Status::errorf("dspark propose {}: sequence slot {} outside its owner's slots", r, q.seq);
    if (q.x0 < 0 || q.x0 >= V) return Status::errorf("dspark propose {}: anchor token {} outside [0, {})", r, q.x0, V);
    if (q.anchor < 0) return Status::errorf("dspark propose {}: anchor {} is negative", r, q.anchor);
    if (Status st = k::validate_sampling_params(q.sample); !st.ok())
      return st.with_context(fmt::format("dspark propose {}", r));
    if (q.owner != me) continue;
    if (!seqs.active(local(q.seq)))
      return Status::errorf("dspark propose {}: sequence slot {} is not active", r, q.seq);
    for (int64_t p = std::max<int64_t>(0, q.anchor - dims_.window + 1); p <= q.anchor; ++p)
      if (!holds(local(q.seq), p))
        return Status::errorf("dspark propose {}: anchor {} needs the context row of position {} (slot {}), not "
                              "committed",
                              r, q.anchor, p, q.seq);
    own_round_[n_own++] = static_cast<int32_t>(r);
  }
  return n_own;
}

void DrafterState::plan_block_rows(std::span<const DsparkRound> rounds, int64_t n_own, int gamma,
                                   StepMetadata& md) const {
  const int64_t G = gamma, T = n_own * G;
  md.B = static_cast<int32_t>(n_own);
  md.T = static_cast<int32_t>(T);
  for (int64_t k = 0; k < n_own; ++k) {
    const DsparkRound& q = rounds[own_round_[k]];
    md.row_begin[k] = static_cast<int32_t>(k * G);
    for (int64_t i = 0; i < G; ++i) {
      const int64_t t = k * G + i;
      md.row_req[t] = static_cast<int32_t>(k);
      md.row_seq[t] = local(q.seq);
      md.row_key[t] = q.seq;
      md.pos[t] = q.anchor + 1 + i;
      md.token[t] = i == 0 ? q.x0 : dims_.noise_token;
      md.window_len[t] = 0;
    }
  }
  md.row_begin[n_own] = static_cast<int32_t>(T);
}

void DrafterState::build_key_lists(const StepMetadata& md, int gamma, int stage, const bf16* kv, int64_t Dh) {
  const int64_t G = gamma, B = md.T / G, kb = row_bytes_;
  for (int64_t r = 0; r < B; ++r) {
    const int32_t seq = md.row_seq[r * G];
    const int64_t anchor = md.pos[r * G] - 1, n_c = std::min<int64_t>(dims_.window, anchor + 1), L = n_c + G;
    uint8_t* buf = key_rows_.data() + r * list_stride_ * kb;
    for (int64_t j = 0; j < n_c; ++j) std::memcpy(buf + j * kb, ring_row(seq, stage, j), static_cast<size_t>(kb));
    for (int64_t i = 0; i < G; ++i) kv_pack_row(dims_.kv, kv + (r * G + i) * Dh, buf + (n_c + i) * kb);
    for (int64_t i = 0; i < G; ++i) {
      const int64_t t = r * G + i;
      rows_[t] = PagedBytes{buf, &kPageZero, kOnePage, 0, kb};
      for (int64_t j = 0; j < L; ++j) list_[t * list_stride_ + j] = static_cast<int32_t>(j);
      len_[t] = static_cast<int32_t>(L);
    }
  }
}

k::AttnList DrafterState::key_list() const {
  return k::AttnList{list_.data(), list_stride_, len_.data(), len_.data(), nullptr};
}

k::PackedAttnKeys DrafterState::keys() const { return k::PackedAttnKeys{rows_.data(), nullptr, dims_.kv}; }

void DrafterState::markov_chain(ThreadPool& pool, const bf16* w1, const bf16* w2,
                                std::span<const DsparkRound> rounds, int64_t n_own, int gamma, float* lambda,
                                int32_t* drafts, const DecisionIO& dec) {
  const int64_t G = gamma, V = dims_.vocab, Rm = dims_.markov_rank, Bo = n_own;
  const LinearWeight w2_view{WeightFormat::kBF16, V, Rm, w2, nullptr};
  for (int64_t k = 0; k < Bo; ++k) prev_[k] = rounds[own_round_[k]].x0;
  for (int64_t i = 0; i < G; ++i) {
    for (int64_t k = 0; k < Bo; ++k) std::memcpy(&markov_rows_[k * Rm], w1 + prev_[k] * Rm, sizeof(bf16) * Rm);
    pool.run([&](int tid, int n) { k::linear_f32(w2_view, markov_rows_.data(), Bo, beta_.data(), tid, n); });
    pool.run([&](int tid, int n) {
      const Range rr = split_range(Bo, tid, n);
      for (int64_t o = rr.begin; o < rr.end; ++o) {  // own round o
        const int64_t row = own_round_[o] * G + i;
        float* lam = lambda + row * V;
        const float* beta = beta_.data() + o * V;
        int32_t best = 0;
        for (int64_t v = 0; v < V; ++v) {
          lam[v] = lam[v] + beta[v];
          if (lam[v] > lam[best]) best = static_cast<int32_t>(v);
        }
        const DsparkRound& q = rounds[own_round_[o]];
        if (q.sample.temperature > 0.0f) {  // drawn from λ (dspark.md §4.3): d_{i+1} at anchor + 2 + i, slot 1
          const int64_t bytes = k::sample_scratch_bytes(V, 1);
          const k::SampleRow sr{q.sample, q.anchor + 2 + i, 1};
          k::sample(lam, 1, V, &sr, &best, reinterpret_cast<char*>(sample_scratch_.data()) + tid * bytes, bytes, 0,
                    1);
        }
        drafts[row] = best;
        prev_[o] = best;
      }
    });
    if (!dec.forced && !dec.log) continue;
    for (int64_t k = 0; k < Bo; ++k) {
      const DsparkRound& q = rounds[own_round_[k]];
      const int64_t row = own_round_[k] * G + i;
      const int32_t bi = static_cast<int32_t>(i);
      if (dec.forced)
        if (const Decision* f = dec.forced->find_dspark(true, 0, q.seq, q.anchor, bi))
          drafts[row] = prev_[k] = f->selected[0];
      if (dec.log) dec.log->push_back({false, false, 0, q.seq, q.anchor, {drafts[row]}, true, true, bi});
    }
  }
}

}  // namespace dsv4
