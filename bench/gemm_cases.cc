// Engine FP8/FP4 linears at the layer's shapes (gemm_cases.h).
#include "gemm_cases.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "base/math.h"
#include "base/thread_pool.h"
#include "kernels/linear/linear.h"
#include "numeric/linear_weight.h"

#include "bench_util.h"

namespace dsv4::bench {
namespace {

WeightFormat weight_format(StorageForm f) {
  switch (f) {
    case StorageForm::kFP8: return WeightFormat::kFP8;
    case StorageForm::kFP4: return WeightFormat::kFP4;
    case StorageForm::kF32: return WeightFormat::kF32;
    default: return WeightFormat::kBF16;
  }
}

int64_t scale_bytes(StorageForm f, int64_t out, int64_t in) {
  if (f == StorageForm::kFP8) return ceil_div<int64_t>(out, 128) * ceil_div<int64_t>(in, 128);
  if (f == StorageForm::kFP4) return out * in / 32;
  return 0;
}

}  // namespace

std::string GemmShape::label() const { return fmt::format("{} {}x{}", name, out, in); }

std::vector<GemmShape> gemm_shapes(const ModelConfig& cfg) {
  const StorageForm dense = cfg.dense_storage(), ex = cfg.expert_storage();
  const int64_t D = cfg.hidden_size, F = cfg.moe_intermediate_size;
  return {{"wq_a", dense, cfg.q_lora_rank, D},
          {"wo_b", dense, D, cfg.wo_b_in()},
          {"w1", ex, F, D},
          {"w2", ex, D, F},
          {"cmp_wkv", StorageForm::kBF16, 2 * cfg.head_dim, D}};  // the CSA compressor's wkv / wgate
}

WeightCopies make_weight_copies(StorageForm form, int64_t out, int64_t in, int64_t span_bytes) {
  WeightCopies w;
  const int64_t sb = scale_bytes(form, out, in);
  w.data_bytes = matrix_bytes(form, out, in) - sb;
  w.bytes_each = w.data_bytes + sb;
  w.n = static_cast<int>(std::clamp<int64_t>(ceil_div<int64_t>(span_bytes, w.bytes_each), 1, 256));
  w.data.resize(static_cast<size_t>(w.data_bytes * w.n));
  w.scale.resize(static_cast<size_t>(sb * w.n));
  Rng rng{99};
  for (int64_t i = 0; i < w.data_bytes; i += 8) {
    uint64_t r = rng.next();
    for (int64_t j = 0; j < 8 && i + j < w.data_bytes; ++j, r >>= 8) {
      const uint8_t b = static_cast<uint8_t>(r);
      if (form == StorageForm::kFP8)  // random sign, |code| < 0x50 (|v| < 4)
        w.data[i + j] = static_cast<uint8_t>((b & 0x80) | (((b & 0x7F) * 0x50) >> 7));
      else if (form == StorageForm::kBF16)  // bf16 in about [-2, 2): exponent byte of 1.0 or below
        w.data[i + j] = (i + j) % 2 == 1 ? static_cast<uint8_t>((b & 0x80) | (0x3C + (b & 0x3))) : b;
      else
        w.data[i + j] = b;
    }
  }
  std::fill_n(w.scale.begin(), sb, form == StorageForm::kFP4 ? uint8_t{120} : uint8_t{119});
  for (int c = 1; c < w.n; ++c) {
    std::memcpy(w.data.data() + c * w.data_bytes, w.data.data(), static_cast<size_t>(w.data_bytes));
    if (sb > 0) std::memcpy(w.scale.data() + c * sb, w.scale.data(), static_cast<size_t>(sb));
  }
  return w;
}

std::vector<CaseResult> run_gemm_cases(const std::vector<GemmShape>& shapes, const GemmSets& sets, int threads) {
  ThreadPool pool(threads);
  std::vector<CaseResult> out;
  for (const GemmShape& s : shapes) {
    WeightCopies wc = make_weight_copies(s.form, s.out, s.in, sets.span_bytes);
    const int64_t sb = scale_bytes(s.form, s.out, s.in);
    // FP4, FP8 and BF16 (the compressors' projections) in the layouts the loader gives every
    // variant (LinearWeight::fp4_dot, fp8_dot, bf16_tiles).
    const bool tiles = dot_tiles_fit(s.out, s.in);
    const bool fp4_dot = s.form == StorageForm::kFP4 && tiles, fp8_dot = s.form == StorageForm::kFP8 && tiles;
    const bool bf16_tiles = s.form == StorageForm::kBF16 && tiles && kernels::linear_prefers_bf16_tiles();
    if (fp4_dot || fp8_dot || bf16_tiles)  // all copies as one matrix of n·out rows (copy c's scales at c·sb)
      pack_tiles_in_place(LinearWeight{weight_format(s.form), wc.n * s.out, s.in, wc.data.data(),
                                       sb > 0 ? wc.scale.data() : nullptr});
    for (int T : sets.rows) {
      std::vector<bf16> x(static_cast<size_t>(T * s.in)), y(static_cast<size_t>(T * s.out));
      Rng rng{static_cast<uint64_t>(T)};
      for (bf16& v : x) v = bf16::from_float(rng.uniform());
      pool.run([&](int tid, int n) { kernels::actq_rows(x.data(), T, s.in, x.data(), tid, n); });
      std::vector<double> ms;
      for (int it = 0; it < (sets.repeats + 1) * wc.n; ++it) {
        const int c = it % wc.n;
        const LinearWeight w{weight_format(s.form), s.out, s.in, wc.data.data() + c * wc.data_bytes,
                             sb > 0 ? wc.scale.data() + c * sb : nullptr, fp4_dot, fp8_dot, bf16_tiles};
        const auto t0 = std::chrono::steady_clock::now();
        pool.run([&](int tid, int n) { kernels::linear(w, x.data(), T, y.data(), tid, n); });
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (it >= wc.n) ms.push_back(t);  // the first pass warms up
      }
      const char* name =
          s.form == StorageForm::kFP4 ? "gemm-fp4" : s.form == StorageForm::kFP8 ? "gemm-fp8" : "gemm-bf16";
      out.push_back(timed_case(name, "gemm", s.label(), T, 1, threads, ms, matrix_cost(s.form, s.out, s.in, T)));
    }
  }
  return out;
}

}  // namespace dsv4::bench
