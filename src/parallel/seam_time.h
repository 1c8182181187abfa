// Wall time of a seam and of its collectives (overlap): where a seam's collective time goes.
//   total       seconds inside the seam's run()
//   exposed     seconds blocked in its collectives (blocking calls and wait()); the first
//               collective of a seam also absorbs the ranks' skew (a peer still computing)
//   waited      the part of exposed spent in wait() of non-blocking collectives
//   overlapped  seconds a started non-blocking collective was in flight while the seam computed
//               (from start until a progress poke found it complete or wait() began)
//   started     non-blocking collectives started; done_at_poke: how many a poke (test())
//               found complete before wait(): OpenMPI progresses them only inside MPI calls
// The time hidden by overlap is waited with overlap off minus waited with it on.
#pragma once

#include <chrono>
#include <cstdint>

#include "base/status.h"
#include "parallel/communicator.h"

namespace dsv4 {

struct SeamTime {
  double total = 0, exposed = 0, waited = 0, overlapped = 0;
  int64_t started = 0, done_at_poke = 0;

  SeamTime& operator+=(const SeamTime& o) {
    total += o.total;
    exposed += o.exposed;
    waited += o.waited;
    overlapped += o.overlapped;
    started += o.started;
    done_at_poke += o.done_at_poke;
    return *this;
  }
};

inline double seam_clock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Adds the wall time of a scope to a counter (a seam's total, a blocking collective's exposed).
class SeamTimer {
 public:
  explicit SeamTimer(double* sum) : sum_(sum), t0_(seam_clock()) {}
  ~SeamTimer() { *sum_ += seam_clock() - t0_; }
  SeamTimer(const SeamTimer&) = delete;
  SeamTimer& operator=(const SeamTimer&) = delete;

 private:
  double* sum_;
  double t0_;
};

// A non-blocking collective of a seam with its timing: start, poke between compute chunks,
// finish (wait) before its buffers are read.
class InFlight {
 public:
  void started(SeamTime& t) {
    t0_ = seam_clock();
    open_ = true;
    ++t.started;
  }
  PendingCollective* handle() { return &pending_; }
  // A progress poke (MPI_Test); cheap when already complete.
  void poke(SeamTime& t) {
    if (!open_ || !pending_.test()) return;
    open_ = false;
    t.overlapped += seam_clock() - t0_;
    ++t.done_at_poke;
  }
  Status finish(SeamTime& t) {
    if (!open_) return pending_.wait();  // complete already (a no-op)
    open_ = false;
    const double t1 = seam_clock();
    t.overlapped += t1 - t0_;
    Status st = pending_.wait();
    const double w = seam_clock() - t1;
    t.exposed += w;
    t.waited += w;
    return st;
  }

 private:
  PendingCollective pending_;
  double t0_ = 0;
  bool open_ = false;
};

}  // namespace dsv4
