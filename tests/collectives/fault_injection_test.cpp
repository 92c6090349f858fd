// Fault injection: every fault kind is detected (an error, or outputs that
// fail the references), never passes silently or hangs; a run that gives a
// fault nothing to act on says so; ranks issuing calls in different orders
// fail; the multi-node faults over two-sided rails too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "bench/host_run.hpp"
#include "collectives/communicator.hpp"
#include "fabric/host/host_fabric.hpp"
#include "host_run_helpers.hpp"

namespace tide {
namespace {

using namespace tide::test;  // NOLINT(google-build-using-namespace): the shared test helpers

struct FaultCase {
  collectives::Fault fault;
  Topo topo;
  plan::Mode mode;
};

// A run of five calls that injects c.fault on rank 0, with short deadlines.
// Five, not two: the reduce-scatter's two banks are then reused across calls,
// where a fault must count no firing that changes nothing (reuse-outbox-early
// once did, and `tide bench` reported it "NOT detected").
HostRunOptions faultRun(const FaultCase& c, uint64_t seed) {
  HostRunOptions o = baseOptions(c.topo.m, c.topo.l, seed);
  o.specs = {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}};
  o.planOptions.rs.mode = c.mode;
  if (c.mode == plan::Mode::kSlotReuse) o.planOptions.rs.roundWidth = 1;
  o.iters = 5;
  o.timeoutSeconds = 1.0;
  o.fault = {c.fault, 0};
  return o;
}

class Faults : public ::testing::TestWithParam<FaultCase> {};

TEST_P(Faults, AreDetected) {
  const FaultCase c = GetParam();
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(std::string(collectives::faultName(c.fault)) + " seed=" + std::to_string(seed));
  const bench::HostRunResult r = bench::runOnHost(faultRun(c, seed));
  EXPECT_GT(r.faultFirings, 0) << "the fault never acted: the case tests nothing";
  const bool detected = !r.error.empty() || !r.allGather.ok || !r.reduceScatter.ok;
  EXPECT_TRUE(detected) << "fault passed silently";
}

// Where a run gives a fault nothing to act on, it reports no firing, and the
// outputs are right: a sweep then tells "not applicable" from "not detected".
class FaultsWithNothingToActOn : public ::testing::TestWithParam<FaultCase> {};

TEST_P(FaultsWithNothingToActOn, ReportNoFiring) {
  const FaultCase c = GetParam();
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(std::string(collectives::faultName(c.fault)) + " seed=" + std::to_string(seed));
  HostRunOptions o = faultRun(c, seed);
  if (c.fault == collectives::Fault::kDuplicatePut) o.rails = fabric::host::HostRails::kSendRecv;
  const bench::HostRunResult r = bench::runOnHost(o);
  EXPECT_EQ(r.faultFirings, 0);
  expectOk(r);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, FaultsWithNothingToActOn,
    ::testing::Values(FaultCase{collectives::Fault::kDropCredit, {1, 2}, plan::Mode::kInPlace},       // no rail rounds
                      FaultCase{collectives::Fault::kCorruptStagedChunk, {2, 1}, plan::Mode::kInPlace},  // no staging
                      FaultCase{collectives::Fault::kSkipStaleZeroing, {2, 2}, plan::Mode::kInPlace},    // no stale block
                      FaultCase{collectives::Fault::kReuseOutboxEarly, {2, 2}, plan::Mode::kInPlace},    // no reuse
                      FaultCase{collectives::Fault::kDuplicatePut, {3, 1}, plan::Mode::kInPlace}),       // two-sided
    [](const auto& param_info) { return faultTestName(param_info.param.fault); });

INSTANTIATE_TEST_SUITE_P(
    Kinds, Faults,
    ::testing::Values(FaultCase{collectives::Fault::kDropCredit, {2, 2}, plan::Mode::kInPlace},
                      FaultCase{collectives::Fault::kSkipCompletionFence, {1, 2}, plan::Mode::kInPlace},
                      FaultCase{collectives::Fault::kCorruptStagedChunk, {2, 2}, plan::Mode::kInPlace},
                      FaultCase{collectives::Fault::kStallPeer, {2, 1}, plan::Mode::kInPlace},
                      FaultCase{collectives::Fault::kSkipStaleZeroing, {5, 2}, plan::Mode::kInPlace},
                      FaultCase{collectives::Fault::kReuseOutboxEarly, {9, 2}, plan::Mode::kSlotReuse},
                      FaultCase{collectives::Fault::kWrongLandingOffset, {1, 2}, plan::Mode::kInPlace},
                      FaultCase{collectives::Fault::kLoseSignal, {2, 2}, plan::Mode::kInPlace},
                      FaultCase{collectives::Fault::kDuplicatePut, {3, 1}, plan::Mode::kInPlace},
                      FaultCase{collectives::Fault::kReleaseGradsEarly, {1, 2}, plan::Mode::kInPlace}),
    [](const auto& param_info) { return faultTestName(param_info.param.fault); });

// skip-stale-zeroing acts only where a lander reads a live element of the
// stale block. 7 rows over M5L2 leave ranks 7, 8 and 9 padding only, so the
// stale blocks of node 4 (ranks 8 and 9) hold zeros: leaving them changes
// nothing and counts no firing (a host sweep once took such a draw for a
// fault that went undetected). On node 0 the same fault acts and is detected.
TEST(Faults, SkipStaleZeroingActsOnlyWhereRowsLive) {
  for (const int rank : {0, 8, 9}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("fault rank " + std::to_string(rank) + " seed=" + std::to_string(seed));
    HostRunOptions o = faultRun(FaultCase{collectives::Fault::kSkipStaleZeroing, {5, 2}, plan::Mode::kInPlace}, seed);
    o.specs = {{{7, 4096}, DType::kBF16}};
    o.fault = {collectives::Fault::kSkipStaleZeroing, rank};
    const bench::HostRunResult r = bench::runOnHost(o);
    if (rank == 0) {
      EXPECT_GT(r.faultFirings, 0) << "the fault never acted on node 0";
      EXPECT_TRUE(!r.error.empty() || !r.allGather.ok || !r.reduceScatter.ok) << "fault passed silently";
    } else {
      EXPECT_EQ(r.faultFirings, 0) << "counted a firing over padding only";
      expectOk(r);
    }
  }
}

// Ranks that issue two groups' calls in different orders must not pass.
TEST(Faults, CallOrderDiffersBetweenRanks) {
  const plan::Topology topo = plan::Topology::make(2, 2);
  const plan::Plan a = plan::makePlan(topo, {{{40, 3}, DType::kBF16}}, DType::kBF16);
  const plan::Plan b = plan::makePlan(topo, {{{9}, DType::kBF16}, {{70, 2}, DType::kBF16}}, DType::kBF16);
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&a, &b});
  const int64_t landA = layout.bytes, landB = landA + a.group.unshardedBytes();
  fabric::host::HostOptions hopt;
  hopt.queues = collectives::kQueuesNeeded;
  hopt.timeoutSeconds = 1.0;
  fabric::host::HostWorld world(topo, landB + b.group.unshardedBytes(), hopt);
  std::vector<std::unique_ptr<collectives::Communicator>> comms;
  std::vector<std::vector<uint8_t>> shardA, shardB;
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int r = 0; r < topo.ranks(); ++r) {
    comms.push_back(std::make_unique<collectives::Communicator>(world.endpoint(r), layout));
    shardA.emplace_back(static_cast<size_t>(a.group.shardBytes));
    shardB.emplace_back(static_cast<size_t>(b.group.shardBytes));
    for (auto& x : shardA.back()) x = static_cast<uint8_t>(rng());
    for (auto& x : shardB.back()) x = static_cast<uint8_t>(rng());
  }
  for (int r = 0; r < topo.ranks(); ++r) {
    std::memset(world.endpoint(r).arena() + landA, 0xA5, static_cast<size_t>(a.group.unshardedBytes() + b.group.unshardedBytes()));
    if (r == 3) {
      comms[3]->allGather(b, shardB[3].data(), landB);
      comms[3]->allGather(a, shardA[3].data(), landA);
    } else {
      comms[static_cast<size_t>(r)]->allGather(a, shardA[static_cast<size_t>(r)].data(), landA);
      comms[static_cast<size_t>(r)]->allGather(b, shardB[static_cast<size_t>(r)].data(), landB);
    }
  }
  bool failed = false;
  for (int r = 0; r < topo.ranks(); ++r) {
    try {
      world.endpoint(r).synchronizeAll();
    } catch (const fabric::FabricError&) {
      failed = true;
    }
  }
  // Without an error, the landings must differ from the reference somewhere.
  bool wrong = false;
  for (int r = 0; r < topo.ranks() && !failed && !wrong; ++r)
    for (int src = 0; src < topo.ranks(); ++src)
      for (size_t p = 0; p < a.group.params.size(); ++p) {
        const auto& P = a.group.params[p];
        if (std::memcmp(world.endpoint(r).arena() + landA + a.group.landing(static_cast<int>(p), src),
                        shardA[static_cast<size_t>(src)].data() + P.shardOffset, static_cast<size_t>(P.shardBytes)))
          wrong = true;
      }
  EXPECT_TRUE(failed || wrong) << "mismatched call order passed silently";
}

TEST(Faults, NamesRoundTrip) {
  for (collectives::Fault f : collectives::allFaults())
    EXPECT_EQ(collectives::parseFault(collectives::faultName(f)), f);
  EXPECT_EQ(collectives::allFaults().size(), 11u);
  EXPECT_THROW(collectives::parseFault("nope"), std::invalid_argument);
}

// Every fault kind on the rail lane of both collectives (one GPU per node across nodes) over
// `rails`: each is caught, by an error or the references, or, where the lane gives it nothing to
// act on (no staged chunk, stale block or outbox there), says so and the outputs are right. The
// kinds in `mustFire` must fire, so the matrix cannot pass by testing nothing; kCallOrder is
// driven by CallOrderDiffersBetweenRanks, not by the run.
void expectLaneFaultsDetected(fabric::host::HostRails rails, const std::vector<collectives::Fault>& mustFire) {
  for (const Topo topo : {Topo{2, 1}, Topo{3, 1}})
    for (plan::Mode mode : {plan::Mode::kInPlace, plan::Mode::kSlotReuse})
      for (collectives::Fault fault : collectives::allFaults()) {
        if (fault == collectives::Fault::kCallOrder) continue;
        const uint64_t seed = freshSeed();
        SCOPED_TRACE(std::string(collectives::faultName(fault)) + " M" + std::to_string(topo.m) +
                     (mode == plan::Mode::kInPlace ? " in-place" : " slot-reuse") + " rails " +
                     fabric::host::hostRailsName(rails) + " seed=" + std::to_string(seed));
        HostRunOptions o = faultRun(FaultCase{fault, topo, mode}, seed);
        o.rails = rails;
        o.planOptions.rs.railLane = o.planOptions.ag.railLane = true;
        const bench::HostRunResult r = bench::runOnHost(o);
        ASSERT_TRUE(r.plan.rs.railLane && r.plan.ag.railLane) << "the lane does not apply: the case tests nothing";
        const bool detected = !r.error.empty() || !r.allGather.ok || !r.reduceScatter.ok;
        if (std::find(mustFire.begin(), mustFire.end(), fault) != mustFire.end()) {
          EXPECT_GT(r.faultFirings, 0) << "a fault the lane can meet never acted";
        }
        if (r.faultFirings > 0) {
          EXPECT_TRUE(detected) << "fault passed silently";
        } else {
          expectOk(r);
        }
      }
}

TEST(LaneFaults, EveryKindIsDetectedOrHasNothingToActOn) {
  expectLaneFaultsDetected(fabric::host::HostRails::kPut,
                           {collectives::Fault::kDropCredit, collectives::Fault::kSkipCompletionFence,
                            collectives::Fault::kStallPeer, collectives::Fault::kWrongLandingOffset,
                            collectives::Fault::kLoseSignal, collectives::Fault::kDuplicatePut,
                            collectives::Fault::kReleaseGradsEarly});
}

// The same over RMA rails, where the reduce-scatter's lane puts packed rows
// from the arena. No credit crosses nodes there and the RMA stand-in replays
// nothing, so a dropped credit and a duplicate put have nothing to act on.
TEST(LaneFaults, OverRmaRailsEveryKindIsDetectedOrHasNothingToActOn) {
  expectLaneFaultsDetected(fabric::host::HostRails::kRma,
                           {collectives::Fault::kSkipCompletionFence, collectives::Fault::kStallPeer,
                            collectives::Fault::kWrongLandingOffset, collectives::Fault::kLoseSignal,
                            collectives::Fault::kReleaseGradsEarly});
}

// The multi-node faults over RMA rails (and, beside them, send/recv rails):
// each is caught, by a deadline or by the references, as over one-sided rails.
// (A dropped credit and a replayed put have no counterpart on two-sided rails:
// no credit crosses nodes there, and the RMA stand-in replays nothing.)
TEST(RmaRails, MultiNodeFaultsAreDetected) {
  for (fabric::host::HostRails rails : {fabric::host::HostRails::kSendRecv, fabric::host::HostRails::kRma})
    for (FaultCase c : {FaultCase{collectives::Fault::kLoseSignal, {2, 2}, plan::Mode::kInPlace},
                        FaultCase{collectives::Fault::kCorruptStagedChunk, {2, 2}, plan::Mode::kInPlace},
                        FaultCase{collectives::Fault::kSkipStaleZeroing, {5, 2}, plan::Mode::kInPlace},
                        FaultCase{collectives::Fault::kReuseOutboxEarly, {9, 2}, plan::Mode::kSlotReuse},
                        FaultCase{collectives::Fault::kStallPeer, {2, 1}, plan::Mode::kInPlace}}) {
      const uint64_t seed = freshSeed();
      SCOPED_TRACE(std::string(collectives::faultName(c.fault)) + " rails " + fabric::host::hostRailsName(rails) +
                   " seed=" + std::to_string(seed));
      HostRunOptions o = faultRun(c, seed);
      o.rails = rails;
      const bench::HostRunResult r = bench::runOnHost(o);
      EXPECT_TRUE(!r.error.empty() || !r.allGather.ok || !r.reduceScatter.ok) << "fault passed silently";
    }
}

}  // namespace
}  // namespace tide
