#include "runtime/service.h"

#include <chrono>
#include <tuple>

#include "base/check.h"

namespace dsv4 {

namespace {

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
  if (Status st = engine_.validate(req); !st.ok()) {
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
  out.id = next_id_++;
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
  std::deque<Pending> inbox;
  std::vector<int64_t> cancels;
  std::vector<std::pair<Sink*, RequestUpdate>> deliver;
  bool cancelled_all = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return quit_ || !inbox_.empty() || !cancels_.empty() || !engine_.idle(); });
      inbox.swap(inbox_);
      admitting_ = static_cast<int64_t>(inbox.size());  // still waiting, until the step's count
      cancels.swap(cancels_);
      if (quit_ && engine_.idle() && inbox.empty()) break;
      if (quit_ && !cancelled_all && steady_seconds() >= grace_deadline_) {
        // Grace is over: everything still known ends as cancelled.
        for (const auto& [id, sink] : sinks_) cancels.push_back(id);
        cancelled_all = true;
      }
    }
    for (Pending& p : inbox) {
      Result<int64_t> id = engine_.add_request(std::move(p.req));
      DSV4_CHECK(id.ok() && *id == p.id, "engine id {} for service id {}: {}", id.ok() ? *id : -1, p.id,
                 id.message());
    }
    inbox.clear();
    for (int64_t id : cancels) engine_.cancel(id);
    cancels.clear();

    Result<StepReport> rep = engine_.step();
    std::unique_lock<std::mutex> lock(mu_);
    if (!rep.ok()) {
      // The engine's state is unknown: every request fails with the error, and the loop ends.
      loop_status_ = rep.status();
      accepting_.store(false);
      for (auto& [id, sink] : sinks_) {
        RequestUpdate u;
        u.id = id;
        u.finished = true;
        u.reason = FinishReason::kError;
        u.error = rep.message();
        deliver.emplace_back(&sink, std::move(u));
      }
      metrics_.finished[static_cast<int>(FinishReason::kError)] += static_cast<int64_t>(sinks_.size());
      lock.unlock();
      for (auto& [sink, u] : deliver) (*sink)(u);
      lock.lock();
      sinks_.clear();
      break;
    }
    ServiceMetrics& m = metrics_;
    if (rep->batch > 0) {
      ++m.steps;
      ++m.batch_hist[bucket(rep->batch, 1, ServiceMetrics::kBatchBuckets)];
      m.batch_sum += rep->batch;
      ++m.step_time_hist[bucket(rep->seconds, 1e-3, ServiceMetrics::kTimeBuckets)];
      m.step_seconds_sum += rep->seconds;
    }
    m.drafts += rep->drafts;
    m.accepted += rep->accepted;
    m.spec_rounds += rep->rounds;
    for (int k = 0; k < ServiceMetrics::kMaxAcceptedAt; ++k)
      m.spec_accepted_at[k] += rep->accepted_at[k];
    m.preempted += rep->preempted;
    m.completion_tokens += rep->committed;
    m.running = engine_.running();
    m.queued = engine_.queued();
    admitting_ = 0;
    std::tie(m.cache_pages_free, m.cache_pages_total) = engine_.cache_pages();
    // Sinks are called without the lock (they may take their own); an entry leaves the map
    // only after its last update, here on this thread, so the pointers stay valid.
    for (RequestUpdate& u : engine_.updates()) {
      auto it = sinks_.find(u.id);
      if (it == sinks_.end()) continue;
      if (u.finished) {
        ++m.finished[static_cast<int>(u.reason)];
        m.prompt_tokens += u.prompt_tokens;
      }
      deliver.emplace_back(&it->second, std::move(u));
    }
    lock.unlock();
    for (auto& [sink, u] : deliver) (*sink)(u);
    lock.lock();
    for (auto& [sink, u] : deliver)
      if (u.finished) sinks_.erase(u.id);
    deliver.clear();
  }
  // Every rank's loop ends (ranks: the other ranks follow rank 0's stop).
  (void)engine_.stop();
}

}  // namespace dsv4
