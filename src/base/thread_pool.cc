#include "base/thread_pool.h"

#include "base/check.h"

namespace dsv4 {
namespace {

// Polling before a thread blocks: a few µs of pause, then yields, so an
// oversubscribed machine (several processes, ctest -j) still makes progress.
constexpr int kPauseIterations = 256;
constexpr int kSpinIterations = kPauseIterations + 64;

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

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
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

void ThreadPool::dispatch(Thunk thunk, void* ctx) {
  ++runs_;
  if (n_threads_ == 1) {
    thunk(ctx, 0, 1);
    return;
  }
  DSV4_CHECK(pending_.load(std::memory_order_acquire) == 0, "ThreadPool::run is not reentrant");
  thunk_ = thunk;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  thunk(ctx, 0, n_threads_);
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
    thunk_(ctx_, tid, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace dsv4
