// Random sequences of TIDE-AG and TIDE-RS calls of several groups on one
// communicator, each call on a caller queue drawn per call (the C API rebinds
// queue 0 to each call's stream, and streams need not be ordered), with no
// host synchronisation between calls. What one group's tests cannot see:
// resources counted across every call (staging slots, outbox blocks, spares,
// inbox generations, the AG stage and its credits, the landing-free signals)
// must follow the communicator's scratch, whatever group each call was and
// whatever queue it came on.
//
// Each draw runs twice on the host fabric: under the protocol checker (no
// violation may be reported) and without it (every call's landing and
// output against the references: byte-exact gathers, float64 sums, exact for
// integer inputs). A draw is replayed by its seed and index:
//   TIDE_TEST_SEED=<seed>  the seed (default: fresh, printed; test_seed.hpp)
//   TIDE_SEQ_DRAWS=<n>     draws (default kDefaultDraws)
//   TIDE_SEQ_ONLY=<i>      run draw i only
//   TIDE_SEQ_MAX_FAILED=<k> stop after k failed runs (default 3)
//   TIDE_SEQ_VERBOSE=1     print every run's topology, calls and time
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/random_inputs.hpp"
#include "bench/reference.hpp"
#include "caller_queue_per_call.hpp"
#include "collectives/communicator.hpp"
#include "fabric/host/host_fabric.hpp"
#include "fabric/host/host_rails.hpp"
#include "test_seed.hpp"

namespace tide {
namespace {

using plan::DType;
using test::CallerQueuePerCall;
using Access = fabric::host::ProtocolChecker::Access;

// Draws per run of the test; each draw runs twice (checker, outputs): about
// 20-25 s on two cores. A reverted outbox fix (each group's own outbox depth)
// is caught in about one draw in twenty, the staging-slot one in one in five;
// the landing-free signals on the caller's queue (CallerQueuePerCall::mergeQueue
// of kSignalQueue, session 21's bug) in 22 draws of 300 under the checker and
// 19 by their outputs (seed 7).
constexpr int kDefaultDraws = 300;

// Host queues of a draw with S caller streams: the collectives' own (queue
// 0 is the first stream), then the other S - 1 streams, then the user's
// compute queue, which overwrites a reduce-scatter's gradients once its
// read-done event fires.
int streamQueue(int i) { return i == 0 ? 0 : collectives::kQueuesNeeded + i - 1; }
int userQueue(int streams) { return collectives::kQueuesNeeded + streams - 1; }
int hostQueues(int streams) { return userQueue(streams) + 1; }

constexpr int64_t kAlign = 4096;
int64_t alignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

uint64_t envOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 0);
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---------------------------------------------------------------- the draw

struct GroupDraw {
  std::vector<plan::ParamSpec> specs;
  DType grad = DType::kBF16;
  plan::PlanOptions options;
  plan::Plan plan;
};

// One call of the sequence. AG calls write a landing slot of the arena, RS
// calls an output slot (a host buffer per rank); a slot is reused only by a
// call ordered after the previous user's consumer (below), never by two
// calls in flight at once, so every call's result can be checked.
struct CallDraw {
  bool allGather = true;
  int group = 0;
  int queue = 0;    // host queue of the call's stream
  int slot = 0;     // landing slot (AG) or output slot (RS)
  int reuses = -1;  // the earlier call whose slot this one reuses, -1: a fresh slot
  bool inPlace = false;       // AG, one node: no shard pointer, the shard sits in the own landing rows
  bool shardInArena = false;  // AG: the shard lies in the arena (rails then send it from there)
  float alpha = 1.0f;         // RS
  bool accumulate = false;    // RS
  bool releaseGrads = false;  // RS: the user queue overwrites the gradients at read-done
};

// Queue `queue` of rank `rank` idles `seconds` before rank `rank` issues call `beforeCall`.
struct DelayDraw {
  int beforeCall = 0;
  int rank = 0;
  int queue = 0;
  double seconds = 0;
};

struct Draw {
  uint64_t seed = 0;  // of this draw: groups, sequence and data
  plan::Topology topo;
  fabric::host::HostRails rails = fabric::host::HostRails::kPut;
  plan::Landing landing = plan::Landing::kPull;
  bench::InputKind inputs = bench::InputKind::kInteger;
  std::vector<GroupDraw> groups;
  std::vector<CallDraw> calls;
  std::vector<DelayDraw> delays;
  std::vector<int> issueOrder;  // ranks in host issue order; each rank issues its calls in sequence order
  std::string issueOrderName;
  int streams = 1;
  std::string streamsName;
  int landingSlots = 0;
  int outputSlots = 0;
};

const char* inputName(bench::InputKind k) {
  switch (k) {
    case bench::InputKind::kInteger: return "integer (exact)";
    case bench::InputKind::kNonFinite: return "normal with NaN/Inf";
    default: return "normal";
  }
}

std::string describe(const Draw& d) {
  std::ostringstream s;
  s << "topology M=" << d.topo.nodes << " L=" << d.topo.gpusPerNode << ", rails "
    << fabric::host::hostRailsName(d.rails) << ", landing " << plan::landingName(d.landing) << ", inputs "
    << inputName(d.inputs) << ", " << d.streamsName << ", host issue order " << d.issueOrderName << "\n";
  for (size_t gi = 0; gi < d.groups.size(); ++gi) {
    const GroupDraw& g = d.groups[gi];
    const plan::RsOptions& o = g.options.rs;
    const plan::RsPlan& rs = g.plan.rs;
    s << "  group " << gi << ": ag " << plan::dtypeName(g.specs.front().dtype) << ", grad "
      << plan::dtypeName(g.grad) << ", shapes";
    for (const plan::ParamSpec& p : g.specs) {
      s << " [";
      for (size_t i = 0; i < p.shape.size(); ++i) s << (i ? "x" : "") << p.shape[i];
      s << "]";
    }
    s << "; options mode " << plan::modeName(o.mode) << " stagingSlots " << o.stagingSlots << " roundWidth "
      << o.roundWidth << " passes " << o.passes << " waveWidth " << o.waveWidth << " sumCtas " << o.sumCtas
      << " landingCtas " << o.landingCtas << " ag.headBytes " << g.options.ag.headBytes << " ag.lastRoundGroups "
      << g.options.ag.lastRoundGroups << " ag.minStridedRun " << g.options.ag.minStridedRun
      << "; plan outboxBlocks " << rs.outboxBlocks << " stagingSlots " << rs.stagingSlots << " roundWidth "
      << rs.roundWidth << " waves " << rs.waves.size() << " generations " << rs.bufferGenerations << " spares "
      << rs.spareBlocks << " S " << g.plan.group.shardBytes << " E " << g.plan.group.outElems << "\n";
  }
  for (size_t c = 0; c < d.calls.size(); ++c) {
    const CallDraw& k = d.calls[c];
    s << "  #" << c << " " << (k.allGather ? "all_gather" : "reduce_scatter") << " group " << k.group << " queue "
      << k.queue << (k.allGather ? " landing slot " : " output slot ") << k.slot;
    if (k.reuses >= 0) s << " (reused after #" << k.reuses << ")";
    if (k.allGather) {
      if (k.inPlace) s << " in place";
      if (k.shardInArena) s << " shard in arena";
    } else {
      s << " alpha " << k.alpha << (k.accumulate ? " accumulate" : "") << (k.releaseGrads ? " release-grads" : "");
    }
    s << "\n";
  }
  for (const DelayDraw& x : d.delays)
    s << "  delay: rank " << x.rank << " queue " << x.queue << " idles " << x.seconds << " s before #"
      << x.beforeCall << "\n";
  return s.str();
}

Draw drawCase(uint64_t seed, int index) {
  Draw d;
  d.seed = splitmix(seed ^ splitmix(static_cast<uint64_t>(index) + 1));
  std::mt19937_64 rng(d.seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };

  // Ranks 2..8: one node, one GPU per node, and both. L >= 2 has staging
  // slots; M >= 4 (and M = 2 over several passes) has outbox depths that
  // differ between In-Place (M - 1) and Slot-Reuse, so M = 4, 5 count twice.
  static const int kTopos[][2] = {{1, 2}, {1, 3}, {1, 4}, {1, 8}, {2, 1}, {2, 2}, {2, 4}, {3, 1}, {3, 2},
                                  {4, 1}, {4, 1}, {4, 2}, {4, 2}, {5, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}};
  const auto& t = kTopos[pick(static_cast<int>(std::size(kTopos)))];
  d.topo = plan::Topology::make(t[0], t[1]);
  const int n = d.topo.ranks();
  const int l = d.topo.gpusPerNode;
  if (d.topo.nodes > 1) {
    static const fabric::host::HostRails kRails[] = {fabric::host::HostRails::kPut, fabric::host::HostRails::kPut,
                                                     fabric::host::HostRails::kSendRecv,
                                                     fabric::host::HostRails::kRma};
    d.rails = kRails[pick(4)];
  }
  d.landing = pick(2) ? plan::Landing::kPush : plan::Landing::kPull;  // one per communicator
  const int in = pick(6);
  d.inputs = in < 3 ? bench::InputKind::kInteger : in < 5 ? bench::InputKind::kRandomNormal : bench::InputKind::kNonFinite;
  const bool exact = d.inputs == bench::InputKind::kInteger;

  // In two draws of three the groups contrast where the scratch's counts are
  // the largest of its groups': Slot-Reuse with one transfer per round (the
  // shallowest outbox) beside In-Place (M - 1 blocks), and 1, 3, 2 staging slots.
  const bool contrast = pick(3) != 0;
  const int groups = contrast ? 3 : 2 + pick(2);
  for (int gi = 0; gi < groups; ++gi) {
    for (int attempt = 0;; ++attempt) {
      if (attempt == 1000) throw std::runtime_error("no valid plan in 1000 attempts");
      GroupDraw g;
      const DType ag = pick(2) ? DType::kFP32 : DType::kBF16;
      g.grad = pick(2) ? DType::kFP32 : DType::kBF16;
      const int params = 1 + pick(3);
      for (int p = 0; p < params; ++p) {
        plan::ParamSpec s;
        s.dtype = ag;
        const bool big = pick(4) == 0;
        const int64_t rows = 1 + pick(big ? 40 * n : 4 * n + 5);
        const int64_t k = 1 + pick(big ? 48 : 12);
        const int kind = pick(3);
        if (kind == 0) s.shape = {rows};
        else if (kind == 1) s.shape = {rows, k};
        else s.shape = {rows, 2, 1 + pick(3)};
        g.specs.push_back(s);
      }
      plan::RsOptions& o = g.options.rs;
      o.mode = pick(2) ? plan::Mode::kSlotReuse : plan::Mode::kInPlace;
      o.stagingSlots = 1 + pick(3);
      o.roundWidth = pick(3) == 0 ? 0 : 1 + pick(3);
      o.passes = pick(2) ? 1 : 2 + pick(2);
      if (contrast) {
        // Group 0 the shallowest outbox, the others a full one used once per
        // call (a call that waits for none of its own sends leaves the
        // previous call on the other bank unordered with the next call on its own).
        o.mode = gi == 0 ? plan::Mode::kSlotReuse : plan::Mode::kInPlace;
        if (gi == 0) o.roundWidth = 1;
        else o.passes = 1;
        o.stagingSlots = gi == 0 ? 1 : gi == 1 ? 3 : 2;
      }
      o.waveWidth = pick(2) ? 0 : 1 + pick(l);
      o.sumCtas = pick(2) ? 0 : 1 + pick(8);
      o.landingCtas = pick(2) ? 0 : 1 + pick(8);
      o.landing = d.landing;
      plan::AgOptions& a = g.options.ag;
      if (pick(2)) a.headBytes = 1 + pick(4096);
      a.lastRoundGroups = 1 + pick(4);
      a.minStridedRun = 1 + pick(5);
      // Half the groups ask for the rail lane of each collective (taken where
      // L = 1 across nodes, over every rail kind): lane and staged calls interleave.
      o.railLane = pick(2) == 0;
      a.railLane = pick(2) == 0;
      try {
        g.plan = plan::makePlan(d.topo, g.specs, g.grad, g.options);
      } catch (const plan::PlanError&) {
        continue;  // an invalid combination: draw again
      }
      d.groups.push_back(std::move(g));
      break;
    }
  }

  // The caller's streams: one for every call; 2..5 with each call on one
  // drawn at random; 3..5 taken in turn (calls closer than that never share
  // one); or a stream per call. A stream that an earlier call's completion
  // orders (its own done event, or an all-gather's or reduce-scatter's on it
  // since) hides what the next call on it could race with.
  const int calls = 6 + pick(7);
  const int policy = pick(12);
  std::vector<int> streamOf(static_cast<size_t>(calls));
  if (policy < 2) {
    d.streams = 1;
    d.streamsName = "one stream";
  } else if (policy < 6) {
    d.streams = 2 + pick(4);
    d.streamsName = std::to_string(d.streams) + " streams, drawn per call";
    for (int& s : streamOf) s = pick(d.streams);
  } else if (policy < 9) {
    d.streams = 3 + pick(3);
    d.streamsName = std::to_string(d.streams) + " streams in turn";
    const int first = pick(d.streams);
    for (int c = 0; c < calls; ++c) streamOf[static_cast<size_t>(c)] = (first + c) % d.streams;
  } else {
    d.streams = calls;
    d.streamsName = "a stream per call";
    for (int c = 0; c < calls; ++c) streamOf[static_cast<size_t>(c)] = c;
    for (int c = calls - 1; c > 0; --c) std::swap(streamOf[static_cast<size_t>(c)], streamOf[static_cast<size_t>(pick(c + 1))]);
  }

  std::vector<int> lastUser;  // per landing slot, then per output slot: the call that last used it
  std::vector<int> lastOutUser;
  for (int c = 0; c < calls; ++c) {
    CallDraw k;
    k.allGather = pick(5) < 2;
    k.group = pick(groups);
    k.queue = streamQueue(streamOf[static_cast<size_t>(c)]);
    std::vector<int>& users = k.allGather ? lastUser : lastOutUser;
    // Reuse a slot (one in three calls where one can be): any group's landing
    // slot (slots fit every group), an output slot of the same group.
    std::vector<int> candidates;
    for (size_t s = 0; s < users.size(); ++s)
      if (k.allGather || d.calls[static_cast<size_t>(users[s])].group == k.group) candidates.push_back(static_cast<int>(s));
    if (!candidates.empty() && pick(3) == 0) {
      k.slot = candidates[static_cast<size_t>(pick(static_cast<int>(candidates.size())))];
      k.reuses = users[static_cast<size_t>(k.slot)];
      users[static_cast<size_t>(k.slot)] = c;
    } else {
      k.slot = static_cast<int>(users.size());
      users.push_back(c);
    }
    if (k.allGather) {
      k.inPlace = d.topo.nodes == 1 && pick(3) == 0;
      k.shardInArena = !k.inPlace && pick(4) == 0;
    } else {
      if (exact) {
        static const float kAlphas[] = {1.0f, 1.0f, 0.5f, 0.25f, 2.0f, -1.0f};  // integer sums stay exact
        k.alpha = kAlphas[pick(6)];
      } else {
        k.alpha = 0.25f + static_cast<float>(pick(1000)) / 500.0f;
      }
      k.accumulate = pick(2) == 0;
      k.releaseGrads = pick(2) == 0;
    }
    d.calls.push_back(k);
  }
  d.landingSlots = static_cast<int>(lastUser.size());
  d.outputSlots = static_cast<int>(lastOutUser.size());

  const int delays = pick(3);
  for (int i = 0; i < delays; ++i)
    d.delays.push_back({pick(calls), pick(n), pick(hostQueues(d.streams)), 0.01 * (1 + pick(5))});

  // Host issue order: call by call, rank by rank (each rank issues its whole
  // sequence before the next starts), or interleaved at random.
  const int order = pick(3);
  if (order == 0) {
    d.issueOrderName = "call-major";
    for (int c = 0; c < calls; ++c)
      for (int r = 0; r < n; ++r) d.issueOrder.push_back(r);
  } else if (order == 1) {
    d.issueOrderName = "rank-major";
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < calls; ++c) d.issueOrder.push_back(r);
  } else {
    d.issueOrderName = "random interleaving";
    std::vector<int> left(static_cast<size_t>(n), calls);
    for (int i = 0; i < n * calls; ++i) {
      int r = pick(n);
      while (left[static_cast<size_t>(r)] == 0) r = (r + 1) % n;
      --left[static_cast<size_t>(r)];
      d.issueOrder.push_back(r);
    }
  }
  return d;
}

// ---------------------------------------------------------------- one run

// Runs the draw's sequence on a fresh host world; returns "" or what went
// wrong. The delays only where the protocol checker is off: its verdict
// follows the happens-before the protocol sets up, whatever the timing.
std::string runDraw(const Draw& d, bool checkProtocol) {
  const plan::Topology& topo = d.topo;
  const int n = topo.ranks();
  const size_t nCalls = d.calls.size();
  std::vector<const plan::Plan*> plans;
  int64_t maxUnsharded = 0;
  for (const GroupDraw& g : d.groups) {
    plans.push_back(&g.plan);
    maxUnsharded = std::max(maxUnsharded, g.plan.group.unshardedBytes());
  }
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans(plans);
  auto groupOf = [&](size_t c) -> const plan::GroupLayout& {
    return d.groups[static_cast<size_t>(d.calls[c].group)].plan.group;
  };

  // Arena: scratch, landing slots (each fits every group), shards placed in the arena.
  int64_t at = layout.bytes;
  std::vector<int64_t> landingAt;
  for (int s = 0; s < d.landingSlots; ++s) {
    landingAt.push_back(at);
    at += alignUp(maxUnsharded);
  }
  std::vector<int64_t> shardAt(nCalls, -1);
  for (size_t c = 0; c < nCalls; ++c)
    if (d.calls[c].allGather && d.calls[c].shardInArena) {
      shardAt[c] = at;
      at += alignUp(groupOf(c).shardBytes);
    }
  const int64_t arenaBytes = std::max<int64_t>(at, kAlign);

  // Every buffer outlives the world (its queues may touch them while it stops).
  // Per call and rank: AG shards; RS gradients (as passed, and a copy for the
  // reference: the user queue may overwrite the passed ones) and the output
  // before the call (accumulating). Per call and rank: a snapshot of the
  // landing or output, copied on the call's stream right after it, as a
  // consumer on that stream reads it.
  std::mt19937_64 rng(splitmix(d.seed ^ 0xda7aull));
  const bool exact = d.inputs == bench::InputKind::kInteger;
  std::vector<std::vector<std::vector<uint8_t>>> shards(nCalls);
  std::vector<std::vector<std::vector<std::vector<uint8_t>>>> grads(nCalls), gradsRef(nCalls);
  std::vector<std::vector<std::vector<uint8_t>>> landingSnap(nCalls);
  std::vector<std::vector<std::vector<float>>> outSnap(nCalls);
  std::vector<std::vector<std::vector<float>>> outputs(static_cast<size_t>(d.outputSlots));  // [slot][rank]
  std::vector<std::vector<std::vector<float>>> initial(static_cast<size_t>(d.outputSlots));  // a fresh slot's contents
  for (size_t c = 0; c < nCalls; ++c) {
    const CallDraw& k = d.calls[c];
    const plan::GroupLayout& g = groupOf(c);
    for (int r = 0; r < n; ++r) {
      if (k.allGather) {
        std::vector<uint8_t> s(static_cast<size_t>(g.shardBytes));
        for (uint8_t& b : s) b = static_cast<uint8_t>(rng());
        shards[c].push_back(std::move(s));
        landingSnap[c].emplace_back(static_cast<size_t>(g.unshardedBytes()), uint8_t{0x5A});
      } else {
        std::vector<std::vector<uint8_t>> gr;
        for (const plan::ParamLayout& p : g.params) {
          gr.emplace_back(static_cast<size_t>(p.rows * p.rowElems * plan::itemSize(g.gradDtype)));
          for (int64_t i = 0; i < p.rows * p.rowElems; ++i)
            bench::storeValue(gr.back().data(), i, g.gradDtype, bench::drawValue(rng, d.inputs));
        }
        gradsRef[c].push_back(gr);
        grads[c].push_back(std::move(gr));
        outSnap[c].emplace_back(static_cast<size_t>(g.outElems), bench::outputPoison());
      }
    }
    if (!k.allGather && k.reuses < 0) {
      std::vector<std::vector<float>>& init = initial[static_cast<size_t>(k.slot)];
      for (int r = 0; r < n; ++r) {
        init.emplace_back(static_cast<size_t>(g.outElems), bench::outputPoison());
        if (k.accumulate)
          for (float& v : init.back())
            v = bench::drawValue(rng, exact ? bench::InputKind::kInteger : bench::InputKind::kRandomNormal);
      }
      outputs[static_cast<size_t>(k.slot)] = init;
    }
  }
  int64_t maxOut = 0;
  for (const GroupDraw& g : d.groups) maxOut = std::max(maxOut, g.plan.group.outElems);
  const std::vector<uint8_t> poisonBytes(static_cast<size_t>(maxUnsharded), uint8_t{0xA5});
  const std::vector<float> poisonFloats(static_cast<size_t>(maxOut), bench::outputPoison());

  fabric::host::HostOptions h;
  h.queues = hostQueues(d.streams);
  h.timeoutSeconds = 30;
  h.checkProtocol = checkProtocol;
  h.rails = d.rails;
  fabric::host::HostWorld world(topo, arenaBytes, h);
  std::vector<std::unique_ptr<CallerQueuePerCall>> eps;
  std::vector<std::unique_ptr<collectives::Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    eps.push_back(std::make_unique<CallerQueuePerCall>(world.endpoint(r)));
    comms.push_back(std::make_unique<collectives::Communicator>(*eps.back(), layout));
  }
  fabric::host::ProtocolChecker* checker = world.checker();
  auto hostAccess = [&](int r, const void* p, int64_t bytes, Access kind, const char* what) {
    if (checker) checker->hostAccess(r, p, bytes, kind, what);
  };
  auto arena = [&](int r) { return world.endpoint(r).arena(); };

  std::ostringstream problems;
  int problemCount = 0;
  auto problem = [&](const std::string& what) {
    if (++problemCount <= 12) problems << "  " << what << "\n";
  };

  try {
    // ---- the host writes every input and poisons every fresh landing
    if (checker) {
      for (size_t c = 0; c < nCalls; ++c)
        for (int r = 0; r < n; ++r) {
          const size_t rr = static_cast<size_t>(r);
          if (d.calls[c].allGather) {
            checker->watch(shards[c][rr].data(), static_cast<int64_t>(shards[c][rr].size()), "a shard");
            checker->watch(landingSnap[c][rr].data(), static_cast<int64_t>(landingSnap[c][rr].size()),
                           "a landing's snapshot");
          } else {
            for (auto& gp : grads[c][rr]) checker->watch(gp.data(), static_cast<int64_t>(gp.size()), "a gradient");
            checker->watch(outSnap[c][rr].data(), static_cast<int64_t>(outSnap[c][rr].size() * sizeof(float)),
                           "an output's snapshot");
          }
        }
      for (auto& slot : outputs)
        for (auto& o : slot) checker->watch(o.data(), static_cast<int64_t>(o.size() * sizeof(float)), "an output");
    }
    for (size_t c = 0; c < nCalls; ++c)
      for (int r = 0; r < n; ++r) {
        const size_t rr = static_cast<size_t>(r);
        if (d.calls[c].allGather) {
          hostAccess(r, shards[c][rr].data(), static_cast<int64_t>(shards[c][rr].size()), Access::kWrite, "draws a shard");
          hostAccess(r, landingSnap[c][rr].data(), static_cast<int64_t>(landingSnap[c][rr].size()), Access::kWrite,
                     "poisons a snapshot");
        } else {
          for (auto& gp : grads[c][rr])
            hostAccess(r, gp.data(), static_cast<int64_t>(gp.size()), Access::kWrite, "draws a gradient");
          hostAccess(r, outSnap[c][rr].data(), static_cast<int64_t>(outSnap[c][rr].size() * sizeof(float)), Access::kWrite,
                     "poisons a snapshot");
        }
      }
    for (auto& slot : outputs)
      for (int r = 0; r < n; ++r) {
        std::vector<float>& o = slot[static_cast<size_t>(r)];
        hostAccess(r, o.data(), static_cast<int64_t>(o.size() * sizeof(float)), Access::kWrite, "fills an output");
      }
    for (size_t c = 0; c < nCalls; ++c) {
      const CallDraw& k = d.calls[c];
      if (!k.allGather) continue;
      const plan::GroupLayout& g = groupOf(c);
      for (int r = 0; r < n; ++r) {
        if (k.reuses < 0) {
          std::byte* land = arena(r) + landingAt[static_cast<size_t>(k.slot)];
          std::memset(land, 0xA5, static_cast<size_t>(maxUnsharded));
          hostAccess(r, land, maxUnsharded, Access::kWrite, "poisons a landing");
          if (k.inPlace)
            for (size_t p = 0; p < g.params.size(); ++p) {
              const plan::ParamLayout& P = g.params[p];
              std::memcpy(land + g.landing(static_cast<int>(p), r), shards[c][static_cast<size_t>(r)].data() + P.shardOffset,
                          static_cast<size_t>(P.shardBytes));
              hostAccess(r, land + g.landing(static_cast<int>(p), r), P.shardBytes, Access::kWrite,
                         "writes a shard into its own landing rows");
            }
        }
        if (k.shardInArena) {
          std::memcpy(arena(r) + shardAt[c], shards[c][static_cast<size_t>(r)].data(), static_cast<size_t>(g.shardBytes));
          hostAccess(r, arena(r) + shardAt[c], g.shardBytes, Access::kWrite, "writes a shard into the arena");
        }
      }
    }

    // ---- issue: every rank its calls in sequence order, the ranks in the drawn host order
    std::vector<size_t> next(static_cast<size_t>(n), 0);
    for (const int r : d.issueOrder) {
      const size_t rr = static_cast<size_t>(r);
      const size_t c = next[rr]++;
      const CallDraw& k = d.calls[c];
      const plan::Plan& pl = d.groups[static_cast<size_t>(k.group)].plan;
      const plan::GroupLayout& g = pl.group;
      fabric::Endpoint& raw = world.endpoint(r);
      for (const DelayDraw& x : d.delays)
        if (!checkProtocol && x.beforeCall == static_cast<int>(c) && x.rank == r) raw.delay(x.queue, x.seconds);
      const int q = k.queue;
      if (k.reuses >= 0) {
        // The slot's previous user was consumed (its snapshot) on its stream:
        // this stream waits for that stream first, as a user's would.
        const int prev = d.calls[static_cast<size_t>(k.reuses)].queue;
        if (prev != q) raw.waitEvent(q, prev, raw.record(prev));
      }
      eps[rr]->bindCaller(q);
      if (k.allGather) {
        std::byte* land = arena(r) + landingAt[static_cast<size_t>(k.slot)];
        if (k.reuses >= 0) {
          // Poisoned again on the stream; in place, the shard goes into the own rows there too.
          raw.copy(q, {fabric::CopyOp{land, poisonBytes.data(), maxUnsharded, 1, 0, 0, false}});
          if (k.inPlace) {
            std::vector<fabric::CopyOp> own;
            for (size_t p = 0; p < g.params.size(); ++p) {
              const plan::ParamLayout& P = g.params[p];
              own.push_back(fabric::CopyOp{land + g.landing(static_cast<int>(p), r), shards[c][rr].data() + P.shardOffset,
                                           P.shardBytes, 1, 0, 0, false});
            }
            raw.copy(q, own);
          }
        }
        const void* shard = k.inPlace ? nullptr : k.shardInArena ? static_cast<const void*>(arena(r) + shardAt[c])
                                                                  : shards[c][rr].data();
        comms[rr]->allGather(pl, shard, landingAt[static_cast<size_t>(k.slot)]);
        raw.copy(q, {fabric::CopyOp{landingSnap[c][rr].data(), land, g.unshardedBytes(), 1, 0, 0, false}});
      } else {
        float* out = outputs[static_cast<size_t>(k.slot)][rr].data();
        if (k.reuses >= 0 && !k.accumulate)
          raw.copy(q, {fabric::CopyOp{out, poisonFloats.data(), g.outBytes(), 1, 0, 0, false}});
        std::vector<const void*> gp;
        for (auto& x : grads[c][rr]) gp.push_back(x.data());
        const collectives::ReduceScatterEvents ev = comms[rr]->reduceScatter(pl, gp, out, k.alpha, k.accumulate);
        if (k.releaseGrads) {
          // The user's compute stream reuses the gradients' memory once read-done fires.
          raw.waitEvent(userQueue(d.streams), q, ev.readDone);
          for (auto& x : grads[c][rr]) raw.zero(userQueue(d.streams), x.data(), static_cast<int64_t>(x.size()));
        }
        raw.copy(q, {fabric::CopyOp{outSnap[c][rr].data(), out, g.outBytes(), 1, 0, 0, false}});
      }
    }

    // ---- synchronise every rank, then check every call
    std::exception_ptr first;
    for (int r = 0; r < n; ++r) {
      try {
        world.endpoint(r).synchronizeAll();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);

    std::vector<int> lastLanding(static_cast<size_t>(d.landingSlots), -1), lastOutput(static_cast<size_t>(d.outputSlots), -1);
    for (size_t c = 0; c < nCalls; ++c)
      (d.calls[c].allGather ? lastLanding : lastOutput)[static_cast<size_t>(d.calls[c].slot)] = static_cast<int>(c);
    for (size_t c = 0; c < nCalls; ++c) {
      const CallDraw& k = d.calls[c];
      const plan::GroupLayout& g = groupOf(c);
      const bool last = (k.allGather ? lastLanding : lastOutput)[static_cast<size_t>(k.slot)] == static_cast<int>(c);
      const std::string name = "#" + std::to_string(c) + (k.allGather ? " all_gather" : " reduce_scatter") +
                               " (group " + std::to_string(k.group) + ", queue " + std::to_string(k.queue) + ")";
      for (int r = 0; r < n; ++r) {
        const size_t rr = static_cast<size_t>(r);
        if (k.allGather) {
          std::vector<const uint8_t*> owners;
          for (const auto& s : shards[c]) owners.push_back(s.data());
          hostAccess(r, landingSnap[c][rr].data(), g.unshardedBytes(), Access::kRead, "checks a landing's snapshot");
          const int64_t atDone = bench::wrongLandingBytes(g, owners, landingSnap[c][rr].data());
          if (atDone != 0)
            problem(name + ", rank " + std::to_string(r) + ": " + std::to_string(atDone) +
                    " landing bytes wrong when its stream reached the call's end");
          if (last) {  // the slot's last user: nothing wrote its landing since
            const std::byte* land = arena(r) + landingAt[static_cast<size_t>(k.slot)];
            hostAccess(r, land, g.unshardedBytes(), Access::kRead, "checks a landing");
            const int64_t atEnd = bench::wrongLandingBytes(g, owners, reinterpret_cast<const uint8_t*>(land));
            if (atEnd != 0)
              problem(name + ", rank " + std::to_string(r) + ": " + std::to_string(atEnd) +
                      " landing bytes wrong after every call");
          }
        } else {
          std::vector<std::vector<const void*>> ref(static_cast<size_t>(n));
          for (int u = 0; u < n; ++u)
            for (const auto& x : gradsRef[c][static_cast<size_t>(u)]) ref[static_cast<size_t>(u)].push_back(x.data());
          const float* before = nullptr;
          if (k.accumulate)
            before = k.reuses >= 0 ? outSnap[static_cast<size_t>(k.reuses)][rr].data()
                                   : initial[static_cast<size_t>(k.slot)][rr].data();
          hostAccess(r, outSnap[c][rr].data(), g.outBytes(), Access::kRead, "checks an output's snapshot");
          const bench::OutputCheck atDone =
              bench::checkShardOutput(g, ref, r, k.alpha, before, outSnap[c][rr].data(), exact);
          if (atDone.wrong != 0)
            problem(name + ", rank " + std::to_string(r) + ": " + std::to_string(atDone.wrong) + " of " +
                    std::to_string(g.outElems) + " output elements wrong when its stream reached the call's end" +
                    " (max rel err " + std::to_string(atDone.maxRelErr) + ")");
          if (last) {
            const float* out = outputs[static_cast<size_t>(k.slot)][rr].data();
            hostAccess(r, out, g.outBytes(), Access::kRead, "checks an output");
            const bench::OutputCheck atEnd = bench::checkShardOutput(g, ref, r, k.alpha, before, out, exact);
            if (atEnd.wrong != 0)
              problem(name + ", rank " + std::to_string(r) + ": " + std::to_string(atEnd.wrong) +
                      " output elements wrong after every call");
          }
        }
      }
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (what.size() > 2000) what = what.substr(0, 2000) + "...";
    problem(std::string("threw: ") + what);
  }
  if (problemCount == 0) return "";
  if (problemCount > 12) problems << "  (" << problemCount - 12 << " more)\n";
  return problems.str();
}

// ---------------------------------------------------------------- the test

TEST(RandomCallSequences, EveryCallMatchesItsReferenceAndTheCheckerIsQuiet) {
  const uint64_t seed = tide_test::testSeed();
  const int draws = static_cast<int>(envOr("TIDE_SEQ_DRAWS", kDefaultDraws));
  const long long only = std::getenv("TIDE_SEQ_ONLY") ? static_cast<long long>(envOr("TIDE_SEQ_ONLY", 0)) : -1;
  std::printf("[ sequences ] TIDE_TEST_SEED=%llu TIDE_SEQ_DRAWS=%d%s\n", static_cast<unsigned long long>(seed), draws,
              only >= 0 ? (" TIDE_SEQ_ONLY=" + std::to_string(only)).c_str() : "");
  std::fflush(stdout);
  RecordProperty("seed", std::to_string(seed));
  const int maxFailed = static_cast<int>(envOr("TIDE_SEQ_MAX_FAILED", 3));
  int failed = 0;
  for (int i = 0; i < draws && failed < maxFailed; ++i) {
    if (only >= 0 && i != only) continue;
    const Draw d = drawCase(seed, i);
    for (const bool check : {true, false}) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::string err = runDraw(d, check);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (std::getenv("TIDE_SEQ_VERBOSE"))
        std::printf("[ sequences ] draw %d %s: M=%d L=%d, %zu calls, %.2f s%s\n", i, check ? "checker" : "outputs",
                    d.topo.nodes, d.topo.gpusPerNode, d.calls.size(), secs, err.empty() ? "" : " FAILED");
      if (err.empty()) continue;
      ++failed;
      ADD_FAILURE() << "TIDE_TEST_SEED=" << seed << " draw " << i << " failed "
                    << (check ? "under the protocol checker" : "its output checks (no checker)") << ":\n"
                    << err << "the draw:\n"
                    << describe(d) << "replay: TIDE_TEST_SEED=" << seed << " TIDE_SEQ_ONLY=" << i;
    }
  }
}

}  // namespace
}  // namespace tide
