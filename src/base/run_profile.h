// Per-run timing of a ThreadPool (a bench instrument, issue 38): with a RunProfile attached,
// every ThreadPool::run appends one record (its name or call site, wall time, each thread's
// start delay and busy time) to storage sized when the profile is made; nothing is allocated
// per run, and with no profile attached a run costs one pointer test.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsv4 {

struct RunRecord {
  const char* name = nullptr;      // the run's name, or nullptr (then the call site names it)
  const char* function = nullptr;  // the call site
  uint32_t line = 0;
  int64_t wall_ns = 0;       // run() entry to its return
  int64_t busy_max_ns = 0;   // the longest and shortest time a thread spent in fn
  int64_t busy_min_ns = 0;
  int64_t wake_max_ns = 0;   // the latest thread's start after run() entry
};

class RunProfile {
 public:
  explicit RunProfile(size_t capacity) : records_(capacity) {}

  void clear() {
    n_ = 0;
    dropped_ = 0;
  }
  // Records beyond the capacity are counted, not kept.
  void add(const RunRecord& r) {
    if (n_ < records_.size()) records_[n_++] = r;
    else ++dropped_;
  }
  std::span<const RunRecord> records() const { return {records_.data(), n_}; }
  uint64_t dropped() const { return dropped_; }

 private:
  std::vector<RunRecord> records_;
  size_t n_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace dsv4
