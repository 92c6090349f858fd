// TIDE-AG and TIDE-RS on the host fabric against independent references
// (byte-exact gather, float64 sums): every topology, integer and non-finite
// inputs, scaling and accumulation, determinism across knobs, interleaved
// groups, gradients reused at read-done, both landing directions, the
// scratch's layout, and the all-gather in place.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "bench/host_run.hpp"
#include "bench/reference.hpp"
#include "collectives/communicator.hpp"
#include "fabric/host/host_fabric.hpp"
#include "fabric/host/host_kernels.hpp"
#include "host_run_helpers.hpp"

namespace tide {
namespace {

using namespace tide::test;  // NOLINT(google-build-using-namespace): the shared test helpers
using bench::InputKind;

class Sweep : public ::testing::TestWithParam<Topo> {};

TEST_P(Sweep, MatchesReferences) {
  const Topo t = GetParam();
  for (auto [ag, grad] : {std::pair{DType::kBF16, DType::kBF16}, std::pair{DType::kFP32, DType::kFP32}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(t.m) + " L=" + std::to_string(t.l) + " seed=" + std::to_string(seed) +
                 " dtype=" + plan::dtypeName(ag));
    expectOk(bench::runOnHost(baseOptions(t.m, t.l, seed, ag, grad)));
  }
}

std::vector<Topo> everyTopology() {
  std::vector<Topo> all;
  for (int m = 1; m <= 16; ++m)
    for (int l : {1, 2, 4, 8}) all.push_back({m, l});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Topologies, Sweep, ::testing::ValuesIn(everyTopology()),
                         [](const auto& param_info) {
                           return "M" + std::to_string(param_info.param.m) + "L" + std::to_string(param_info.param.l);
                         });

TEST(HostCollectives, LargeNodeCountTinyTensors) {
  struct Case { Topo t; plan::Mode mode; int passes; };
  for (Case c : {Case{{64, 8}, plan::Mode::kInPlace, 1}, Case{{64, 4}, plan::Mode::kSlotReuse, 2}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(c.t.m) + " L=" + std::to_string(c.t.l) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(c.t.m, c.t.l, seed);
    o.specs = {{{1000}, DType::kBF16}, {{513, 3}, DType::kBF16}};
    o.planOptions.rs.mode = c.mode;
    o.planOptions.rs.passes = c.passes;
    o.iters = 1;
    o.timeoutSeconds = 120;  // hundreds of ranks x 5 queues on 2 cores
    expectOk(bench::runOnHost(o));
  }
}

TEST(HostCollectives, IntegerInputsAreExact) {
  for (plan::Landing landing : {plan::Landing::kPull, plan::Landing::kPush})
    for (Topo t : {Topo{1, 4}, Topo{3, 2}, Topo{9, 4}}) {
      const uint64_t seed = freshSeed();
      SCOPED_TRACE(std::string("landing ") + plan::landingName(landing) + " seed=" + std::to_string(seed));
      HostRunOptions o = baseOptions(t.m, t.l, seed);
      o.inputs = InputKind::kInteger;
      o.planOptions.rs.landing = landing;
      expectOk(bench::runOnHost(o));  // kInteger compares exactly
    }
}

TEST(HostCollectives, NonFiniteInputsGiveExpectedClasses) {
  for (plan::Landing landing : {plan::Landing::kPull, plan::Landing::kPush}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE(std::string("landing ") + plan::landingName(landing) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(3, 2, seed);
    o.inputs = InputKind::kNonFinite;
    o.planOptions.rs.landing = landing;
    expectOk(bench::runOnHost(o));
  }
}

TEST(HostCollectives, AlphaAndAccumulate) {
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (Topo t : {Topo{1, 2}, Topo{5, 2}}) {
    HostRunOptions o = baseOptions(t.m, t.l, seed);
    o.alpha = 0.125f;
    o.accumulate = true;
    o.iters = 3;
    expectOk(bench::runOnHost(o));
  }
}

// Bitwise determinism: repeats, passes, staging slots and modes give the
// same bits for a fixed topology and wave width.
TEST(HostCollectives, DeterministicAcrossKnobs) {
  for (Topo t : {Topo{1, 4}, Topo{5, 4}, Topo{9, 8}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(t.m) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(t.m, t.l, seed);
    o.keepOutputs = true;
    o.iters = 1;
    const bench::HostRunResult ref = bench::runOnHost(o);
    expectOk(ref);
    // The landing direction too: a push landing sums the same rows in the
    // same order (without the pull's zero rows), so the bits match.
    // And where the landings queue (their own queue or behind the sends).
    struct Knob { int passes, slots; plan::Mode mode; int sumCtas; plan::Landing landing; bool landOwnQueue; };
    for (Knob k : {Knob{1, 2, plan::Mode::kInPlace, 1, plan::Landing::kPull, true},
                   Knob{2, 1, plan::Mode::kSlotReuse, 7, plan::Landing::kPush, false},
                   Knob{3, 3, plan::Mode::kInPlace, 16, plan::Landing::kPush, true},
                   Knob{4, 2, plan::Mode::kSlotReuse, 132, plan::Landing::kPull, false}}) {
      HostRunOptions v = o;
      v.planOptions.rs.passes = k.passes;
      v.planOptions.rs.stagingSlots = k.slots;
      v.planOptions.rs.mode = k.mode;
      v.planOptions.rs.sumCtas = k.sumCtas;  // the sum-worker budget
      v.planOptions.rs.landing = k.landing;
      v.issue.landingOwnQueue = k.landOwnQueue;
      const bench::HostRunResult r = bench::runOnHost(v);
      expectOk(r);
      ASSERT_EQ(r.outputs.size(), ref.outputs.size());
      for (size_t i = 0; i < r.outputs.size(); ++i)
        EXPECT_EQ(0, std::memcmp(r.outputs[i].data(), ref.outputs[i].data(), r.outputs[i].size() * sizeof(float)))
            << "rank " << i << " differs with passes=" << k.passes << " slots=" << k.slots << " landing "
            << plan::landingName(k.landing) << (k.landOwnQueue ? " on its own queue" : " behind the sends");
      EXPECT_EQ(r.landings, ref.landings);
    }
  }
}

// FSDP2 issues the all-gather of layer l+1 while the reduce-scatter of layer l
// runs; calls of several groups interleave with no host synchronisation in
// between, on both fabrics' shared scratch, under the protocol checker; on one
// GPU per node with rail-lane groups beside a staged one.
TEST(HostCollectives, GroupsInterleaveAsFsdpIssuesThem) {
  for (plan::Landing direction : {plan::Landing::kPull, plan::Landing::kPush})
  for (Topo t : {Topo{1, 4}, Topo{3, 2}, Topo{5, 2}, Topo{4, 1}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(t.m) + " L=" + std::to_string(t.l) + " seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const plan::Topology topo = plan::Topology::make(t.m, t.l);
    const int n = topo.ranks();
    std::vector<plan::Plan> plans;
    for (int gi = 0; gi < 3; ++gi) {
      // Groups with 1, 2 and 3 passes share the scratch: on several nodes their
      // own-node spares rotate through the same two blocks per bank.
      plan::PlanOptions po;
      po.rs.passes = 1 + gi;
      po.rs.landing = direction;
      // On one GPU per node, groups 0 and 2 on the rail lane beside a staged
      // group 1: two inboxes in one scratch, calls interleaved.
      po.rs.railLane = gi != 1;
      plans.push_back(plan::makePlan(topo, raggedShapes(rng, 2 + gi, DType::kBF16, 4 * n), DType::kBF16, po));
    }
    const collectives::ScratchLayout layout =
        collectives::ScratchLayout::forPlans({&plans[0], &plans[1], &plans[2]});
    std::vector<int64_t> landing;
    int64_t end = layout.bytes;
    for (const plan::Plan& p : plans) {
      landing.push_back(end);
      end += (p.group.unshardedBytes() + 4095) / 4096 * 4096;
    }
    fabric::host::HostOptions hopt;
    hopt.queues = collectives::kQueuesNeeded;
    hopt.timeoutSeconds = 20;
    hopt.checkProtocol = true;
    fabric::host::HostWorld world(topo, end, hopt);
    for (int r = 0; r < n; ++r)  // the landings poisoned: an unwritten byte fails the comparison below
      std::memset(world.endpoint(r).arena() + layout.bytes, 0xA5, static_cast<size_t>(end - layout.bytes));
    // Inputs per (rank, group): shard bytes and bf16 gradients of small integers (exact sums).
    std::vector<std::vector<std::vector<uint8_t>>> shards(static_cast<size_t>(n));
    // [rank][group][param] -> bf16 bits
    std::vector<std::vector<std::vector<std::vector<uint16_t>>>> gradsBf16(static_cast<size_t>(n));
    std::vector<std::vector<std::vector<float>>> outs(static_cast<size_t>(n));
    std::vector<std::unique_ptr<collectives::Communicator>> comms;
    for (int r = 0; r < n; ++r) {
      comms.push_back(std::make_unique<collectives::Communicator>(world.endpoint(r), layout));
      for (const plan::Plan& p : plans) {
        shards[r].emplace_back(static_cast<size_t>(p.group.shardBytes));
        for (auto& b : shards[r].back()) b = static_cast<uint8_t>(rng());
        std::vector<std::vector<uint16_t>> g;
        for (const auto& P : p.group.params) {
          g.emplace_back(static_cast<size_t>(P.rows * P.rowElems));
          for (auto& v : g.back()) v = fabric::host::floatToBf16(static_cast<float>(static_cast<int>(rng() % 9) - 4));
        }
        gradsBf16[r].push_back(std::move(g));
        outs[r].emplace_back(static_cast<size_t>(p.group.outElems), bench::outputPoison());
      }
    }
    auto gradPtrs = [&](int r, int gi) {
      std::vector<const void*> v;
      for (auto& g : gradsBf16[r][gi]) v.push_back(g.data());
      return v;
    };
    // Issue order (same on every rank): AG0 AG1 RS0 AG2 RS1 RS2.
    for (int r = 0; r < n; ++r) {
      auto& c = *comms[r];
      c.allGather(plans[0], shards[r][0].data(), landing[0]);
      c.allGather(plans[1], shards[r][1].data(), landing[1]);
      c.reduceScatter(plans[0], gradPtrs(r, 0), outs[r][0].data(), 1.0f, false);
      c.allGather(plans[2], shards[r][2].data(), landing[2]);
      c.reduceScatter(plans[1], gradPtrs(r, 1), outs[r][1].data(), 1.0f, false);
      c.reduceScatter(plans[2], gradPtrs(r, 2), outs[r][2].data(), 1.0f, false);
    }
    for (int r = 0; r < n; ++r) ASSERT_NO_THROW(world.endpoint(r).synchronizeAll());
    for (int r = 0; r < n; ++r)
      for (size_t gi = 0; gi < plans.size(); ++gi) {
        const plan::GroupLayout& g = plans[gi].group;
        for (size_t p = 0; p < g.params.size(); ++p) {
          const auto& P = g.params[p];
          for (int src = 0; src < n; ++src)
            ASSERT_EQ(0, std::memcmp(world.endpoint(r).arena() + landing[gi] + g.landing(static_cast<int>(p), src),
                                     shards[src][gi].data() + P.shardOffset, static_cast<size_t>(P.shardBytes)))
                << "group " << gi << " param " << p << " from rank " << src << " on rank " << r;
          for (int64_t x = 0; x < P.outElems; ++x) {
            const int64_t flat = int64_t{r} * P.outElems + x;
            double want = 0;
            if (flat < P.rows * P.rowElems)
              for (int u = 0; u < n; ++u) want +=
                bench::loadValue(&gradsBf16[u][gi][p][static_cast<size_t>(flat)], 0, plan::DType::kBF16);
            ASSERT_EQ(outs[r][gi][static_cast<size_t>(P.outOffset + x)], want)
                << "group " << gi << " param " << p << " elem " << x << " on rank " << r;
          }
        }
      }
  }
}

// The host may overwrite the gradients as soon as a reduce-scatter's readDone
// event has completed (Endpoint::synchronizeEvent), while the network phase
// may still run: outputs stay exact and the checker sees no race. A
// communicator that claims readDone before its reads (fault
// release-grads-early) is caught by the same test.
struct ReadDoneRun {
  bool raised = false;
  std::string error;
  int64_t wrong = 0;
  int64_t firings = 0;  // times the injected fault acted, over every rank
};

ReadDoneRun overwriteGradientsAtReadDone(Topo t, plan::Mode mode, collectives::Fault fault, uint64_t seed,
                                         bool railLane = false) {
  std::mt19937_64 rng(seed);
  const plan::Topology topo = plan::Topology::make(t.m, t.l);
  const int n = topo.ranks();
  plan::PlanOptions opt;
  opt.rs.mode = mode;
  opt.rs.railLane = railLane;
  const plan::Plan pl = plan::makePlan(topo, raggedShapes(rng, 3, DType::kBF16, 4 * n), DType::kBF16, opt);
  const plan::GroupLayout& g = pl.group;
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&pl});
  // [rank][param] -> bf16 bits of small integers (exact sums); a copy for the reference.
  std::vector<std::vector<std::vector<uint16_t>>> grads(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
  std::vector<std::vector<float>> outs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (const auto& P : g.params) {
      grads[r].emplace_back(static_cast<size_t>(P.rows * P.rowElems));
      for (auto& v : grads[r].back())
        v = fabric::host::floatToBf16(static_cast<float>(static_cast<int>(rng() % 9) - 4));
    }
    ref[r] = grads[r];
    outs[r].assign(static_cast<size_t>(g.outElems), bench::outputPoison());
  }
  fabric::host::HostOptions hopt;
  hopt.queues = collectives::kQueuesNeeded;
  hopt.timeoutSeconds = 5;
  hopt.checkProtocol = true;
  ReadDoneRun res;
  {
    fabric::host::HostWorld world(topo, layout.bytes, hopt);
    fabric::host::ProtocolChecker* checker = world.checker();
    using Access = fabric::host::ProtocolChecker::Access;
    std::vector<std::unique_ptr<collectives::Communicator>> comms;
    for (int r = 0; r < n; ++r) {
      comms.push_back(std::make_unique<collectives::Communicator>(world.endpoint(r), layout,
                                                                  collectives::FaultConfig{fault, 0}));
      for (auto& gp : grads[r]) checker->watch(gp.data(), static_cast<int64_t>(gp.size() * 2), "a gradient");
      checker->watch(outs[r].data(), static_cast<int64_t>(outs[r].size() * 4), "an output");
    }
    try {
      std::vector<collectives::ReduceScatterEvents> ev(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        std::vector<const void*> ptrs;
        for (auto& gp : grads[r]) ptrs.push_back(gp.data());
        ev[r] = comms[r]->reduceScatter(pl, ptrs, outs[r].data(), 1.0f, false);
      }
      for (int r = 0; r < n; ++r) {
        world.endpoint(r).synchronizeEvent(collectives::kCallerQueue, ev[r].readDone);
        for (auto& gp : grads[r]) {
          checker->hostAccess(r, gp.data(), static_cast<int64_t>(gp.size() * 2), Access::kWrite, "reuses a gradient");
          std::fill(gp.begin(), gp.end(), uint16_t{0x7fc0});  // NaN
        }
      }
      for (int r = 0; r < n; ++r) world.endpoint(r).synchronizeAll();
    } catch (const std::exception& e) {
      res.raised = true;
      res.error = e.what();
    }
    for (const auto& c : comms) res.firings += c->faultFirings();
  }
  if (res.raised) return res;
  for (int r = 0; r < n; ++r)
    for (size_t p = 0; p < g.params.size(); ++p) {
      const auto& P = g.params[p];
      for (int64_t x = 0; x < P.outElems; ++x) {
        const int64_t flat = int64_t{r} * P.outElems + x;
        double want = 0;
        if (flat < P.rows * P.rowElems)
          for (int u = 0; u < n; ++u) want +=
            bench::loadValue(&ref[u][p][static_cast<size_t>(flat)], 0, plan::DType::kBF16);
        if (outs[r][static_cast<size_t>(P.outOffset + x)] != want) ++res.wrong;
      }
    }
  return res;
}

// The rail lane (L = 1 across nodes) reads the gradients on its rails and in
// its own wave's sum: its read-done follows both.
TEST(HostCollectives, GradientsMayBeReusedAtReadDone) {
  for (Topo t : {Topo{1, 2}, Topo{2, 2}, Topo{3, 1}})
    for (plan::Mode mode : {plan::Mode::kInPlace, plan::Mode::kSlotReuse})
      for (bool lane : {false, true}) {
        if (lane && t.l != 1) continue;
        const uint64_t seed = freshSeed();
        SCOPED_TRACE("M=" + std::to_string(t.m) + " L=" + std::to_string(t.l) + (lane ? " rail lane" : "") +
                     " seed=" + std::to_string(seed));
        const ReadDoneRun r = overwriteGradientsAtReadDone(t, mode, collectives::Fault::kNone, seed, lane);
        EXPECT_FALSE(r.raised) << r.error;
        EXPECT_EQ(r.wrong, 0);
        EXPECT_EQ(r.firings, 0);
      }
}

TEST(HostCollectives, EarlyReadDoneIsCaughtByTheReuseTest) {
  for (auto [t, lane] : {std::pair{Topo{1, 2}, false}, std::pair{Topo{2, 2}, false}, std::pair{Topo{3, 1}, true}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(t.m) + " L=" + std::to_string(t.l) + (lane ? " rail lane" : "") +
                 " seed=" + std::to_string(seed));
    const ReadDoneRun r =
        overwriteGradientsAtReadDone(t, plan::Mode::kInPlace, collectives::Fault::kReleaseGradsEarly, seed, lane);
    EXPECT_GT(r.firings, 0) << "the fault never acted";
    EXPECT_TRUE(r.raised || r.wrong > 0) << "gradients overwritten before their reads passed silently";
    // Caught by the checker, not by some other error (a deadline, say).
    if (r.raised) {
      EXPECT_NE(r.error.find("protocol violation"), std::string::npos) << r.error;
    }
  }
}

// Narrow waves (W < L) leave GPUs without a contributor in a wave: the pull
// landing adds their zero rows, the push landing skips them; same bits. Two
// calls of two passes under the checker: the pull landing of the second call
// once read row tails that the first call's short last pass left unzeroed.
TEST(HostCollectives, PushLandingMatchesPullWithNarrowWaves) {
  for (Topo t : {Topo{5, 4}, Topo{3, 8}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(t.m) + " L=" + std::to_string(t.l) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(t.m, t.l, seed);
    o.keepOutputs = true;
    o.iters = 2;
    o.checkProtocol = true;
    o.planOptions.rs.waveWidth = 2;
    o.planOptions.rs.passes = 2;
    const bench::HostRunResult pull = bench::runOnHost(o);
    expectOk(pull);
    o.planOptions.rs.landing = plan::Landing::kPush;
    const bench::HostRunResult push = bench::runOnHost(o);
    expectOk(push);
    ASSERT_EQ(push.outputs.size(), pull.outputs.size());
    for (size_t r = 0; r < push.outputs.size(); ++r)
      EXPECT_EQ(0, std::memcmp(push.outputs[r].data(), pull.outputs[r].data(), push.outputs[r].size() * sizeof(float)))
          << "rank " << r;
  }
}

// Across nodes the scratch holds one shard for rails that read only from the
// arena (RMA): sized for the largest multi-node group, none on one node.
TEST(HostCollectives, ScratchHoldsARailSourceShardAcrossNodes) {
  const std::vector<plan::ParamSpec> small = {{{64, 8}, DType::kBF16}}, large = {{{640, 8}, DType::kBF16}};
  const plan::Plan a = plan::makePlan(plan::Topology::make(2, 2), small, DType::kBF16);
  const plan::Plan b = plan::makePlan(plan::Topology::make(2, 2), large, DType::kBF16);
  const plan::Plan oneNode = plan::makePlan(plan::Topology::make(1, 4), large, DType::kBF16);
  const collectives::ScratchLayout both = collectives::ScratchLayout::forPlans({&a, &b});
  EXPECT_EQ(both.railSourceBytes, b.group.shardBytes);
  EXPECT_GE(both.railSource, both.stage + both.stageBytes);
  EXPECT_LE(both.railSource + both.railSourceBytes, both.staging);
  EXPECT_TRUE(both.fits(a) && both.fits(b));
  collectives::ScratchLayout short1 = collectives::ScratchLayout::forPlans({&b});
  ASSERT_TRUE(short1.fits(b));
  short1.railSourceBytes -= 1;  // everything else as b needs
  EXPECT_FALSE(short1.fits(b));
  EXPECT_EQ(collectives::ScratchLayout::forPlans({&oneNode}).railSourceBytes, 0);
}

// Regions whose sum (or a block count times its size) passes 64 bits are
// refused, not wrapped into a small or overlapping layout. Each plan alone is
// checked by the plan library; the scratch adds the largest of several.
TEST(HostCollectives, ScratchRefusesLayoutsPastSixtyFourBits) {
  const std::vector<plan::ParamSpec> shapes = {{{64, 8}, DType::kBF16}};
  const plan::Plan base = plan::makePlan(plan::Topology::make(2, 2), shapes, DType::kBF16);
  constexpr int64_t kHalf = int64_t{1} << 62;
  plan::Plan stage = base, rail = base, blocks = base, outbox = base, spares = base;
  stage.ag.stageBytes = std::numeric_limits<int64_t>::max() - 10;  // its 4 KiB alignment wraps
  rail.ag.stageBytes = kHalf;
  rail.group.shardBytes = kHalf;  // stage + rail source = 2^63
  blocks.rs.blockBytes = kHalf;   // the inbox's blocks (generations x blocks per generation) first
  // Each of the next two overflows in its own term alone: the inbox (2 x 2 blocks of 2^33) stays small.
  outbox.rs.blockBytes = spares.rs.blockBytes = int64_t{1} << 33;
  outbox.rs.outboxBlocks = 1 << 30;  // two banks x 2^30 blocks x 2^33 bytes = 2^64
  spares.rs.spareBlocks = 1 << 30;   // the same for the spare blocks
  const std::pair<const char*, const plan::Plan*> cases[] = {
      {"stage", &stage}, {"rail", &rail}, {"inbox", &blocks}, {"outbox", &outbox}, {"spares", &spares}};
  for (const auto& [name, p] : cases) {
    try {
      collectives::ScratchLayout::forPlans({&base, p});
      ADD_FAILURE() << name << ": a scratch past 64 bits was laid out";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("overflows 64 bits"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(collectives::ScratchLayout::forPlans({&base}));
}

// One Level 2 landing direction per communicator: a push landing leaves the
// inbox unzeroed, which a pull landing reads, so the scratch refuses the mix;
// rail-lane groups have no Level 2 landing and mix with either direction.
TEST(HostCollectives, OneLandingDirectionPerCommunicator) {
  // One topology, as in any communicator: a group with no Level 2 landing (the rail lane on one
  // GPU per node) mixes with either direction; two directions do not mix.
  const plan::Topology two = plan::Topology::make(2, 1);
  const std::vector<plan::ParamSpec> shapes = {{{64, 8}, DType::kBF16}, {{100}, DType::kBF16}};
  plan::PlanOptions push;
  push.rs.landing = plan::Landing::kPush;
  plan::PlanOptions lanePush = push;
  lanePush.ag.railLane = lanePush.rs.railLane = true;
  const plan::Plan pullPlan = plan::makePlan(two, shapes, DType::kBF16);
  const plan::Plan pushPlan = plan::makePlan(two, shapes, DType::kBF16, push);
  const plan::Plan lane = plan::makePlan(two, shapes, DType::kBF16, lanePush);
  EXPECT_EQ(lane.rs.landing, plan::Landing::kPull);
  EXPECT_THROW(collectives::ScratchLayout::forPlans({&pullPlan, &pushPlan}), std::invalid_argument);
  const collectives::ScratchLayout pushed = collectives::ScratchLayout::forPlans({&lane, &pushPlan});
  EXPECT_EQ(pushed.landing, plan::Landing::kPush);
  EXPECT_TRUE(pushed.fits(pushPlan));
  EXPECT_FALSE(pushed.fits(pullPlan));
  EXPECT_EQ(pushed.bytes - collectives::ScratchLayout::forPlans({&lane, &pullPlan}).bytes,
            int64_t{pushed.generations} * pushed.blocksPerGeneration * pushed.blockBytes);  // independent of inboxBytes()
}

// Groups planned for different topologies cannot share a communicator's scratch.
TEST(HostCollectives, OneTopologyPerCommunicator) {
  const std::vector<plan::ParamSpec> shapes = {{{64, 8}, DType::kBF16}};
  const plan::Plan a = plan::makePlan(plan::Topology::make(2, 2), shapes, DType::kBF16);
  const plan::Plan b = plan::makePlan(plan::Topology::make(1, 4), shapes, DType::kBF16);
  try {
    (void)collectives::ScratchLayout::forPlans({&a, &b});
    FAIL() << "groups of 2 x 2 and 1 x 4 were laid out together";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("2 x 2 and 1 x 4"), std::string::npos) << e.what();
  }
}

// All-gather in place (no shard pointer: the shard already sits in the own
// landing rows, where the FSDP2 adapter casts it): the landing is the packed
// run's, byte for byte, and the own landing is not copied again.
TEST(HostCollectives, AllGatherInPlaceMatchesPacked) {
  for (int l : {1, 2, 3, 8}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("L=" + std::to_string(l) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(1, l, seed);
    o.keepOutputs = true;
    o.checkProtocol = true;
    const bench::HostRunResult packed = bench::runOnHost(o);
    expectOk(packed);
    o.inPlaceShard = true;
    const bench::HostRunResult inPlace = bench::runOnHost(o);
    expectOk(inPlace);
    EXPECT_EQ(inPlace.landings, packed.landings);
    // Every rank copies its shard to the L - 1 peers only.
    EXPECT_EQ(inPlace.allGather.stats.copyBytes * l, packed.allGather.stats.copyBytes * (l - 1));
  }
}

TEST(HostCollectives, AllGatherInPlaceRefusesSeveralNodes) {
  HostRunOptions o = baseOptions(2, 2, freshSeed());
  o.inPlaceShard = true;
  const bench::HostRunResult r = bench::runOnHost(o);
  EXPECT_NE(r.error.find("single node"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace tide
