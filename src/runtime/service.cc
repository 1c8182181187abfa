#include "runtime/service.h"

#include <chrono>
#include <tuple>

#include "base/check.h"

namespace dsv4 {

namespace {

constexpr double kFailurePollSeconds = 0.1;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int bucket(double v, double first, int n) {  // smallest i with v <= first * 2^i, else n
  double edge = first;
  for (int i = 0; i < n; ++i, edge *= 2)
    if (v <= edge) return i;
  return n;
}

}  // namespace

Service::Service(Engine& engine, const ServiceOptions& opt) : engine_(engine), opt_(opt) {}

std::unique_ptr<Service> Service::start(Engine& engine, const ServiceOptions& opt) {
  std::unique_ptr<Service> s(new Service(engine, opt));
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

Service::~Service() { shutdown(0); }

Service::Submitted Service::submit(GenerationRequest req, Sink sink) {
  Submitted out;
  // Validation reads only the model and the limits: safe beside the running loop.
  if (Status st = engine_.prepare(req); !st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.rejected;
    out.error = SubmitError::kInvalid;
    out.message = st.message();
    return out;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_.load() || quit_ || !loop_status_.ok()) {
    ++metrics_.rejected;
    out.error = SubmitError::kStopping;
    out.message = loop_status_.ok() ? "the server is shutting down" : "the engine failed: " + loop_status_.message();
    return out;
  }
  const int64_t waiting = static_cast<int64_t>(inbox_.size()) + admitting_ + metrics_.queued;
  if (waiting >= opt_.max_queue) {
    ++metrics_.rejected;
    out.error = SubmitError::kQueueFull;
    out.message = fmt::format("{} requests are waiting, max_queue = {}", waiting, opt_.max_queue);
    return out;
  }
  out.id = next_id_;
  next_id_ += req.n;  // choice k reports as id + k (Engine::add_request), to the same sink
  for (int32_t k = 1; k < req.n; ++k) sinks_.emplace(out.id + k, sink);
  sinks_.emplace(out.id, std::move(sink));
  inbox_.push_back(Pending{std::move(req), out.id});
  wake_.notify_one();
  return out;
}

void Service::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancels_.push_back(id);
  wake_.notify_one();
}

void Service::shutdown(double grace_seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_.store(false);
    if (!quit_) {
      quit_ = true;
      grace_deadline_ = steady_seconds() + std::max(0.0, grace_seconds);
    }
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

ServiceMetrics Service::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

Status Service::loop_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loop_status_;
}

void Service::run() {
  LoopBuffers loop;
  while (take_work(loop)) {
    for (Pending& p : loop.inbox) {
      Result<int64_t> id = engine_.add_request(std::move(p.req));
      DSV4_CHECK(id.ok() && *id == p.id, "engine id {} for service id {}: {}", id.ok() ? *id : -1, p.id,
                 id.message());
    }
    loop.inbox.clear();
    for (int64_t id : loop.cancels) engine_.cancel(id);
    loop.cancels.clear();
    Result<StepReport> rep = engine_.step();
    if (!rep.ok()) {
      fail_all(rep.status(), loop);
      return;  // with ranks the failure ended every rank's loop: nothing to stop
    }
    finish_step(*rep, loop);
  }
  // Every rank's loop ends (ranks: the other ranks follow rank 0's stop).
  (void)engine_.stop();
}

// Waits for work and takes the submitted requests and cancellations; false when the loop ends
// (shutdown, nothing left to run).
bool Service::take_work(LoopBuffers& loop) {
  std::unique_lock<std::mutex> lock(mu_);
  // Idle with ranks: a look for another rank's failure every kFailurePollSeconds (the step
  // that follows reports it).
  auto work = [&] { return quit_ || !inbox_.empty() || !cancels_.empty() || !engine_.idle(); };
  while (!wake_.wait_for(lock, std::chrono::duration<double>(kFailurePollSeconds), work))
    if (engine_.job_failed()) return true;
  loop.inbox.swap(inbox_);
  admitting_ = static_cast<int64_t>(loop.inbox.size());  // still waiting, until the step's count
  loop.cancels.swap(cancels_);
  if (quit_ && engine_.idle() && loop.inbox.empty()) return false;
  if (quit_ && !loop.cancelled_all && steady_seconds() >= grace_deadline_) {
    // Grace is over: everything still known ends as cancelled.
    for (const auto& [id, sink] : sinks_) loop.cancels.push_back(id);
    loop.cancelled_all = true;
  }
  return true;
}

// Calls the sinks of loop.deliveries without the lock (they may take their own); an entry
// leaves sinks_ only after its last update, on this thread, so the pointers stay valid.
void Service::call_sinks(std::unique_lock<std::mutex>& lock, LoopBuffers& loop) {
  lock.unlock();
  for (auto& [sink, u] : loop.deliveries) (*sink)(u);
  lock.lock();
}

// The engine's state is unknown after a failed step: every request fails with the error, and
// the loop ends.
void Service::fail_all(const Status& error, LoopBuffers& loop) {
  std::unique_lock<std::mutex> lock(mu_);
  loop_status_ = error;
  accepting_.store(false);
  for (auto& [id, sink] : sinks_) {
    RequestUpdate u;
    u.id = id;
    u.finished = true;
    u.reason = FinishReason::kError;
    u.error = error.message();
    loop.deliveries.emplace_back(&sink, std::move(u));
  }
  metrics_.finished[static_cast<int>(FinishReason::kError)] += static_cast<int64_t>(sinks_.size());
  call_sinks(lock, loop);
  sinks_.clear();
}

// The step's metrics, then each request's update to its sink.
void Service::finish_step(const StepReport& rep, LoopBuffers& loop) {
  std::unique_lock<std::mutex> lock(mu_);
  record_step(rep);
  for (RequestUpdate& u : engine_.updates()) {
    auto it = sinks_.find(u.id);
    if (it == sinks_.end()) continue;
    if (u.finished) {
      ++metrics_.finished[static_cast<int>(u.reason)];
      metrics_.prompt_tokens += u.prompt_tokens;
    }
    loop.deliveries.emplace_back(&it->second, std::move(u));
  }
  call_sinks(lock, loop);
  for (auto& [sink, u] : loop.deliveries)
    if (u.finished) sinks_.erase(u.id);
  loop.deliveries.clear();
}

// Counters and load after a step (mu_ held).
void Service::record_step(const StepReport& rep) {
  ServiceMetrics& m = metrics_;
  if (rep.batch > 0) {
    ++m.steps;
    ++m.batch_hist[bucket(rep.batch, 1, ServiceMetrics::kBatchBuckets)];
    m.batch_sum += rep.batch;
    ++m.step_time_hist[bucket(rep.seconds, 1e-3, ServiceMetrics::kTimeBuckets)];
    m.step_seconds_sum += rep.seconds;
  }
  m.drafts += rep.drafts;
  m.accepted += rep.accepted;
  m.spec_rounds += rep.rounds;
  for (int k = 0; k < ServiceMetrics::kMaxAcceptedAt; ++k) m.spec_accepted_at[k] += rep.accepted_at[k];
  m.preempted += rep.preempted;
  m.completion_tokens += rep.committed;
  m.running = engine_.running();
  m.queued = engine_.queued();
  admitting_ = 0;
  std::tie(m.cache_pages_free, m.cache_pages_total) = engine_.cache_pages();
  const auto& prefix = engine_.prefix_by_rank();
  m.prefix_prompt_tokens.resize(prefix.size());
  m.prefix_hit_tokens.resize(prefix.size());
  for (size_t q = 0; q < prefix.size(); ++q) {
    m.prefix_prompt_tokens[q] = prefix[q].prompt_tokens;
    m.prefix_hit_tokens[q] = prefix[q].hit_tokens;
  }
}

}  // namespace dsv4
