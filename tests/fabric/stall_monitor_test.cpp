// The stall monitor that guards the CUDA wait watchdog: a section held past
// the limit is reported once, with the time spent; sections that leave in
// time, and time outside any section, are not.
#include "fabric/stall_monitor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tide::fabric {
namespace {

using namespace std::chrono_literals;

struct Reports {
  std::mutex mu;
  std::vector<double> spent;
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return spent.size();
  }
  // Under the lock: the monitor's thread appends (and may reallocate) under it, and
  // nothing else orders its next report after this read (TSan, session 37).
  double at(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    return spent.at(i);
  }
};

TEST(StallMonitor, ReportsASectionHeldPastTheLimitOnce) {
  Reports reports;
  StallMonitor monitor(0.05, [&](double s) {
    std::lock_guard<std::mutex> lock(reports.mu);
    reports.spent.push_back(s);
  });
  monitor.enter();
  std::this_thread::sleep_for(400ms);  // eight limits: reported once, not eight times
  monitor.leave();
  ASSERT_EQ(reports.count(), 1u);
  EXPECT_GT(reports.at(0), 0.05);
  EXPECT_LT(reports.at(0), 0.4);
  // A new section that stalls is a new report.
  monitor.enter();
  std::this_thread::sleep_for(200ms);
  monitor.leave();
  EXPECT_EQ(reports.count(), 2u);
}

TEST(StallMonitor, SectionsThatLeaveInTimeAndIdleTimeAreNotReported) {
  std::atomic<int> reports{0};
  StallMonitor monitor(0.1, [&](double) { ++reports; });
  const auto until = std::chrono::steady_clock::now() + 500ms;
  while (std::chrono::steady_clock::now() < until) {  // many short sections, as the watchdog's polls
    monitor.enter();
    std::this_thread::sleep_for(2ms);
    monitor.leave();
    std::this_thread::sleep_for(3ms);
  }
  std::this_thread::sleep_for(300ms);  // idle past the limit
  EXPECT_EQ(reports.load(), 0);
}

TEST(StallMonitor, RefusesNoLimitOrNoHandler) {
  EXPECT_THROW(StallMonitor(0, [](double) {}), std::invalid_argument);
  EXPECT_THROW(StallMonitor(1, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace tide::fabric
