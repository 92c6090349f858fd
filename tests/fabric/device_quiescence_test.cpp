// The registry of fabric/device_quiescence.hpp with plain probes: a device is
// quiescent when every endpoint enrolled on it says so, whatever the endpoints
// of other devices say; a withdrawn endpoint no longer counts. A call made
// through runIfQuiescent runs only then, never while another thread is inside
// an endpoint operation (holding the device's gate shared), and operations
// started meanwhile wait for it to return. A device marked as never draining
// stays not quiescent.
#include "fabric/device_quiescence.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace tide::fabric {
namespace {

// Another thread inside an endpoint operation on `device`: it holds the
// device's gate shared from construction until release() (or destruction).
class OperationInFlight {
 public:
  explicit OperationInFlight(int device)
      : thread_([this, device] {
          std::shared_lock<std::shared_mutex> gate(DeviceQuiescence::gate(device));
          inside_.set_value();
          leave_.get_future().wait();
        }) {
    if (inside_.get_future().wait_for(std::chrono::seconds(10)) != std::future_status::ready)
      ADD_FAILURE() << "the operation did not get inside device " << device << "'s gate within 10 s";
  }
  ~OperationInFlight() { release(); }
  void release() {
    if (!thread_.joinable()) return;
    leave_.set_value();
    thread_.join();
  }

 private:
  std::promise<void> inside_, leave_;
  std::thread thread_;
};

TEST(DeviceQuiescence, EveryEndpointOfTheDeviceMustAgree) {
  int a = 0, b = 0, other = 0;  // owners
  bool aIdle = true, bIdle = true, otherIdle = false;
  DeviceQuiescence::enroll(0, &a, [&] { return aIdle; });
  DeviceQuiescence::enroll(0, &b, [&] { return bIdle; });
  DeviceQuiescence::enroll(1, &other, [&] { return otherIdle; });
  EXPECT_TRUE(DeviceQuiescence::quiescent(0));  // device 1's busy endpoint does not count
  EXPECT_FALSE(DeviceQuiescence::quiescent(1));
  bIdle = false;
  EXPECT_FALSE(DeviceQuiescence::quiescent(0));  // asked now, not at enrollment
  DeviceQuiescence::withdraw(&b);
  EXPECT_TRUE(DeviceQuiescence::quiescent(0));
  DeviceQuiescence::withdraw(&a);
  DeviceQuiescence::withdraw(&other);
  EXPECT_TRUE(DeviceQuiescence::quiescent(1));
}

TEST(DeviceQuiescence, NoEndpointMeansQuiescent) { EXPECT_TRUE(DeviceQuiescence::quiescent(7)); }

TEST(DeviceQuiescence, WithdrawRemovesOnlyThatOwner) {
  int a = 0, b = 0;
  int askedA = 0, askedB = 0;
  DeviceQuiescence::enroll(2, &a, [&] { ++askedA; return true; });
  DeviceQuiescence::enroll(2, &b, [&] { ++askedB; return true; });
  DeviceQuiescence::withdraw(&a);
  EXPECT_TRUE(DeviceQuiescence::quiescent(2));
  EXPECT_EQ(askedA, 0);
  EXPECT_EQ(askedB, 1);
  DeviceQuiescence::withdraw(&b);
}

// An endpoint whose teardown timed out withdraws, but its waits may stay queued: its device is
// never quiescent again (no graph build may wait on them without a deadline), however its other
// endpoints answer; other devices are not affected.
TEST(DeviceQuiescence, ADeviceThatDidNotDrainIsNeverQuiescentAgain) {
  static int nextDevice = 1000;  // the mark lasts the process: a fresh device per run (--gtest_repeat)
  const int device = nextDevice;
  nextDevice += 2;
  int endpoint = 0;
  DeviceQuiescence::enroll(device, &endpoint, [] { return true; });
  EXPECT_TRUE(DeviceQuiescence::quiescent(device));
  DeviceQuiescence::markNeverDrains(device);
  DeviceQuiescence::withdraw(&endpoint);
  EXPECT_FALSE(DeviceQuiescence::quiescent(device));
  bool ran = false;
  EXPECT_FALSE(DeviceQuiescence::runIfQuiescent(device, [&] { ran = true; }));
  EXPECT_FALSE(ran);
  EXPECT_TRUE(DeviceQuiescence::quiescent(device + 1));
}

TEST(DeviceQuiescence, RunIfQuiescentAsksEveryProbe) {
  int a = 0;
  bool idle = false;
  int calls = 0;
  DeviceQuiescence::enroll(3, &a, [&] { return idle; });
  EXPECT_FALSE(DeviceQuiescence::runIfQuiescent(3, [&] { ++calls; }));
  EXPECT_EQ(calls, 0);
  idle = true;
  EXPECT_TRUE(DeviceQuiescence::runIfQuiescent(3, [&] { ++calls; }));
  EXPECT_EQ(calls, 1);
  DeviceQuiescence::withdraw(&a);
}

TEST(DeviceQuiescence, AnOperationInFlightOnAnotherThreadDefersTheCall) {
  int a = 0;
  int asked = 0;
  DeviceQuiescence::enroll(4, &a, [&] { ++asked; return true; });
  OperationInFlight op(4);
  int calls = 0;
  // Not waited for: the operation may itself be waiting on the host for this thread.
  EXPECT_FALSE(DeviceQuiescence::runIfQuiescent(4, [&] { ++calls; }));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(asked, 0);  // its endpoint is mid-operation: not even asked
  op.release();
  EXPECT_TRUE(DeviceQuiescence::runIfQuiescent(4, [&] { ++calls; }));
  EXPECT_EQ(calls, 1);
  DeviceQuiescence::withdraw(&a);
}

TEST(DeviceQuiescence, OperationsStartedDuringTheCallWaitForIt) {
  std::atomic<bool> inCall{false};
  std::atomic<bool> sawCall{false};
  std::thread op;
  std::promise<void> opWaiting;
  EXPECT_TRUE(DeviceQuiescence::runIfQuiescent(5, [&] {
    inCall = true;
    op = std::thread([&] {
      opWaiting.set_value();
      std::shared_lock<std::shared_mutex> gate(DeviceQuiescence::gate(5));
      sawCall = inCall.load();  // an operation that got in during the call would see it
    });
    opWaiting.get_future().wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    inCall = false;
  }));
  op.join();
  EXPECT_FALSE(sawCall.load());
}

TEST(DeviceQuiescence, OtherDevicesOperationsDoNotDeferTheCall) {
  OperationInFlight op(6);
  EXPECT_TRUE(DeviceQuiescence::runIfQuiescent(7, [] {}));
}

}  // namespace
}  // namespace tide::fabric
