// The host fabric's in-order queue: a host wait on it fails when the queue
// stalls (no task finishes within the limit), not when a long but moving
// backlog outlasts the limit (many calls enqueued before one synchronize).
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "fabric/host/work_queue.hpp"

namespace tide::fabric::host {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueue, ABusyQueueIsNoStall) {
  WorkQueue q;
  uint64_t last = 0;
  // 12 tasks of 40 ms: 480 ms in all, each well within a 150 ms stall limit.
  for (int i = 0; i < 12; ++i) last = q.submit([] { std::this_thread::sleep_for(40ms); });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(q.waitCompleted(last, 150ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms) << "returned before the backlog ran";
  EXPECT_EQ(q.completed(), last);
}

TEST(WorkQueue, AStalledQueueTimesOut) {
  WorkQueue q;
  q.submit([] {});
  const uint64_t stuck = q.submit([] { std::this_thread::sleep_for(600ms); });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(q.waitCompleted(stuck, 100ms));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 500ms) << "the limit bounds the stall, not more";
  EXPECT_TRUE(q.waitCompleted(stuck, 2s));  // the task ends: the same wait then passes
}

// A failure belongs to the work from its task on: waits up to an earlier task
// see none (what a read-done event of a call before the failure reports),
// waits that include it or a later, skipped task see it.
TEST(WorkQueue, AFailureBelongsToItsTaskAndTheTasksAfterIt) {
  WorkQueue q;
  int ran = 0;
  const uint64_t before = q.submit([&] { ++ran; });
  const uint64_t failing = q.submit([] { throw std::runtime_error("injected"); });
  const uint64_t skipped = q.submit([&] { ++ran; });
  ASSERT_TRUE(q.waitCompleted(skipped, 2s));
  EXPECT_EQ(ran, 1) << "a task after the failure ran";
  EXPECT_EQ(q.failureUpTo(before), nullptr);
  EXPECT_NE(q.failureUpTo(failing), nullptr);
  EXPECT_NE(q.failureUpTo(skipped), nullptr);
  EXPECT_NE(q.failure(), nullptr);
}

TEST(WorkQueue, AStopEndsTheWait) {
  WorkQueue q;
  q.submit([] { std::this_thread::sleep_for(300ms); });
  const uint64_t never = q.submit([] {});
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    q.requestStop();
  });
  EXPECT_FALSE(q.waitCompleted(never, 10s));  // dropped at the stop, so never completed
  stopper.join();
  EXPECT_LT(q.completed(), never);
}

}  // namespace
}  // namespace tide::fabric::host
