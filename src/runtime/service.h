// Service: the engine loop on its own thread, for front ends that run many requests at once
// (the HTTP server, the chat CLI). Loop: take submitted requests and cancellations -> one
// engine step (schedule -> execute -> update) -> hand each request's update to its sink.
// The engine is used from that thread only; submit/cancel/metrics are thread-safe.
//
// With ranks the service runs on rank 0 (the other ranks follow with Engine::step until
// stopped, apps/cli/ranks.h); shutdown stops every rank.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runtime/engine.h"
#include "runtime/request.h"

namespace dsv4 {

struct ServiceOptions {
  int32_t max_queue = 256;  // requests waiting for admission beyond this: kQueueFull
};

// Counters since start, and the current load (Prometheus-style; the server formats them).
struct ServiceMetrics {
  static constexpr int kBatchBuckets = 8;  // batch size <= 1, 2, 4, ..., 128, +Inf
  static constexpr int kTimeBuckets = 10;  // step seconds <= 1ms * 2^i, i = 0..9, +Inf
  int64_t finished[7] = {};                // by FinishReason (index = enum value)
  int64_t rejected = 0;                    // submit errors (invalid, queue full, stopping)
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t running = 0, queued = 0;
  int64_t steps = 0;
  int64_t batch_hist[kBatchBuckets + 1] = {};
  int64_t batch_sum = 0;                   // requests over all steps
  int64_t step_time_hist[kTimeBuckets + 1] = {};
  double step_seconds_sum = 0;
  int64_t drafts = 0, accepted = 0;        // draft tokens verified / accepted (MTP or DSpark)
  static constexpr int kMaxAcceptedAt = StepReport::kMaxAcceptedAt;
  int64_t spec_rounds = 0;                 // verify steps of requests with drafts
  int64_t spec_accepted_at[kMaxAcceptedAt] = {};  // those rounds by drafts accepted (0 .. γ)
  int64_t preempted = 0;
  int64_t cache_pages_free = -1, cache_pages_total = -1;  // after the last step; -1: no compressed layers
  // Per owner rank since the start: prompt tokens at first admission, and those the prefix
  // cache held (Scheduler::prefix_by_rank).
  std::vector<int64_t> prefix_prompt_tokens, prefix_hit_tokens;
};

class Service {
 public:
  enum class SubmitError { kNone, kInvalid, kQueueFull, kStopping };
  struct Submitted {
    int64_t id = -1;
    SubmitError error = SubmitError::kNone;
    std::string message;  // names the field and the limit
  };
  // Called on the service thread, in order, once per step that touched the request; the last
  // call has finished set. Must not block for long (copy into a queue and return).
  using Sink = std::function<void(const RequestUpdate&)>;

  // The engine outlives the service.
  static std::unique_ptr<Service> start(Engine& engine, const ServiceOptions& opt);
  ~Service();  // shutdown(0)

  // Engine::prepare (thread-safe): validates the request and compiles its constraint, on the
  // caller's thread. submit() prepares too, but a prepared request's grammar is not compiled again.
  Status prepare(GenerationRequest& req) const { return engine_.prepare(req); }
  // Submitted::id: the request's id; with n choices, choice k's updates carry id + k.
  Submitted submit(GenerationRequest req, Sink sink);
  // The request ends with reason kCancelled at the next step (no-op once finished; one choice:
  // cancel each choice's id).
  void cancel(int64_t id);
  // Stops accepting (submit -> kStopping), lets running and queued requests finish for up to
  // grace_seconds, cancels the rest, stops the engine (every rank) and joins the thread.
  void shutdown(double grace_seconds);
  bool accepting() const { return accepting_.load(); }
  ServiceMetrics metrics() const;
  // The first engine error that ended the loop (then every request failed with it), else ok.
  Status loop_status() const;

 private:
  struct Pending {
    GenerationRequest req;
    int64_t id;
  };
  // The loop thread's own buffers, reused across steps.
  struct LoopBuffers {
    std::deque<Pending> inbox;
    std::vector<int64_t> cancels;
    std::vector<std::pair<Sink*, RequestUpdate>> deliveries;
    bool cancelled_all = false;  // the grace after shutdown() is over
  };

  explicit Service(Engine& engine, const ServiceOptions& opt);
  // The loop: take_work -> admit and cancel -> engine step -> finish_step (or fail_all).
  void run();
  bool take_work(LoopBuffers& loop);
  void finish_step(const StepReport& rep, LoopBuffers& loop);
  void fail_all(const Status& error, LoopBuffers& loop);
  void record_step(const StepReport& rep);
  void call_sinks(std::unique_lock<std::mutex>& lock, LoopBuffers& loop);

  Engine& engine_;
  ServiceOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Pending> inbox_;
  int64_t admitting_ = 0;  // taken from inbox_ by the loop, not yet counted in metrics_.queued
  std::vector<int64_t> cancels_;
  std::unordered_map<int64_t, Sink> sinks_;
  ServiceMetrics metrics_;
  Status loop_status_;
  std::atomic<bool> accepting_{true};
  bool quit_ = false;
  double grace_deadline_ = 0;  // steady seconds; 0 = none
  int64_t next_id_ = 0;
  std::thread thread_;
};

}  // namespace dsv4
