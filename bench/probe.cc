// Probe dispatch and timing (probe.h).
#include "probe.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/check.h"
#include "base/math.h"

namespace dsv4::bench {
namespace {

constexpr int64_t kPage = 4096;

bool wide512(Isa isa) { return isa == Isa::kAvx512 || isa == Isa::kAvx512Bf16; }

uint64_t read_sum(Isa isa, const uint8_t* p, int64_t bytes) {
  if (wide512(isa)) return probe::read_sum_avx512(p, bytes);
  if (isa == Isa::kAvx2) return probe::read_sum_avx2(p, bytes);
  return probe::read_sum_scalar(p, bytes);
}

float dot_loop(Isa isa, int64_t iters, double* flops) {
  switch (isa) {
    case Isa::kAvx512Bf16: return probe::dot_loop_bf16(iters, flops);
    case Isa::kAvx512: return probe::dot_loop_fma512(iters, flops);
    case Isa::kAvx2: return probe::dot_loop_fma256(iters, flops);
    case Isa::kScalar: break;
  }
  return probe::dot_loop_sse(iters, flops);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* read_probe_name(Isa isa) {
  if (wide512(isa)) return "avx512 (64-byte loads)";
  if (isa == Isa::kAvx2) return "avx2 (32-byte loads)";
  return "scalar (8-byte loads)";
}

const char* dot_probe_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Bf16: return "VDPBF16PS (avx512bf16)";
    case Isa::kAvx512: return "FMA fp32 (avx512)";
    case Isa::kAvx2: return "FMA fp32 (avx2)";
    case Isa::kScalar: break;
  }
  return "mul+add fp32 (sse)";
}

double read_bandwidth_gbps(ThreadPool& pool, int64_t bytes, int reps, Isa isa) {
  DSV4_CHECK(isa_supported(isa), "probe isa {}", isa_name(isa));
  const int nt = pool.size();
  // Each thread's share is whole pages, first-touched by that thread.
  const int64_t pages = std::max<int64_t>(nt, bytes / kPage);
  const int64_t n = pages * kPage;
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(static_cast<uint8_t*>(std::aligned_alloc(kPage, n)), &std::free);
  DSV4_CHECK(buf != nullptr, "cannot allocate {} bytes for the read probe", n);
  auto share = [&](int tid) {
    const Range r = split_range(pages, tid, nt);
    return std::pair<uint8_t*, int64_t>(buf.get() + r.begin * kPage, (r.end - r.begin) * kPage);
  };
  pool.run([&](int tid, int) {
    auto [p, len] = share(tid);
    for (int64_t i = 0; i < len; i += 8) {
      const uint64_t v = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
      std::copy_n(reinterpret_cast<const uint8_t*>(&v), 8, p + i);
    }
  });
  std::vector<uint64_t> sums(static_cast<size_t>(nt));
  double best = 0.0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int tid, int) {
      auto [p, len] = share(tid);
      sums[tid] += read_sum(isa, p, len);
    });
    best = std::max(best, static_cast<double>(n) / seconds_since(t0) / 1e9);
  }
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  volatile uint64_t sink = total;  // keeps the loads
  static_cast<void>(sink);
  return best;
}

double dot_peak_gflops(ThreadPool& pool, int reps, double seconds, Isa isa) {
  DSV4_CHECK(isa_supported(isa), "probe isa {}", isa_name(isa));
  // Calibrate iterations to about `seconds` on one thread.
  double flops = 0;
  int64_t iters = 1 << 14;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile float v = dot_loop(isa, iters, &flops);
    static_cast<void>(v);
    const double t = seconds_since(t0);
    if (t >= seconds / 4 || iters > (int64_t{1} << 40)) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds / std::max(t, 1e-9)));
      break;
    }
    iters *= 4;
  }
  std::vector<double> done(static_cast<size_t>(pool.size()));
  std::vector<float> keep(static_cast<size_t>(pool.size()));
  double best = 0.0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int tid, int) { keep[tid] = dot_loop(isa, iters, &done[tid]); });
    const double t = seconds_since(t0);
    double total = 0;
    for (double d : done) total += d;
    best = std::max(best, total / t / 1e9);
  }
  volatile float sink = keep[0];
  static_cast<void>(sink);
  return best;
}

}  // namespace dsv4::bench
