// Persistent worker pool: the one threading idiom of dsv4. run(fn) calls
// fn(tid, nthreads) once on every worker (the caller is worker 0) and returns
// when all are done. No allocation per call; no nested parallel regions.
// A step issues hundreds of short runs, so idle workers and the waiting
// caller spin briefly on atomics before they block on a condition variable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace dsv4 {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls of run() since construction: each one ends in a barrier when size() > 1.
  uint64_t runs() const { return runs_; }

  template <class Fn>
  void run(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    auto thunk = [](void* ctx, int tid, int n) { (*static_cast<F*>(ctx))(tid, n); };
    dispatch(thunk, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Thunk = void (*)(void*, int, int);
  void dispatch(Thunk thunk, void* ctx);
  void worker(int tid);

  int n_threads_;
  uint64_t runs_ = 0;  // written by the caller only (run() is not reentrant)
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  Thunk thunk_ = nullptr;  // written before generation_ is published
  void* ctx_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace dsv4
