// Shared by the benchmark programs: the error exit (a failed step ends the run with its
// message), the deterministic random stream that fills synthetic weights and caches, and the
// step clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "base/status.h"

namespace dsv4::bench {

[[noreturn]] inline void die(const char* program, const Status& st) {
  std::fprintf(stderr, "%s: %s\n", program, st.message().c_str());
  std::exit(1);
}

// splitmix64 stream.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f * 2.0f - 1.0f; }  // [-1, 1)
};

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Largest of v, at least floor.
inline int max_of(const std::vector<int>& v, int floor) {
  return v.empty() ? floor : std::max(floor, *std::max_element(v.begin(), v.end()));
}

}  // namespace dsv4::bench
