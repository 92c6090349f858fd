// The protocol checker on hand-made schedules: it must report races and
// landing-rule breaks from the ordering the ops establish, whichever
// interleaving happens, and stay silent when the ordering is sound.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fabric/host/host_fabric.hpp"

namespace tide::fabric::host {
namespace {

struct World {
  explicit World(int ranks = 2) : world(plan::Topology::make(1, ranks), 1 << 16, options()) {}
  static HostOptions options() {
    HostOptions o;
    o.queues = 3;
    o.timeoutSeconds = 2.0;
    o.checkProtocol = true;
    return o;
  }
  // Drains every queue; returns the first error message, empty if none.
  std::string drain() {
    std::string first;
    for (int r = 0; r < world.ranks(); ++r) {
      try {
        world.endpoint(r).synchronizeAll();
      } catch (const FabricError& e) {
        if (first.empty()) first = e.what();
      }
    }
    return first;
  }
  HostWorld world;
};

CopyOp copyOf(void* dst, const void* src, int64_t bytes) {
  CopyOp op;
  op.dst = dst;
  op.src = src;
  op.width = bytes;
  return op;
}

TEST(ProtocolCheckerTest, UnorderedWritesToOneRegionAreReported) {
  World w;
  Endpoint& ep = w.world.endpoint(0);
  std::byte* a = ep.arena();
  ep.zero(0, a, 256);
  ep.zero(1, a + 128, 256);  // overlaps, other queue, no ordering
  const std::string err = w.drain();
  EXPECT_NE(err.find("protocol violation"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 0 arena"), std::string::npos) << err;
}

TEST(ProtocolCheckerTest, DisjointOrOrderedAccessesAreClean) {
  World w;
  Endpoint& ep = w.world.endpoint(0);
  std::byte* a = ep.arena();
  ep.zero(0, a, 128);
  ep.zero(1, a + 128, 128);               // disjoint bytes: fine
  const uint64_t ev = ep.record(0);
  ep.waitEvent(1, 0, ev);
  ep.copy(1, {copyOf(a + 1024, a, 128)});  // reads queue 0's bytes after its event
  EXPECT_EQ(w.drain(), "");
}

TEST(ProtocolCheckerTest, CounterSignalOrdersAcrossRanks) {
  for (bool withWait : {true, false}) {
    World w;
    Endpoint& r0 = w.world.endpoint(0);
    Endpoint& r1 = w.world.endpoint(1);
    std::byte* peer = r0.peerArena(1);
    r0.copy(0, {copyOf(peer, r0.arena() + 4096, 64)});  // rank 0 writes into rank 1's arena
    r0.signal(0, 1, 7, 1);
    if (withWait) r1.wait(0, 7, 1, 0, "the data");
    r1.copy(0, {copyOf(r1.arena() + 8192, r1.arena(), 64)});  // rank 1 reads it
    const std::string err = w.drain();
    if (withWait)
      EXPECT_EQ(err, "");
    else
      EXPECT_NE(err.find("no happens-before"), std::string::npos) << err;
  }
}

TEST(ProtocolCheckerTest, LandingRulesOnTheInbox) {
  // A landing may read each contribution once; reading consumed bytes again
  // (a stale block) or overwriting an unconsumed one is a violation.
  for (int scenario = 0; scenario < 3; ++scenario) {
    World w(1);
    Endpoint& ep = w.world.endpoint(0);
    ep.annotateInbox(0, 1024);
    auto* inbox = reinterpret_cast<float*>(ep.arena());
    auto* out = reinterpret_cast<float*>(ep.arena() + 4096);
    LandOp land;
    land.dst = out;
    land.elems = 16;
    land.sources = {inbox};
    ep.copy(0, {copyOf(inbox, ep.arena() + 8192, 64)});  // a contribution arrives
    ep.land(0, land);                                     // and is consumed
    if (scenario == 0) {
      ep.copy(0, {copyOf(inbox, ep.arena() + 8192, 64)});  // the next one
      ep.land(0, land);
      EXPECT_EQ(w.drain(), "");
    } else if (scenario == 1) {
      ep.land(0, land);  // stale: nothing new arrived, nothing was zeroed
      EXPECT_NE(w.drain().find("stale block"), std::string::npos);
    } else {
      ep.copy(0, {copyOf(inbox + 32, ep.arena() + 8192, 64)});  // arrives ...
      ep.copy(0, {copyOf(inbox + 32, ep.arena() + 8192, 64)});  // ... twice before a landing
      EXPECT_NE(w.drain().find("no landing has consumed"), std::string::npos);
    }
  }
}

TEST(ProtocolCheckerTest, AHostWriteOverAnUnconsumedContributionIsNamed) {
  World w(1);
  Endpoint& ep = w.world.endpoint(0);
  ProtocolChecker* checker = w.world.checker();
  ASSERT_NE(checker, nullptr);
  ep.annotateInbox(0, 1024);
  ep.copy(0, {copyOf(ep.arena(), ep.arena() + 8192, 64)});  // a contribution arrives
  ep.synchronize(0);
  try {
    checker->hostAccess(0, ep.arena(), 64, ProtocolChecker::Access::kWrite, "overwrites the inbox");
    ADD_FAILURE() << "a host write over an unconsumed contribution passed";
  } catch (const tide::fabric::FabricError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no landing has consumed"), std::string::npos) << what;
    EXPECT_NE(what.find("host of rank 0: overwrites the inbox"), std::string::npos) << what;
  }
}

TEST(ProtocolCheckerTest, HostAccessesFollowSynchronisation) {
  World w(1);
  Endpoint& ep = w.world.endpoint(0);
  ProtocolChecker* checker = w.world.checker();
  ASSERT_NE(checker, nullptr);
  ep.zero(0, ep.arena(), 64);
  ep.synchronize(0);
  EXPECT_NO_THROW(checker->hostAccess(0, ep.arena(), 64, ProtocolChecker::Access::kRead, "reads after sync"));
  // Whichever of the two runs second reports the race: here the host reads
  // first and the queue's write, when it runs, finds the host's read.
  ep.delay(1, 0.05);
  ep.zero(1, ep.arena() + 64, 64);
  std::string report;
  try {
    checker->hostAccess(0, ep.arena() + 64, 64, ProtocolChecker::Access::kRead, "reads before sync");
  } catch (const FabricError& e) {
    report = e.what();
  }
  const std::string drained = w.drain();
  if (report.empty()) report = drained;
  // The race itself, not some other error (a deadline, say).
  EXPECT_NE(report.find("protocol violation"), std::string::npos) << report;
  EXPECT_NE(report.find("no happens-before"), std::string::npos) << report;
}

// A range that crosses a watched buffer's edge (it runs past the end, or
// starts before the start) is reported: such an access is the very one that
// is wrong, where the checker once took it for memory nobody watches and kept
// silent. Ranges inside a buffer, or beside it, are no violation.
TEST(ProtocolCheckerTest, RangesCrossingAWatchedBuffersEdgeAreReported) {
  std::vector<std::byte> memory(256);
  ProtocolChecker checker(1, 1);
  checker.watch(memory.data() + 64, 128, "a watched buffer");
  auto reported = [&](const std::byte* p, int64_t bytes, const std::string& words) {
    try {
      checker.hostAccess(0, p, bytes, ProtocolChecker::Access::kWrite, "writes");
      ADD_FAILURE() << "not reported: " << words;
    } catch (const FabricError& e) {
      EXPECT_EQ(e.kind(), FabricError::Kind::kProtocol) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  reported(memory.data() + 128, 128,
           "protocol violation: 'host of rank 0: writes' touches bytes [64, 192) of a watched buffer (128 bytes): "
           "64 byte(s) past its end");
  reported(memory.data() + 32, 64, "bytes [-32, 32) of a watched buffer (128 bytes): 32 byte(s) before its start");
  reported(memory.data(), 256, "bytes [-64, 192) of a watched buffer (128 bytes): 64 byte(s) before its start and "
                               "64 byte(s) past its end");
  EXPECT_NO_THROW(checker.hostAccess(0, memory.data() + 64, 128, ProtocolChecker::Access::kWrite, "fills it"));
  EXPECT_NO_THROW(checker.hostAccess(0, memory.data(), 64, ProtocolChecker::Access::kWrite, "writes before it"));
  EXPECT_NO_THROW(checker.hostAccess(0, memory.data() + 192, 64, ProtocolChecker::Access::kWrite, "writes after it"));

  // A queue's copy out of a caller's buffer (memory the fabric does not
  // bound), past its watched part: reported by the task, which copies nothing.
  World w(1);
  Endpoint& ep = w.world.endpoint(0);
  std::vector<std::byte> user(256, std::byte{1});
  w.world.checker()->watch(user.data(), 128, "a caller's buffer");
  ep.copy(0, {copyOf(ep.arena(), user.data() + 64, 128)});
  const std::string err = w.drain();
  EXPECT_NE(err.find("protocol violation: 'copy (rank 0, queue 0"), std::string::npos) << err;
  EXPECT_NE(err.find("touches bytes [64, 192) of a caller's buffer (128 bytes): 64 byte(s) past its end"),
            std::string::npos)
      << err;
  EXPECT_EQ(ep.arena()[0], std::byte{0}) << "the copy ran";
}

// Each rank has its own host: rank 0's host synchronising with its queue
// orders nothing for rank 1, whose put into the bytes rank 0 copied out of
// races with that copy on GPUs unless a signal -> wait (or a real host
// barrier) orders them. A test's one thread driving both ranks must not
// stand in for that ordering.
TEST(ProtocolCheckerTest, OneRanksHostSynchronisationDoesNotOrderAnotherRank) {
  enum class Order { kNone, kSignal, kHostBarrier };
  for (Order order : {Order::kNone, Order::kSignal, Order::kHostBarrier}) {
    World w;
    Endpoint& r0 = w.world.endpoint(0);
    Endpoint& r1 = w.world.endpoint(1);
    r0.copy(0, {copyOf(r0.arena() + 4096, r0.arena(), 64)});  // rank 0 reads its bytes [0, 64)
    if (order == Order::kSignal) r0.signal(0, 1, 5, 1);
    r0.synchronize(0);
    if (order == Order::kSignal) r1.wait(0, 5, 1, 0, "rank 0's copy");
    if (order == Order::kHostBarrier) w.world.hostBarrier();
    r1.copy(0, {copyOf(r1.peerArena(0), r1.arena() + 8192, 64)});  // rank 1 puts into them
    const std::string err = w.drain();
    if (order == Order::kNone) {
      EXPECT_NE(err.find("no happens-before"), std::string::npos) << err;
      EXPECT_NE(err.find("rank 0 arena"), std::string::npos) << err;
    } else {
      EXPECT_EQ(err, "");
    }
  }
}

// I5: a wait on a counter the rank signals itself, issued before that signal,
// is reported at issue time, even though the host fabric's unbounded queues
// would let it pass; issued after the signal it is fine.
TEST(ProtocolCheckerTest, WaitOnOwnSignalIssuedBeforeTheSignalIsReported) {
  World w(1);
  Endpoint& ep = w.world.endpoint(0);
  try {
    ep.wait(0, 3, 1, 0, "own signal issued later");
    FAIL() << "the early wait was not reported";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kProtocol);
    EXPECT_NE(std::string(e.what()).find("I5"), std::string::npos) << e.what();
  }
  ep.signal(1, 0, 4, 1);
  EXPECT_NO_THROW(ep.wait(0, 4, 1, 0, "own signal issued before"));
  EXPECT_EQ(w.drain(), "");
}

// I6: two queues of rank 0 signal one counter of rank 1 with 1 and 2 and
// nothing orders them. Whichever runs first, the pair is reported: on GPUs,
// where a signal writes its value, 1 after 2 takes the counter back (the old
// landing-free order, BENCHMARKS session 29). Reported also when the host's
// run happens to put them in value order.
TEST(ProtocolCheckerTest, UnorderedSignalsOfDifferentValuesToOneCounterAreReported) {
  for (const bool largerFirst : {false, true}) {
    World w;
    Endpoint& r0 = w.world.endpoint(0);
    // Queue 2 holds its signal until queue 1's has run, by time only (no happens-before).
    r0.delay(largerFirst ? 1 : 2, 0.2);
    r0.signal(1, 1, 9, 1);
    r0.signal(2, 1, 9, 2);
    const std::string err = w.drain();
    EXPECT_NE(err.find("I6: signals to counter 9 of rank 1"), std::string::npos) << err;
  }
}

// Growing values in happens-before order (an event between the queues, or a
// wait on the peer), and the same value from two unordered queues, are fine.
TEST(ProtocolCheckerTest, OrderedGrowingSignalsAndRepeatedValuesAreClean) {
  World w;
  Endpoint& r0 = w.world.endpoint(0);
  Endpoint& r1 = w.world.endpoint(1);
  r0.signal(0, 1, 9, 1);
  r0.waitEvent(1, 0, r0.record(0));
  r0.signal(1, 1, 9, 2);  // after the 1, by the event
  r1.wait(0, 9, 2, 0, "the 2");
  r1.signal(0, 0, 5, 1);
  r0.wait(2, 5, 1, 1, "rank 1's reply");
  r0.signal(2, 1, 9, 3);  // after the 2, through rank 1
  r0.signal(0, 1, 11, 4);
  r0.signal(1, 1, 11, 4);  // the same value twice, unordered: harmless
  EXPECT_EQ(w.drain(), "");
}

}  // namespace
}  // namespace tide::fabric::host
