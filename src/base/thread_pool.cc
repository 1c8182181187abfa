#include "base/thread_pool.h"

#include "base/check.h"

namespace dsv4 {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int t = 1; t < n_threads_; ++t) threads_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& th : threads_) th.join();
}

void ThreadPool::dispatch(Thunk thunk, void* ctx) {
  if (n_threads_ == 1) {
    thunk(ctx, 0, 1);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    DSV4_CHECK(pending_ == 0, "ThreadPool::run is not reentrant");
    thunk_ = thunk;
    ctx_ = ctx;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  thunk(ctx, 0, n_threads_);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
}

void ThreadPool::worker(int tid) {
  uint64_t seen = 0;
  for (;;) {
    Thunk thunk;
    void* ctx;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      thunk = thunk_;
      ctx = ctx_;
    }
    thunk(ctx, tid, n_threads_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace dsv4
