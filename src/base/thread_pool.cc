#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "base/check.h"

namespace dsv4 {
namespace {

// Polling before a thread blocks: a few µs of pause, then yields, so an
// oversubscribed machine (several processes, ctest -j) still makes progress.
constexpr int kPauseIterations = 256;
constexpr int kSpinIterations = kPauseIterations + 64;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void cpu_relax(int spin) {
  if (spin < kPauseIterations) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads), spans_(n_threads_) {
  for (int t = 1; t < n_threads_; ++t) threads_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& th : threads_) th.join();
}

// fn on thread tid, with its clock readings when the run is timed.
void ThreadPool::run_thunk(int tid) {
  if (!timing_) {
    thunk_(ctx_, tid, n_threads_);
    return;
  }
  ThreadSpan& span = spans_[static_cast<size_t>(tid)];
  span.begin_ns = now_ns();
  thunk_(ctx_, tid, n_threads_);
  span.end_ns = now_ns();
}

void ThreadPool::dispatch_timed(Thunk thunk, void* ctx, RunRecord record) {
  const int64_t t0 = now_ns();
  timing_ = true;
  dispatch(thunk, ctx);
  timing_ = false;
  record.wall_ns = now_ns() - t0;
  record.busy_min_ns = record.wall_ns;
  for (const ThreadSpan& span : spans_) {
    const int64_t busy = span.end_ns - span.begin_ns;
    record.busy_max_ns = std::max(record.busy_max_ns, busy);
    record.busy_min_ns = std::min(record.busy_min_ns, busy);
    record.wake_max_ns = std::max(record.wake_max_ns, span.begin_ns - t0);
  }
  profile_->add(record);
}

void ThreadPool::dispatch(Thunk thunk, void* ctx) {
  ++runs_;
  thunk_ = thunk;
  ctx_ = ctx;
  if (n_threads_ == 1) {
    run_thunk(0);
    return;
  }
  DSV4_CHECK(pending_.load(std::memory_order_acquire) == 0, "ThreadPool::run is not reentrant");
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_thunk(0);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      cpu_relax(spin);
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
}

void ThreadPool::worker(int tid) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && !stop_.load(std::memory_order_acquire); ++spin) {
      if (spin < kSpinIterations) {
        cpu_relax(spin);
      } else {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; });
      }
      g = generation_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = g;
    run_thunk(tid);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace dsv4
