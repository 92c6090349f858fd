// TIDE-AG and TIDE-RS on the host fabric against independent references
// (byte-exact gather, float64 sums), determinism across knobs, and fault
// injection: every fault kind must be detected, never pass or hang.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "bench/host_run.hpp"
#include "collectives/communicator.hpp"
#include "fabric/host/host_fabric.hpp"
#include "fabric/host/host_kernels.hpp"

namespace tide {
namespace {

using bench::HostRunOptions;
using bench::InputKind;
using plan::DType;
using plan::ParamSpec;

uint64_t freshSeed() {
  static std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

// Ragged shapes: padded tail rows, 1-D, 3-D, rows < ranks.
std::vector<ParamSpec> raggedShapes(std::mt19937_64& rng, int params, DType t, int maxRows) {
  std::vector<ParamSpec> specs;
  for (int p = 0; p < params; ++p) {
    ParamSpec s;
    s.dtype = t;
    const int kind = static_cast<int>(rng() % 3);
    const int64_t rows = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(maxRows));
    if (kind == 0) s.shape = {rows};
    else if (kind == 1) s.shape = {rows, 1 + static_cast<int64_t>(rng() % 6)};
    else s.shape = {rows, 2, 1 + static_cast<int64_t>(rng() % 3)};
    specs.push_back(s);
  }
  return specs;
}

HostRunOptions baseOptions(int m, int l, uint64_t seed, DType ag = DType::kBF16, DType grad = DType::kBF16) {
  std::mt19937_64 rng(seed);
  HostRunOptions o;
  o.topo = plan::Topology::make(m, l);
  o.specs = raggedShapes(rng, 2 + static_cast<int>(rng() % 4), ag, 3 * m * l + 5);
  o.gradDtype = grad;
  o.seed = seed;
  o.iters = 2;
  o.timeoutSeconds = 20;
  return o;
}

void expectOk(const bench::HostRunResult& r) {
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.allGather.ok) << r.allGather.wrong << " landing bytes wrong";
  EXPECT_TRUE(r.reduceScatter.ok) << r.reduceScatter.wrong << " output elements wrong, max rel err "
                                  << r.reduceScatter.maxRelErr;
}

struct Topo {
  int m, l;
};

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
// between, on both fabrics' shared scratch, under the protocol checker.
TEST(HostCollectives, GroupsInterleaveAsFsdpIssuesThem) {
  for (plan::Landing direction : {plan::Landing::kPull, plan::Landing::kPush})
  for (Topo t : {Topo{1, 4}, Topo{3, 2}, Topo{5, 2}}) {
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
        outs[r].emplace_back(static_cast<size_t>(p.group.outElems), std::nanf(""));
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
              for (int u = 0; u < n; ++u) want += fabric::host::bf16ToFloat(gradsBf16[u][gi][p][static_cast<size_t>(flat)]);
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
};

ReadDoneRun overwriteGradientsAtReadDone(Topo t, plan::Mode mode, collectives::Fault fault, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const plan::Topology topo = plan::Topology::make(t.m, t.l);
  const int n = topo.ranks();
  plan::PlanOptions opt;
  opt.rs.mode = mode;
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
    outs[r].assign(static_cast<size_t>(g.outElems), std::nanf(""));
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
          checker->hostAccess(gp.data(), static_cast<int64_t>(gp.size() * 2), Access::kWrite, "reuses a gradient");
          std::fill(gp.begin(), gp.end(), uint16_t{0x7fc0});  // NaN
        }
      }
      for (int r = 0; r < n; ++r) world.endpoint(r).synchronizeAll();
    } catch (const std::exception& e) {
      res.raised = true;
      res.error = e.what();
    }
  }
  if (res.raised) return res;
  for (int r = 0; r < n; ++r)
    for (size_t p = 0; p < g.params.size(); ++p) {
      const auto& P = g.params[p];
      for (int64_t x = 0; x < P.outElems; ++x) {
        const int64_t flat = int64_t{r} * P.outElems + x;
        double want = 0;
        if (flat < P.rows * P.rowElems)
          for (int u = 0; u < n; ++u) want += fabric::host::bf16ToFloat(ref[u][p][static_cast<size_t>(flat)]);
        if (outs[r][static_cast<size_t>(P.outOffset + x)] != want) ++res.wrong;
      }
    }
  return res;
}

TEST(HostCollectives, GradientsMayBeReusedAtReadDone) {
  for (Topo t : {Topo{1, 2}, Topo{2, 2}, Topo{3, 1}})
    for (plan::Mode mode : {plan::Mode::kInPlace, plan::Mode::kSlotReuse}) {
      const uint64_t seed = freshSeed();
      SCOPED_TRACE("M=" + std::to_string(t.m) + " L=" + std::to_string(t.l) + " seed=" + std::to_string(seed));
      const ReadDoneRun r = overwriteGradientsAtReadDone(t, mode, collectives::Fault::kNone, seed);
      EXPECT_FALSE(r.raised) << r.error;
      EXPECT_EQ(r.wrong, 0);
    }
}

TEST(HostCollectives, EarlyReadDoneIsCaughtByTheReuseTest) {
  for (Topo t : {Topo{1, 2}, Topo{2, 2}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(t.m) + " L=" + std::to_string(t.l) + " seed=" + std::to_string(seed));
    const ReadDoneRun r =
        overwriteGradientsAtReadDone(t, plan::Mode::kInPlace, collectives::Fault::kReleaseGradsEarly, seed);
    EXPECT_TRUE(r.raised || r.wrong > 0) << "gradients overwritten before their reads passed silently";
  }
}

// The protocol checker sees no violation in sound runs, across modes and passes.
TEST(ProtocolChecker, SoundRunsAreClean) {
  struct Case { Topo t; int passes; plan::Mode mode; };
  struct Landed : Case { plan::Landing landing = plan::Landing::kPull; };
  for (Landed c : {Landed{{{1, 4}, 1, plan::Mode::kInPlace}}, Landed{{{2, 2}, 1, plan::Mode::kInPlace}},
                   Landed{{{5, 2}, 2, plan::Mode::kSlotReuse}}, Landed{{{9, 4}, 1, plan::Mode::kSlotReuse}},
                   Landed{{{4, 4}, 3, plan::Mode::kInPlace}},
                   Landed{{{2, 2}, 1, plan::Mode::kInPlace}, plan::Landing::kPush},
                   Landed{{{5, 2}, 2, plan::Mode::kSlotReuse}, plan::Landing::kPush},
                   Landed{{{4, 4}, 3, plan::Mode::kInPlace}, plan::Landing::kPush},
                   Landed{{{3, 8}, 2, plan::Mode::kInPlace}, plan::Landing::kPush}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(c.t.m) + " L=" + std::to_string(c.t.l) + " landing " +
                 plan::landingName(c.landing) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(c.t.m, c.t.l, seed);
    o.planOptions.rs.passes = c.passes;
    o.planOptions.rs.mode = c.mode;
    o.planOptions.rs.landing = c.landing;
    o.checkProtocol = true;
    o.iters = 3;
    expectOk(bench::runOnHost(o));
  }
}

// Faults that break an ordering or a landing rule are reported by the checker
// itself, naming the region and both operations, whatever the interleaving.
class CheckedFaults : public ::testing::TestWithParam<std::pair<collectives::Fault, Topo>> {};

TEST_P(CheckedFaults, AreReportedAsViolations) {
  const auto [fault, topo] = GetParam();
  const uint64_t seed = freshSeed();
  SCOPED_TRACE(std::string(collectives::faultName(fault)) + " seed=" + std::to_string(seed));
  HostRunOptions o = baseOptions(topo.m, topo.l, seed);
  o.specs = {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}};
  if (fault == collectives::Fault::kReuseOutboxEarly) {
    o.planOptions.rs.mode = plan::Mode::kSlotReuse;
    o.planOptions.rs.roundWidth = 1;
  }
  o.checkProtocol = true;
  o.timeoutSeconds = 2.0;
  o.fault = {fault, 0};
  const bench::HostRunResult r = bench::runOnHost(o);
  EXPECT_NE(r.error.find("protocol violation"), std::string::npos) << r.error;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, CheckedFaults,
    ::testing::Values(std::pair{collectives::Fault::kReleaseGradsEarly, Topo{1, 2}},
                      std::pair{collectives::Fault::kReuseOutboxEarly, Topo{9, 2}},
                      std::pair{collectives::Fault::kSkipStaleZeroing, Topo{5, 2}},
                      std::pair{collectives::Fault::kSkipCompletionFence, Topo{1, 2}},
                      std::pair{collectives::Fault::kWrongLandingOffset, Topo{1, 2}}),
    [](const auto& param_info) {
      std::string n = collectives::faultName(param_info.param.first);
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

// ---------------------------------------------------------------- faults

struct FaultCase {
  collectives::Fault fault;
  Topo topo;
  plan::Mode mode;
};

// A run of two calls that injects c.fault on rank 0, with short deadlines.
HostRunOptions faultRun(const FaultCase& c, uint64_t seed) {
  HostRunOptions o = baseOptions(c.topo.m, c.topo.l, seed);
  o.specs = {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}};
  o.planOptions.rs.mode = c.mode;
  if (c.mode == plan::Mode::kSlotReuse) o.planOptions.rs.roundWidth = 1;
  o.iters = 2;
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
    [](const auto& param_info) {
      std::string n = collectives::faultName(param_info.param.fault);
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

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
    [](const auto& param_info) {
      std::string n = collectives::faultName(param_info.param.fault);
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

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
  std::mt19937_64 rng(freshSeed());
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

// Random multi-node configurations under the protocol checker, two calls
// each: wave width, passes, staging slots, mode and landing direction drawn
// together, since the I1 (stale / doubled landing) and I5 (wait issued before
// its signal) cases live in their mix. Slot-Reuse with fewer outbox blocks
// than a pass's remote reads (M - 1 > 2k) reuses blocks of the same pass;
// its sends are issued between the reads that wait for them.
TEST(ProtocolChecker, RandomLevel2ConfigurationsAreClean) {
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 12;) {
    const int m = 2 + static_cast<int>(rng() % 14), l = 1 + static_cast<int>(rng() % 4);
    HostRunOptions o = baseOptions(m, l, rng());
    o.checkProtocol = true;
    o.planOptions.rs.waveWidth = 1 + static_cast<int>(rng() % l);
    o.planOptions.rs.passes = 1 + static_cast<int>(rng() % 3);
    o.planOptions.rs.stagingSlots = 1 + static_cast<int>(rng() % 3);
    o.planOptions.rs.mode = rng() % 2 ? plan::Mode::kInPlace : plan::Mode::kSlotReuse;
    o.planOptions.rs.landing = rng() % 2 ? plan::Landing::kPull : plan::Landing::kPush;
    // Narrow rounds a third of the time (0: the solver's): a wave of several rounds.
    o.planOptions.rs.roundWidth = rng() % 3 == 0 ? 1 + static_cast<int>(rng() % 2) : 0;
    // Rails as across real nodes half the time: send/recv or RMA puts with counted signals.
    o.rails = static_cast<fabric::host::HostRails>(rng() % 4 == 3 ? 0 : rng() % 3);
    o.issue.landingOwnQueue = rng() % 4 != 0;  // behind the sends a quarter of the time
    // Some (M, L, W) put two contributors of a wave on one inbox block; the
    // planner refuses those (its own tests cover that), so draw again.
    try {
      plan::makePlan(o.topo, o.specs, o.gradDtype, o.planOptions);
    } catch (const plan::PlanError& e) {
      if (e.reason() != plan::Reason::kPlanCollision) throw;
      continue;
    }
    ++trial;
    SCOPED_TRACE(std::string(plan::modeName(o.planOptions.rs.mode)) + " M=" + std::to_string(m) + " L=" +
                 std::to_string(l) + " W=" +
                 std::to_string(o.planOptions.rs.waveWidth) + " K=" + std::to_string(o.planOptions.rs.roundWidth) +
                 " passes=" + std::to_string(o.planOptions.rs.passes) +
                 " landing " + plan::landingName(o.planOptions.rs.landing) +
                 " rails " + fabric::host::hostRailsName(o.rails) +
                 (o.issue.landingOwnQueue ? "" : " landing behind the sends"));
    expectOk(bench::runOnHost(o));
  }
}

// Slot-Reuse whose outbox is smaller than a pass's remote reads (the case
// rule I5 caught: the read that reuses a block waited for a send not issued
// yet), at the default and the narrowest wave width.
TEST(ProtocolChecker, SmallOutboxIssuesSendsBeforeReuse) {
  struct Case { Topo t; int waveWidth, passes; };
  for (Case c : {Case{{7, 4}, 1, 1}, Case{{11, 1}, 0, 2}, Case{{15, 2}, 0, 1}, Case{{13, 2}, 1, 3}}) {
    const uint64_t seed = freshSeed();
    SCOPED_TRACE("M=" + std::to_string(c.t.m) + " L=" + std::to_string(c.t.l) + " seed=" + std::to_string(seed));
    HostRunOptions o = baseOptions(c.t.m, c.t.l, seed);
    o.checkProtocol = true;
    o.planOptions.rs.mode = plan::Mode::kSlotReuse;
    o.planOptions.rs.waveWidth = c.waveWidth;
    o.planOptions.rs.passes = c.passes;
    const plan::Plan p = plan::makePlan(o.topo, o.specs, o.gradDtype, o.planOptions);
    EXPECT_LT(p.rs.outboxBlocks, c.t.m - 1) << "the case needs an outbox smaller than the pass's remote reads";
    expectOk(bench::runOnHost(o));
  }
}

// Slot-Reuse's outbox holds two consecutive rounds' blocks (Eq. 9): with
// rounds narrower than a wave, a later round's read reuses a block of the
// same wave's first round, whose send must be issued before that read (the
// sends of a wave once went out all together, after all of its reads: "a send
// before its read" on M4L3 at K = 1, found by a random sweep of the CLI's
// options). Every rail kind and landing direction.
TEST(ProtocolChecker, NarrowRoundsReuseTheOutboxWithinAWave) {
  struct Case { Topo t; int roundWidth, passes; };
  for (Case c : {Case{{4, 3}, 1, 1}, Case{{8, 4}, 1, 2}, Case{{6, 5}, 2, 1}, Case{{6, 4}, 1, 3}}) {
    for (int rails = 0; rails < 3; ++rails) {
      for (plan::Landing landing : {plan::Landing::kPull, plan::Landing::kPush}) {
        const uint64_t seed = freshSeed();
        SCOPED_TRACE("M=" + std::to_string(c.t.m) + " L=" + std::to_string(c.t.l) + " K=" +
                     std::to_string(c.roundWidth) + " rails=" + std::to_string(rails) + " landing " +
                     plan::landingName(landing) + " seed=" + std::to_string(seed));
        HostRunOptions o = baseOptions(c.t.m, c.t.l, seed);
        o.checkProtocol = true;
        o.rails = static_cast<fabric::host::HostRails>(rails);
        o.planOptions.rs.mode = plan::Mode::kSlotReuse;
        o.planOptions.rs.roundWidth = c.roundWidth;
        o.planOptions.rs.passes = c.passes;
        o.planOptions.rs.landing = landing;
        const plan::Plan p = plan::makePlan(o.topo, o.specs, o.gradDtype, o.planOptions);
        size_t widest = 0;
        for (const plan::RsWave& w : p.rs.waves) widest = std::max(widest, w.contributors.size());
        EXPECT_LT(p.rs.outboxBlocks, static_cast<int>(widest))
            << "the case needs a wave wider than the outbox (several rounds per wave)";
        expectOk(bench::runOnHost(o));
      }
    }
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

// One Level 2 landing direction per communicator: a push landing leaves the
// inbox unzeroed, which a pull landing reads, so the scratch refuses the mix;
// one-node groups have no Level 2 and mix with either.
TEST(HostCollectives, OneLandingDirectionPerCommunicator) {
  const plan::Topology two = plan::Topology::make(2, 2), one = plan::Topology::make(1, 4);
  const std::vector<plan::ParamSpec> shapes = {{{64, 8}, DType::kBF16}, {{100}, DType::kBF16}};
  plan::PlanOptions push;
  push.rs.landing = plan::Landing::kPush;
  const plan::Plan pullPlan = plan::makePlan(two, shapes, DType::kBF16);
  const plan::Plan pushPlan = plan::makePlan(two, shapes, DType::kBF16, push);
  const plan::Plan oneNode = plan::makePlan(one, shapes, DType::kBF16, push);
  EXPECT_EQ(oneNode.rs.landing, plan::Landing::kPull);
  EXPECT_THROW(collectives::ScratchLayout::forPlans({&pullPlan, &pushPlan}), std::invalid_argument);
  const collectives::ScratchLayout pushed = collectives::ScratchLayout::forPlans({&oneNode, &pushPlan});
  EXPECT_EQ(pushed.landing, plan::Landing::kPush);
  EXPECT_TRUE(pushed.fits(pushPlan));
  EXPECT_FALSE(pushed.fits(pullPlan));
  EXPECT_EQ(pushed.bytes - collectives::ScratchLayout::forPlans({&oneNode, &pullPlan}).bytes,
            int64_t{pushed.generations} * pushed.blocksPerGeneration * pushed.blockBytes);  // independent of inboxBytes()
}

}  // namespace
}  // namespace tide

namespace tide {
namespace {

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

// Between two all-gathers a reduce-scatter of many passes records more events
// than an endpoint keeps (Endpoint::kEventWindow; the CUDA fabric recycles
// them): an order carried from one all-gather to the next must not be an event
// (session 17: two-sided rails kept the stage credit as one, and the CUDA
// fabric's ring had recycled it by the next all-gather).
TEST(TwoSidedRails, OrderAcrossCallsOutlivesTheEventWindow) {
  const uint64_t seed = freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  HostRunOptions o = baseOptions(8, 1, seed);
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
    try {
      world.endpoint(1).synchronize(1);
    } catch (const fabric::FabricError&) {
      // the sender's send was never delivered: it fails stop too
    }
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
  std::mt19937_64 rng(freshSeed());
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
