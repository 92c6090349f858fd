// The fail-stop deadline over calls that cannot be timed from inside (the
// RMA rails' window registration on a blocking NCCL communicator): a call
// that returns in time gives its result; one that does not aborts the process
// with a message naming it.
#include "fabric/fail_stop_deadline.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace tide::fabric {
namespace {

using namespace std::chrono_literals;

TEST(FailStopDeadline, ACallInTimeReturnsItsResult) {
  const int drawn = static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count() % 1000) + 1;
  EXPECT_EQ(callUnderFailStopDeadline(5, "w", "a call", "h", [&] { return drawn * 3; }), drawn * 3);
  bool ran = false;
  callUnderFailStopDeadline(5, "w", "a call", "h", [&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST(FailStopDeadline, AnExceptionPassesThroughAndLeavesNoStall) {
  EXPECT_THROW(callUnderFailStopDeadline(0.05, "w", "a call", "h", []() -> int { throw std::runtime_error("x"); }),
               std::runtime_error);
  std::this_thread::sleep_for(150ms);  // past the limit, out of the section: no abort
}

TEST(FailStopDeadlineDeathTest, ACallPastTheDeadlineAbortsNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(callUnderFailStopDeadline(0.05, "[tide cuda fabric] rank 3", "registering the RMA window",
                                         "a rail peer never registered",
                                         [] { std::this_thread::sleep_for(5s); }),
               "\\[tide cuda fabric\\] rank 3: FATAL: registering the RMA window has not returned after "
               "[0-9.]+ s \\(deadline 0.05 s; a rail peer never registered\\): aborting the process \\(fail stop\\)");
}

}  // namespace
}  // namespace tide::fabric
