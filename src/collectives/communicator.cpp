#include "collectives/communicator.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "collectives/counter_ids.hpp"
#include "collectives/level1_sum.hpp"
#include "fabric/byte_range.hpp"

namespace tide::collectives {

using plan::BufferRef;
using plan::CopyDesc;
using plan::Region;

// A reduce-scatter pass records a sum event per outbox block (up to one per
// node) before its sends wait on the first of them: an endpoint's event
// window must outlast that at the most nodes, with the call's other events
// besides (issue_only_test issues both collectives at kMaxNodes).
static_assert(fabric::Endpoint::kEventWindow >= 2 * ids::kMaxNodes + 256,
              "the event window is too short for a reduce-scatter pass at kMaxNodes nodes");

// Every plan a communicator takes fits its scatter-group counters: one group
// per all-gather round but the last (at most log2 of kMaxNodes of them) and
// at most kMaxLastRoundGroups in the last.
static_assert(plan::kMaxLastRoundGroups + 10 <= ids::kMaxScatterGroups && (1 << 10) >= ids::kMaxNodes,
              "the scatter-group counters cannot hold every plan's groups");

Communicator::Communicator(fabric::Endpoint& ep, ScratchLayout layout, FaultConfig faults, IssueOptions issue)
    : ep_(ep), layout_(layout), faults_(faults), issue_(issue) {
  if (ep_.numQueues() < kQueuesNeeded)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "the collectives need " + std::to_string(kQueuesNeeded) + " queues");
  if (ep_.arenaBytes() < layout_.end())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "arena smaller than the scratch layout");
  // Staging chunks take their slot modulo this count: an empty layout (none made by forPlans) would divide by 0.
  if (layout_.stagingSlots < 1)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage,
                              "the scratch layout has no staging slot: make it with ScratchLayout::forPlans");
  const plan::Topology& t = ep_.topology();
  if (t.gpusPerNode > ids::kMaxLocal || t.nodes > ids::kMaxNodes)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "topology exceeds the counter table");
  // Across nodes the rails are copies to load/store-reachable peers (one-sided,
  // signals travel as writes) or two-sided transfers (NCCL send/recv: every
  // put needs the receiver's railRecv, and no signal crosses nodes).
  if (t.nodes > 1 && !ep_.railsByCopy() && !ep_.railsTwoSided())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage,
                              "the collectives across nodes need copy-engine or send/recv rails");
  if (layout_.inboxBytes() > 0) {
    ep_.annotateInbox(layout_.inbox, layout_.inboxBytes());
    if (layout_.landing == plan::Landing::kPush) ep_.annotateInbox(layout_.push, layout_.inboxBytes());
  }
}

void Communicator::checkPlan(const plan::Plan& plan) const {
  const plan::Topology& t = ep_.topology();
  if (plan.group.topo.nodes != t.nodes || plan.group.topo.gpusPerNode != t.gpusPerNode)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "plan made for another topology");
  if (t.nodes > 1 && !plan.rs.railLane && plan.rs.landing != layout_.landing)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage,
                              std::string("plan lands ") + plan::landingName(plan.rs.landing) +
                                  " but the communicator's groups land " + plan::landingName(layout_.landing));
  if (!layout_.fits(plan))
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "plan larger than the communicator's scratch");
  if (plan.ag.scatterGroups.size() > static_cast<size_t>(ids::kMaxScatterGroups) ||
      plan.ag.rounds.size() > static_cast<size_t>(ids::kMaxRounds))
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "plan exceeds the counter table");
}

std::byte* Communicator::addressOf(const BufferRef& ref, const void* shard, int64_t landingOffset,
                                   const std::vector<const void*>* grads, int stagingSlot) {
  std::byte* base = ref.rank == ep_.rank() ? ep_.arena() : ep_.peerArena(ref.rank);
  switch (ref.region) {
    case Region::kShard:
      return static_cast<std::byte*>(const_cast<void*>(shard)) + ref.offset;
    case Region::kLanding:
      return base + landingOffset + ref.offset;
    case Region::kStage:
      return base + layout_.stage + ref.offset;
    case Region::kGrad:
      return static_cast<std::byte*>(const_cast<void*>(grads->at(static_cast<size_t>(ref.index)))) + ref.offset;
    case Region::kStaging:
      return base + layout_.stagingSlot(stagingSlot) + ref.offset;
    default:
      throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "descriptor region not addressable");
  }
}

std::vector<fabric::CopyOp> Communicator::toCopyOps(const std::vector<CopyDesc>& descs, const void* shard,
                                                    int64_t landingOffset,
                                                    const std::vector<const void*>* grads, int stagingSlot) {
  std::vector<fabric::CopyOp> ops;
  ops.reserve(descs.size());
  for (const CopyDesc& d : descs) {
    fabric::CopyOp op;
    op.src = addressOf(d.src, shard, landingOffset, grads, stagingSlot);
    op.dst = addressOf(d.dst, shard, landingOffset, grads, stagingSlot);
    op.width = d.width;
    op.rows = d.rows;
    op.srcPitch = d.srcPitch;
    op.dstPitch = d.dstPitch;
    ops.push_back(op);
  }
  return ops;
}

// ------------------------------------------------------------------ TIDE-AG

void Communicator::refuseIfUnusable() {
  if (unusable_.empty()) {
    const std::string failed = ep_.failureOfIssuedWork();
    if (!failed.empty()) unusable_ = "work it issued failed: " + failed;
  }
  if (!unusable_.empty())
    throw fabric::FabricError(fabric::FabricError::Kind::kUnusable,
                              "communicator unusable: " + unusable_ +
                                  "; its peers count that call, so every later call would pair with the wrong one "
                                  "of theirs. Destroy the communicator on every rank and make a new one");
}

bool Communicator::landingInArena(int64_t arenaBytes, const plan::GroupLayout& g, int64_t landingOffset) {
  // Subtractions, not sums: an offset near INT64_MAX must not wrap into range.
  return landingOffset >= 0 && g.unshardedBytes() <= arenaBytes && landingOffset <= arenaBytes - g.unshardedBytes();
}

std::string Communicator::landingProblem(int64_t arenaBytes, const plan::GroupLayout& g, int64_t landingOffset,
                                         const ScratchLayout* layout) {
  if (!landingInArena(arenaBytes, g, landingOffset))
    return "landing offset " + std::to_string(landingOffset) + " for " + std::to_string(g.unshardedBytes()) +
           " bytes lies outside the arena of " + std::to_string(arenaBytes) + " bytes";
  if (layout != nullptr && layout->overlaps(landingOffset, g.unshardedBytes()))
    return "a landing of " + std::to_string(g.unshardedBytes()) + " bytes at arena offset " +
           std::to_string(landingOffset) + " does not lie in the arena's user area [0, " + std::to_string(layout->base) +
           "), below the collectives' scratch (tideCommAlloc gives landings there)";
  return "";
}

std::string Communicator::shardProblem(const plan::GroupLayout& g, const void* shard, int64_t landingOffset,
                                       const std::byte* arena, int64_t arenaBytes, const ScratchLayout* layout) {
  // In place (shard == nullptr): this rank's shard already sits in its own
  // landing rows (the caller cast or copied it there), so nothing is copied
  // into the own landing and the peers' copies read it from there. One node
  // only: across nodes the rails send the shard as one contiguous block.
  const bool inPlace = shard == nullptr;
  if (inPlace && g.topo.nodes > 1) return "an all-gather in place (no shard pointer) needs a single node";
  // A shard that shares no byte with the arena is the caller's own memory, wherever
  // it sits (one that starts where the arena ends, a neighbouring allocation, too).
  // One that shares some must lie inside it (the fabric would refuse it mid-issue).
  const auto* shardBytes = static_cast<const std::byte*>(shard);
  if (inPlace || !fabric::rangesMeet(shardBytes, g.shardBytes, arena, arenaBytes)) return "";
  if (!fabric::liesWithin(shardBytes, g.shardBytes, arena, arenaBytes))
    return reinterpret_cast<std::uintptr_t>(shardBytes) >= reinterpret_cast<std::uintptr_t>(arena)
               ? "the shard starts inside the arena and runs past its end"
               : "the shard starts before the arena and runs into it";
  // Peers write this call's landing while the shard is still being read for
  // them, and the collectives' scratch is rewritten by every call: a shard
  // in either would be sent half overwritten. (In place is shard == NULL.)
  const int64_t shardOffset = shardBytes - arena;
  const bool inLanding = fabric::offsetRangesMeet(shardOffset, g.shardBytes, landingOffset, g.unshardedBytes());
  const bool inScratch = layout != nullptr && layout->overlaps(shardOffset, g.shardBytes);
  if (!inLanding && !inScratch) return "";
  return std::string("the shard overlaps ") + (inLanding ? "this call's landing" : "the collectives' scratch") +
         " in the arena (arena bytes [" + std::to_string(shardOffset) + ", " +
         std::to_string(shardOffset + g.shardBytes) + ")): peers write there while it is read; pass NULL "
         "for a shard already in its own landing rows (one node), or keep it outside the landing";
}

namespace {

// Why a reduce-scatter buffer of `bytes` at `p` cannot serve, or "" (see
// reduceScatterBufferProblem): parameter `param`'s gradient, or the output where param < 0.
// Per call and parameter: no string is built unless there is a problem.
std::string bufferProblem(int param, const void* p, int64_t bytes, const std::byte* arena, int64_t arenaBytes,
                          const ScratchLayout* layout) {
  const auto* at = static_cast<const std::byte*>(p);
  if (!fabric::rangesMeet(at, bytes, arena, arenaBytes)) return "";  // the caller's own memory
  const bool within = fabric::liesWithin(at, bytes, arena, arenaBytes);
  const int64_t offset = at - arena;
  if (within && (layout == nullptr || !layout->overlaps(offset, bytes))) return "";
  const std::string what = param < 0 ? "out" : "the gradient of parameter " + std::to_string(param);
  if (!within)
    return what + (reinterpret_cast<std::uintptr_t>(at) >= reinterpret_cast<std::uintptr_t>(arena)
                       ? " starts inside the arena and runs past its end"
                       : " starts before the arena and runs into it");
  return what + " overlaps the collectives' scratch in the arena (arena bytes [" + std::to_string(offset) + ", " +
         std::to_string(offset + bytes) + ")), which the call itself rewrites: keep it in the arena's user area "
         "(tideCommAlloc) or outside the arena";
}

}  // namespace

std::string Communicator::reduceScatterBufferProblem(const plan::GroupLayout& g, const std::vector<const void*>& grads,
                                                     const float* out, const std::byte* arena, int64_t arenaBytes,
                                                     const ScratchLayout* layout) {
  const int64_t item = plan::itemSize(g.gradDtype);
  auto gradBytes = [&](size_t p) { return g.params[p].rows * g.params[p].rowElems * item; };
  for (size_t p = 0; p < grads.size() && p < g.params.size(); ++p) {
    std::string why = bufferProblem(static_cast<int>(p), grads[p], gradBytes(p), arena, arenaBytes, layout);
    if (!why.empty()) return why;
  }
  if (std::string why = bufferProblem(-1, out, g.outBytes(), arena, arenaBytes, layout); !why.empty()) return why;
  // No reduce-scatter in place: the sums write the output while the Level 1
  // pushes and rail sends still read the gradients (a probe with out = a
  // rank's gradient came out wrong in some calls, every call returning success).
  for (size_t p = 0; p < grads.size() && p < g.params.size(); ++p)
    if (fabric::rangesMeet(out, g.outBytes(), grads[p], gradBytes(p)))
      return "out overlaps the gradient of parameter " + std::to_string(p) +
             ": the call writes out while it still reads the gradients (no reduce-scatter in place); give out "
             "memory of its own";
  return "";
}

uint64_t Communicator::allGather(const plan::Plan& plan, const void* shard, int64_t landingOffset) {
  refuseIfUnusable();
  checkPlan(plan);
  const plan::GroupLayout& g = plan.group;
  if (const std::string why = landingProblem(ep_.arenaBytes(), g, landingOffset, &layout_); !why.empty())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, why);
  if (const std::string why = shardProblem(g, shard, landingOffset, ep_.arena(), ep_.arenaBytes(), &layout_);
      !why.empty())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, why);
  const uint64_t v = ++agCalls_;
  return issueOrMarkUnusable("all_gather#" + std::to_string(v),
                             [&] { return issueAllGather(plan, shard, landingOffset, v); });
}

uint64_t Communicator::issueAllGather(const plan::Plan& plan, const void* shard, int64_t landingOffset, uint64_t v) {
  const plan::Topology& t = plan.group.topo;
  const int node = t.nodeOf(ep_.rank());
  const int local = t.localOf(ep_.rank());
  const uint64_t entry = ep_.record(kCallerQueue);
  if (plan.ag.railLane) return agRailLane(plan, shard, landingOffset, v, entry);

  // Condition 1, landing free to overwrite: published to every other local
  // rank (this rank's own queues wait for the entry event, which says as much),
  // in call order whatever stream each call came on (kSignalQueue).
  if (t.gpusPerNode > 1) {
    ep_.waitEvent(kSignalQueue, kCallerQueue, entry);
    for (int i = 0; i < t.gpusPerNode; ++i)
      if (i != local) ep_.signal(kSignalQueue, t.rankOf(node, i), ids::kAgReady + local, v);
  }

  const std::vector<uint64_t> arrived = agRailRounds(plan, shard, v, entry);
  const uint64_t copiesDone = agLocalCopies(plan, shard, landingOffset, v, entry, arrived);

  // Condition 2 on this rank's landing: every local rank's writes into it
  // (this rank's own through its copy queue's event: a wait on an event costs
  // the host a fraction of a counter wait with its watchdog).
  if (!injected(Fault::kSkipCompletionFence)) {
    for (int i = 0; i < t.gpusPerNode; ++i)
      if (i != local) ep_.wait(kCallerQueue, ids::kAgDone + i, v, t.rankOf(node, i), "landing writes");
    ep_.waitEvent(kCallerQueue, kCopyQueue, copiesDone);
  } else {
    noteFaultFired();
  }
  return ep_.record(kCallerQueue);
}

// The rails' share of TIDE-AG (across nodes only): Bruck rounds that bring
// every other node's shards into this rank's stage. Returns, per scatter
// group, the net-queue event after which its stage slots have arrived.
std::vector<uint64_t> Communicator::agRailRounds(const plan::Plan& plan, const void* shard, uint64_t v,
                                                 uint64_t entry) {
  const plan::Topology& t = plan.group.topo;
  const int me = ep_.rank();
  const int64_t s = plan.group.shardBytes;
  // Rails: Bruck rounds with lead-based pacing and per-round stage credits.
  // Two-sided rails carry no signal across nodes; a round's bytes land when
  // the receiver posts its receives, which it does in round order (the lead)
  // and after its copies consumed the previous call's stage (the credit).
  const bool twoSided = ep_.railsTwoSided();
  std::vector<uint64_t> arrived(plan.ag.scatterGroups.size(), 0);
  if (t.nodes > 1) {
    ep_.waitEvent(kNetQueue, kCallerQueue, entry);
    // A counter, not an event: any number of calls may come between two all-gathers.
    if (twoSided && v > 1)
      ep_.wait(kNetQueue, ids::kAgStageFree, v - 1, me, "the previous all-gather's stage consumed");
    // Rails that read only from the arena send the shard from a copy in the
    // scratch, made on this queue (the previous call's puts from it come first).
    const std::byte* shardSource = static_cast<const std::byte*>(shard);
    if (ep_.railSourcesInArena() && !fabric::liesWithin(shardSource, s, ep_.arena(), ep_.arenaBytes())) {
      std::byte* copy = ep_.arena() + layout_.railSource;
      ep_.copy(kNetQueue, {fabric::CopyOp{copy, shard, s, 1, 0, 0}});
      shardSource = copy;
    }
    for (const plan::AgRound& r : plan.ag.rounds) {
      const int target = t.railPeer(me, -r.firstSlot);
      const int source = t.railPeer(me, r.firstSlot);
      if (!twoSided && v > 1) ep_.wait(kNetQueue, ids::kAgCredit + r.index, v - 1, target, "receive-stage credit");
      if (!twoSided && r.index >= 1) ep_.wait(kNetQueue, ids::kAgLead + r.index, v, target, "round lead");
      // The round's bytes x in [0, slots*S): slot 0 is the shard, the rest the stage.
      std::vector<std::pair<int64_t, int>> marks;  // (byte end, signal id)
      marks.push_back({r.headBytes, ids::kAgHead + r.index});
      for (size_t gi = 0; gi < plan.ag.scatterGroups.size(); ++gi) {
        const plan::AgScatterGroup& grp = plan.ag.scatterGroups[gi];
        if (grp.round == r.index)
          marks.push_back({int64_t{grp.firstSlot + grp.slots - r.firstSlot} * s,
                           ids::kAgGroup + static_cast<int>(gi)});
      }
      std::vector<int64_t> cuts = {0, r.bytes};
      for (auto& m : marks) cuts.push_back(m.first);
      if (s < r.bytes) cuts.push_back(s);
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      const int64_t stageDst = layout_.stage + int64_t{r.firstSlot - 1} * s;
      std::vector<std::pair<int64_t, int64_t>> chunks;  // [lo, hi) of the round's bytes, cut at the marks
      for (size_t k = 0; k + 1 < cuts.size(); ++k)
        if (cuts[k] < cuts[k + 1] && cuts[k] < r.bytes) chunks.push_back({cuts[k], cuts[k + 1]});
      for (const auto& [lo, hi] : chunks) {
        const std::byte* src = lo < s ? shardSource + lo : ep_.arena() + layout_.stage + (lo - s);
        ep_.railPut(kNetQueue, target, stageDst + lo, src, hi - lo, -1, 0);
        if (!twoSided)
          for (auto& m : marks)
            if (m.first == hi) ep_.signal(kNetQueue, target, m.second, v);
      }
      if (twoSided) {
        // The same chunks from the source, in the same group as the sends; the
        // marks are this rank's own, set once the group has landed.
        for (const auto& [lo, hi] : chunks) ep_.railRecv(kNetQueue, source, stageDst + lo, hi - lo, -1, 0);
        for (const auto& [lo, hi] : chunks)
          for (auto& m : marks)
            if (m.first == hi) ep_.signal(kNetQueue, me, m.second, v);
      }
      // Receive this round; confirm it to the sender of the next round.
      ep_.wait(kNetQueue, ids::kAgHead + r.index, v, source, "round head");
      if (!twoSided && static_cast<size_t>(r.index + 1) < plan.ag.rounds.size())
        ep_.signal(kNetQueue, t.railPeer(me, 2 * r.firstSlot), ids::kAgLead + r.index + 1, v);
      for (size_t gi = 0; gi < plan.ag.scatterGroups.size(); ++gi) {
        if (plan.ag.scatterGroups[gi].round != r.index) continue;
        ep_.wait(kNetQueue, ids::kAgGroup + static_cast<int>(gi), v, source, "stage slots");
        arrived[gi] = ep_.record(kNetQueue);
      }
    }
  }
  return arrived;
}

void Communicator::shiftOneByteUnderFault(const plan::GroupLayout& g, std::vector<CopyDesc>& localDescs) {
  if (!injected(Fault::kWrongLandingOffset) || localDescs.empty()) return;
  // One byte off, into a neighbour's range (a doubled landing) but never
  // outside the landing: at its end, one byte back instead of on, which
  // would write past the arena.
  noteFaultFired();
  CopyDesc& d = localDescs.front();
  const int64_t end = d.dst.offset + (d.rows - 1) * d.dstPitch + d.width;
  if (end < g.unshardedBytes()) d.dst.offset += 1;
  else if (d.dst.offset > 0) d.dst.offset -= 1;
  else d.width -= 1;  // the whole landing: one byte short
}

// The copy engines' share of TIDE-AG: this rank's shard into every local
// landing (its own, unless in place, and the node-local peers'), then the
// stage slots as they arrive; then the done signals and the stage credits.
uint64_t Communicator::agLocalCopies(const plan::Plan& plan, const void* shard, int64_t landingOffset, uint64_t v,
                                     uint64_t entry, const std::vector<uint64_t>& arrived) {
  const plan::GroupLayout& g = plan.group;
  const plan::Topology& t = g.topo;
  const int me = ep_.rank();
  const int node = t.nodeOf(me);
  const int local = t.localOf(me);
  const bool inPlace = shard == nullptr;
  const bool twoSided = ep_.railsTwoSided();
  // Copy engines: own shard into every local landing, then the stage slots.
  ep_.waitEvent(kCopyQueue, kCallerQueue, entry);
  if (injected(Fault::kSkipCompletionFence)) ep_.delay(kCopyQueue, kFaultRaceSeconds);
  for (int i = 0; i < t.gpusPerNode; ++i)
    if (i != local) ep_.wait(kCopyQueue, ids::kAgReady + i, v, t.rankOf(node, i), "landing free");
  std::vector<CopyDesc> localDescs = plan::agLocalDescriptors(g, me, inPlace);
  shiftOneByteUnderFault(g, localDescs);
  // The own landing is filled on its own queue (another copy engine) while
  // this one writes the peers'; the done signals wait for both.
  std::vector<CopyDesc> ownDescs, peerDescs;
  for (const CopyDesc& d : localDescs) (d.dst.rank == me ? ownDescs : peerDescs).push_back(d);
  // In place there is nothing to copy there, and its queue stays out of the call.
  uint64_t ownDone = 0;
  if (!ownDescs.empty()) {
    ep_.waitEvent(kOwnCopyQueue, kCallerQueue, entry);
    if (injected(Fault::kSkipCompletionFence)) ep_.delay(kOwnCopyQueue, kFaultRaceSeconds);
    ep_.copy(kOwnCopyQueue, toCopyOps(ownDescs, shard, landingOffset, nullptr, 0));
    ownDone = ep_.record(kOwnCopyQueue);
  }
  // On one node the rail queue is idle during TIDE-AG: when the peer writes
  // are small on average (groups of many small parameters pay a copy
  // engine's fixed cost once per parameter and peer), they are split over it
  // and the copy queue (two copy engines), balanced by bytes, so that one
  // engine's per-copy cost overlaps the other's transfers. Large copies stay
  // on one engine, where they already run at the link's rate.
  constexpr int64_t kSplitBelowAvgBytes = int64_t{4} << 20;
  int64_t peerBytes = 0;
  for (const CopyDesc& d : peerDescs) peerBytes += d.width * d.rows;
  const bool split = t.nodes == 1 && peerDescs.size() > 1 &&
                     peerBytes < kSplitBelowAvgBytes * static_cast<int64_t>(peerDescs.size());
  uint64_t splitDone = 0;
  if (split) {
    std::vector<CopyDesc> mine, other;
    int64_t mineBytes = 0, otherBytes = 0;
    for (const CopyDesc& d : peerDescs) {
      const int64_t b = d.width * d.rows;
      if (mineBytes <= otherBytes) {
        mine.push_back(d);
        mineBytes += b;
      } else {
        other.push_back(d);
        otherBytes += b;
      }
    }
    peerDescs.swap(mine);
    // After the copy queue's "landing free" waits (and, through them, the
    // call's entry): nothing else is on the copy queue yet in this call.
    ep_.waitEvent(kNetQueue, kCopyQueue, ep_.record(kCopyQueue));
    ep_.copy(kNetQueue, toCopyOps(other, shard, landingOffset, nullptr, 0));
    splitDone = ep_.record(kNetQueue);
  }
  if (!peerDescs.empty()) ep_.copy(kCopyQueue, toCopyOps(peerDescs, shard, landingOffset, nullptr, 0));
  for (size_t gi = 0; gi < plan.ag.scatterGroups.size(); ++gi) {
    ep_.waitEvent(kCopyQueue, kNetQueue, arrived[gi]);
    ep_.copy(kCopyQueue, toCopyOps(plan::agScatterDescriptors(g, plan.ag, me, plan.ag.scatterGroups[gi]),
                                   shard, landingOffset, nullptr, 0));
  }
  // Condition 2 (parameters ready) is the peers' done signals; condition 3
  // (stage reusable) is the credit to each round's sender.
  if (ownDone > 0) ep_.waitEvent(kCopyQueue, kOwnCopyQueue, ownDone);
  if (split) ep_.waitEvent(kCopyQueue, kNetQueue, splitDone);
  for (int i = 0; i < t.gpusPerNode; ++i)
    if (i != local) ep_.signal(kCopyQueue, t.rankOf(node, i), ids::kAgDone + local, v);
  const uint64_t done = ep_.record(kCopyQueue);
  if (!injected(Fault::kDropCredit)) {
    if (twoSided)
      ep_.signal(kCopyQueue, me, ids::kAgStageFree, v);  // the next call's receives wait for it
    else
      for (const plan::AgRound& r : plan.ag.rounds)
        ep_.signal(kCopyQueue, t.railPeer(me, r.firstSlot), ids::kAgCredit + r.index, v);
  } else if (!plan.ag.rounds.empty()) {
    noteFaultFired();  // on one node there are no rail rounds, so no credit to drop
  }
  return done;
}

// ------------------------------------------------------------------ TIDE-RS

ReduceScatterEvents Communicator::reduceScatter(const plan::Plan& plan, const std::vector<const void*>& grads,
                                                float* out, float alpha, bool accumulate) {
  refuseIfUnusable();
  checkPlan(plan);
  if (grads.size() != plan.group.params.size())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "one gradient pointer per parameter");
  if (const std::string why =
          reduceScatterBufferProblem(plan.group, grads, out, ep_.arena(), ep_.arenaBytes(), &layout_);
      !why.empty())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, why);
  const uint64_t call = ++rsCalls_;
  return issueOrMarkUnusable("reduce_scatter#" + std::to_string(call),
                             [&] { return issueReduceScatter(plan, grads, out, alpha, accumulate); });
}

ReduceScatterEvents Communicator::issueReduceScatter(const plan::Plan& plan, const std::vector<const void*>& grads,
                                                     float* out, float alpha, bool accumulate) {
  const uint64_t entry = ep_.record(kCallerQueue);
  ReduceScatterEvents ev;
  if (injected(Fault::kReleaseGradsEarly)) {
    noteFaultFired();
    ev.readDone = entry;  // claims the gradients are free before they are read
    ep_.delay(kCopyQueue, kFaultRaceSeconds);
    ep_.delay(kSumQueue, kFaultRaceSeconds);
    if (plan.rs.railLane) {  // the lane reads the gradients on these two
      ep_.delay(kNetQueue, kFaultRaceSeconds);
      ep_.delay(rsLandQueue(), kFaultRaceSeconds);
    }
  }
  if (plan.rs.railLane) {
    const GradientReads reads = rsRailLane(plan, grads, out, alpha, accumulate, entry);
    if (reads.net > 0) ep_.waitEvent(kCallerQueue, kNetQueue, reads.net);
    if (reads.land > 0) ep_.waitEvent(kCallerQueue, rsLandQueue(), reads.land);
  } else if (plan.group.topo.nodes == 1) {
    rsSingleNode(plan, grads, out, alpha, accumulate, entry);
  } else {
    rsMultiNode(plan, grads, out, alpha, accumulate, entry);
  }
  const uint64_t copyEnd = ep_.record(kCopyQueue);
  const uint64_t sumEnd = ep_.record(kSumQueue);
  ep_.waitEvent(kCallerQueue, kCopyQueue, copyEnd);
  ep_.waitEvent(kCallerQueue, kSumQueue, sumEnd);
  const bool honest = !injected(Fault::kReleaseGradsEarly);
  if (honest) ev.readDone = ep_.record(kCallerQueue);
  if (plan.group.topo.nodes > 1) {
    ep_.waitEvent(kCallerQueue, kNetQueue, ep_.record(kNetQueue));
    if (rsLandQueue() != kNetQueue) ep_.waitEvent(kCallerQueue, rsLandQueue(), ep_.record(rsLandQueue()));
    ev.done = ep_.record(kCallerQueue);
  } else {
    // One node: nothing follows the read-done point, so the call is done there
    // too (one event record less; each costs the issuing thread 2-5 us).
    ev.done = honest ? ev.readDone : ep_.record(kCallerQueue);
  }
  return ev;
}

// Level 1 staging of one destination block (sequence number `seq`, counted
// over all calls): wait until every owner has consumed what last used the
// staging slot, push my slices into the owners' slot, tell them; then the sum
// queue waits until every sender's slices are in my slot.
void Communicator::stageChunk(const plan::Plan& plan, const std::vector<const void*>& grads, uint64_t seq,
                              int pass, int block) {
  const plan::Topology& t = plan.group.topo;
  const int me = ep_.rank();
  const int node = t.nodeOf(me);
  const int local = t.localOf(me);
  const int l = t.gpusPerNode;
  if (l == 1) return;
  const uint64_t slots = static_cast<uint64_t>(layout_.stagingSlots);  // see stagingSlotOf
  const int slot = stagingSlotOf(seq);
  for (int i = 0; i < l; ++i)
    if (i != local && seq >= slots)
      ep_.wait(kCopyQueue, ids::kRsFree + i, seq - slots + 1, t.rankOf(node, i), "staging slot free");
  std::vector<CopyDesc> pushes = plan::level1Pushes(plan.group, plan.rs, me, pass, block);
  ep_.copy(kCopyQueue, toCopyOps(pushes, nullptr, 0, &grads, slot));
  if (injected(Fault::kCorruptStagedChunk) && !pushes.empty()) {
    noteFaultFired();
    const CopyDesc& d = pushes.front();
    ep_.zero(kCopyQueue, addressOf(d.dst, nullptr, 0, &grads, slot), d.width);
  }
  for (int i = 0; i < l; ++i)
    if (i != local) ep_.signal(kCopyQueue, t.rankOf(node, i), ids::kRsArrive + local, seq + 1);
  for (int u = 0; u < l; ++u)
    if (u != local) ep_.wait(kSumQueue, ids::kRsArrive + u, seq + 1, t.rankOf(node, u), "staged chunk");
}

void Communicator::rsSingleNode(const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
                                float alpha, bool accumulate, uint64_t entry) {
  const plan::GroupLayout& g = plan.group;
  const plan::RsPlan& rs = plan.rs;
  const plan::Topology& t = g.topo;
  const int me = ep_.rank();
  const int local = t.localOf(me);
  const int l = t.gpusPerNode;
  ep_.waitEvent(kCopyQueue, kCallerQueue, entry);
  ep_.waitEvent(kSumQueue, kCallerQueue, entry);
  int chunk = 0;
  for (int q = 0; q < rs.passes; ++q) {
    for (int s = 0; s < l; ++s, ++chunk) {
      const uint64_t seq = rsChunks_ + static_cast<uint64_t>(chunk);  // 0-based
      const int slot = stagingSlotOf(seq);
      // Push my slices of every other rank's rows into its staging slot; then
      // sum my own rows of this chunk straight into the output.
      stageChunk(plan, grads, seq, q, s);
      const plan::ElemRange range = plan::subSliceRange(g, rs, q, s);
      if (range.size() > 0) {
        fabric::SumOp op = level1Sum(g, rs, me, me, 1, range, ep_.arena() + layout_.stagingSlot(slot), grads,
                                     out + range.begin, 0);
        op.ctas = rs.sumCtas;
        op.alpha = alpha;
        op.accumulate = accumulate;
        ep_.sum(kSumQueue, op);
      }
      for (int u = 0; u < l; ++u)
        if (u != local) ep_.signal(kSumQueue, t.rankOf(0, u), ids::kRsFree + local, seq + 1);
    }
  }
  rsChunks_ += static_cast<uint64_t>(chunk);
}

}  // namespace tide::collectives
