// ThreadPool's RunProfile: one record per run while attached, none after, names and call
// sites kept, the capacity never exceeded.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "base/run_profile.h"
#include "base/thread_pool.h"

namespace dsv4 {
namespace {

TEST(ThreadPoolProfile, RecordsEachRunWhileAttached) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    RunProfile profile(8);
    std::atomic<int> calls{0};
    pool.run([&](int, int) { calls.fetch_add(1); });  // before attach: not recorded
    pool.attach(&profile);
    pool.run([&](int, int) { calls.fetch_add(1); }, "first");
    const uint32_t line = __LINE__ + 1;
    pool.run([&](int, int) { calls.fetch_add(1); });
    pool.attach(nullptr);
    pool.run([&](int, int) { calls.fetch_add(1); });
    EXPECT_EQ(calls.load(), 4 * threads);
    ASSERT_EQ(profile.records().size(), 2u) << threads;
    const RunRecord& a = profile.records()[0];
    const RunRecord& b = profile.records()[1];
    EXPECT_STREQ(a.name, "first");
    EXPECT_EQ(b.name, nullptr);
    EXPECT_EQ(b.line, line);
    EXPECT_NE(std::string(b.function).find("RecordsEachRunWhileAttached"), std::string::npos) << b.function;
    for (const RunRecord& r : profile.records()) {
      EXPECT_GE(r.busy_min_ns, 0);
      EXPECT_LE(r.busy_min_ns, r.busy_max_ns);
      EXPECT_LE(r.busy_max_ns, r.wall_ns);
      EXPECT_GE(r.wake_max_ns, 0);
      EXPECT_LE(r.wake_max_ns, r.wall_ns);
    }
  }
}

TEST(ThreadPoolProfile, CountsRunsBeyondTheCapacity) {
  ThreadPool pool(2);
  RunProfile profile(2);
  pool.attach(&profile);
  for (int i = 0; i < 5; ++i) pool.run([](int, int) {});
  EXPECT_EQ(profile.records().size(), 2u);
  EXPECT_EQ(profile.dropped(), 3u);
  profile.clear();
  pool.run([](int, int) {});
  EXPECT_EQ(profile.records().size(), 1u);
  EXPECT_EQ(profile.dropped(), 0u);
}

}  // namespace
}  // namespace dsv4
