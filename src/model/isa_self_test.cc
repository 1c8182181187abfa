#include "model/isa_self_test.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/indexer/indexer.h"
#include "kernels/lane_dot/lane_dot.h"
#include "kernels/linear/linear.h"
#include "kernels/q_path/q_path.h"
#include "kernels/sparse_attn/sparse_attn.h"
#include "numeric/cache_rows.h"
#include "numeric/quant.h"

namespace dsv4 {
namespace {

constexpr int kMaxRows = 17;  // rows 1..16 reach every tile shape; 17 a ragged GEMM tile

// Runs fn(tid, nthreads) for every tid in turn: one thread, the split of `nthreads`.
template <class Fn>
void split_inline(int nthreads, Fn&& fn) {
  for (int tid = 0; tid < nthreads; ++tid) fn(tid, nthreads);
}

// The first element where the two runs differ in their bits, or -1.
template <class T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  return -1;
}

std::vector<bf16> random_bf16(std::mt19937& rng, int64_t n, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<bf16> v(static_cast<size_t>(n));
  for (bf16& x : v) x = bf16::from_float(d(rng));
  return v;
}

// Random bytes of a stored weight: e4m3 codes (never NaN), e2m1 pairs, ue8m0 scales near 1.
std::vector<uint8_t> random_bytes(std::mt19937& rng, int64_t n, uint8_t lo, uint8_t hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (uint8_t& b : v) b = static_cast<uint8_t>(d(rng));
  return v;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(T));
}

struct OwnedWeight {
  LinearWeight w;
  std::vector<uint8_t> data, scale;
};

// dot: FP4 / FP8 in the kernels' tile layouts (LinearWeight::fp4_dot, fp8_dot).
OwnedWeight make_weight(std::mt19937& rng, WeightFormat f, int64_t out, int64_t in, bool dot) {
  OwnedWeight o;
  o.w.format = f;
  o.w.out = out;
  o.w.in = in;
  switch (f) {
    case WeightFormat::kBF16: {
      const std::vector<bf16> v = random_bf16(rng, out * in, 0.05f);
      o.data = bytes_of(v);
      break;
    }
    case WeightFormat::kF32: {
      std::normal_distribution<float> d(0.0f, 0.05f);
      std::vector<float> v(static_cast<size_t>(out * in));
      for (float& x : v) x = d(rng);
      o.data = bytes_of(v);
      break;
    }
    case WeightFormat::kFP8: {
      o.data = random_bytes(rng, out * in, 0, 0x7E);
      for (size_t i = 0; i < o.data.size(); i += 3) o.data[i] |= 0x80;  // signs, never 0xFF
      o.scale = random_bytes(rng, ((out + 127) / 128) * ((in + 127) / 128), 120, 127);
      o.scale.back() = 140;  // an extreme scale (the FP8 range check is on x alone)
      break;
    }
    case WeightFormat::kFP4: {
      o.data = random_bytes(rng, out * in / 2, 0, 255);
      o.scale = random_bytes(rng, out * (in / 32), 120, 127);
      o.scale.back() = 1;  // outside the VDPBF16PS range check: the multiply-add path runs too
      break;
    }
  }
  o.w.data = o.data.data();
  o.w.scale = o.scale.empty() ? nullptr : o.scale.data();
  if (dot) o.w = pack_tiles_in_place(o.w);
  return o;
}

// Runs `run` (which writes one output vector) on `isa` and on scalar; the set function
// selects a kernel's variant.
template <class T, class Run>
Status compare(Isa isa, void (*set)(Isa), const std::string& what, Run&& run) {
  std::vector<T> want, got;
  set(Isa::kScalar);
  run(want);
  set(isa);
  run(got);
  const int64_t at = first_difference(want, got);
  if (at < 0) return Status();
  return Status::errorf("{} on {}: element {} differs from the scalar variant", what, isa_name(isa), at);
}

struct LinearCase {
  const char* name;
  WeightFormat format;
  int64_t out, in;
  bool dot = false;        // in the kernels' dot layout
  bool actq = true;       // x on the actq grid (when in % 128 == 0)
  int64_t k_group = 0;
};

Status check_linear(Isa isa, std::mt19937& rng) {
  const LinearCase cases[] = {
      {"fp8", WeightFormat::kFP8, 150, 384},                // partial scale grid in out
      {"fp8 wo_a (partial K, no actq)", WeightFormat::kFP8, 40, 80, false, false},
      {"fp8 grouped K tree", WeightFormat::kFP8, 64, 512, false, true, 256},
      {"fp8 tile layout", WeightFormat::kFP8, 144, 384, true},        // partial scale grid in out
      {"fp8 tile layout, grouped K", WeightFormat::kFP8, 32, 512, true, false, 256},
      {"fp4 stored", WeightFormat::kFP4, 48, 416},           // partial last K block
      {"fp4 tile layout", WeightFormat::kFP4, 48, 384, true},
      {"bf16", WeightFormat::kBF16, 40, 200, false, false},
  };
  for (const LinearCase& c : cases) {
    const OwnedWeight ow = make_weight(rng, c.format, c.out, c.in, c.dot);
    std::vector<bf16> x = random_bf16(rng, kMaxRows * c.in, 1.0f);
    if (c.actq && c.in % 128 == 0)  // as the engine feeds it (actq needs whole 128-blocks)
      for (int64_t t = 0; t < kMaxRows; ++t) actq_dequant_row(x.data() + t * c.in, c.in, x.data() + t * c.in);
    for (int64_t T : {1, 3, 8, 17}) {
      for (int nthreads : {1, 2}) {
        const std::string what = fmt::format("linear {} (T = {}, {} threads)", c.name, T, nthreads);
        kernels::LinearSlice s;
        s.k_group = c.k_group;
        DSV4_RETURN_IF_ERROR(compare<bf16>(isa, kernels::set_linear_isa, what, [&](std::vector<bf16>& y) {
          y.assign(static_cast<size_t>(T * c.out), bf16{});
          split_inline(nthreads, [&](int tid, int n) { kernels::linear_slice(ow.w, s, x.data(), T, y.data(), tid, n); });
        }));
        DSV4_RETURN_IF_ERROR(compare<float>(isa, kernels::set_linear_isa, what + " fp32 out", [&](std::vector<float>& y) {
          y.assign(static_cast<size_t>(T * c.out), 0.0f);
          split_inline(nthreads, [&](int tid, int n) { kernels::linear_slice(ow.w, s, x.data(), T, y.data(), tid, n); });
        }));
      }
    }
  }
  // fp32 input (hc_*_fn) on an F32 weight, and actq itself.
  const OwnedWeight f32 = make_weight(rng, WeightFormat::kF32, 24, 256, false);
  std::vector<float> xf(static_cast<size_t>(kMaxRows * 256));
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : xf) v = d(rng);
  DSV4_RETURN_IF_ERROR(compare<float>(isa, kernels::set_linear_isa, "linear f32 in", [&](std::vector<float>& y) {
    y.assign(static_cast<size_t>(kMaxRows * 24), 0.0f);
    split_inline(2, [&](int tid, int n) { kernels::linear_f32_in(f32.w, xf.data(), kMaxRows, y.data(), tid, n); });
  }));
  std::vector<bf16> xa = random_bf16(rng, kMaxRows * 512, 3.0f);
  xa[5] = bf16::from_float(1e-30f);  // a block near the amax floor
  return compare<bf16>(isa, kernels::set_linear_isa, "actq", [&](std::vector<bf16>& y) {
    y.assign(xa.size(), bf16{});
    split_inline(2, [&](int tid, int n) { kernels::actq_rows(xa.data(), kMaxRows, 512, y.data(), tid, n); });
  });
}

// Identity page table over `rows` rows: one page.
PagedBytes one_page(const std::vector<uint8_t>& pool, const int32_t* table, int64_t rows, int64_t width) {
  PagedBytes p;
  p.pool = pool.data();
  p.table = table;
  p.page_rows = static_cast<int32_t>(rows);
  p.width = width;
  return p;
}

// The router's and hyper-connections' lane dots: fp32 and bf16 weights, every row count, a tail;
// the router's blocks of weights.
Status check_lane_dot(Isa isa, std::mt19937& rng) {
  constexpr int64_t kN = 1003;
  constexpr int kRows = kernels::kLaneDotMaxRows;
  const std::vector<bf16> wb = random_bf16(rng, kN, 1.0f), x = random_bf16(rng, kRows * kN, 1.0f);
  std::vector<float> wf(kN);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : wf) v = d(rng);
  const bf16* rows[kRows];
  for (int r = 0; r < kRows; ++r) rows[r] = x.data() + r * kN;
  return compare<float>(isa, kernels::set_lane_dot_isa, "lane dot", [&](std::vector<float>& out) {
    constexpr int kOuts = kRows * (kRows + 1) / 2;  // R = 1..kRows rows
    out.assign(2 * kOuts, 0.0f);
    for (int R = 1, at = 0; R <= kRows; at += R, ++R) {
      kernels::lane_dot_rows(wf.data(), rows, R, kN, out.data() + at);
      kernels::lane_dot_rows(wb.data(), rows, R, kN, out.data() + kOuts + at);
    }
    // lane_dot_block: every weight count (the rows as weights too) with 8 and 3 rows.
    for (int n_w = 1; n_w <= kernels::kLaneDotMaxWeights; ++n_w)
      for (int R : {kRows, 3}) {
        float o[kernels::kLaneDotMaxWeights * kRows];
        kernels::lane_dot_block(rows + kRows - n_w, n_w, rows, R, kN, o);
        out.insert(out.end(), o, o + n_w * R);
      }
  });
}

Status check_indexer(Isa isa, std::mt19937& rng) {
  kernels::IndexerParams p;
  p.n_heads = 4;
  p.head_dim = 64;
  p.rope_dim = 16;
  p.topk = 16;
  const IndexKeyFormat f{p.head_dim};
  constexpr int64_t kEntries = 150;  // two full 64-entry tiles and a partial one
  std::vector<uint8_t> pool(static_cast<size_t>(kEntries * f.bytes()));
  for (int64_t e = 0; e < kEntries; ++e) {
    std::vector<bf16> v = random_bf16(rng, p.head_dim, 1.0f);
    fp4sim_row(v.data(), p.head_dim);
    index_key_pack(f, v.data(), pool.data() + e * f.bytes());
  }
  const int32_t table[1] = {0};
  std::vector<PagedBytes> rows(kMaxRows, one_page(pool, table, kEntries, f.bytes()));
  std::vector<int32_t> count(kMaxRows);
  for (int t = 0; t < kMaxRows; ++t) count[t] = static_cast<int32_t>(kEntries - 7 * t);
  const kernels::IndexKeys keys{rows.data(), count.data(), f};
  std::vector<bf16> qi = random_bf16(rng, kMaxRows * p.n_heads * p.head_dim, 1.0f);
  for (int64_t r = 0; r < kMaxRows * p.n_heads; ++r) fp4sim_row(qi.data() + r * p.head_dim, p.head_dim);
  const std::vector<bf16> wgt = random_bf16(rng, kMaxRows * p.n_heads, 0.3f);
  for (int nthreads : {1, 2}) {
    std::vector<uint8_t> scratch(static_cast<size_t>(kernels::indexer_select_scratch_bytes(p, nthreads) + 64));
    void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    DSV4_RETURN_IF_ERROR(compare<int32_t>(
        isa, kernels::set_indexer_isa, fmt::format("indexer select ({} threads)", nthreads), [&](std::vector<int32_t>& out) {
          std::vector<int32_t> picks(static_cast<size_t>(kMaxRows * p.topk), -2), n_picks(kMaxRows, -2);
          split_inline(nthreads, [&](int tid, int n) {
            kernels::indexer_select(p, qi.data(), wgt.data(), keys, kMaxRows, picks.data(), n_picks.data(), aligned, tid, n);
          });
          split_inline(nthreads, [&](int tid, int n) {
            kernels::indexer_select_merge(p, keys, kMaxRows, picks.data(), n_picks.data(), aligned, tid, n);
          });
          out = picks;
          out.insert(out.end(), n_picks.begin(), n_picks.end());
        }));
  }
  return Status();
}

// The index queries' finish (RoPE, Hadamard, fp4sim_32): a head on the vector widths, the
// tables of two positions.
Status check_indexer_finish(Isa isa, std::mt19937& rng) {
  kernels::IndexerParams p;
  p.n_heads = 3;
  p.head_dim = 128;
  p.rope_dim = 64;
  p.topk = 16;
  const std::vector<float> inv_freq(p.rope_dim / 2, 0.01f);
  const int64_t pos[2] = {5, 1000};
  const std::vector<bf16> x = random_bf16(rng, 2 * p.n_heads * p.head_dim, 1.0f), omega = random_bf16(rng, 2 * p.n_heads, 1.0f);
  return compare<bf16>(isa, kernels::set_indexer_isa, "indexer finish", [&](std::vector<bf16>& y) {
    y = x;
    std::vector<bf16> wgt(2 * p.n_heads);
    kernels::indexer_finish(p, inv_freq.data(), pos, 2, y.data(), omega.data(), wgt.data(), 0, 1);
    y.insert(y.end(), wgt.begin(), wgt.end());
  });
}

Status check_sparse_attn(Isa isa, std::mt19937& rng) {
  kernels::SparseAttnParams p;
  p.n_heads = 4;
  p.head_dim = 192;
  const KvRowFormat f{p.head_dim, 64};
  constexpr int64_t kWin = 160, kCmp = 90, kStride = 200;
  auto packed_rows = [&](int64_t n) {
    std::vector<uint8_t> pool(static_cast<size_t>(n * f.bytes()));
    for (int64_t e = 0; e < n; ++e) {
      std::vector<bf16> v = random_bf16(rng, p.head_dim, 1.0f);
      fp8sim_row(v.data(), f.nope());
      kv_pack_row(f, v.data(), pool.data() + e * f.bytes());
    }
    return pool;
  };
  const std::vector<uint8_t> win_pool = packed_rows(kWin), cmp_pool = packed_rows(kCmp);
  const int32_t table[1] = {0};
  std::vector<PagedBytes> win(kMaxRows, one_page(win_pool, table, kWin, f.bytes()));
  std::vector<PagedBytes> cmp(kMaxRows, one_page(cmp_pool, table, kCmp, f.bytes()));
  std::vector<int32_t> list(kMaxRows * kStride, -1), len(kMaxRows), n_win(kMaxRows);
  std::uniform_int_distribution<int32_t> pick(0, kCmp - 1);
  for (int t = 0; t < kMaxRows; ++t) {  // window part, then compressed entries; some empty
    n_win[t] = 20 + 8 * t;
    len[t] = std::min<int32_t>(kStride, n_win[t] + 30 + 5 * t);
    for (int j = 0; j < len[t]; ++j) {
      int32_t& e = list[t * kStride + j];
      e = j < n_win[t] ? static_cast<int32_t>(kWin - n_win[t] + j) : pick(rng);
      if (j % 11 == 5) e = -1;
    }
  }
  const kernels::AttnList l{list.data(), kStride, len.data(), n_win.data()};
  const kernels::PackedAttnKeys keys{win.data(), cmp.data(), f};
  const std::vector<bf16> q = random_bf16(rng, kMaxRows * p.n_heads * p.head_dim, 0.1f);
  std::vector<float> sink(p.n_heads);
  for (int h = 0; h < p.n_heads; ++h) sink[h] = 0.5f * h - 1.0f;
  for (int nthreads : {1, 2}) {
    std::vector<float> scratch(static_cast<size_t>(kernels::sparse_attn_scratch_floats(p, nthreads)));
    DSV4_RETURN_IF_ERROR(compare<bf16>(
        isa, kernels::set_sparse_attn_isa, fmt::format("sparse attention ({} threads)", nthreads), [&](std::vector<bf16>& o) {
          o.assign(q.size(), bf16{});
          split_inline(nthreads, [&](int tid, int n) {
            kernels::sparse_attn(p, q.data(), kMaxRows, l, keys, sink.data(), o.data(), scratch.data(), tid, n);
          });
        }));
  }
  return Status();
}

// The query heads' bf16 RMS: a group of 16 heads and a short one, dims on the vector widths.
Status check_head_rms(Isa isa, std::mt19937& rng) {
  constexpr int kHeads = 21, kDim = 48;
  const std::vector<bf16> x = random_bf16(rng, 2 * kHeads * kDim, 1.0f);
  return compare<bf16>(isa, kernels::set_q_path_isa, "head_rms", [&](std::vector<bf16>& y) {
    y = x;
    kernels::head_rms(y.data(), 2, kHeads, kDim, 1e-6f, 0, 1);
  });
}

}  // namespace

KernelIsas kernel_isas() {
  return KernelIsas{kernels::linear_isa(), kernels::lane_dot_isa(), kernels::indexer_isa(), kernels::sparse_attn_isa(),
                    kernels::q_path_isa()};
}

void set_kernel_isas(const KernelIsas& isas) {
  kernels::set_linear_isa(isas.linear);
  kernels::set_lane_dot_isa(isas.lane_dot);
  kernels::set_indexer_isa(isas.indexer);
  kernels::set_sparse_attn_isa(isas.sparse_attn);
  kernels::set_q_path_isa(isas.q_path);
}

void set_kernel_isa(Isa isa) { set_kernel_isas(KernelIsas{isa, isa, isa, isa, isa}); }

Status isa_self_test(Isa isa) {
  if (!isa_supported(isa)) return Status::errorf("ISA self-test: {} is not supported by this CPU", isa_name(isa));
  const KernelIsas caller = kernel_isas();
  std::mt19937 rng(20261202u);
  Status st = check_linear(isa, rng);
  if (st.ok()) st = check_lane_dot(isa, rng);
  if (st.ok()) st = check_indexer(isa, rng);
  if (st.ok()) st = check_indexer_finish(isa, rng);
  if (st.ok()) st = check_sparse_attn(isa, rng);
  if (st.ok()) st = check_head_rms(isa, rng);
  set_kernel_isas(caller);
  return st;
}

}  // namespace dsv4
