// C API for communicators: groups, symmetric user memory, TIDE-AG, TIDE-RS.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "capi/call_agreement.hpp"
#include "capi/call_timer.hpp"
#include "capi/errors.hpp"
#include "capi/fabric_factory.hpp"
#include "capi/group_agreement.hpp"
#include "capi/landing_agreement.hpp"
#include "capi/live_handles.hpp"
#include "capi/plan_config.hpp"
#include "collectives/communicator.hpp"
#include "collectives/counter_ids.hpp"
#include "fabric/seconds_text.hpp"
#include "plan/plan_json.hpp"

struct tideGroup {
  const tideComm* owner = nullptr;  // the communicator it was registered on (the object, not its handle)
  tideGroup* handle = nullptr;      // what tideGroupRegister handed out (live_handles.hpp)
  size_t index = 0;                 // its place in the owner's registration order
  tide::plan::Plan plan;
  std::string json;
  uint64_t digest = 0;  // protocolDigest(plan): what the ranks compare (requireSameGroups)
  tide::capi::AgreedLandings landings;  // its all-gathers' offsets the ranks have compared (requireSameLanding)
};

struct tideComm {
  // Every call that reads or changes the communicator holds it: calls from
  // several threads (FSDP2's backward runs on autograd's threads) go one at
  // a time, in the order they take it, which must match on every rank.
  std::mutex mu;
  // Set by tideCommDestroy under `mu`: a call that was waiting for the lock
  // finds it and is refused (the object itself lives until that call is out).
  bool destroyed = false;
  tide::capi::FabricHandle fabric;
  std::vector<std::unique_ptr<tideGroup>> groups;
  int64_t userTop = 0;  // bump allocator for symmetric user memory, from offset 0
  std::string rails;    // tideCommGetRails' answer, kept for the pointer handed out
  tide::collectives::IssueOptions issue;                // from the environment when the comm was made
  bool callChecks = false;     // TIDE_CHECK_CALLS, read when the comm was made (requireSameCall)
  uint64_t callsChecked = 0;   // collectives compared so far (requireSameCall)
  std::optional<tide::collectives::Communicator> comm;  // created at the first collective
  // Groups (a prefix of `groups`) the ranks have compared and found alike
  // (requireSameGroups); and why the ranks could not compare their groups or
  // landings, or found them different (sticky: the ranks are out of step).
  size_t groupsAgreed = 0;
  std::string outOfStep;
  std::optional<tide::collectives::ReduceScatterEvents> lastReduceScatter;  // for tideCommWaitInputsRead
  bool reduceScatterFailed = false;  // the last reduce-scatter threw (its message went to tideGetLastError)
  // Host time inside the collective calls (tideCommStats_t): at a few µs of
  // driver work per stream operation, a call's enqueue is what a host-bound
  // training step pays for it, so it is measured always (two clock reads).
  tide::capi::CallTimer allGatherTime, reduceScatterTime;

  std::vector<const tide::plan::Plan*> registeredPlans() const {
    std::vector<const tide::plan::Plan*> plans;
    for (const auto& g : groups) plans.push_back(&g->plan);
    return plans;
  }

  // Where a scratch of `need` bytes starts in an arena of `arena` bytes (need <= arena):
  // at the top, its base aligned down to 4096.
  static int64_t scratchBase(int64_t arena, int64_t need) { return (arena - need) / 4096 * 4096; }

  // Scratch goes at the top of the arena, sized for every group registered so
  // far: the layout the first collective makes (or made). Throws where the
  // arena cannot hold it.
  tide::collectives::ScratchLayout scratchLayout() const {
    using tide::collectives::ScratchLayout;
    if (comm) return comm->layout();
    if (groups.empty()) throw std::invalid_argument("register a group before the first collective");
    const std::vector<const tide::plan::Plan*> plans = registeredPlans();
    const int64_t arena = fabric.endpoint->arenaBytes();
    const int64_t need = ScratchLayout::forPlans(plans).bytes;
    if (need > arena)
      throw std::invalid_argument("arena of " + std::to_string(arena) + " bytes is too small: the collective scratch "
                                  "of the groups registered so far takes " + std::to_string(need) +
                                  " bytes (tideScratchBytes says how much an arena needs)");
    const int64_t base = scratchBase(arena, need);
    if (base < userTop)
      throw std::invalid_argument("arena of " + std::to_string(arena) + " bytes is too small: user memory ends at " +
                                  std::to_string(userTop) + " (each tideCommAlloc starts at a multiple of 4096), and "
                                  "the collective scratch of " + std::to_string(need) + " bytes would start at " +
                                  std::to_string(base) + " (its base aligned down to 4096)");
    return ScratchLayout::forPlans(plans, base);
  }

  tide::collectives::Communicator& communicator() {
    if (!comm) comm.emplace(*fabric.endpoint, scratchLayout(), faultsFromEnv(), issue);
    return *comm;
  }

  // TIDE_RS_LANDING_QUEUE=own (default) | net, read when the comm is made:
  // where the reduce-scatter across nodes lands (IssueOptions::landingOwnQueue);
  // the bits are the same either way, so this is for measuring the overlap.
  static tide::collectives::IssueOptions issueFromEnv() {
    tide::collectives::IssueOptions issue;
    const char* v = std::getenv("TIDE_RS_LANDING_QUEUE");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "own") == 0) return issue;
    if (std::strcmp(v, "net") != 0)
      throw std::invalid_argument(std::string("TIDE_RS_LANDING_QUEUE=") + v + " (want own or net)");
    issue.landingOwnQueue = false;
    std::fprintf(stderr, "[tide] TIDE_RS_LANDING_QUEUE=net: reduce-scatter landings across nodes queue behind "
                         "the sends\n");
    return issue;
  }

  // Test hook: TIDE_TEST_FAULT=<fault> (a name from tideFaultNames that the
  // collectives inject) and TIDE_TEST_FAULT_RANK=<rank> (default 0) make this
  // process's communicators misbehave, so tests of the layers above can show
  // that they catch it. Never set in training.
  static tide::collectives::FaultConfig faultsFromEnv() {
    using tide::collectives::Fault;
    tide::collectives::FaultConfig f;
    const char* name = std::getenv("TIDE_TEST_FAULT");
    if (name == nullptr || *name == '\0') return f;
    f.kind = tide::collectives::parseFault(name);
    if (f.kind == Fault::kStallPeer || f.kind == Fault::kLoseSignal || f.kind == Fault::kDuplicatePut ||
        f.kind == Fault::kCallOrder)
      throw std::invalid_argument(std::string("TIDE_TEST_FAULT=") + name +
                                  ": only faults that the collectives inject can be set here");
    if (const char* r = std::getenv("TIDE_TEST_FAULT_RANK"); r != nullptr && *r != '\0') {
      char* end = nullptr;
      const long rank = std::strtol(r, &end, 10);
      if (end == r || *end != '\0' || rank < 0)
        throw std::invalid_argument(std::string("TIDE_TEST_FAULT_RANK=") + r + ": not a rank");
      f.rank = static_cast<int>(rank);
    }
    // Never silent: a stray variable in a training job would corrupt results.
    std::fprintf(stderr, "[tide] WARNING: TIDE_TEST_FAULT=%s is set: rank %d's collectives inject this fault "
                         "(a test hook; their results are wrong on purpose)\n", name, f.rank);
    return f;
  }
};

namespace {

using tide::capi::guarded;
using tide::capi::invalid;

constexpr int kQueues = tide::collectives::kQueuesNeeded;

tide::capi::SharedHandles<tideComm>& liveComms() {
  static tide::capi::SharedHandles<tideComm> handles;
  return handles;
}

// Registered groups, each kept as a reference that shares its communicator's
// ownership (the communicator's object owns its groups): a call holds one for
// its duration (HeldGroup), so that tideCommDestroy of that communicator on
// another thread cannot free the group under a call that names it. (A call
// on the group's own communicator holds that already; one handed a foreign
// group, or tideGroupGetJson, which locks no communicator, did not.)
tide::capi::SharedHandles<tideGroup>& liveGroups() {
  static tide::capi::SharedHandles<tideGroup> handles;
  return handles;
}

// One call's hold on a communicator: a reference (its memory outlives the
// call, whatever another thread destroys) and its lock, or why there is none.
class LockedComm {
 public:
  explicit LockedComm(tideComm_t comm) {
    if (!comm) {
      problem_ = "null communicator";
      return;
    }
    ref_ = liveComms().acquire(comm);
    if (!ref_) {
      problem_ = "unknown or destroyed communicator";
      return;
    }
    lock_ = std::unique_lock<std::mutex>(ref_->mu);
    if (ref_->destroyed) problem_ = "communicator destroyed while this call waited for it";
  }
  // Why the call cannot use the communicator, or null.
  const char* problem() const { return problem_; }
  const std::shared_ptr<tideComm>& ref() const { return ref_; }
  // The object the handle names (handles are numbers, live_handles.hpp): a
  // call rebinds its `comm` to it once it holds the communicator.
  tideComm* object() const { return ref_.get(); }

 private:
  std::shared_ptr<tideComm> ref_;
  std::unique_lock<std::mutex> lock_;
  const char* problem_ = nullptr;
};

// One call's hold on a group (liveGroups), or why there is none.
class HeldGroup {
 public:
  explicit HeldGroup(tideGroup_t group) {
    if (!group) {
      problem_ = "null group";
      return;
    }
    ref_ = liveGroups().acquire(group);
    if (!ref_) problem_ = "unknown group, or its communicator was destroyed";
  }
  const char* problem() const { return problem_; }
  tideGroup* object() const { return ref_.get(); }  // as LockedComm::object

 private:
  std::shared_ptr<tideGroup> ref_;
  const char* problem_ = nullptr;
};

// Every rank's words for one of the comparisons below (rank-major); an
// exchange that fails leaves the ranks out of step, which sticks.
std::vector<uint64_t> exchangeOrMarkOutOfStep(tideComm_t comm, const std::vector<uint64_t>& mine,
                                              const std::string& what, const char* compared) {
  try {
    return comm->fabric.gatherWords(mine, what);
  } catch (const std::exception& e) {
    comm->outOfStep = std::string("the ranks could not compare ") + compared + ": " + e.what();
    throw;
  }
}

// Every rank must have registered the same groups (group_agreement.hpp); the
// ranks compare them at points of the call sequence, which every rank issues
// alike (not at registrations, whose timing may differ across ranks):
//   - the communicator's first collective compares every group registered
//     so far (they size the scratch, which must match);
//   - a later collective on a group registered after that compares the groups
//     up to it in registration order.
// A difference fails the call on every rank and sticks: the ranks are out of step.
tideResult_t requireSameGroups(tideComm_t comm, const tideGroup* group, const char* call) {
  const bool first = !comm->comm;
  if (!first && group->index < comm->groupsAgreed) return tideSuccess;
  // A communicator a failed collective left unusable says so at once, not after the exchange's wait.
  if (comm->comm) comm->comm->refuseIfUnusable();
  const size_t count = first ? comm->groups.size() : group->index + 1;
  std::vector<tide::capi::GroupDigest> compared;
  for (size_t i = 0; i < count; ++i) compared.push_back({&comm->groups[i]->plan, comm->groups[i]->digest});
  const std::vector<uint64_t> everyRanks = exchangeOrMarkOutOfStep(
      comm, tide::capi::groupsDigest(compared, comm->callChecks),
      "comparing the registered groups across ranks (at " + std::string(call) +
          "; every rank must register the same groups, in the same order, before the same collectives)",
      "their groups");
  const std::string differ =
      tide::capi::groupsDisagreement(compared, comm->callChecks, comm->fabric.endpoint->rank(), everyRanks);
  if (!differ.empty()) {
    comm->outOfStep =
        first ? differ + " (a communicator's first collective compares every group each rank has registered so far: "
                         "register the same groups before it on every rank)"
              : differ;
    tide::capi::setLastError(tideInvalidArgument, "groups_differ", std::string(call) + ": " + comm->outOfStep);
    return tideInvalidArgument;
  }
  comm->groupsAgreed = count;  // never fewer than before: see `first` and the index test above
  return tideSuccess;
}

// The first collective puts the scratch at the top of the arena, above user memory
// (tideCommAlloc). Ranks whose allocations differ (the same calls on every rank are the
// contract) may disagree on whether it fits: the one it does not fit would refuse the call
// alone while its peers wait in the collective for it, until their deadline, never told why.
// So the ranks compare where their user memory ends, and where it differs in that way all
// refuse together, naming the ranks. Groups and arena sizes are equal on every rank by now.
tideResult_t requireScratchAboveEveryRanksUserMemory(tideComm_t comm, const char* call) {
  const int64_t arena = comm->fabric.endpoint->arenaBytes();
  const int64_t need = tide::collectives::ScratchLayout::forPlans(comm->registeredPlans()).bytes;
  const std::vector<uint64_t> tops = exchangeOrMarkOutOfStep(
      comm, {static_cast<uint64_t>(comm->userTop)},
      std::string("comparing where user memory ends across ranks (at the first collective, ") + call + ")",
      "where their user memory ends");
  const int64_t base = need > arena ? 0 : tideComm::scratchBase(arena, need);
  std::string below, ends;
  size_t ranksBelow = 0;
  for (size_t r = 0; r < tops.size(); ++r) {
    const auto top = static_cast<int64_t>(tops[r]);
    ends += (r ? ", " : "") + std::to_string(r) + ": " + std::to_string(top);
    if (top > base) below += (ranksBelow++ ? ", " : "") + std::to_string(r);
  }
  if (need > arena || ranksBelow == tops.size()) {
    // Alike on every rank: this rank's own layout says why, with the reason of the case below (tide.h).
    try {
      (void)comm->scratchLayout();
    } catch (const std::invalid_argument& e) {
      tide::capi::setLastError(tideInvalidArgument, "arena_too_small", std::string(call) + ": " + e.what());
      return tideInvalidArgument;
    }
  }
  if (ranksBelow == 0 || ranksBelow == tops.size()) return tideSuccess;
  tide::capi::setLastError(tideInvalidArgument, "arena_too_small",
                           std::string(call) + ": the collective scratch of " + std::to_string(need) +
                               " bytes would start at arena offset " + std::to_string(base) +
                               ", below where user memory ends on rank(s) " + below + " (user memory ends, per rank: " +
                               ends + "; tideCommAlloc takes the same calls on every rank)");
  return tideInvalidArgument;
}

// Every rank must pass the same landing offset to a group's all-gather
// (landing_agreement.hpp): the ranks compare each (group, offset) pair at its
// first use, and a difference fails the call on every rank that compared and sticks.
tideResult_t requireSameLanding(tideComm_t comm, tideGroup* group, int64_t landingOffset) {
  if (group->landings.contains(landingOffset)) return tideSuccess;
  if (comm->comm) comm->comm->refuseIfUnusable();
  const std::vector<uint64_t> everyRanks = exchangeOrMarkOutOfStep(
      comm, tide::capi::landingWords(group->index, landingOffset),
      "comparing a landing offset across ranks (tideAllGather of group " + std::to_string(group->index) +
          " at landing offset " + std::to_string(landingOffset) +
          ", its first use on this rank; every rank must pass the same offset: a rank that used another one "
          "before does not join this comparison)",
      "a landing offset");
  const std::string differ =
      tide::capi::landingDisagreement(group->index, landingOffset, comm->fabric.endpoint->rank(), everyRanks);
  if (!differ.empty()) {
    comm->outOfStep = differ;
    tide::capi::setLastError(tideInvalidArgument, "landings_differ", "tideAllGather: " + differ);
    return tideInvalidArgument;
  }
  if (group->landings.add(landingOffset))
    std::fprintf(stderr, "[tide] group %zu has been gathered at %zu landing offsets: the ranks compare each new one "
                         "in a host-blocking exchange (a landing that stays put costs none)\n",
                 group->index, group->landings.size());
  return tideSuccess;
}

// With TIDE_CHECK_CALLS=1, every collective compares what it is (kind, group,
// landing, call number) across the ranks before it runs (call_agreement.hpp;
// where among the other comparisons: compareBeforeCall).
tideResult_t requireSameCall(tideComm_t comm, tide::capi::CallKind kind, const tideGroup* group,
                             int64_t landingOffset) {
  if (!comm->callChecks) return tideSuccess;
  if (comm->comm) comm->comm->refuseIfUnusable();
  const uint64_t number = comm->callsChecked++;
  const std::vector<uint64_t> mine = tide::capi::callWords(kind, group->index, number, landingOffset);
  const std::vector<uint64_t> everyRanks = exchangeOrMarkOutOfStep(
      comm, mine,
      "comparing collective " + std::to_string(number) + " across ranks (TIDE_CHECK_CALLS=1; every rank must set "
          "it and issue the same collectives in the same order)",
      "a call");
  const std::string differ = tide::capi::callDisagreement(mine, comm->fabric.endpoint->rank(), everyRanks);
  if (!differ.empty()) {
    comm->outOfStep = differ;
    const char* call = kind == tide::capi::CallKind::kAllGather ? "tideAllGather: " : "tideReduceScatter: ";
    tide::capi::setLastError(tideInvalidArgument, "calls_differ", call + differ);
    return tideInvalidArgument;
  }
  return tideSuccess;
}

// The comparisons before a collective, in an order every rank that issues
// the same calls meets alike. The groups' comparison comes first at the
// communicator's first collective (every rank makes it, and it tells ranks
// that set TIDE_CHECK_CALLS differently apart); later, the call's comes
// first: whether a rank compares the groups (a group new to it) or a landing
// (an offset new to it) depends on its own calls, so ranks whose calls differ
// would otherwise meet in different exchanges rather than be named in one.
tideResult_t compareBeforeCall(tideComm_t comm, tideGroup* group, tide::capi::CallKind kind, int64_t landingOffset) {
  if (!comm->outOfStep.empty())
    throw tide::fabric::FabricError(tide::fabric::FabricError::Kind::kUnusable,
                                    "communicator unusable: " + comm->outOfStep);
  const bool allGather = kind == tide::capi::CallKind::kAllGather;
  const char* call = allGather ? "tideAllGather" : "tideReduceScatter";
  const bool first = !comm->comm;
  if (first) {
    if (const tideResult_t r = requireSameGroups(comm, group, call); r != tideSuccess) return r;
    if (const tideResult_t r = requireScratchAboveEveryRanksUserMemory(comm, call); r != tideSuccess) return r;
  }
  if (const tideResult_t r = requireSameCall(comm, kind, group, landingOffset); r != tideSuccess) return r;
  if (!first) {
    if (const tideResult_t r = requireSameGroups(comm, group, call); r != tideSuccess) return r;
  }
  return allGather ? requireSameLanding(comm, group, landingOffset) : tideSuccess;
}

// The scratch the first collective made, or, before it, the one it will make where the
// arena can hold it (kept in `prospective`), else nullptr: that collective refuses the
// call, on every rank.
const tide::collectives::ScratchLayout* currentOrProspectiveScratch(
    const tideComm* comm, std::optional<tide::collectives::ScratchLayout>& prospective) {
  if (comm->comm) return &comm->comm->layout();
  try {
    prospective = comm->scratchLayout();
  } catch (const std::invalid_argument&) {
    return nullptr;
  }
  return &*prospective;
}

// Why tideAllGather refuses this rank's landing (Communicator::landingProblem), or "",
// against that scratch.
std::string landingProblem(const tideComm* comm, const tideGroup* group, int64_t landingOffset) {
  std::optional<tide::collectives::ScratchLayout> prospective;
  return tide::collectives::Communicator::landingProblem(comm->fabric.endpoint->arenaBytes(), group->plan.group,
                                                         landingOffset, currentOrProspectiveScratch(comm, prospective));
}

// Why tideAllGather refuses this rank's shard (Communicator::shardProblem), or "",
// against that scratch.
std::string shardProblem(const tideComm* comm, const tideGroup* group, const void* shard, int64_t landingOffset) {
  tide::fabric::Endpoint& ep = *comm->fabric.endpoint;
  std::optional<tide::collectives::ScratchLayout> prospective;
  return tide::collectives::Communicator::shardProblem(group->plan.group, shard, landingOffset, ep.arena(),
                                                       ep.arenaBytes(), currentOrProspectiveScratch(comm, prospective));
}

// Why tideReduceScatter refuses this rank's gradients or output
// (Communicator::reduceScatterBufferProblem), or "", against the same scratch.
std::string reduceScatterBufferProblem(const tideComm* comm, const tideGroup* group,
                                       const std::vector<const void*>& grads, const float* out) {
  tide::fabric::Endpoint& ep = *comm->fabric.endpoint;
  std::optional<tide::collectives::ScratchLayout> prospective;
  return tide::collectives::Communicator::reduceScatterBufferProblem(
      group->plan.group, grads, out, ep.arena(), ep.arenaBytes(), currentOrProspectiveScratch(comm, prospective));
}

tideResult_t initWith(tideComm_t* out, tide::capi::FabricHandle handle,
                      const tide::collectives::IssueOptions& issue, bool callChecks) {
  auto c = std::make_shared<tideComm>();
  c->fabric = std::move(handle);
  c->issue = issue;
  c->callChecks = callChecks;
  *out = liveComms().add(std::move(c));
  return tideSuccess;
}

// Longest wait deadline accepted (about 11.6 days): a deadline must stay a
// finite count of nanoseconds past now.
constexpr double kMaxTimeoutSeconds = 1e6;
// Largest arena accepted (1 PiB): its page and window roundings must not overflow.
constexpr int64_t kMaxArenaBytes = int64_t{1} << 50;

// Why `cfg` cannot make a communicator, or "" (the topology itself is checked by Topology::make).
std::string configProblem(const tideCommConfig_t* cfg) {
  if (!cfg) return "null config";
  if (cfg->nodes <= 0 || cfg->gpusPerNode <= 0) return "nodes and gpusPerNode must be positive";
  // Said here, before the bootstrap waits for the peers, not at the first collective.
  if (cfg->nodes > tide::collectives::ids::kMaxNodes)
    return "nodes " + std::to_string(cfg->nodes) + " above " + std::to_string(tide::collectives::ids::kMaxNodes) +
           ", the most a communicator's signal counters cover";
  if (cfg->rank < 0 || int64_t{cfg->rank} >= int64_t{cfg->nodes} * cfg->gpusPerNode)
    return "rank " + std::to_string(cfg->rank) + " outside 0.." +
           std::to_string(int64_t{cfg->nodes} * cfg->gpusPerNode - 1);
  if (cfg->arenaBytes <= 0 || cfg->arenaBytes > kMaxArenaBytes)
    return "arenaBytes " + std::to_string(cfg->arenaBytes) + " outside 1.." + std::to_string(kMaxArenaBytes);
  if (!std::isfinite(cfg->timeoutSeconds) || cfg->timeoutSeconds < 0 || cfg->timeoutSeconds > kMaxTimeoutSeconds)
    return "timeoutSeconds " + tide::fabric::secondsText(cfg->timeoutSeconds) + " outside 0 (the default).." +
           tide::fabric::secondsText(kMaxTimeoutSeconds);
  return "";
}

// No CUDA fabric in this build: `call` says so.
tideResult_t noCudaFabric(const char* call) {
  tide::capi::setLastError(tideUnavailable, "no_cuda", std::string(call) + ": this build has no CUDA fabric");
  return tideUnavailable;
}

// The steps every tideCommInit* shares: the arguments (`source`: the unique id
// or the store directory), the CUDA fabric where it needs one, the topology,
// then the fabric `make` builds.
template <class Make>
tideResult_t initComm(const char* call, const tideCommConfig_t* cfg, const void* source, const char* sourceName,
                      tideComm_t* out, bool needsCuda, Make&& make) {
  return guarded(call, [&]() -> tideResult_t {
    if (!out) return invalid(call, "null comm (the handle to fill)");
    *out = nullptr;  // first: a refused call leaves no stale handle behind
    if (!source) return invalid(call, std::string("null ") + sourceName);
    if (const std::string problem = configProblem(cfg); !problem.empty()) return invalid(call, problem);
    if (needsCuda && !tide::capi::cudaFabricBuilt()) return noCudaFabric(call);
    tide::plan::Topology::make(cfg->nodes, cfg->gpusPerNode);
    const tide::collectives::IssueOptions issue = tideComm::issueFromEnv();
    const bool callChecks = tide::capi::callChecksFromEnv();
    if (callChecks && cfg->rank == 0)
      std::fprintf(stderr, "[tide] TIDE_CHECK_CALLS=1: every collective first compares itself across the ranks in a "
                           "host-blocking exchange (a debugging aid: it serializes the ranks' host threads)\n");
    return initWith(out, make(), issue, callChecks);
  });
}

}  // namespace

TIDE_API int tideHasCuda(void) { return tide::capi::cudaFabricBuilt() ? 1 : 0; }

TIDE_API tideResult_t tideGetUniqueId(tideUniqueId_t* id) {
  return guarded("tideGetUniqueId", [&]() -> tideResult_t {
    if (!id) return invalid("tideGetUniqueId", "null id");
    if (!tide::capi::cudaFabricBuilt()) return noCudaFabric("tideGetUniqueId");
    tide::capi::makeCudaUniqueId(id);
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideCommInitCuda(const tideCommConfig_t* cfg, const tideUniqueId_t* id, tideComm_t* out) {
  return initComm("tideCommInitCuda", cfg, id, "unique id", out, /*needsCuda=*/true, [&] {
    return tide::capi::makeCudaFabric(*cfg, *id, kQueues, tide::collectives::ids::kEnd);
  });
}

TIDE_API tideResult_t tideCommInitHost(const tideCommConfig_t* cfg, const char* storeDir, tideComm_t* out) {
  return initComm("tideCommInitHost", cfg, storeDir, "storeDir", out, /*needsCuda=*/false,
                  [&] { return tide::capi::makeHostFabric(*cfg, storeDir, kQueues); });
}

TIDE_API tideResult_t tideCommInitCudaIpc(const tideCommConfig_t* cfg, const char* storeDir, tideComm_t* out) {
  return initComm("tideCommInitCudaIpc", cfg, storeDir, "storeDir", out, /*needsCuda=*/true, [&] {
    return tide::capi::makeCudaIpcFabric(*cfg, storeDir, kQueues, tide::collectives::ids::kEnd);
  });
}

TIDE_API tideResult_t tideCommDestroy(tideComm_t comm) {
  return guarded("tideCommDestroy", [&]() -> tideResult_t {
    if (!comm) return tideSuccess;
    const std::shared_ptr<tideComm> ref = liveComms().remove(comm);
    if (!ref) return invalid("tideCommDestroy", "unknown or already destroyed communicator");
    std::exception_ptr drainFailure;
    {
      // After a call another thread has inside; calls still waiting for the
      // lock find `destroyed` and are refused, and the last of them frees the object.
      const std::lock_guard<std::mutex> lock(ref->mu);
      ref->destroyed = true;
      for (const auto& g : ref->groups) liveGroups().remove(g->handle);
      try {
        ref->fabric.endpoint->synchronizeAll();
      } catch (...) {
        // Torn down all the same, and returned: an enqueued collective that
        // failed here (a peer that never came) has no other call to report it.
        drainFailure = std::current_exception();
      }
      ref->comm.reset();
      ref->lastReduceScatter.reset();
      ref->fabric = tide::capi::FabricHandle{};  // the arena and the fabric's threads, now
    }
    if (drainFailure) std::rethrow_exception(drainFailure);
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideCommAlloc(tideComm_t comm, int64_t bytes, int64_t* offset, void** ptr) {
  return guarded("tideCommAlloc", [&]() -> tideResult_t {
    const LockedComm held(comm);
    if (const char* why = held.problem()) return invalid("tideCommAlloc", why);
    comm = held.object();
    if (!offset) return invalid("tideCommAlloc", "null offset");
    if (bytes <= 0) return invalid("tideCommAlloc", "bytes " + std::to_string(bytes) + " is not positive");
    const int64_t at = (comm->userTop + 4095) / 4096 * 4096;
    const int64_t limit = comm->comm ? comm->comm->layout().base : comm->fabric.endpoint->arenaBytes();
    if (bytes > limit - at)  // not at + bytes: a huge request must not wrap into range
      return invalid("tideCommAlloc", std::to_string(bytes) + " bytes do not fit in the arena (" +
                                          std::to_string(limit - at) + " left)");
    comm->userTop = at + bytes;
    *offset = at;
    if (ptr) *ptr = comm->fabric.endpoint->arena() + at;
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideScratchBytes(const tidePlanConfig_t* configs, int count, int64_t* bytes) {
  return guarded("tideScratchBytes", [&]() -> tideResult_t {
    if (!configs) return invalid("tideScratchBytes", "null configs");
    if (!bytes) return invalid("tideScratchBytes", "null bytes");
    if (count < 1) return invalid("tideScratchBytes", "count " + std::to_string(count) + " is below 1");
    std::vector<tide::plan::Plan> plans;
    for (int i = 0; i < count; ++i) {
      tide::capi::PlanInputs in = tide::capi::parsePlanConfig(&configs[i]);
      plans.push_back(tide::plan::makePlan(in.topo, in.specs, in.gradDtype, in.options));
    }
    std::vector<const tide::plan::Plan*> ptrs;
    for (const auto& p : plans) ptrs.push_back(&p);
    // The communicator aligns the scratch base down to 4 KiB below the arena's top.
    *bytes = tide::collectives::ScratchLayout::forPlans(ptrs).bytes + 4096;
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideGroupRegister(tideComm_t comm, const tidePlanConfig_t* config, tideGroup_t* out) {
  return guarded("tideGroupRegister", [&]() -> tideResult_t {
    const LockedComm held(comm);
    if (const char* why = held.problem()) return invalid("tideGroupRegister", why);
    comm = held.object();
    if (!out) return invalid("tideGroupRegister", "null out");
    *out = nullptr;
    if (!config) return invalid("tideGroupRegister", "null config");
    const tide::plan::Topology& t = comm->fabric.endpoint->topology();
    if (config->nodes != t.nodes || config->gpusPerNode != t.gpusPerNode)
      return invalid("tideGroupRegister", "the group's topology " + std::to_string(config->nodes) + " x " +
                                              std::to_string(config->gpusPerNode) + " differs from the communicator's " +
                                              std::to_string(t.nodes) + " x " + std::to_string(t.gpusPerNode));
    tide::capi::PlanInputs in = tide::capi::parsePlanConfig(config);
    auto g = std::make_unique<tideGroup>();
    g->owner = comm;
    g->plan = tide::plan::makePlan(in.topo, in.specs, in.gradDtype, in.options);
    g->json = tide::plan::planToJson(g->plan);
    g->digest = tide::capi::protocolDigest(g->plan);
    // One Level 2 landing per communicator (ScratchLayout::landing): say so here, not at every later call.
    // Rail-lane groups have no Level 2 landing and mix with either.
    if (t.nodes > 1 && !g->plan.rs.railLane) {
      for (const auto& other : comm->groups)
        if (!other->plan.rs.railLane && other->plan.rs.landing != g->plan.rs.landing)
          return invalid("tideGroupRegister",
                         std::string("the groups of one communicator share one Level 2 landing: this group's is ") +
                             tide::plan::landingName(g->plan.rs.landing) + ", the registered groups' " +
                             tide::plan::landingName(other->plan.rs.landing) + " (plan option landing)");
    }
    if (comm->comm && !comm->comm->layout().fits(g->plan)) {
      // Scratch is sized already: the new group must fit in it.
      return invalid("tideGroupRegister", "register every group before the first collective: this one needs "
                                            "more scratch than was sized");
    }
    g->index = comm->groups.size();
    g->handle = liveGroups().add(std::shared_ptr<tideGroup>(held.ref(), g.get()));  // (aliasing: it owns the communicator)
    *out = g->handle;
    comm->groups.push_back(std::move(g));
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideGroupGetJson(tideGroup_t group, const char** json) {
  return guarded("tideGroupGetJson", [&]() -> tideResult_t {
    const HeldGroup heldGroup(group);
    if (const char* why = heldGroup.problem()) return invalid("tideGroupGetJson", why);
    group = heldGroup.object();
    if (!json) return invalid("tideGroupGetJson", "null json");
    *json = group->json.c_str();
    return tideSuccess;
  });
}

namespace {
// Its plan may fit another communicator's scratch, but the caller mixed up handles.
constexpr const char* kForeignGroup = "the group was registered on another communicator";
}  // namespace

namespace {

// Queue 0 is the caller's stream for the length of one call: bound where the
// call binds it, released (fenced into the fabric's own queue 0) when the call
// returns or throws. tideCommSynchronize and tideCommDestroy then wait for the
// work of every call, whatever stream each was given, and never query a stream
// after its call returned (the caller may have destroyed it since).
class BoundCallerStream {
 public:
  BoundCallerStream(tideComm_t comm, void* stream) : comm_(comm) { comm_->fabric.bindStream(stream); }
  ~BoundCallerStream() { comm_->fabric.releaseStream(); }
  BoundCallerStream(const BoundCallerStream&) = delete;
  BoundCallerStream& operator=(const BoundCallerStream&) = delete;

 private:
  tideComm_t comm_;
};

}  // namespace

TIDE_API tideResult_t tideAllGather(tideComm_t comm, tideGroup_t group, const void* shard, int64_t landingOffset,
                                    void* stream) {
  return guarded("tideAllGather", [&]() -> tideResult_t {
    const LockedComm held(comm);  // shard NULL: in place
    if (const char* why = held.problem()) return invalid("tideAllGather", why);
    comm = held.object();
    const HeldGroup heldGroup(group);
    if (const char* why = heldGroup.problem()) return invalid("tideAllGather", why);
    group = heldGroup.object();
    if (group->owner != comm) return invalid("tideAllGather", kForeignGroup);
    // (Before the first collective makes the communicator: a refused call must not size the scratch.)
    if (const std::string why = landingProblem(comm, group, landingOffset); !why.empty())
      return invalid("tideAllGather", why);
    // The shard is this rank's own argument: refused before the ranks compare (or count) the call.
    if (const std::string why = shardProblem(comm, group, shard, landingOffset); !why.empty())
      return invalid("tideAllGather", why);
    const BoundCallerStream bound(comm, stream);  // first: it refuses a stream under graph capture before any exchange
    if (const tideResult_t r = compareBeforeCall(comm, group, tide::capi::CallKind::kAllGather, landingOffset);
        r != tideSuccess)
      return r;
    const tide::capi::CallTimer::Started started;
    tide::collectives::Communicator& c = comm->communicator();
    c.allGather(group->plan, shard, landingOffset);
    comm->allGatherTime.add(started);
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideReduceScatter(tideComm_t comm, tideGroup_t group, const void* const* grads, float* out,
                                        float alpha, int accumulate, void* stream) {
  return guarded("tideReduceScatter", [&]() -> tideResult_t {
    const LockedComm held(comm);
    if (const char* why = held.problem()) return invalid("tideReduceScatter", why);
    comm = held.object();
    // Any failure of this call, a refused argument (a null or unknown group) included, leaves no
    // read-done point to wait for (tideCommWaitInputsRead after it is refused, as tide.h says).
    comm->lastReduceScatter.reset();
    comm->reduceScatterFailed = true;
    const HeldGroup heldGroup(group);
    if (const char* why = heldGroup.problem()) return invalid("tideReduceScatter", why);
    group = heldGroup.object();
    if (!grads) return invalid("tideReduceScatter", "null grads");
    if (!out) return invalid("tideReduceScatter", "null out");
    if (group->owner != comm) return invalid("tideReduceScatter", kForeignGroup);
    // A NaN or infinite scale makes every output element NaN or infinite: a caller's mistake
    // (e.g. a divide factor whose reciprocal overflows fp32), said here rather than in the shards.
    if (!std::isfinite(alpha))
      return invalid("tideReduceScatter", "alpha " + std::to_string(alpha) + " is not finite");
    std::vector<const void*> g(grads, grads + group->plan.group.params.size());
    // The sum kernels load and store whole elements: a misaligned address faults on a GPU.
    if (reinterpret_cast<uintptr_t>(out) % alignof(float) != 0)
      return invalid("tideReduceScatter", "out is not 4-byte aligned");
    const auto gradAlign = static_cast<uintptr_t>(tide::plan::itemSize(group->plan.group.gradDtype));
    for (size_t p = 0; p < g.size(); ++p) {
      if (!g[p]) return invalid("tideReduceScatter", "null gradient pointer (parameter " + std::to_string(p) + ")");
      if (reinterpret_cast<uintptr_t>(g[p]) % gradAlign != 0)
        return invalid("tideReduceScatter", "gradient of parameter " + std::to_string(p) + " is not " +
                                                std::to_string(gradAlign) + "-byte aligned");
    }
    // The buffers are this rank's own arguments: refused before the ranks compare (or count) the call.
    if (const std::string why = reduceScatterBufferProblem(comm, group, g, out); !why.empty())
      return invalid("tideReduceScatter", why);
    // (After the checks: a refused call must not size the scratch.)
    const BoundCallerStream bound(comm, stream);  // first: it refuses a stream under graph capture before any exchange
    if (const tideResult_t r = compareBeforeCall(comm, group, tide::capi::CallKind::kReduceScatter, 0);
        r != tideSuccess)
      return r;
    const tide::capi::CallTimer::Started started;  // the call's own host time, not the exchange's wait
    tide::collectives::Communicator& c = comm->communicator();
    comm->lastReduceScatter = c.reduceScatter(group->plan, g, out, alpha, accumulate != 0);
    comm->reduceScatterFailed = false;
    comm->reduceScatterTime.add(started);
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideCommWaitInputsRead(tideComm_t comm, void* stream) {
  return guarded("tideCommWaitInputsRead", [&]() -> tideResult_t {
    const LockedComm held(comm);
    if (const char* why = held.problem()) return invalid("tideCommWaitInputsRead", why);
    comm = held.object();
    if (!comm->lastReduceScatter)
      return invalid("tideCommWaitInputsRead", comm->reduceScatterFailed
                                                   ? "the last reduce-scatter failed, so it has no read-done point"
                                                   : "no reduce-scatter was issued");
    // readDone is on the caller queue, after the Level 1 pushes and sums: the
    // gradients' last readers (the network phase reads only arena blocks).
    const uint64_t readDone = comm->lastReduceScatter->readDone;
    tide::fabric::Endpoint& ep = *comm->fabric.endpoint;
    if (ep.eventLive(tide::collectives::kCallerQueue, readDone)) {
      const BoundCallerStream bound(comm, stream);  // released once `stream` waits
      comm->fabric.callerWait(tide::collectives::kCallerQueue, readDone);
    } else {
      // So many events were recorded since the reduce-scatter that its
      // read-done event was recycled; its readers ran on the communicator's
      // own queues, so draining them all is a (late, rare) read-done point.
      ep.synchronizeAll();
    }
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideCommReservedBytes(tideComm_t comm, int64_t* bytes) {
  return guarded("tideCommReservedBytes", [&]() -> tideResult_t {
    const LockedComm held(comm);
    if (const char* why = held.problem()) return invalid("tideCommReservedBytes", why);
    comm = held.object();
    if (!bytes) return invalid("tideCommReservedBytes", "null bytes");
    *bytes = comm->fabric.reservedBytes;
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideCommGetRails(tideComm_t comm, const char** name) {
  return guarded("tideCommGetRails", [&]() -> tideResult_t {
    const LockedComm held(comm);
    if (const char* why = held.problem()) return invalid("tideCommGetRails", why);
    comm = held.object();
    if (!name) return invalid("tideCommGetRails", "null name");
    if (comm->rails.empty()) comm->rails = comm->fabric.endpoint->railsDescription();
    *name = comm->rails.c_str();
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideCommGetStats(tideComm_t comm, tideCommStats_t* stats) {
  return guarded("tideCommGetStats", [&]() -> tideResult_t {
    const LockedComm held(comm);
    if (const char* why = held.problem()) return invalid("tideCommGetStats", why);
    comm = held.object();
    if (!stats) return invalid("tideCommGetStats", "null stats");
    const tide::fabric::Stats s = comm->fabric.endpoint->stats();
    *stats = tideCommStats_t{.copyBytes = s.copyBytes,
                             .copyDescriptors = s.copyOps,
                             .railBytes = s.railBytes,
                             .railPuts = s.railPuts,
                             .sumElems = s.sumElems,
                             .landElems = s.landElems,
                             .copyGraphLaunches = s.copyGraphLaunches,
                             .copyGraphsBuilt = s.copyGraphsBuilt,
                             .allGatherCalls = comm->allGatherTime.calls,
                             .allGatherHostNs = comm->allGatherTime.ns,
                             .reduceScatterCalls = comm->reduceScatterTime.calls,
                             .reduceScatterHostNs = comm->reduceScatterTime.ns};
    return tideSuccess;
  });
}

TIDE_API tideResult_t tideCommSynchronize(tideComm_t comm) {
  return guarded("tideCommSynchronize", [&]() -> tideResult_t {
    const LockedComm held(comm);
    if (const char* why = held.problem()) return invalid("tideCommSynchronize", why);
    comm = held.object();
    comm->fabric.endpoint->synchronizeAll();
    return tideSuccess;
  });
}
