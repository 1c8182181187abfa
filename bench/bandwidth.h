// Machine read-bandwidth probe shared by the benchmarks (STYLE.md 15): every
// thread of `pool` sums its share of a 1 GiB uint64 buffer; best of `reps`
// timed passes, in GB/s (1e9 bytes). The buffer spans far more than the
// last-level cache, so this is the DRAM read roofline a decode step is held to.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/math.h"
#include "base/thread_pool.h"

namespace dsv4::bench {

inline double measure_read_bandwidth(ThreadPool& pool, int reps = 7) {
  const int64_t n = (int64_t{1} << 30) / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  pool.run([&](int tid, int nt) {
    const Range r = split_range(n, tid, nt);
    for (int64_t i = r.begin; i < r.end; ++i) buf[i] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()));
  double best = 0.0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int tid, int nt) {
      const Range r = split_range(n, tid, nt);
      uint64_t s = 0;
      for (int64_t i = r.begin; i < r.end; ++i) s += buf[i];
      sums[tid] = s;
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / sec / 1e9);
  }
  // A volatile store of the sums keeps the compiler from eliding the loads.
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  volatile uint64_t sink = total;
  static_cast<void>(sink);
  return best;
}

}  // namespace dsv4::bench
