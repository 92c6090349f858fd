// Two-sided rails on the host fabric (stand-ins for NCCL send/recv and NCCL
// host RMA across real nodes): bit for bit against one-sided rails, order kept
// across calls beyond the event window, and the fabric's own fail-stops for
// unmatched, mismatched or lost transfers.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/host_run.hpp"
#include "collectives/communicator.hpp"
#include "fabric/host/host_fabric.hpp"
#include "host_run_helpers.hpp"

namespace tide {
namespace {

using namespace tide::test;  // NOLINT(google-build-using-namespace): the shared test helpers

// Two-sided rails (the host stand-ins for NCCL send/recv and for NCCL host
// RMA across real nodes): every topology with M >= 2, both modes and
// landings, several passes and wave widths, under the protocol checker,
// against the references and bit for bit against the one-sided run of the
// same inputs and plan.
TEST(TwoSidedRails, MatchOneSidedBitForBit) {
  struct Case { int m, l, passes, wave; plan::Mode mode; plan::Landing landing; };
  const std::vector<Case> cases = {
      {2, 1, 1, 0, plan::Mode::kInPlace, plan::Landing::kPull},
      {2, 2, 3, 0, plan::Mode::kSlotReuse, plan::Landing::kPush},
      {3, 2, 2, 1, plan::Mode::kInPlace, plan::Landing::kPull},
      {4, 2, 1, 0, plan::Mode::kSlotReuse, plan::Landing::kPull},
      {5, 3, 3, 1, plan::Mode::kInPlace, plan::Landing::kPush},
      {3, 4, 2, 2, plan::Mode::kSlotReuse, plan::Landing::kPush},
      {7, 1, 2, 0, plan::Mode::kInPlace, plan::Landing::kPull},
  };
  for (const Case& c : cases) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(c.m) + " L=" + std::to_string(c.l) + " passes=" + std::to_string(c.passes) +
                 " wave=" + std::to_string(c.wave) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(c.m, c.l, seed);
    o.iters = 3;  // stage credits and inbox generations across calls
    o.keepOutputs = true;
    o.checkProtocol = true;
    o.planOptions.rs.passes = c.passes;
    o.planOptions.rs.waveWidth = c.wave;
    o.planOptions.rs.mode = c.mode;
    o.planOptions.rs.landing = c.landing;
    const bench::HostRunResult oneSided = bench::runOnHost(o);
    expectOk(oneSided);
    for (fabric::host::HostRails rails : {fabric::host::HostRails::kSendRecv, fabric::host::HostRails::kRma}) {
      SCOPED_TRACE(std::string("rails ") + fabric::host::hostRailsName(rails));
      o.rails = rails;
      const bench::HostRunResult twoSided = bench::runOnHost(o);
      expectOk(twoSided);
      EXPECT_GT(twoSided.reduceScatter.stats.railPuts, 0);
      EXPECT_EQ(twoSided.reduceScatter.stats.railBytes, oneSided.reduceScatter.stats.railBytes);
      EXPECT_EQ(twoSided.allGather.stats.railBytes, oneSided.allGather.stats.railBytes);
      ASSERT_EQ(twoSided.outputs.size(), oneSided.outputs.size());
      for (size_t i = 0; i < twoSided.outputs.size(); ++i)
        EXPECT_EQ(0, std::memcmp(twoSided.outputs[i].data(), oneSided.outputs[i].data(),
                                 twoSided.outputs[i].size() * sizeof(float)))
            << "rank " << i;
      EXPECT_EQ(twoSided.landings, oneSided.landings);
    }
  }
}

// Between two all-gathers a reduce-scatter of many passes over many nodes (it
// records about two events per node and pass) records more events than an
// endpoint keeps (Endpoint::kEventWindow; the CUDA fabric recycles
// them): an order carried from one all-gather to the next must not be an event
// (session 17: two-sided rails kept the stage credit as one, and the CUDA
// fabric's ring had recycled it by the next all-gather).
TEST(TwoSidedRails, OrderAcrossCallsOutlivesTheEventWindow) {
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  HostRunOptions o = baseOptions(40, 1, seed);
  o.specs = {{.shape = {2048, 64}, .dtype = DType::kBF16}, {.shape = {1024, 33}, .dtype = DType::kBF16}};
  o.iters = 2;  // all-gather, reduce-scatter, all-gather, reduce-scatter
  o.planOptions.rs.passes = 64;  // the most a plan takes
  o.rails = fabric::host::HostRails::kSendRecv;
  const bench::HostRunResult r = bench::runOnHost(o);
  expectOk(r);
  // The premise: one reduce-scatter recorded more events on a rank than the window holds
  // (the stats are per call, summed over the ranks).
  const int64_t perRank = r.reduceScatter.stats.events / o.topo.ranks();
  EXPECT_GT(perRank, static_cast<int64_t>(fabric::Endpoint::kEventWindow)) << "the case no longer outruns the event window";
}

// A receive that no send matches fails stop at the deadline, naming the peer;
// a size mismatch is a protocol error. Driven on the fabric directly.
TEST(TwoSidedRails, UnmatchedOrMismatchedTransfersFailStop) {
  fabric::host::HostOptions ho;
  ho.queues = 2;
  ho.timeoutSeconds = 0.5;
  ho.rails = fabric::host::HostRails::kSendRecv;
  {
    fabric::host::HostWorld world(plan::Topology::make(2, 1), 1 << 16, ho);
    ASSERT_TRUE(world.endpoint(0).railsTwoSided());
    ASSERT_FALSE(world.endpoint(0).railsByCopy());
    world.endpoint(0).railRecv(1, 1, 0, 4096, -1, 0);
    try {
      world.endpoint(0).synchronize(1);
      FAIL() << "an unmatched receive completed";
    } catch (const fabric::FabricError& e) {
      EXPECT_EQ(e.kind(), fabric::FabricError::Kind::kTimeout);
      EXPECT_NE(std::string(e.what()).find("from rank 1"), std::string::npos) << e.what();
    }
  }
  {
    fabric::host::HostWorld world(plan::Topology::make(2, 1), 1 << 16, ho);
    std::vector<std::byte> src(4096, std::byte{7});
    world.endpoint(1).railPut(1, 0, 0, src.data(), 2048, -1, 0);
    world.endpoint(1).record(1);  // closes the sender's group
    world.endpoint(0).railRecv(1, 1, 0, 4096, -1, 0);
    try {
      world.endpoint(0).synchronize(1);
      FAIL() << "a receive matched a send of another size";
    } catch (const fabric::FabricError& e) {
      EXPECT_EQ(e.kind(), fabric::FabricError::Kind::kProtocol) << e.what();
    }
    // The sender's send was never delivered: it fails stop too (its own deadline, or the
    // job's failure the receiver recorded).
    try {
      world.endpoint(1).synchronize(1);
      FAIL() << "a send whose receiver refused it completed";
    } catch (const fabric::FabricError& e) {
      const auto kind = e.kind();
      EXPECT_TRUE(kind == fabric::FabricError::Kind::kTimeout || kind == fabric::FabricError::Kind::kPeerFailure ||
                  kind == fabric::FabricError::Kind::kProtocol)
          << e.what();
    }
  }
}

// A call that failed midway drops its deferred rail group (Communicator's
// issueOrMarkUnusable): a synchronize or destroy after it issues nothing of
// that group, which no peer would match (each would fail stop at the deadline).
TEST(TwoSidedRails, ADiscardedGroupIsNeverIssued) {
  for (const auto rails : {fabric::host::HostRails::kSendRecv, fabric::host::HostRails::kRma}) {
    SCOPED_TRACE(fabric::host::hostRailsName(rails));
    fabric::host::HostOptions ho;
    ho.queues = 2;
    ho.timeoutSeconds = 0.5;
    ho.rails = rails;
    fabric::host::HostWorld world(plan::Topology::make(2, 1), 1 << 16, ho);
    fabric::Endpoint& sender = world.endpoint(1);
    std::memset(world.endpoint(0).arena(), 0xA5, 4096);
    std::memset(sender.arena() + 8192, 7, 2048);  // RMA puts read from the arena only
    sender.railPut(1, 0, 0, sender.arena() + 8192, 2048, -1, 0);
    sender.railRecv(1, 0, 4096, 1024, -1, 0);
    sender.discardDeferredRails();
    EXPECT_NO_THROW(sender.synchronizeAll()) << "the discarded group went out and met no peer";
    EXPECT_TRUE(sender.failureOfIssuedWork().empty()) << sender.failureOfIssuedWork();
    const std::vector<std::byte> poison(4096, std::byte{0xA5});
    EXPECT_EQ(std::memcmp(world.endpoint(0).arena(), poison.data(), poison.size()), 0) << "a discarded put landed";
  }
}

// RMA rails, driven on the fabric directly: a receive no put answers, and a
// put no receive grants a credit for, fail stop at the deadline naming the
// peer and what was missing; a lost data signal does too; a rail transfer
// on a second queue is refused (the counts are per peer, not per queue).
TEST(RmaRails, MissingPartnersAndLostSignalsFailStop) {
  fabric::host::HostOptions ho;
  ho.queues = 2;
  ho.timeoutSeconds = 0.5;
  ho.rails = fabric::host::HostRails::kRma;
  auto expectTimeout = [](fabric::Endpoint& ep, const std::string& needle) {
    try {
      ep.synchronize(1);
      FAIL() << "completed; expected a timeout mentioning '" << needle << "'";
    } catch (const fabric::FabricError& e) {
      EXPECT_EQ(e.kind(), fabric::FabricError::Kind::kTimeout) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Puts read from the sender's arena, as NCCL's host RMA reads only from a registered window.
  constexpr int64_t kSrc = 1 << 15;
  auto source = [&](fabric::host::HostWorld& world, int rank) {
    std::byte* p = world.endpoint(rank).arena() + kSrc;
    std::memset(p, 7, 4096);
    return p;
  };
  {
    fabric::host::HostWorld world(plan::Topology::make(2, 1), 1 << 16, ho);
    ASSERT_TRUE(world.endpoint(0).railsTwoSided());
    ASSERT_FALSE(world.endpoint(0).railsByCopy());
    ASSERT_TRUE(world.endpoint(0).railSourcesInArena());
    std::vector<std::byte> outside(64, std::byte{1});
    try {
      world.endpoint(1).railPut(1, 0, 0, outside.data(), 64, -1, 0);
      FAIL() << "an RMA rail put from outside the arena was accepted";
    } catch (const fabric::FabricError& e) {
      EXPECT_EQ(e.kind(), fabric::FabricError::Kind::kUsage) << e.what();
    }
    world.endpoint(0).railRecv(1, 1, 0, 4096, 3, 1);
    expectTimeout(world.endpoint(0), "rail puts from rank 1 (0 of 1 signals arrived)");
    EXPECT_EQ(world.endpoint(0).counterValue(3), 0u);
  }
  {
    fabric::host::HostWorld world(plan::Topology::make(2, 1), 1 << 16, ho);
    world.endpoint(1).railPut(1, 0, 0, source(world, 1), 4096, -1, 0);
    expectTimeout(world.endpoint(1), "credits for rail puts from rank 0");
  }
  {
    fabric::host::HostWorld world(plan::Topology::make(2, 1), 1 << 16, ho);
    fabric::FabricFaults f;
    f.loseSignalAfter = 0;
    world.endpoint(1).setFabricFaults(f);
    world.endpoint(0).railRecv(1, 1, 0, 4096, 3, 1);
    world.endpoint(0).record(1);  // ends the receiver's group: its credit goes out
    world.endpoint(1).railPut(1, 0, 0, source(world, 1), 4096, -1, 0);
    world.endpoint(1).synchronize(1);  // the put itself completes: it had its credit
    expectTimeout(world.endpoint(0), "rail puts from rank 1");
  }
  {
    fabric::host::HostWorld world(plan::Topology::make(2, 1), 1 << 16, ho);
    world.endpoint(0).railRecv(1, 1, 0, 64, -1, 0);
    try {
      world.endpoint(0).railRecv(0, 1, 64, 64, -1, 0);
      FAIL() << "a rail receive on a second queue was accepted";
    } catch (const fabric::FabricError& e) {
      EXPECT_EQ(e.kind(), fabric::FabricError::Kind::kUsage) << e.what();
    }
    world.endpoint(0).record(1);  // the accepted receive's group goes out
    const std::byte* from = source(world, 1);
    world.endpoint(1).railPut(1, 0, 0, from, 64, -1, 0);
    world.endpoint(1).synchronizeAll();
    world.endpoint(0).synchronizeAll();
    EXPECT_EQ(0, std::memcmp(world.endpoint(0).arena(), from, 64));
  }
}

// A group's puts land last first on the host's RMA rails; with several
// transfers each way in one group, every receive still sees its own bytes
// and the counters come after all of them.
TEST(RmaRails, GroupsOfManyTransfersEachWayLandWhole) {
  fabric::host::HostOptions ho;
  ho.queues = 2;
  ho.timeoutSeconds = 5;
  ho.rails = fabric::host::HostRails::kRma;
  ho.checkProtocol = true;
  fabric::host::HostWorld world(plan::Topology::make(2, 1), 1 << 16, ho);
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr int kMessages = 5, kBytes = 1024;
  for (int round = 1; round <= 3; ++round) {
    // Each message's bytes, drawn fresh, and in its sender's arena (RMA puts read only from there).
    std::vector<std::vector<std::byte>> src(2 * kMessages, std::vector<std::byte>(kBytes));
    for (auto& v : src)
      for (auto& b : v) b = static_cast<std::byte>(rng());
    auto at = [&](int r, int i) { return world.endpoint(r).arena() + (1 << 15) + i * kBytes; };
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < kMessages; ++i)
        std::memcpy(at(r, i), src[static_cast<size_t>(r * kMessages + i)].data(), kBytes);
    for (int r = 0; r < 2; ++r) {
      fabric::Endpoint& ep = world.endpoint(r);
      ep.setCallContext("round#" + std::to_string(round));
      for (int i = 0; i < kMessages; ++i) ep.railPut(1, 1 - r, (i + 1) * kBytes, at(r, i), kBytes, -1, 0);
      for (int i = 0; i < kMessages; ++i)
        ep.railRecv(1, 1 - r, (i + 1) * kBytes, kBytes, i + 1 == kMessages ? 9 : -1, static_cast<uint64_t>(round));
      ep.record(1);  // ends the group
    }
    for (int r = 0; r < 2; ++r) world.endpoint(r).synchronizeAll();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(world.endpoint(r).counterValue(9), static_cast<uint64_t>(round));
      for (int i = 0; i < kMessages; ++i)
        EXPECT_EQ(0, std::memcmp(world.endpoint(r).arena() + (i + 1) * kBytes,
                                 src[static_cast<size_t>((1 - r) * kMessages + i)].data(), kBytes))
            << "round " << round << " rank " << r << " message " << i;
    }
  }
}

}  // namespace
}  // namespace tide
