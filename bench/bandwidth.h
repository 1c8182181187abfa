// Read-bandwidth probe of the Google Benchmark programs (linear_bench, context_bench):
// probe.h's probe with the widest loads the CPU runs, on a 1 GiB buffer, best of
// `reps` passes, in GB/s (1e9 bytes).
#pragma once

#include <cstdint>

#include "base/cpu.h"
#include "base/thread_pool.h"
#include "probe.h"

namespace dsv4::bench {

inline double measure_read_bandwidth(ThreadPool& pool, int reps = 7) {
  return read_bandwidth_gbps(pool, int64_t{1} << 30, reps, detect_isa());
}

}  // namespace dsv4::bench
