// Runs an engine kernel call fn(tid, nthreads) on 1 thread (the caller) or on
// a shared 2-thread pool, the two thread counts every operator test covers.
#pragma once

#include "base/thread_pool.h"

namespace dsv4::test {

inline ThreadPool& pool2() {
  static ThreadPool p(2);
  return p;
}

template <class Fn>
void run(int nthreads, Fn&& fn) {
  if (nthreads == 1) fn(0, 1);
  else pool2().run([&fn](int tid, int n) { fn(tid, n); });
}

}  // namespace dsv4::test
