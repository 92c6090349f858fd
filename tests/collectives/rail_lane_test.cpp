// TIDE-RS on App. F's rail lane (L = 1 across nodes): against the float64
// and exact references, bit for bit against the staged path on the same
// inputs, over one- and two-sided rails, under the protocol checker, with
// scaling and accumulation, on edge shapes and special values, beside staged
// groups on one communicator, and with its lost credits and signals detected.
// Over rails that read only from the arena (RMA) its rows go out from a copy
// in the other inbox generation, with the same bits.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/host_run.hpp"
#include "bench/reference.hpp"
#include "collectives/communicator.hpp"
#include "collectives/counter_ids.hpp"
#include "fabric/host/host_fabric.hpp"
#include "fabric/host/host_kernels.hpp"
#include "host_run_helpers.hpp"

namespace tide {
namespace {

using namespace tide::test;  // NOLINT(google-build-using-namespace): the shared test helpers
using bench::InputKind;

// Runs `o` staged and on the lane (both collectives, as the C API's railLane
// asks): both pass their references, the landings are the same bytes, and the
// outputs the staged path's bits. The lane's all-gather copies only the own
// shard (no stage to scatter); its reduce-scatter lands by sums, and copies
// nothing but, over rails that read only from the arena, the rows it puts.
void expectLaneMatchesStaged(HostRunOptions o) {
  o.keepOutputs = true;
  o.planOptions.rs.railLane = o.planOptions.ag.railLane = false;
  const bench::HostRunResult staged = bench::runOnHost(o);
  expectOk(staged);
  EXPECT_FALSE(staged.plan.rs.railLane);
  o.planOptions.rs.railLane = o.planOptions.ag.railLane = true;
  const bench::HostRunResult lane = bench::runOnHost(o);
  expectOk(lane);
  ASSERT_TRUE(lane.plan.rs.railLane);
  ASSERT_TRUE(lane.plan.ag.railLane);
  EXPECT_EQ(lane.plan.ag.stageBytes, 0);
  EXPECT_EQ(lane.landings, staged.landings);
  EXPECT_EQ(lane.allGather.stats.railBytes, staged.allGather.stats.railBytes) << "the same rows over the rails";
  EXPECT_LT(lane.allGather.stats.copyBytes, staged.allGather.stats.copyBytes) << "the lane scatters no stage";
  EXPECT_GT(lane.reduceScatter.stats.railPuts, 0);
  EXPECT_EQ(lane.reduceScatter.stats.landElems, 0) << "the lane lands by sums, not by Level 2 landings";
  ASSERT_EQ(lane.outputs.size(), staged.outputs.size());
  for (size_t r = 0; r < lane.outputs.size(); ++r) {
    ASSERT_EQ(lane.outputs[r].size(), staged.outputs[r].size());
    EXPECT_EQ(0, std::memcmp(lane.outputs[r].data(), staged.outputs[r].data(), lane.outputs[r].size() * sizeof(float)))
        << "rank " << r << ": the lane's bits differ from the staged path's";
  }
  const bool packs = o.rails == fabric::host::HostRails::kRma;
  EXPECT_EQ(lane.reduceScatter.stats.copyBytes, packs ? lane.reduceScatter.stats.railBytes : 0);
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

// NCCL host RMA puts read only from the arena: the reduce-scatter's lane
// copies each wave's rows into the other inbox generation and puts them from
// there. Same bits as staged over the same rails, under the protocol checker
// (which sees a pack overwrite rows a sum or a put still reads), with both
// generations reused across calls, scaling and accumulation, and M odd (a
// call's last wave and the next call's first on one generation).
TEST(RailLane, ReduceScatterLaneRunsOverRmaRailsFromPackedRows) {
  struct Case { int m, passes; plan::Mode mode; DType grad; InputKind inputs; };
  for (Case c : {Case{2, 1, plan::Mode::kInPlace, DType::kBF16, InputKind::kRandomNormal},
                 Case{2, 4, plan::Mode::kSlotReuse, DType::kBF16, InputKind::kInteger},
                 Case{3, 3, plan::Mode::kInPlace, DType::kFP32, InputKind::kRandomNormal},
                 Case{5, 1, plan::Mode::kSlotReuse, DType::kBF16, InputKind::kNonFinite}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(c.m) + " passes=" + std::to_string(c.passes) + " grad " +
                 plan::dtypeName(c.grad) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(c.m, 1, seed, DType::kBF16, c.grad);
    o.rails = fabric::host::HostRails::kRma;
    o.checkProtocol = true;
    o.iters = 3;
    o.inputs = c.inputs;
    o.planOptions.rs.passes = c.passes;
    o.planOptions.rs.mode = c.mode;
    if (c.inputs == InputKind::kRandomNormal) {
      o.alpha = 0.25f;
      o.accumulate = c.m == 3;
    }
    expectLaneMatchesStaged(o);
  }
}

// The all-gather's lane sends from the landing, which is in the arena: over
// RMA rails it runs (the reduce-scatter staged), byte for byte as staged.
TEST(RailLane, AllGatherLaneRunsOverRmaRails) {
  for (int m : {2, 3, 5}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(m) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(m, 1, seed);
    o.rails = fabric::host::HostRails::kRma;
    o.keepOutputs = true;
    o.iters = 3;
    const bench::HostRunResult staged = bench::runOnHost(o);
    expectOk(staged);
    o.planOptions.ag.railLane = true;
    const bench::HostRunResult lane = bench::runOnHost(o);
    expectOk(lane);
    ASSERT_TRUE(lane.plan.ag.railLane);
    EXPECT_EQ(lane.landings, staged.landings);
  }
}

// Staged and lane all-gathers of two groups on one communicator, interleaved
// as FSDP2 would issue them: a staged call waits for the stage credit of the
// call before it, which a lane call in between must pass on. Over one- and
// two-sided rails, under the checker, every landing byte its owner's.
TEST(RailLane, AllGatherLaneInterleavesWithStagedGroups) {
  for (fabric::host::HostRails rails : {fabric::host::HostRails::kPut, fabric::host::HostRails::kSendRecv})
    for (int m : {2, 3, 5}) {
      const uint64_t seed = freshSeed();
      SCOPED_TRACE(std::string(fabric::host::hostRailsName(rails)) + " M=" + std::to_string(m) +
                   " seed=" + std::to_string(seed));
      std::mt19937_64 rng(seed);
      const plan::Topology topo = plan::Topology::make(m, 1);
      std::vector<plan::Plan> plans;  // staged, lane
      for (bool lane : {false, true}) {
        plan::PlanOptions po;
        po.ag.railLane = lane;
        plans.push_back(plan::makePlan(topo, raggedShapes(rng, 2 + static_cast<int>(rng() % 3), DType::kBF16, 4 * m),
                                       DType::kBF16, po));
      }
      const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&plans[0], &plans[1]});
      std::vector<int64_t> landing = {layout.bytes, layout.bytes + (plans[0].group.unshardedBytes() + 4095) / 4096 * 4096};
      const int64_t arena = landing[1] + (plans[1].group.unshardedBytes() + 4095) / 4096 * 4096;
      fabric::host::HostOptions hopt;
      hopt.queues = collectives::kQueuesNeeded;
      hopt.timeoutSeconds = 20;
      hopt.checkProtocol = true;
      hopt.rails = rails;
      fabric::host::HostWorld world(topo, arena, hopt);
      std::vector<std::unique_ptr<collectives::Communicator>> comms;
      for (int r = 0; r < m; ++r)
        comms.push_back(std::make_unique<collectives::Communicator>(world.endpoint(r), layout));
      // Call order, the same on every rank: S L L S L S S L.
      const int order[] = {0, 1, 1, 0, 1, 0, 0, 1};
      for (int call = 0; call < 8; ++call) {
        const int gi = order[call];
        const plan::GroupLayout& g = plans[static_cast<size_t>(gi)].group;
        std::vector<std::vector<uint8_t>> shards(static_cast<size_t>(m));
        for (int r = 0; r < m; ++r) {
          shards[r].resize(static_cast<size_t>(g.shardBytes));
          for (auto& b : shards[r]) b = static_cast<uint8_t>(rng());
          std::memset(world.endpoint(r).arena() + landing[gi], 0xA5, static_cast<size_t>(g.unshardedBytes()));
        }
        for (int r = 0; r < m; ++r) comms[r]->allGather(plans[static_cast<size_t>(gi)], shards[r].data(), landing[gi]);
        for (int r = 0; r < m; ++r) ASSERT_NO_THROW(world.endpoint(r).synchronizeAll());
        for (int r = 0; r < m; ++r)
          for (size_t p = 0; p < g.params.size(); ++p)
            for (int src = 0; src < m; ++src)
              ASSERT_EQ(0, std::memcmp(world.endpoint(r).arena() + landing[gi] + g.landing(static_cast<int>(p), src),
                                       shards[src].data() + g.params[p].shardOffset,
                                       static_cast<size_t>(g.params[p].shardBytes)))
                  << "call " << call << (gi ? " (lane)" : " (staged)") << ", param " << p << " from rank " << src
                  << " on rank " << r;
      }
    }
}

// Without a staged all-gather on the communicator, lane calls pass no stage
// credit on: nothing would wait for it, so a lost one would go unnoticed. A
// signal lost there (the first of rank 0, the others' held back) now meets a
// deadline instead (it passed silently before, found by a review).
TEST(RailLane, AllGatherLaneAloneSendsNoStageCredit) {
  const int m = 3;
  const plan::Topology topo = plan::Topology::make(m, 1);
  plan::PlanOptions po;
  po.ag.railLane = true;
  const plan::Plan pl = plan::makePlan(topo, {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}}, DType::kBF16, po);
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&pl});
  ASSERT_FALSE(layout.stagedAllGatherAcrossNodes);
  for (bool loseOne : {false, true}) {
    SCOPED_TRACE(loseOne ? "rank 0's first signal lost" : "sound");
    fabric::host::HostOptions hopt;
    hopt.queues = collectives::kQueuesNeeded;
    hopt.timeoutSeconds = 2;
    fabric::host::HostWorld world(topo, layout.bytes + pl.group.unshardedBytes(), hopt);
    if (loseOne) {
      fabric::FabricFaults ff;
      ff.loseSignalAfter = 0;
      world.endpoint(0).setFabricFaults(ff);
    }
    std::vector<std::unique_ptr<collectives::Communicator>> comms;
    for (int r = 0; r < m; ++r) comms.push_back(std::make_unique<collectives::Communicator>(world.endpoint(r), layout));
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::string error;
    int64_t wrong = 0;
    try {
      for (int call = 0; call < 3; ++call) {
        std::vector<std::vector<uint8_t>> shards(m);
        for (int r = 0; r < m; ++r) {
          shards[r].resize(static_cast<size_t>(pl.group.shardBytes));
          for (auto& b : shards[r]) b = static_cast<uint8_t>(rng());
          std::memset(world.endpoint(r).arena() + layout.bytes, 0xA5, static_cast<size_t>(pl.group.unshardedBytes()));
        }
        if (call == 0) {  // rank 0's credits and rounds wait: its first signal would be the hand-off
          world.endpoint(0).delay(collectives::kSignalQueue, 0.2);
          world.endpoint(0).delay(collectives::kOwnCopyQueue, 0.2);
        }
        for (int r = 0; r < m; ++r) comms[r]->allGather(pl, shards[r].data(), layout.bytes);
        for (int r = 0; r < m; ++r) world.endpoint(r).synchronizeAll();
        for (int r = 0; r < m; ++r)
          for (size_t p = 0; p < pl.group.params.size(); ++p)
            for (int src = 0; src < m; ++src)
              wrong += std::memcmp(world.endpoint(r).arena() + layout.bytes + pl.group.landing(static_cast<int>(p), src),
                                   shards[src].data() + pl.group.params[p].shardOffset,
                                   static_cast<size_t>(pl.group.params[p].shardBytes)) != 0;
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!loseOne) {
      EXPECT_EQ(error, "");
      EXPECT_EQ(wrong, 0);
      for (int r = 0; r < m; ++r)
        for (const plan::AgRound& round : pl.ag.rounds)
          EXPECT_EQ(world.endpoint(r).counterValue(collectives::ids::kAgCredit + round.index), 0u) << "rank " << r;
    } else {
      EXPECT_GT(world.endpoint(0).fabricFaultFirings(), 0);
      EXPECT_TRUE(!error.empty() || wrong > 0) << "a lost signal passed silently";
    }
  }
}

// The all-gather lane's faults: a dropped landing credit ends at a deadline,
// a skipped completion fence or a shifted own copy in wrong landing bytes.
TEST(RailLane, AllGatherLaneFaultsAreDetected) {
  for (collectives::Fault fault : {collectives::Fault::kDropCredit, collectives::Fault::kSkipCompletionFence,
                                   collectives::Fault::kWrongLandingOffset}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE(std::string(collectives::faultName(fault)) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(3, 1, seed);
    o.specs = {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}};
    o.planOptions.ag.railLane = true;
    o.iters = 2;
    o.timeoutSeconds = 1.0;
    o.fault = {fault, 0};
    const bench::HostRunResult r = bench::runOnHost(o);
    EXPECT_GT(r.faultFirings, 0) << "the fault never acted: the case tests nothing";
    EXPECT_TRUE(!r.error.empty() || !r.allGather.ok) << "fault passed silently";
    if (fault == collectives::Fault::kDropCredit) {  // the stalled sender's deadline, or a rank's behind it
      EXPECT_NE(r.error.find("all_gather#1"), std::string::npos) << r.error;
      EXPECT_NE(r.error.find("(rail lane)"), std::string::npos) << r.error;
    }
  }
}

// A credit the lane never sends stalls its sender past the deadline, in the
// reduce-scatter (the run's all-gathers go first and pass). (Gradients
// released before the lane's reads: host_collectives_test's read-done tests.)
TEST(RailLane, DroppedCreditEndsAtTheDeadline) {
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  HostRunOptions o = baseOptions(3, 1, seed);
  o.specs = {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}};
  o.planOptions.rs.railLane = true;
  o.iters = 2;
  o.timeoutSeconds = 1.0;
  o.fault = {collectives::Fault::kDropCredit, 0};
  const bench::HostRunResult r = bench::runOnHost(o);
  EXPECT_GT(r.faultFirings, 0) << "the fault never acted: the case tests nothing";
  // The first deadline may be the stalled sender's or one of the ranks waiting behind it.
  EXPECT_NE(r.error.find("reduce_scatter#1"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("lane inbox"), std::string::npos) << r.error;
}

// Reduce-scatters alone (no all-gather before them to catch it): each of the
// first signals of rank 0 lost in turn (credits, arrivals, its own "summed")
// ends at a deadline, never in a silent result or a hang.
TEST(RailLane, LostSignalEndsAtTheDeadline) {
  const plan::Topology topo = plan::Topology::make(3, 1);
  plan::PlanOptions po;
  po.rs.railLane = true;
  po.rs.passes = 2;
  const plan::Plan pl = plan::makePlan(topo, {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}}, DType::kBF16, po);
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&pl});
  for (int drop : {0, 1, 2, 3}) {
    SCOPED_TRACE("signal " + std::to_string(drop) + " lost");
    // Declared before the world, so that they outlive its queues: after the first rank's
    // error the other ranks' queues still run their work, up to their own deadlines.
    std::vector<std::vector<uint16_t>> g0(3), g1(3);
    std::vector<std::vector<float>> out(3);
    fabric::host::HostOptions hopt;
    hopt.queues = collectives::kQueuesNeeded;
    hopt.timeoutSeconds = 1;
    fabric::host::HostWorld world(topo, layout.bytes, hopt);
    fabric::FabricFaults ff;
    ff.loseSignalAfter = drop;
    world.endpoint(0).setFabricFaults(ff);
    std::vector<std::unique_ptr<collectives::Communicator>> comms;
    for (int r = 0; r < 3; ++r) {
      comms.push_back(std::make_unique<collectives::Communicator>(world.endpoint(r), layout));
      g0[r].assign(64 * 16, fabric::host::floatToBf16(1.0f + static_cast<float>(r)));
      g1[r].assign(33, fabric::host::floatToBf16(-2.0f));
      out[r].assign(static_cast<size_t>(pl.group.outElems), bench::outputPoison());
    }
    std::string error;
    try {
      for (int call = 0; call < 2; ++call) {
        for (int r = 0; r < 3; ++r) comms[r]->reduceScatter(pl, {g0[r].data(), g1[r].data()}, out[r].data(), 1.f, false);
        for (int r = 0; r < 3; ++r) world.endpoint(r).synchronizeAll();
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_GT(world.endpoint(0).fabricFaultFirings(), 0);
    EXPECT_NE(error.find("timed out"), std::string::npos) << error;
  }
}

// Random edge shapes, lane against staged bit for bit: up to 8 passes (empty
// passes), parameters of fewer rows than ranks (shards of padding only), fp32
// and bf16 gradients, negative alpha, accumulation, every input kind, both
// rail kinds and landing queues, some draws under the checker.
TEST(RailLane, EdgeShapesBitForBit) {
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 30; ++trial) {
    const int m = 2 + static_cast<int>(rng() % 6);
    HostRunOptions o = baseOptions(m, 1, rng());
    o.specs.clear();
    for (int p = 0, np = 1 + static_cast<int>(rng() % 4); p < np; ++p) {
      const int64_t rows = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * m));
      o.specs.push_back({rng() % 2 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, 1 + static_cast<int64_t>(rng() % 5)},
                         DType::kBF16});
    }
    o.gradDtype = rng() % 2 ? DType::kBF16 : DType::kFP32;
    o.planOptions.rs.passes = 1 + static_cast<int>(rng() % 8);
    o.rails = rng() % 2 ? fabric::host::HostRails::kPut : fabric::host::HostRails::kSendRecv;
    o.issue.landingOwnQueue = rng() % 2 == 0;
    o.checkProtocol = trial % 3 == 0;
    o.inputs = static_cast<InputKind>(rng() % 3);
    o.alpha = rng() % 2 ? -0.375f : 1.0f;
    o.accumulate = rng() % 2 == 0;
    SCOPED_TRACE("trial " + std::to_string(trial) + " M=" + std::to_string(m) + " passes=" +
                 std::to_string(o.planOptions.rs.passes));
    expectLaneMatchesStaged(o);
  }
}

// Lane and staged plans of one group's shapes on one communicator (its
// staged groups landing by push), called on the same inputs in alternating
// order: each within the float64 reference (outputs poisoned where not
// accumulating), and equal bit for bit on signed zeros, subnormals, NaN
// payloads, infinities.
TEST(RailLane, LaneAndStagedInterleavedOnOneCommunicator) {
  // The last two cancel everything smaller in an fp32 sum, which the float64 reference keeps: the
  // rounds that draw them check bit equality and that every element was written, not the reference.
  const float specials[] = {-0.0f, 0.0f, 1e-40f, -1e-40f, std::nanf("0x123"), INFINITY, -INFINITY, 3.5f, -2.25f,
                            65504.0f, 1e30f, -1e30f};
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (fabric::host::HostRails rails : {fabric::host::HostRails::kPut, fabric::host::HostRails::kSendRecv})
    for (bool ownQueue : {true, false})
      for (int m : {2, 3, 4}) {
        SCOPED_TRACE(std::string(fabric::host::hostRailsName(rails)) + (ownQueue ? " landing queue" : " net queue") +
                     " M=" + std::to_string(m));
        const plan::Topology topo = plan::Topology::make(m, 1);
        const std::vector<plan::ParamSpec> specs = {{{5, 3}, DType::kBF16}, {{1}, DType::kBF16},
                                                    {{2 * m + 1, 2}, DType::kBF16}};
        std::vector<plan::Plan> plans;  // 3 passes staged, lane; 1 pass staged, lane
        for (int v = 0; v < 4; ++v) {
          plan::PlanOptions po;
          po.rs.passes = v < 2 ? 3 : 1;
          po.rs.railLane = v % 2 == 1;
          po.rs.landing = plan::Landing::kPush;
          plans.push_back(plan::makePlan(topo, specs, DType::kBF16, po));
        }
        const collectives::ScratchLayout layout =
            collectives::ScratchLayout::forPlans({&plans[0], &plans[1], &plans[2], &plans[3]});
        fabric::host::HostOptions hopt;
        hopt.queues = collectives::kQueuesNeeded;
        hopt.timeoutSeconds = 20;
        hopt.checkProtocol = true;
        hopt.rails = rails;
        fabric::host::HostWorld world(topo, layout.bytes, hopt);
        collectives::IssueOptions issue;
        issue.landingOwnQueue = ownQueue;
        std::vector<std::unique_ptr<collectives::Communicator>> comms;
        for (int r = 0; r < m; ++r)
          comms.push_back(std::make_unique<collectives::Communicator>(world.endpoint(r), layout,
                                                                      collectives::FaultConfig{}, issue));
        const plan::GroupLayout& g = plans[0].group;
        for (int round = 0; round < 8; ++round) {
          const bool huge = round >= 4;
          const size_t kinds = std::size(specials) - (huge ? 0 : 2);
          std::vector<std::vector<std::vector<uint16_t>>> grads(static_cast<size_t>(m));
          for (int r = 0; r < m; ++r)
            for (const auto& P : g.params) {
              grads[r].emplace_back(static_cast<size_t>(P.rows * P.rowElems));
              for (auto& v : grads[r].back()) v = fabric::host::floatToBf16(specials[rng() % kinds]);
            }
          const float alpha = round % 2 ? -0.5f : 1.0f;
          const bool accumulate = round % 4 >= 2;
          // Accumulating rounds add into special values; the others write over the poison, so an
          // element no path writes fails the reference check.
          std::vector<float> init(static_cast<size_t>(g.outElems), bench::outputPoison());
          if (accumulate)
            for (auto& v : init) v = specials[rng() % kinds];
          std::vector<std::vector<std::vector<float>>> outs(4, std::vector<std::vector<float>>(m, init));  // [plan][rank]
          const int order[4] = {round % 2, 1 - round % 2, 2 + round % 2, 3 - round % 2};
          for (int r = 0; r < m; ++r) {
            std::vector<const void*> ptrs;
            for (auto& x : grads[r]) ptrs.push_back(x.data());
            for (int v : order) comms[r]->reduceScatter(plans[v], ptrs, outs[v][r].data(), alpha, accumulate);
          }
          for (int r = 0; r < m; ++r) ASSERT_NO_THROW(world.endpoint(r).synchronizeAll());
          std::vector<std::vector<const void*>> gradPtrs(static_cast<size_t>(m));
          for (int r = 0; r < m; ++r)
            for (auto& x : grads[r]) gradPtrs[r].push_back(x.data());
          for (int r = 0; r < m; ++r) {
            for (int v = 0; v < 4; ++v) {
              // Huge values overflow differently in float64, so no reference; accumulating onto special
              // values leaves no poison to find either: those rounds rest on the lane-vs-staged comparison
              // below (and their non-accumulating twins on the poison check).
              if (huge && accumulate) continue;
              if (huge) {  // every element written: none still holds the poison
                int64_t unwritten = 0;
                for (float y : outs[v][r]) unwritten += std::bit_cast<uint32_t>(y) == bench::kOutputPoisonBits;
                EXPECT_EQ(0, unwritten) << "round " << round << " rank " << r << " plan " << v;
                continue;
              }
              // Against the float64 reference, NaN and infinities included.
              const bench::OutputCheck c = bench::checkShardOutput(plans[v].group, gradPtrs, r, alpha,
                                                                   accumulate ? init.data() : nullptr,
                                                                   outs[v][r].data(), false);
              EXPECT_EQ(0, c.wrong) << "round " << round << " rank " << r << " plan " << v
                                    << " (max rel err " << c.maxRelErr << ")";
            }
            EXPECT_EQ(0, std::memcmp(outs[0][r].data(), outs[1][r].data(), outs[0][r].size() * 4))
                << "round " << round << " rank " << r << " (3 passes)";
            EXPECT_EQ(0, std::memcmp(outs[2][r].data(), outs[3][r].data(), outs[2][r].size() * 4))
                << "round " << round << " rank " << r << " (1 pass)";
          }
        }
      }
}

}  // namespace
}  // namespace tide
