// Linear engine roofline (STYLE.md 15): first the machine's read bandwidth (a
// 2-thread sum over a 1 GiB buffer, best of several), then Flash-size linears
// y[T, out] = W[out, in]·x[T, in] at T = 1, 4, 16, 64 on the 2-thread pool, per ISA
// variant. Counters: weight bytes moved per call (codes + scales, weight_MB),
// GB/s of weight bytes and bw_frac, the fraction of the measured read bandwidth,
// and GFLOP/s (2·T·out·in per call: the compute side at large T). Each call reads
// a different copy of the weight (copies span more than the last-level cache),
// as a decode step reads every layer's weights once from DRAM. FP8/FP4 weights are in the
// layout the loader gives the variant (the tile layouts for one that reads them), so each
// variant runs what the engine runs. `dsv4 bench --cases gemm` times the selected variant
// at the layer's shapes (beside ggml with --peer-ggml); this program compares the variants.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/cpu.h"
#include "base/math.h"
#include "base/thread_pool.h"
#include "kernels/linear/linear.h"
#include "numeric/e2m1.h"
#include "numeric/e4m3.h"
#include "numeric/linear_weight.h"
#include "numeric/ue8m0.h"

#include "bandwidth.h"

namespace dsv4 {
namespace {

using kernels::actq_rows;
using kernels::linear;
using kernels::set_linear_isa;

constexpr int kThreads = 2;
constexpr int64_t kSpanBytes = int64_t{96} << 20;  // weight copies per shape: > 2x a 32 MiB L3

ThreadPool& pool() {
  static ThreadPool p(kThreads);
  return p;
}

double g_read_gbps = 0.0;

struct Shape {
  const char* name;
  WeightFormat format;
  int64_t out, in;
};

// Flash sizes: attention q down-projection and output projection (FP8), an FP8
// square, one routed expert's w1 / w3 and w2 (FP4), a BF16 square.
const Shape kShapes[] = {
    {"wq_a_fp8", WeightFormat::kFP8, 1024, 4096},  {"wo_b_fp8", WeightFormat::kFP8, 4096, 8192},
    {"fp8_4096", WeightFormat::kFP8, 4096, 4096},  {"w1w3_fp4", WeightFormat::kFP4, 2048, 4096},
    {"w2_fp4", WeightFormat::kFP4, 4096, 2048},    {"bf16_4096", WeightFormat::kBF16, 4096, 4096},
};

int64_t data_bytes(const Shape& s) {
  switch (s.format) {
    case WeightFormat::kBF16: return s.out * s.in * 2;
    case WeightFormat::kF32: return s.out * s.in * 4;
    case WeightFormat::kFP8: return s.out * s.in;
    case WeightFormat::kFP4: return s.out * s.in / 2;
  }
  return 0;
}
int64_t scale_bytes(const Shape& s) {
  if (s.format == WeightFormat::kFP8) return ceil_div<int64_t>(s.out, 128) * ceil_div<int64_t>(s.in, 128);
  if (s.format == WeightFormat::kFP4) return s.out * s.in / 32;
  return 0;
}

// Copies of one random weight of a shape (trained-like magnitudes: N(0, 1/in)
// through the format's codes), laid out back to back.
// `packed`: the same copies in the tile layouts (LinearWeight::fp4_dot, fp8_dot), which the
// loader gives every variant, built on first use.
struct WeightSet {
  const Shape* shape = nullptr;
  int n_copies = 0;
  std::vector<uint8_t> data, scale, packed, packed_scale;
  bool packs() const {
    return shape->format != WeightFormat::kF32 && dot_tiles_fit(shape->out, shape->in);
  }
  LinearWeight copy(int i, bool tiles) const {
    const std::vector<uint8_t>& sc = tiles && shape->format == WeightFormat::kFP4 ? packed_scale : scale;
    LinearWeight w{shape->format, shape->out, shape->in, (tiles ? packed : data).data() + i * data_bytes(*shape),
                   sc.empty() ? nullptr : sc.data() + i * scale_bytes(*shape)};
    w.fp4_dot = tiles && shape->format == WeightFormat::kFP4;
    w.fp8_dot = tiles && shape->format == WeightFormat::kFP8;
    w.bf16_tiles = tiles && shape->format == WeightFormat::kBF16;
    return w;
  }
};

// All copies packed as one matrix of n_copies·out rows (rows stay in place per 16-row tile).
void pack_copies(WeightSet& ws) {
  if (!ws.packed.empty()) return;
  ws.packed = ws.data;
  ws.packed_scale = ws.scale;
  pack_tiles_in_place(LinearWeight{ws.shape->format, ws.n_copies * ws.shape->out, ws.shape->in, ws.packed.data(),
                                   ws.packed_scale.empty() ? nullptr : ws.packed_scale.data()});
}

WeightSet& weights(const Shape& s) {
  static WeightSet ws;
  if (ws.shape == &s) return ws;
  ws = WeightSet{};
  ws.shape = &s;
  const int64_t db = data_bytes(s), sb = scale_bytes(s);
  ws.n_copies = static_cast<int>(std::max<int64_t>(1, ceil_div<int64_t>(kSpanBytes, db + sb)));
  ws.data.resize(ws.n_copies * db);
  ws.scale.resize(ws.n_copies * sb);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  switch (s.format) {
    case WeightFormat::kBF16: {
      const float sigma = 1.0f / std::sqrt(static_cast<float>(s.in));
      for (int64_t i = 0; i < s.out * s.in; ++i) {
        const bf16 v = bf16::from_float(nd(rng) * sigma);
        std::memcpy(ws.data.data() + 2 * i, &v, 2);
      }
      break;
    }
    case WeightFormat::kF32:
      break;
    case WeightFormat::kFP8:  // codes of N(0, 64^2) (block amax near 448), block scale 2^-9
      for (int64_t i = 0; i < db; ++i) ws.data[i] = e4m3_encode(nd(rng) * 64.0f);
      for (int64_t i = 0; i < sb; ++i) ws.scale[i] = ue8m0_encode_exp(-9);
      break;
    case WeightFormat::kFP4:  // codes of N(0, 1) * 2, per-32 scale 2^-7
      for (int64_t i = 0; i < db; ++i)
        ws.data[i] = static_cast<uint8_t>(e2m1_encode(nd(rng) * 2.0f) | (e2m1_encode(nd(rng) * 2.0f) << 4));
      for (int64_t i = 0; i < sb; ++i) ws.scale[i] = ue8m0_encode_exp(-7);
      break;
  }
  for (int c = 1; c < ws.n_copies; ++c) {
    std::memcpy(ws.data.data() + c * db, ws.data.data(), db);
    if (sb > 0) std::memcpy(ws.scale.data() + c * sb, ws.scale.data(), sb);
  }
  return ws;
}

void bm_linear(benchmark::State& state, const Shape* shape, Isa isa) {
  const int64_t T = state.range(0);
  WeightSet& ws = weights(*shape);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<bf16> x(T * shape->in), y(T * shape->out);
  for (auto& v : x) v = bf16::from_float(nd(rng));
  if (shape->format == WeightFormat::kFP8 || shape->format == WeightFormat::kFP4)
    actq_rows(x.data(), T, shape->in, x.data(), 0, 1);
  set_linear_isa(isa);
  // The layout the loader gives the variant: FP4 and FP8 tiles, BF16 tiles where it prefers them.
  const bool tiles = ws.packs() && (shape->format != WeightFormat::kBF16 || kernels::linear_prefers_bf16_tiles());
  if (tiles) pack_copies(ws);
  int c = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const LinearWeight w = ws.copy(c, tiles);
    c = (c + 1) % ws.n_copies;
    pool().run([&](int tid, int n) { linear(w, x.data(), T, y.data(), tid, n); });
    benchmark::ClobberMemory();
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  set_linear_isa(detect_isa());
  const double bytes = static_cast<double>(data_bytes(*shape) + scale_bytes(*shape));
  const double gbps = bytes * static_cast<double>(state.iterations()) / sec / 1e9;
  state.counters["weight_MB"] = bytes / 1e6;
  state.counters["GB/s"] = gbps;
  state.counters["bw_frac"] = gbps / g_read_gbps;
  state.counters["GFLOP/s"] = 2.0 * static_cast<double>(T * shape->out * shape->in) *
                              static_cast<double>(state.iterations()) / sec / 1e9;
}

}  // namespace
}  // namespace dsv4

int main(int argc, char** argv) {
  using namespace dsv4;
  benchmark::Initialize(&argc, argv);
  g_read_gbps = bench::measure_read_bandwidth(pool());
  std::printf("read bandwidth (%d threads, 1 GiB sum, best of 7): %.1f GB/s\n", kThreads, g_read_gbps);
  benchmark::AddCustomContext("read_bandwidth_GBps", std::to_string(g_read_gbps));
  for (const Shape& s : kShapes)
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      const std::string name = std::string("linear/") + s.name + "/" + isa_name(isa);
      benchmark::RegisterBenchmark(name.c_str(), bm_linear, &s, isa)
          ->ArgName("T")
          ->Arg(1)
          ->Arg(4)
          ->Arg(8)
          ->Arg(16)
          ->Arg(64)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
