#include "bench/host_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>

#include "bench/host_memory.hpp"
#include "bench/reference.hpp"
#include "collectives/communicator.hpp"
#include "fabric/host/host_fabric.hpp"

namespace tide::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kUserQueue = collectives::kQueuesNeeded;  // stands in for the user's compute stream

struct RankData {
  std::vector<uint8_t> shard;                   // packed S bytes
  std::vector<std::vector<uint8_t>> grads;      // per parameter, D_p*K_p items
  std::vector<float> out;
};

// The middle value, or the mean of the two middle values for an even count
// (the upper one alone would be the maximum of two).
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

void addStats(fabric::Stats& s, fabric::host::HostWorld& world) {
  for (int r = 0; r < world.ranks(); ++r) {
    const fabric::Stats x = world.endpoint(r).stats();
    s.copyBytes += x.copyBytes;
    s.railBytes += x.railBytes;
    s.copyOps += x.copyOps;
    s.railPuts += x.railPuts;
    s.sumElems += x.sumElems;
    s.landElems += x.landElems;
    s.events += x.events;
    world.endpoint(r).resetStats();
  }
}

void perCall(fabric::Stats& s, int iters) {
  const int64_t n = std::max(iters, 1);
  s.copyBytes /= n; s.railBytes /= n; s.copyOps /= n; s.railPuts /= n; s.sumElems /= n; s.landElems /= n;
  s.events /= n;
}

void synchronizeAll(fabric::host::HostWorld& world) {
  std::exception_ptr first;
  for (int r = 0; r < world.ranks(); ++r) {
    try {
      world.endpoint(r).synchronizeAll();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

// Every rank's arena, shard, gradients and output live in this process, and
// each call keeps a copy of every rank's gradients for the reference (and,
// accumulating, of every output before the call); plus one rank's float64
// reference at a time, and with keepOutputs every landing and output again.
// Refused up front when that exceeds what the host can still give: with
// overcommit the allocations would succeed and the OOM killer would stop the
// process without a word when they are first written.
struct MemoryNeed {
  double bytes = 0;
  int64_t perRank = 0;
};

MemoryNeed memoryNeed(const plan::GroupLayout& g, int64_t arenaBytes, bool accumulate, bool keepOutputs) {
  const int64_t n = g.topo.ranks();
  int64_t gradBytes = 0;
  for (const plan::ParamLayout& p : g.params) gradBytes += p.rows * p.rowElems * plan::itemSize(g.gradDtype);
  // Beside the data, each rank's queue threads, communicator and bookkeeping
  // (about 0.3 MiB measured; HostMemory.TheNeedCountedCoversARunsPeak).
  constexpr int64_t kRankOverheadBytes = int64_t{2} << 20;
  int64_t perRank =
      kRankOverheadBytes + arenaBytes + g.shardBytes + 2 * gradBytes + g.outElems * int64_t{sizeof(float)};
  if (accumulate) perRank += g.outElems * int64_t{sizeof(float)};
  if (keepOutputs) perRank += g.unshardedBytes() + g.outElems * int64_t{sizeof(float)};
  // In double: ranks x bytes per rank can pass 2^63 (thousands of ranks of
  // 2^40-element parameters), where int64 would wrap and let the run through.
  const double need = static_cast<double>(n) * static_cast<double>(perRank) +
                      static_cast<double>(g.outElems) * static_cast<double>(sizeof(double));
  return {need, perRank};
}

// The scratch, then the landing at its end (runOnHost's arena).
int64_t arenaBytesOf(const plan::GroupLayout& g, const collectives::ScratchLayout& layout) {
  return layout.bytes + g.unshardedBytes();
}

void refuseIfMemoryShort(const plan::GroupLayout& g, int64_t arenaBytes, bool accumulate, bool keepOutputs) {
  const int64_t n = g.topo.ranks();
  const auto [need, perRank] = memoryNeed(g, arenaBytes, accumulate, keepOutputs);
  const std::optional<int64_t> room = hostMemoryAvailable();
  if (room && need > static_cast<double>(*room)) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    char msg[320];
    std::snprintf(msg, sizeof msg,
                  "the host run needs about %.2f GiB of host memory (%lld ranks x %.3f GiB: arena, shard, "
                  "gradients and their reference copy, output) and %.2f GiB are available (MemAvailable, or "
                  "the memory cgroup's limit): "
                  "choose fewer ranks or smaller parameters",
                  need / kGiB, static_cast<long long>(n), static_cast<double>(perRank) / kGiB,
                  static_cast<double>(*room) / kGiB);
    throw std::invalid_argument(msg);
  }
}

}  // namespace

double hostRunMemoryNeed(const HostRunOptions& o) {
  const plan::Plan pl = plan::makePlan(o.topo, o.specs, o.gradDtype, o.planOptions);
  return memoryNeed(pl.group, arenaBytesOf(pl.group, collectives::ScratchLayout::forPlans({&pl})), o.accumulate,
                    o.keepOutputs)
      .bytes;
}

HostRunResult runOnHost(const HostRunOptions& o) {
  if (o.fault.kind == collectives::Fault::kCallOrder)
    throw std::invalid_argument(
        "fault call-order needs two groups issued in different orders; the C++ test "
        "Faults.CallOrderDiffersBetweenRanks injects it");
  if (o.fault.kind != collectives::Fault::kNone && o.iters < 2)
    throw std::invalid_argument(std::string("fault ") + collectives::faultName(o.fault.kind) +
                                " needs at least 2 iterations: a fault may act in a call's last step and show only "
                                "in the next call (a dropped credit, a replayed put)");
  HostRunResult res;
  res.plan = plan::makePlan(o.topo, o.specs, o.gradDtype, o.planOptions);
  const plan::Plan& pl = res.plan;
  const plan::GroupLayout& g = pl.group;
  const int n = g.topo.ranks();
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&pl});
  const int64_t landingOffset = layout.bytes;
  const int64_t arenaBytes = arenaBytesOf(g, layout);
  refuseIfMemoryShort(g, arenaBytes, o.accumulate, o.keepOutputs);
  // Inputs outlive the world: its queues may still touch them while it stops.
  std::vector<RankData> data(static_cast<size_t>(n));
  fabric::host::HostOptions hopt;
  hopt.queues = collectives::kQueuesNeeded + 1;  // + the user's compute queue
  hopt.timeoutSeconds = o.timeoutSeconds;
  hopt.checkProtocol = o.checkProtocol;
  hopt.rails = o.rails;
  fabric::host::HostWorld world(g.topo, arenaBytes, hopt);
  std::vector<std::unique_ptr<collectives::Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    collectives::FaultConfig f = o.fault;
    comms.push_back(std::make_unique<collectives::Communicator>(world.endpoint(r), layout, f, o.issue));
  }
  if (o.fault.kind == collectives::Fault::kStallPeer) {
    fabric::FabricFaults ff;
    ff.stallSeconds = o.timeoutSeconds * 2.5;
    world.endpoint(o.fault.rank).setFabricFaults(ff);
  } else if (o.fault.kind == collectives::Fault::kLoseSignal) {
    fabric::FabricFaults ff;
    ff.loseSignalAfter = 0;
    world.endpoint(o.fault.rank).setFabricFaults(ff);
  } else if (o.fault.kind == collectives::Fault::kDuplicatePut) {
    fabric::FabricFaults ff;
    ff.duplicatePutAfter = 0;
    world.endpoint(o.fault.rank).setFabricFaults(ff);
  }

  std::mt19937_64 rng(o.seed);
  const int bGrad = plan::itemSize(g.gradDtype);
  std::vector<double> agTimes, rsTimes;
  res.allGather.ok = true;
  res.reduceScatter.ok = true;
  try {
    for (int it = 0; it < o.iters; ++it) {
      // ---- fresh inputs
      for (int r = 0; r < n; ++r) {
        RankData& d = data[static_cast<size_t>(r)];
        d.shard.assign(static_cast<size_t>(g.shardBytes), 0);
        for (size_t p = 0; p < g.params.size(); ++p) {
          const plan::ParamLayout& P = g.params[p];
          const int64_t valid = P.validRows(r) * P.rowElems;  // padding rows stay zero, as FSDP2 pads
          for (int64_t i = 0; i < valid; ++i)
            storeValue(d.shard.data() + P.shardOffset, i, g.agDtype, drawValue(rng, o.inputs));
        }
        d.grads.resize(g.params.size());
        for (size_t p = 0; p < g.params.size(); ++p) {
          const plan::ParamLayout& P = g.params[p];
          d.grads[p].assign(static_cast<size_t>(P.rows * P.rowElems * bGrad), 0);
          for (int64_t i = 0; i < P.rows * P.rowElems; ++i)
            storeValue(d.grads[p].data(), i, g.gradDtype, drawValue(rng, o.inputs));
        }
        if (!o.accumulate || it == 0) {
          d.out.assign(static_cast<size_t>(g.outElems), 0.0f);
          for (float& v : d.out) v = o.accumulate ? drawValue(rng, InputKind::kInteger) : outputPoison();
        }
      }
      fabric::host::ProtocolChecker* checker = world.checker();
      using Access = fabric::host::ProtocolChecker::Access;
      if (checker) {
        // The host wrote every input (buffers keep their addresses across iterations).
        for (int r = 0; r < n; ++r) {
          RankData& d = data[static_cast<size_t>(r)];
          if (it == 0) {
            checker->watch(d.shard.data(), static_cast<int64_t>(d.shard.size()), "a shard");
            for (auto& gp : d.grads) checker->watch(gp.data(), static_cast<int64_t>(gp.size()), "a gradient");
            checker->watch(d.out.data(), static_cast<int64_t>(d.out.size() * sizeof(float)), "an output");
          }
          checker->hostAccess(r, d.shard.data(), static_cast<int64_t>(d.shard.size()), Access::kWrite, "draws a shard");
          for (auto& gp : d.grads)
            checker->hostAccess(r, gp.data(), static_cast<int64_t>(gp.size()), Access::kWrite, "draws a gradient");
          checker->hostAccess(r, d.out.data(), static_cast<int64_t>(d.out.size() * sizeof(float)), Access::kWrite,
                              "poisons an output");
        }
      }
      // Poison every landing so an unwritten byte fails.
      for (int r = 0; r < n; ++r) {
        std::memset(world.endpoint(r).arena() + landingOffset, 0xA5, static_cast<size_t>(g.unshardedBytes()));
        if (checker)
          checker->hostAccess(r, world.endpoint(r).arena() + landingOffset, g.unshardedBytes(), Access::kWrite,
                              "poisons a landing");
      }
      // In place: each rank's shard goes into its own landing rows (as the
      // FSDP2 adapter casts it there), and the all-gather gets no pointer.
      if (o.inPlaceShard) {
        for (int r = 0; r < n; ++r) {
          std::byte* land = world.endpoint(r).arena() + landingOffset;
          for (size_t p = 0; p < g.params.size(); ++p) {
            const plan::ParamLayout& P = g.params[p];
            std::memcpy(land + g.landing(static_cast<int>(p), r), data[static_cast<size_t>(r)].shard.data() + P.shardOffset,
                        static_cast<size_t>(P.shardBytes));
            if (checker)
              checker->hostAccess(r, land + g.landing(static_cast<int>(p), r), P.shardBytes, Access::kWrite,
                                  "writes a shard into its own landing");
          }
        }
      }

      // ---- all-gather on every rank
      auto t0 = Clock::now();
      for (int r = 0; r < n; ++r) {
        comms[static_cast<size_t>(r)]->allGather(pl, o.inPlaceShard ? nullptr : data[static_cast<size_t>(r)].shard.data(),
                                                 landingOffset);
      }
      if (o.keepOutputs && it + 1 == o.iters) res.landings.assign(static_cast<size_t>(n), {});  // by rank
      // With a fault injected, each rank's landing is checked as soon as its
      // caller's event fires, as a consumer would read it, the misbehaving
      // rank's first: a rank checked after another's wait has already
      // outlived its race would not show a fault that lets its caller return
      // too early. Without one, every rank is synchronized and the time taken
      // first, so that it holds the collective alone, not the checks of the
      // ranks synchronized before the last (2.5x the all-gather's own time on
      // 8 ranks and one 32 MiB parameter).
      const bool checkAsEachEnds = o.fault.kind != collectives::Fault::kNone;
      if (!checkAsEachEnds) {
        for (int r = 0; r < n; ++r) world.endpoint(r).synchronize(collectives::kCallerQueue);
        agTimes.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      for (int k = 0; k < n; ++k) {
        const int r = (o.fault.rank + k) % n;
        if (checkAsEachEnds) {
          world.endpoint(r).synchronize(collectives::kCallerQueue);
          if (k + 1 == n) agTimes.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        const uint8_t* land = reinterpret_cast<const uint8_t*>(world.endpoint(r).arena() + landingOffset);
        if (checker) checker->hostAccess(r, land, g.unshardedBytes(), Access::kRead, "consumes a landing");
        std::vector<const uint8_t*> shards;
        for (const RankData& d : data) shards.push_back(d.shard.data());
        res.allGather.wrong += wrongLandingBytes(g, shards, land);
        if (o.keepOutputs && it + 1 == o.iters)
          res.landings[static_cast<size_t>(r)].assign(land, land + g.unshardedBytes());
      }
      synchronizeAll(world);
      addStats(res.allGather.stats, world);

      // ---- reduce-scatter on every rank
      std::vector<std::vector<float>> before(static_cast<size_t>(n));  // what the call accumulates onto
      if (o.accumulate)
        for (int r = 0; r < n; ++r) before[static_cast<size_t>(r)] = data[static_cast<size_t>(r)].out;
      std::vector<std::vector<std::vector<uint8_t>>> gradsRef(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) gradsRef[static_cast<size_t>(r)] = data[static_cast<size_t>(r)].grads;
      std::vector<collectives::ReduceScatterEvents> events(static_cast<size_t>(n));
      t0 = Clock::now();
      for (int r = 0; r < n; ++r) {
        RankData& d = data[static_cast<size_t>(r)];
        std::vector<const void*> grads;
        for (auto& gp : d.grads) grads.push_back(gp.data());
        events[static_cast<size_t>(r)] =
            comms[static_cast<size_t>(r)]->reduceScatter(pl, grads, d.out.data(), o.alpha, o.accumulate);
        // The user's compute stream frees the gradients once readDone fires
        // and reuses their memory (here: overwrites it).
        fabric::Endpoint& ep = world.endpoint(r);
        ep.waitEvent(kUserQueue, collectives::kCallerQueue, events[static_cast<size_t>(r)].readDone);
        for (auto& gp : d.grads) ep.zero(kUserQueue, gp.data(), static_cast<int64_t>(gp.size()));
      }
      for (int r = 0; r < n; ++r) world.endpoint(r).synchronize(collectives::kCallerQueue);
      rsTimes.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      synchronizeAll(world);
      addStats(res.reduceScatter.stats, world);
      for (int r = 0; r < n; ++r) {
        const std::vector<float>& y = data[static_cast<size_t>(r)].out;
        if (checker)
          checker->hostAccess(r, y.data(), static_cast<int64_t>(y.size() * sizeof(float)), Access::kRead,
                              "consumes an output");
        std::vector<std::vector<const void*>> gradPtrs(static_cast<size_t>(n));
        for (int u = 0; u < n; ++u)
          for (const auto& gp : gradsRef[static_cast<size_t>(u)]) gradPtrs[static_cast<size_t>(u)].push_back(gp.data());
        const OutputCheck check = checkShardOutput(g, gradPtrs, r, o.alpha,
                                                   o.accumulate ? before[static_cast<size_t>(r)].data() : nullptr,
                                                   y.data(), o.inputs == InputKind::kInteger);
        res.reduceScatter.wrong += check.wrong;
        res.reduceScatter.maxRelErr = std::max(res.reduceScatter.maxRelErr, check.maxRelErr);
        if (o.keepOutputs && it + 1 == o.iters) res.outputs.push_back(y);
      }
    }
  } catch (const std::exception& e) {
    res.error = e.what();
    res.allGather.ok = res.reduceScatter.ok = false;
  }
  if (o.fault.kind != collectives::Fault::kNone)
    res.faultFirings = comms[static_cast<size_t>(o.fault.rank)]->faultFirings() +
                       world.endpoint(o.fault.rank).fabricFaultFirings();
  res.allGather.ok = res.allGather.ok && res.allGather.wrong == 0;
  res.reduceScatter.ok = res.reduceScatter.ok && res.reduceScatter.wrong == 0;
  // The first call builds what later calls reuse (cached copy lists, first
  // touches of the arenas): a warm-up, left out of the times when others ran.
  for (std::vector<double>* times : {&agTimes, &rsTimes})
    if (times->size() > 1) times->erase(times->begin());
  res.allGather.seconds = median(agTimes);
  res.reduceScatter.seconds = median(rsTimes);
  perCall(res.allGather.stats, o.iters);
  perCall(res.reduceScatter.stats, o.iters);
  return res;
}

}  // namespace tide::bench
