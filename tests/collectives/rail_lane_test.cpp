// TIDE-RS on App. F's rail lane (L = 1 across nodes): against the float64
// and exact references, bit for bit against the staged path on the same
// inputs, over one- and two-sided rails, under the protocol checker, with
// scaling and accumulation, and with the faults that apply to it detected.
// The lane is refused over rails that read only from the arena (RMA).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "bench/host_run.hpp"
#include "collectives/communicator.hpp"
#include "fabric/host/host_fabric.hpp"
#include "host_run_helpers.hpp"

namespace tide {
namespace {

using namespace tide::test;  // NOLINT(google-build-using-namespace): the shared test helpers
using bench::InputKind;

// Runs `o` staged and on the lane: both pass their references and the lane
// gives the staged path's bits, moving only gradient-dtype rows over the rails.
void expectLaneMatchesStaged(HostRunOptions o) {
  o.keepOutputs = true;
  o.planOptions.rs.railLane = false;
  const bench::HostRunResult staged = bench::runOnHost(o);
  expectOk(staged);
  EXPECT_FALSE(staged.plan.rs.railLane);
  o.planOptions.rs.railLane = true;
  const bench::HostRunResult lane = bench::runOnHost(o);
  expectOk(lane);
  ASSERT_TRUE(lane.plan.rs.railLane);
  EXPECT_GT(lane.reduceScatter.stats.railPuts, 0);
  EXPECT_EQ(lane.reduceScatter.stats.landElems, 0) << "the lane lands by sums, not by Level 2 landings";
  ASSERT_EQ(lane.outputs.size(), staged.outputs.size());
  for (size_t r = 0; r < lane.outputs.size(); ++r) {
    ASSERT_EQ(lane.outputs[r].size(), staged.outputs[r].size());
    EXPECT_EQ(0, std::memcmp(lane.outputs[r].data(), staged.outputs[r].data(), lane.outputs[r].size() * sizeof(float)))
        << "rank " << r << ": the lane's bits differ from the staged path's";
  }
}

TEST(RailLane, MatchesTheStagedPathBitForBit) {
  struct Case { int m, passes; plan::Mode mode; DType ag, grad; };
  for (Case c : {Case{2, 1, plan::Mode::kInPlace, DType::kBF16, DType::kBF16},
                 Case{2, 4, plan::Mode::kSlotReuse, DType::kBF16, DType::kBF16},
                 Case{3, 2, plan::Mode::kInPlace, DType::kFP32, DType::kFP32},
                 Case{4, 3, plan::Mode::kSlotReuse, DType::kBF16, DType::kFP32},
                 Case{5, 1, plan::Mode::kInPlace, DType::kBF16, DType::kBF16},
                 Case{8, 2, plan::Mode::kInPlace, DType::kBF16, DType::kBF16}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(c.m) + " passes=" + std::to_string(c.passes) + " grad " +
                 plan::dtypeName(c.grad) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(c.m, 1, seed, c.ag, c.grad);
    o.iters = 3;  // both inbox generations reused across calls
    o.planOptions.rs.passes = c.passes;
    o.planOptions.rs.mode = c.mode;
    expectLaneMatchesStaged(o);
  }
}

// With the landing queue folded into the net queue (IssueOptions), every
// wave's sum runs behind its own sends and before the next wave's accept.
TEST(RailLane, ScalesAccumulatesAndKeepsExactAndNonFiniteInputs) {
  for (InputKind inputs : {InputKind::kRandomNormal, InputKind::kInteger, InputKind::kNonFinite}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("inputs " + std::to_string(static_cast<int>(inputs)) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(3, 1, seed);
    o.inputs = inputs;
    o.planOptions.rs.passes = 2;
    o.issue.landingOwnQueue = inputs != InputKind::kInteger;
    if (inputs == InputKind::kRandomNormal) {
      o.alpha = 0.125f;
      o.accumulate = true;
    }
    expectLaneMatchesStaged(o);
  }
}

// Send/recv rails: the wave's sends and receives go out as one group; same bits.
TEST(RailLane, SendRecvRailsUnderTheProtocolChecker) {
  for (fabric::host::HostRails rails : {fabric::host::HostRails::kPut, fabric::host::HostRails::kSendRecv})
    for (int m : {2, 5}) {
      const uint64_t seed = freshSeed();
      SCOPED_TRACE(std::string("rails ") + fabric::host::hostRailsName(rails) + " M=" + std::to_string(m) +
                   " seed=" + std::to_string(seed));
      HostRunOptions o = baseOptions(m, 1, seed);
      o.rails = rails;
      o.checkProtocol = true;
      o.planOptions.rs.passes = 3;
      expectLaneMatchesStaged(o);
    }
}

// NCCL host RMA puts read only from the arena; the lane sends from the
// gradients, so the call is refused with a message naming the option.
TEST(RailLane, RefusedOverRailsThatReadOnlyFromTheArena) {
  HostRunOptions o = baseOptions(2, 1, freshSeed());
  o.rails = fabric::host::HostRails::kRma;
  o.planOptions.rs.railLane = true;
  const bench::HostRunResult r = bench::runOnHost(o);
  EXPECT_NE(r.error.find("rail_lane"), std::string::npos) << r.error;
}

// The lane's own faults: a credit never sent stalls the sender past its
// deadline; gradients released before the sends read them give wrong sums.
TEST(RailLane, FaultsAreDetected) {
  for (collectives::Fault fault : {collectives::Fault::kDropCredit, collectives::Fault::kLoseSignal,
                                   collectives::Fault::kStallPeer}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE(std::string(collectives::faultName(fault)) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(3, 1, seed);
    o.specs = {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}};
    o.planOptions.rs.railLane = true;
    o.iters = 2;
    o.timeoutSeconds = 1.0;
    o.fault = {fault, 0};
    const bench::HostRunResult r = bench::runOnHost(o);
    EXPECT_GT(r.faultFirings, 0) << "the fault never acted: the case tests nothing";
    EXPECT_TRUE(!r.error.empty() || !r.allGather.ok || !r.reduceScatter.ok) << "fault passed silently";
  }
}

}  // namespace
}  // namespace tide
