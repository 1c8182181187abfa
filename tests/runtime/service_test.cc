// Service: the engine loop on its own thread. Requests submitted from many threads get the
// tokens of an offline run, each exactly one final update; cancel, queue limits, shutdown
// with and without grace; metrics count what happened.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/service.h"
#include "support/tiny_model.h"

namespace dsv4 {
namespace {

Limits small_limits() {
  Limits l;
  l.max_batch = 4;
  l.max_seqs = 4;
  l.max_rows = 32;
  l.max_chunk = 16;
  l.max_context = 256;
  l.n_threads = 1;
  return l;
}

GenerationRequest req(int i, int max_tokens) {
  GenerationRequest g;
  g.prompt = test::random_tokens(3 + i % 5, 100 + i, 512);
  g.max_tokens = max_tokens;
  g.stop_at_eos = false;
  g.sampling = {0.8f, 0.95f, static_cast<uint64_t>(i)};
  return g;
}

// Collects one request's updates; wait() returns once the final one arrived.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  RequestUpdate final;
  int finals = 0;
  Service::Sink sink() {
    return [this](const RequestUpdate& u) {
      std::lock_guard<std::mutex> lock(mu);
      tokens.insert(tokens.end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) {
        ++finals;
        final = u;
        cv.notify_all();
      }
    };
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finals > 0; });
  }
};

std::vector<int32_t> offline(const test::TinyModel& m, const GenerationRequest& g) {
  auto e = Engine::create(m.cfg, *m.w, small_limits(), EngineOptions{});
  EXPECT_TRUE((*e)->add_request(g).ok());
  std::vector<int32_t> out;
  while (!(*e)->idle()) {
    EXPECT_TRUE((*e)->step().ok());
    for (auto& u : (*e)->updates()) out.insert(out.end(), u.tokens.begin(), u.tokens.end());
  }
  return out;
}

TEST(Service, ConcurrentSubmitsGetOfflineTokens) {
  const auto& m = test::tiny_model("tiny", TinyQuant::kFp8);
  auto e = Engine::create(m.cfg, *m.w, small_limits(), EngineOptions{});
  ASSERT_TRUE(e.ok());
  auto svc = Service::start(**e, ServiceOptions{});
  constexpr int kN = 12;
  std::vector<Collector> got(kN);
  std::vector<std::thread> clients;
  for (int i = 0; i < kN; ++i)
    clients.emplace_back([&, i] {
      auto s = svc->submit(req(i, 6 + i % 4), got[i].sink());
      ASSERT_EQ(s.error, Service::SubmitError::kNone) << s.message;
      got[i].wait();
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got[i].finals, 1);
    EXPECT_EQ(got[i].final.reason, FinishReason::kLength);
    EXPECT_EQ(got[i].tokens, offline(m, req(i, 6 + i % 4))) << i;
  }
  const ServiceMetrics mt = svc->metrics();
  EXPECT_EQ(mt.finished[static_cast<int>(FinishReason::kLength)], kN);
  EXPECT_GT(mt.steps, 0);
  int64_t hist = 0;
  for (int64_t h : mt.batch_hist) hist += h;
  EXPECT_EQ(hist, mt.steps);
  svc->shutdown(0);
  EXPECT_EQ(svc->submit(req(0, 2), [](const RequestUpdate&) {}).error, Service::SubmitError::kStopping);
}

TEST(Service, InvalidQueueFullCancelAndShutdown) {
  const auto& m = test::tiny_model("tiny", TinyQuant::kFp8);
  Limits l = small_limits();
  l.max_batch = l.max_seqs = 1;
  // Each step lasts at least 5 ms, so the long request is still running when it is cancelled
  // (200 tokens take at least a second on a machine of any speed).
  EngineOptions eo;
  eo.min_step_seconds = 0.005;
  auto e = Engine::create(m.cfg, *m.w, l, eo);
  ASSERT_TRUE(e.ok());
  ServiceOptions opt;
  opt.max_queue = 2;
  auto svc = Service::start(**e, opt);
  GenerationRequest bad = req(0, 4);
  bad.prompt.push_back(9999);
  auto s = svc->submit(bad, [](const RequestUpdate&) {});
  EXPECT_EQ(s.error, Service::SubmitError::kInvalid);
  EXPECT_NE(s.message.find("outside the vocabulary"), std::string::npos) << s.message;

  // One long request runs; more wait until the queue is full. (Which submits are refused
  // depends on the loop's timing: a request it has taken from the inbox but not yet handed to
  // the engine still counts as waiting, so the count never dips below the truth.)
  std::vector<Collector> got(8);
  std::vector<int64_t> ids;
  std::vector<int> accepted;  // the index into got of each id
  int full = 0;
  for (int i = 0; i < 8; ++i) {
    auto r = svc->submit(req(i, 200), got[i].sink());
    if (r.error == Service::SubmitError::kQueueFull) {
      ++full;
      EXPECT_NE(r.message.find("max_queue = 2"), std::string::npos) << r.message;
    } else {
      ASSERT_EQ(r.error, Service::SubmitError::kNone) << r.message;
      ids.push_back(r.id);
      accepted.push_back(i);
    }
  }
  EXPECT_GE(full, 1);
  ASSERT_EQ(accepted[0], 0);
  svc->cancel(ids[0]);
  got[0].wait();
  EXPECT_EQ(got[0].final.reason, FinishReason::kCancelled);
  EXPECT_LT(got[0].tokens.size(), 200u);
  // Shutdown without grace cancels the rest; each still gets exactly one final update.
  svc->shutdown(0);
  for (int i : accepted) {
    got[i].wait();
    EXPECT_EQ(got[i].finals, 1);
    EXPECT_EQ(got[i].final.reason, FinishReason::kCancelled) << i;
  }
  for (int i = 0; i < 8; ++i) {
    const bool refused = std::find(accepted.begin(), accepted.end(), i) == accepted.end();
    EXPECT_TRUE(!refused || got[i].finals == 0) << "refused request " << i << " got an update";
  }
}

// A request whose prompt fits but whose prompt + max_tokens never can is refused at submit
// (kInvalid, naming max_tokens and the cache; the server's 400): no step runs, no update
// comes. One that just fits runs to max_tokens.
TEST(Service, RequestThatCanNeverFitIsInvalid) {
  const auto& m = test::tiny_model("tiny", TinyQuant::kFp8);
  Limits l = small_limits();
  l.page_tokens = 16;
  l.cache_blocks = 2;  // 32 positions in all
  auto e = Engine::create(m.cfg, *m.w, l, EngineOptions{});
  ASSERT_TRUE(e.ok()) << e.message();
  auto svc = Service::start(**e, ServiceOptions{});
  GenerationRequest g = req(0, 0);  // a prompt of 3 tokens
  ASSERT_EQ(g.prompt.size(), 3u);
  g.max_tokens = 31;  // rows 0 .. 31: a third page
  Collector never;
  const auto s = svc->submit(g, never.sink());
  EXPECT_EQ(s.error, Service::SubmitError::kInvalid);
  EXPECT_EQ(s.id, -1);
  EXPECT_EQ(s.message, "max_tokens: prompt (3 tokens) + max_tokens (31) needs 3 compressed-cache pages of 16 "
                       "positions, the cache has only 2 (cache_blocks)");
  g.max_tokens = 30;  // rows 0 .. 30
  Collector fits;
  ASSERT_EQ(svc->submit(g, fits.sink()).error, Service::SubmitError::kNone);
  fits.wait();
  EXPECT_EQ(fits.final.reason, FinishReason::kLength) << fits.final.error;
  EXPECT_EQ(fits.tokens.size(), 30u);
  svc->shutdown(0);
  EXPECT_EQ(never.finals, 0);
  EXPECT_TRUE(never.tokens.empty());
  const ServiceMetrics mt = svc->metrics();
  EXPECT_EQ(mt.rejected, 1);
  EXPECT_EQ(mt.prompt_tokens, 3);  // the request that ran, only
  EXPECT_EQ(mt.finished[static_cast<int>(FinishReason::kError)], 0);
}

TEST(Service, ShutdownGraceLetsRequestsFinish) {
  const auto& m = test::tiny_model("tiny", TinyQuant::kFp8);
  auto e = Engine::create(m.cfg, *m.w, small_limits(), EngineOptions{});
  ASSERT_TRUE(e.ok());
  auto svc = Service::start(**e, ServiceOptions{});
  Collector c;
  ASSERT_EQ(svc->submit(req(3, 10), c.sink()).error, Service::SubmitError::kNone);
  svc->shutdown(600);
  c.wait();
  EXPECT_EQ(c.final.reason, FinishReason::kLength);
  EXPECT_EQ(c.tokens, offline(m, req(3, 10)));
}

}  // namespace
}  // namespace dsv4
