// Signals to one counter must come in value order (fabric.hpp): the CUDA
// fabric writes the value, so a smaller one after a larger takes the counter
// back, and a wait for the larger value that starts after that waits for ever
// (BENCHMARKS, session 29). The host fabric, which keeps the larger value,
// refuses such a signal and fails the job, so CPU runs catch what would stall
// a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fabric/host/host_fabric.hpp"

namespace tide::fabric::host {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kId = 3;

HostOptions options() {
  HostOptions o;
  o.queues = 2;
  o.timeoutSeconds = 30.0;  // far above what a refusal may take: it must not sit the deadline out
  return o;
}

// What synchronizeAll() of `ep` throws ("" when nothing).
std::string drainError(Endpoint& ep) {
  try {
    ep.synchronizeAll();
  } catch (const FabricError& e) {
    return e.what();
  }
  return "";
}

TEST(CounterOrder, GrowingAndRepeatedValuesPass) {
  HostWorld world(plan::Topology::make(1, 2), 1 << 12, options());
  Endpoint& sender = world.endpoint(0);
  for (uint64_t v : {1, 2, 2, 5}) sender.signal(0, 1, kId, v);
  EXPECT_EQ(drainError(sender), "");
  world.endpoint(1).wait(0, kId, 5, 0, "the last value");
  EXPECT_EQ(drainError(world.endpoint(1)), "");
  EXPECT_EQ(world.endpoint(1).counterValue(kId), 5u);
}

// Two queues of one rank signal one counter, the later value first (as the
// old landing-free signals on two callers' streams did): the smaller value
// fails the sender's queue, naming both values, the counter keeps the larger,
// and the receiver's pending wait for a value nobody sends ends at once with
// the job's failure, not at its deadline.
TEST(CounterOrder, ASmallerValueFailsTheJob) {
  HostWorld world(plan::Topology::make(1, 2), 1 << 12, options());
  Endpoint& sender = world.endpoint(0);
  Endpoint& receiver = world.endpoint(1);
  receiver.wait(1, kId, 3, 0, "a value nobody sends");
  sender.signal(0, 1, kId, 2);
  sender.synchronize(0);
  const auto start = Clock::now();
  sender.signal(1, 1, kId, 1);
  const std::string err = drainError(sender);
  EXPECT_NE(err.find("a signal of 1 to counter 3 of rank 1, which holds 2 already"), std::string::npos) << err;
  EXPECT_NE(err.find("must come in value order"), std::string::npos) << err;
  EXPECT_EQ(receiver.counterValue(kId), 2u);
  const std::string peer = drainError(receiver);
  EXPECT_NE(peer.find("must come in value order"), std::string::npos) << "the peer's wait said: '" << peer << "'";
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0) << "the wait sat its deadline out";
}

}  // namespace
}  // namespace tide::fabric::host
