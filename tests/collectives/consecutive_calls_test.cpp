// Consecutive collectives on one communicator that differ in what the earlier
// tests keep fixed: groups with different scratch needs (outbox depth,
// staging slots) one after another, each call on a caller queue of its own
// (the C API rebinds queue 0 to each call's stream, and streams need not be
// ordered), and a call that fails after it started. Host fabric, ranks as
// threads; the protocol checker and exact integer outputs as references.
#include <gtest/gtest.h>

#include <chrono>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/reference.hpp"
#include "caller_queue_per_call.hpp"
#include "collectives/communicator.hpp"
#include "fabric/host/host_fabric.hpp"
#include "fabric/host/host_kernels.hpp"
#include "host_run_helpers.hpp"

namespace tide {
namespace {

using plan::DType;
using test::CallerQueuePerCall;

// Every rank's endpoint behind the decorator, and a communicator on it.
struct DecoratedRanks {
  std::vector<std::unique_ptr<CallerQueuePerCall>> eps;
  std::vector<std::unique_ptr<collectives::Communicator>> comms;
};

DecoratedRanks decorate(fabric::host::HostWorld& world, const collectives::ScratchLayout& layout) {
  DecoratedRanks out;
  for (int r = 0; r < world.ranks(); ++r) {
    out.eps.push_back(std::make_unique<CallerQueuePerCall>(world.endpoint(r)));
    out.comms.push_back(std::make_unique<collectives::Communicator>(*out.eps.back(), layout));
  }
  return out;
}

// `call` must throw a FabricError of `kind` whose message holds `needle`;
// `ifAccepted` says what went wrong if it returns.
template <typename Call>
void expectRefused(Call&& call, fabric::FabricError::Kind kind, const std::string& needle, const char* ifAccepted) {
  try {
    call();
    ADD_FAILURE() << ifAccepted;
  } catch (const fabric::FabricError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Small integers in bf16 per rank and parameter: their sums are exact in fp32.
using RankGrads = std::vector<std::vector<uint16_t>>;
std::vector<RankGrads> drawGrads(const plan::GroupLayout& g, std::mt19937_64& rng) {
  std::vector<RankGrads> grads(static_cast<size_t>(g.topo.ranks()));
  for (RankGrads& rank : grads)
    for (const plan::ParamLayout& p : g.params) {
      rank.emplace_back(static_cast<size_t>(p.rows * p.rowElems));
      for (uint16_t& x : rank.back()) x = fabric::host::floatToBf16(static_cast<float>(static_cast<int>(rng() % 9) - 4));
    }
  return grads;
}

std::vector<const void*> pointers(const RankGrads& g) {
  std::vector<const void*> p;
  for (const auto& x : g) p.push_back(x.data());
  return p;
}

// Output elements of every rank that differ from the float64 sum.
int64_t wrongOutputs(const plan::GroupLayout& g, const std::vector<RankGrads>& grads,
                     const std::vector<std::vector<float>>& outs) {
  int64_t wrong = 0;
  const int n = g.topo.ranks();
  for (int r = 0; r < n; ++r)
    for (size_t p = 0; p < g.params.size(); ++p) {
      const plan::ParamLayout& P = g.params[p];
      for (int64_t x = 0; x < P.outElems; ++x) {
        const int64_t flat = int64_t{r} * P.outElems + x;
        double want = 0;
        if (flat < P.rows * P.rowElems)
          for (int u = 0; u < n; ++u) want +=
            bench::loadValue(&grads[static_cast<size_t>(u)][p][static_cast<size_t>(flat)], 0, plan::DType::kBF16);
        wrong += outs[static_cast<size_t>(r)][static_cast<size_t>(P.outOffset + x)] != want;
      }
    }
  return wrong;
}

// Reduce-scatters of `plans` in order, every call on a caller queue of its
// own when `queuePerCall`; the net queues start late by `netDelay` seconds
// (a slow network phase lets later calls' sums run ahead). Returns the wrong
// output elements of every call (poisoned before it). `seed` draws the gradients.
std::vector<int64_t> reduceScatters(const plan::Topology& topo, const std::vector<const plan::Plan*>& plans,
                                    bool queuePerCall, double netDelay, bool checkProtocol, uint64_t seed) {
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans(plans);
  fabric::host::HostOptions h;
  h.queues = collectives::kQueuesNeeded + static_cast<int>(plans.size());
  h.timeoutSeconds = 20;
  h.checkProtocol = checkProtocol;
  fabric::host::HostWorld world(topo, layout.bytes, h);
  const int n = topo.ranks();
  auto [eps, comms] = decorate(world, layout);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<RankGrads>> grads;
  std::vector<std::vector<std::vector<float>>> outs;
  for (const plan::Plan* p : plans) {
    grads.push_back(drawGrads(p->group, rng));
    outs.emplace_back(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(p->group.outElems), bench::outputPoison()));
  }
  if (netDelay > 0)
    for (int r = 0; r < n; ++r) world.endpoint(r).delay(collectives::kNetQueue, netDelay);
  for (size_t c = 0; c < plans.size(); ++c)
    for (int r = 0; r < n; ++r) {
      eps[static_cast<size_t>(r)]->bindCaller(queuePerCall ? collectives::kQueuesNeeded + static_cast<int>(c) : 0);
      comms[static_cast<size_t>(r)]->reduceScatter(*plans[c], pointers(grads[c][static_cast<size_t>(r)]),
                                                   outs[c][static_cast<size_t>(r)].data(), 1.0f, false);
    }
  for (int r = 0; r < n; ++r) world.endpoint(r).synchronizeAll();
  std::vector<int64_t> wrong;
  for (size_t c = 0; c < plans.size(); ++c) wrong.push_back(wrongOutputs(plans[c]->group, grads[c], outs[c]));
  return wrong;
}

// A Slot-Reuse group with a two-block outbox, then an In-Place group with
// M - 1 blocks: outbox uses are counted across calls, so block and reuse
// wait must follow one modulus (the scratch's). With the group's own, the
// third call's sum refilled a block the first call's send still read.
TEST(ConsecutiveCalls, GroupsWithDifferentOutboxDepths) {
  const plan::Topology topo = plan::Topology::make(4, 1);
  const std::vector<plan::ParamSpec> specs = {{{4096, 64}, DType::kBF16}};
  plan::PlanOptions slotReuse, inPlace;
  slotReuse.rs.mode = plan::Mode::kSlotReuse;
  slotReuse.rs.roundWidth = 1;
  inPlace.rs.mode = plan::Mode::kInPlace;
  const plan::Plan b = plan::makePlan(topo, specs, DType::kBF16, slotReuse);
  const plan::Plan a = plan::makePlan(topo, specs, DType::kBF16, inPlace);
  ASSERT_LT(b.rs.outboxBlocks, a.rs.outboxBlocks) << "the premise: two outbox depths";
  for (const bool check : {true, false}) {
    const uint64_t seed = test::freshSeed();
    SCOPED_TRACE(std::string(check ? "protocol checker" : "outputs, net queues 0.5 s late") +
                 " seed=" + std::to_string(seed));
    const std::vector<int64_t> wrong = reduceScatters(topo, {&b, &a, &a}, true, check ? 0 : 0.5, check, seed);
    EXPECT_EQ(wrong, std::vector<int64_t>(3, 0));
  }
}

// Groups with one and with three staging slots: chunks are counted across
// calls, so slot and reuse wait follow the scratch's count (with the
// group's own, a peer pushed into a slot the previous chunk's sum still read).
TEST(ConsecutiveCalls, GroupsWithDifferentStagingSlots) {
  const plan::Topology topo = plan::Topology::make(1, 2);
  const std::vector<plan::ParamSpec> specs = {{{8192, 512}, DType::kBF16}};
  plan::PlanOptions one, three;
  one.rs.stagingSlots = 1;
  three.rs.stagingSlots = 3;
  const plan::Plan b = plan::makePlan(topo, specs, DType::kBF16, one);
  const plan::Plan a = plan::makePlan(topo, specs, DType::kBF16, three);
  for (const bool check : {true, false}) {
    const uint64_t seed = test::freshSeed();
    SCOPED_TRACE(std::string(check ? "protocol checker" : "outputs") + " seed=" + std::to_string(seed));
    EXPECT_EQ(reduceScatters(topo, {&b, &b, &b, &a}, false, 0, check, seed), std::vector<int64_t>(4, 0));
  }
}

// A call that fails after it took its call number may have enqueued part of
// its work, and its peers count it: the communicator refuses every later
// call, saying so, instead of pairing a retry with the peers' next call
// (wrong bytes or a hang). A usage error found before the call starts (a
// shard running past the arena) leaves it usable.
TEST(ConsecutiveCalls, ACallFailingMidwayLeavesTheCommunicatorUnusable) {
  const plan::Topology topo = plan::Topology::make(1, 2);
  const plan::Plan p = plan::makePlan(topo, {{{1024, 16}, DType::kBF16}}, DType::kBF16, {});
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&p});
  const int64_t landing = layout.bytes;
  const int64_t arenaBytes = landing + p.group.unshardedBytes();
  fabric::host::HostOptions h;
  h.queues = collectives::kQueuesNeeded;
  h.timeoutSeconds = 5;
  fabric::host::HostWorld world(topo, arenaBytes, h);
  auto [eps, comms] = decorate(world, layout);
  const size_t s = static_cast<size_t>(p.group.shardBytes);
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint8_t>> shards(2, std::vector<uint8_t>(s));
  for (auto& shard : shards)
    for (uint8_t& x : shard) x = static_cast<uint8_t>(rng());

  // Refused before it starts: still usable, and the next all-gather is right.
  const std::byte* pastTheEnd = world.endpoint(0).arena() + arenaBytes - static_cast<int64_t>(s / 2);
  expectRefused([&] { comms[0]->allGather(p, pastTheEnd, landing); }, fabric::FabricError::Kind::kUsage,
                "runs past its end", "a shard running past the arena was accepted");
  EXPECT_NO_THROW(comms[0]->refuseIfUnusable());
  for (int r = 0; r < 2; ++r)
    std::memset(world.endpoint(r).arena() + landing, 0xA5, static_cast<size_t>(p.group.unshardedBytes()));
  for (int r = 0; r < 2; ++r) comms[static_cast<size_t>(r)]->allGather(p, shards[static_cast<size_t>(r)].data(), landing);
  for (int r = 0; r < 2; ++r) world.endpoint(r).synchronizeAll();
  const std::vector<const uint8_t*> owners = {shards[0].data(), shards[1].data()};
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(bench::wrongLandingBytes(p.group, owners,
                                       reinterpret_cast<const uint8_t*>(world.endpoint(r).arena() + landing)),
              0)
        << "rank " << r << "'s landing";

  // Fails midway (its first copy): says so, and every later call is refused.
  eps[0]->failCopyAfter(0);
  const auto gatherAgain = [&] { comms[0]->allGather(p, shards[0].data(), landing); };
  expectRefused(gatherAgain, fabric::FabricError::Kind::kDevice, "all_gather#2 failed midway",
                "the injected copy failure did not surface");
  EXPECT_EQ(eps[0]->discards(), 1) << "the failed call's deferred rail group was kept, to be issued later";
  // Its peer, at its own call #2, hears of it from the job's failure record
  // and refuses naming it, not at its deadline with a timeout.
  const auto peerStart = std::chrono::steady_clock::now();
  expectRefused(
      [&] {
        comms[1]->allGather(p, shards[1].data(), landing);
        world.endpoint(1).synchronizeAll();
      },
      fabric::FabricError::Kind::kUnusable, "the job failed: rank 0: all_gather#2 failed midway: injected",
      "rank 1 completed an all-gather that rank 0 never issued");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - peerStart).count(), h.timeoutSeconds)
      << "rank 1 waited out its deadline";
  for (int call = 0; call < 2; ++call)
    expectRefused(gatherAgain, fabric::FabricError::Kind::kUnusable, "Destroy the communicator on every rank",
                  "an unusable communicator issued an all-gather");
  std::vector<float> out(static_cast<size_t>(p.group.outElems));
  std::vector<uint16_t> grad(static_cast<size_t>(p.group.params[0].rows * p.group.params[0].rowElems));
  expectRefused([&] { comms[0]->reduceScatter(p, {grad.data()}, out.data(), 1.0f, false); },
                fabric::FabricError::Kind::kUnusable, "Destroy the communicator on every rank",
                "an unusable communicator issued a reduce-scatter");
}

// An all-gather across nodes with a head split at byte 0 waited forever for a
// head signal no chunk sent: such plans are refused (plan tests), and the
// default head is what runs here.
TEST(ConsecutiveCalls, AllGathersOfTwoGroupsOnQueuesOfTheirOwnAcrossNodes) {
  const plan::Topology topo = plan::Topology::make(2, 2);
  const plan::Plan a = plan::makePlan(topo, {{{300, 24}, DType::kBF16}}, DType::kBF16, {});
  const plan::Plan b = plan::makePlan(topo, {{{77}, DType::kBF16}, {{40, 9}, DType::kBF16}}, DType::kBF16, {});
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&a, &b});
  const int64_t landA = layout.bytes;
  const int64_t landB = landA + (a.group.unshardedBytes() + 4095) / 4096 * 4096;
  fabric::host::HostOptions h;
  h.queues = collectives::kQueuesNeeded + 4;
  h.timeoutSeconds = 20;
  h.checkProtocol = true;
  fabric::host::HostWorld world(topo, landB + b.group.unshardedBytes(), h);
  const int n = topo.ranks();
  auto [eps, comms] = decorate(world, layout);
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const plan::Plan* plans[4] = {&a, &b, &a, &b};
  const int64_t lands[4] = {landA, landB, landA, landB};
  std::vector<std::vector<std::vector<uint8_t>>> shards(4);
  for (int c = 0; c < 4; ++c) {
    for (int r = 0; r < n; ++r) {
      shards[static_cast<size_t>(c)].emplace_back(static_cast<size_t>(plans[c]->group.shardBytes));
      for (uint8_t& x : shards[static_cast<size_t>(c)].back()) x = static_cast<uint8_t>(rng());
    }
  }
  // Calls 1 and 2 (groups a, b), then 3 and 4 over the same landings: each on its own queue,
  // every rank's landing poisoned first (calls 1 and 2 are synchronized before 3 and 4 start).
  for (int c = 0; c < 4; ++c) {
    for (int r = 0; r < n; ++r)
      std::memset(world.endpoint(r).arena() + lands[c], 0xA5, static_cast<size_t>(plans[c]->group.unshardedBytes()));
    for (int r = 0; r < n; ++r) {
      eps[static_cast<size_t>(r)]->bindCaller(collectives::kQueuesNeeded + c);
      comms[static_cast<size_t>(r)]->allGather(*plans[c], shards[static_cast<size_t>(c)][static_cast<size_t>(r)].data(),
                                               lands[c]);
    }
    if (c == 1 || c == 3)  // the two landings are checked before the next two calls overwrite them
      for (int r = 0; r < n; ++r) world.endpoint(r).synchronizeAll();
    if (c != 1 && c != 3) continue;
    for (int k = c - 1; k <= c; ++k) {
      std::vector<const uint8_t*> owners;
      for (const auto& shard : shards[static_cast<size_t>(k)]) owners.push_back(shard.data());
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(bench::wrongLandingBytes(plans[k]->group, owners,
                                           reinterpret_cast<const uint8_t*>(world.endpoint(r).arena() + lands[k])),
                  0)
            << "call " << k + 1 << ", rank " << r;
    }
  }
}

// Two all-gathers, each on a caller queue of its own, rank 0's first one
// late behind its caller's own fill of the first landing (as a caller that
// still uses it would). The landing-free signals must keep call order across
// those queues. Sent on the caller's queue, as before session 21, call 2's
// signal told the peer that call 1's landing was free, and the peer's shard
// landed there before the fill. Returns the landing bytes that differ from
// their owners' shards.
// `ranks` on one node; `peersOneQueue`: ranks other than 0 issue both calls on one queue.
// `seed` draws the shards.
int64_t wrongBytesWithUnorderedCallers(uint64_t seed, bool signalsOnCallerQueue, int ranks = 2,
                                       bool peersOneQueue = false) {
  const plan::Topology topo = plan::Topology::make(1, ranks);
  const plan::Plan p = plan::makePlan(topo, {{{96, 40}, DType::kBF16}, {{33}, DType::kBF16}}, DType::kBF16, {});
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&p});
  const int64_t slot = (p.group.unshardedBytes() + 4095) / 4096 * 4096;
  const int64_t landings[2] = {layout.bytes, layout.bytes + slot};
  fabric::host::HostOptions h;
  h.queues = collectives::kQueuesNeeded + 2;
  h.timeoutSeconds = 20;
  fabric::host::HostWorld world(topo, layout.bytes + 2 * slot, h);
  const int n = topo.ranks();
  auto [eps, comms] = decorate(world, layout);
  if (signalsOnCallerQueue)
    for (auto& ep : eps) ep->mergeQueue(collectives::kSignalQueue, collectives::kCallerQueue);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::vector<uint8_t>>> shards(2);  // [call][rank]
  for (auto& call : shards)
    for (int r = 0; r < n; ++r) {
      call.emplace_back(static_cast<size_t>(p.group.shardBytes));
      for (uint8_t& x : call.back()) x = static_cast<uint8_t>(rng() | 1);  // never the fill's 0
    }
  for (int c = 0; c < 2; ++c)
    for (int r = 0; r < n; ++r) {
      test::CallerQueuePerCall& ep = *eps[static_cast<size_t>(r)];
      ep.bindCaller(collectives::kQueuesNeeded + (peersOneQueue && r > 0 ? 0 : c));
      // 1 s: the peer's write must land inside it for the old order to show, on a loaded CI host too.
      if (r == 0 && c == 0) ep.delay(collectives::kCallerQueue, 1.0);
      ep.zero(collectives::kCallerQueue, ep.arena() + landings[c], p.group.unshardedBytes());
      comms[static_cast<size_t>(r)]->allGather(p, shards[static_cast<size_t>(c)][static_cast<size_t>(r)].data(),
                                               landings[c]);
    }
  for (int r = 0; r < n; ++r) world.endpoint(r).synchronizeAll();
  int64_t wrong = 0;
  for (int c = 0; c < 2; ++c) {
    std::vector<const uint8_t*> owners;
    for (const auto& shard : shards[static_cast<size_t>(c)]) owners.push_back(shard.data());
    for (int r = 0; r < n; ++r)
      wrong += bench::wrongLandingBytes(p.group, owners,
                                        reinterpret_cast<const uint8_t*>(world.endpoint(r).arena() + landings[c]));
  }
  return wrong;
}

// The message of the FabricError that `run` throws, "" when it throws none:
// the protocol error itself, or a peer's report of it (the job's first failure).
std::string protocolErrorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const fabric::FabricError& e) {
    EXPECT_TRUE(e.kind() == fabric::FabricError::Kind::kProtocol ||
                e.kind() == fabric::FabricError::Kind::kPeerFailure)
        << e.what();
    return e.what();
  }
  return "";
}

// Three ranks, the peers' two calls on one queue (call 2's entry then waits
// for their call 1 to end) and rank 0's on two: every landing right. The
// old order stalled here on GPUs, one process per rank or not (BENCHMARKS,
// sessions 27-29): there a signal writes its value, so rank 0's late call 1
// took the counter back from 2 to 1, under the peers' wait for 2.
TEST(ConsecutiveCalls, PeersOnOneCallerQueueAndRankZeroOnTwo) {
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  EXPECT_EQ(wrongBytesWithUnorderedCallers(seed, false, 3, true), 0);
}

// The same with the old order rebuilt: the counter going back is refused.
// A test of its own because the old order races on purpose, so that
// tools/run_sanitizers.sh can leave it out of the TSan run and keep the one above.
TEST(ConsecutiveCalls, PeersOnOneCallerQueueAndRankZeroOnTwoOldOrderRefused) {
  const std::string err = protocolErrorOf([] { wrongBytesWithUnorderedCallers(test::freshSeed(), true, 3, true); });
  EXPECT_NE(err.find("must come in value order"), std::string::npos)
      << "the old order's counter going back was not refused: '" << err << "'";
}

// In the old order (signals on the caller's queue) call 2's "landing free"
// overtakes call 1's: a peer's shard can land before rank 0's fill, and the
// counter would go back on GPUs. The host fabric refuses that signal, so the
// old order fails the job here whatever the timing (it once took a lost race
// to show as wrong bytes).
TEST(ConsecutiveCalls, LandingFreeSignalsKeepCallOrderAcrossCallerQueues) {
  const uint64_t seed = test::freshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  EXPECT_EQ(wrongBytesWithUnorderedCallers(seed, false), 0);
}

// The old order rebuilt: refused. A test of its own for the same reason as
// PeersOnOneCallerQueueAndRankZeroOnTwoOldOrderRefused (it races on purpose).
TEST(ConsecutiveCalls, LandingFreeSignalsOnTheCallerQueueRefused) {
  const std::string err = protocolErrorOf([] { wrongBytesWithUnorderedCallers(test::freshSeed(), true); });
  EXPECT_NE(err.find("a signal of 1 to counter"), std::string::npos)
      << "signals on the caller's queue passed: the test shows nothing ('" << err << "')";
}

}  // namespace
}  // namespace tide
