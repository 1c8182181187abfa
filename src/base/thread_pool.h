// Persistent worker pool: the one threading idiom of dsv4. run(fn) calls
// fn(tid, nthreads) once on every worker (the caller is worker 0) and returns
// when all are done. No allocation per call; no nested parallel regions.
// A step issues hundreds of short runs, so idle workers and the waiting
// caller spin briefly on atomics before they block on a condition variable.
// With a RunProfile attached (run_profile.h) every run is timed; a run may carry a name for it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <source_location>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/run_profile.h"

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

  // Every later run() records into `profile` (nullptr: none); the caller keeps it alive.
  void attach(RunProfile* profile) { profile_ = profile; }

  template <class Fn>
  void run(Fn&& fn, const char* name = nullptr, std::source_location site = std::source_location::current()) {
    using F = std::remove_reference_t<Fn>;
    auto thunk = [](void* ctx, int tid, int n) { (*static_cast<F*>(ctx))(tid, n); };
    void* ctx = const_cast<void*>(static_cast<const void*>(&fn));
    if (profile_) dispatch_timed(thunk, ctx, RunRecord{name, site.function_name(), site.line()});
    else dispatch(thunk, ctx);
  }

 private:
  using Thunk = void (*)(void*, int, int);
  // Each thread's clock readings around fn in a timed run (one cache line per thread).
  struct alignas(64) ThreadSpan {
    int64_t begin_ns = 0;
    int64_t end_ns = 0;
  };
  void dispatch(Thunk thunk, void* ctx);
  void dispatch_timed(Thunk thunk, void* ctx, RunRecord record);
  void run_thunk(int tid);
  void worker(int tid);

  int n_threads_;
  uint64_t runs_ = 0;  // written by the caller only (run() is not reentrant)
  RunProfile* profile_ = nullptr;
  bool timing_ = false;  // this run is timed: written before generation_ is published
  std::vector<ThreadSpan> spans_;
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
