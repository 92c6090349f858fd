// TIDE-AG on App. F's rail lane: groups with one GPU per node (L = 1) across
// nodes, AgPlan::railLane. Every rank's rows sit at the same landing offsets
// on every rank (Landing(p, r) = o_p N + r s_p), so the Bruck rounds need no
// receive stage: in round d node n puts the rows of ranks n .. n + c_d - 1
// (mod M), which its landing holds after rounds 0 .. d-1, straight into the
// same offsets of node n - 2^d's landing. No stage, no scatter, no rail-source
// copy (the landing is in the arena, which RMA rails read from).
//
// Order, per call v and round d:
//  - a target's landing is free for call v once its caller reached the call
//    (kAgLaneFree + d := v, from the target's signal queue after its entry);
//  - round d's puts read the own rows (the own copy) and rounds 0 .. d-1's
//    arrivals, which the net queue waited for before it;
//  - the last put of the round sets kAgLaneRows + d := v on the target.
// Two-sided rails carry no signal across nodes: a round's sends and the
// receives from node n + 2^d go out as one group, after which this rank sets
// its own kAgLaneRows + d. The call is done when the own copy, every round's
// arrival, and this rank's own sends (which read its landing) are.
#include <algorithm>

#include "collectives/communicator.hpp"
#include "collectives/counter_ids.hpp"

namespace tide::collectives {

namespace {

// Byte runs [offset, offset + bytes) of the landing that hold the rows of
// ranks first .. first + count - 1 (mod ranks), for every parameter: one run
// per parameter, two where the ranks wrap past the last.
std::vector<std::pair<int64_t, int64_t>> rowsOfRanks(const plan::GroupLayout& g, int first, int count) {
  const int n = g.topo.ranks();
  std::vector<std::pair<int, int>> spans;  // [rank, rank + k)
  if (first + count <= n) {
    spans.push_back({first, count});
  } else {
    spans.push_back({first, n - first});
    spans.push_back({0, first + count - n});
  }
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (size_t p = 0; p < g.params.size(); ++p) {
    if (g.params[p].shardBytes == 0) continue;
    for (auto [rank, k] : spans) runs.push_back({g.landing(static_cast<int>(p), rank), k * g.params[p].shardBytes});
  }
  return runs;
}

}  // namespace

uint64_t Communicator::agRailLane(const plan::Plan& plan, const void* shard, int64_t landingOffset, uint64_t v,
                                  uint64_t entry) {
  const plan::GroupLayout& g = plan.group;
  const plan::Topology& t = g.topo;
  const int me = ep_.rank();
  const int node = t.nodeOf(me);
  const bool twoSided = ep_.railsTwoSided();

  // The own shard into the own landing rows.
  ep_.waitEvent(kOwnCopyQueue, kCallerQueue, entry);
  if (injected(Fault::kSkipCompletionFence)) ep_.delay(kOwnCopyQueue, kFaultRaceSeconds);
  std::vector<plan::CopyDesc> own = plan::agLocalDescriptors(g, me, /*inPlace=*/false);
  shiftOneByteUnderFault(g, own);
  ep_.copy(kOwnCopyQueue, toCopyOps(own, shard, landingOffset, nullptr, 0));
  const uint64_t ownDone = ep_.record(kOwnCopyQueue);

  // This landing is free for call v from the caller's entry on: tell each
  // round's sender, in call order whatever stream the call came on.
  if (!twoSided) {
    ep_.waitEvent(kSignalQueue, kCallerQueue, entry);
    for (const plan::AgRound& r : plan.ag.rounds) {
      if (injected(Fault::kDropCredit)) {
        noteFaultFired();
        continue;
      }
      ep_.signal(kSignalQueue, t.railPeer(me, r.firstSlot), ids::kAgLaneFree + r.index, v);
    }
  }

  std::byte* landing = ep_.arena() + landingOffset;
  ep_.waitEvent(kNetQueue, kOwnCopyQueue, ownDone);
  for (const plan::AgRound& r : plan.ag.rounds) {
    const int target = t.railPeer(me, -r.firstSlot);
    const int source = t.railPeer(me, r.firstSlot);
    // What this round sends: ranks node .. node + c_d - 1; what it receives:
    // the source's, ranks node + 2^d .. node + 2^d + c_d - 1.
    const auto sends = rowsOfRanks(g, node, r.slots);
    const auto receives = rowsOfRanks(g, (node + r.firstSlot) % t.nodes, r.slots);
    if (!twoSided) ep_.wait(kNetQueue, ids::kAgLaneFree + r.index, v, target, "landing free (rail lane)");
    // One submission per round where the fabric can (RailPiece lists); a
    // group of parameters without elements sends the signal alone.
    std::vector<fabric::Endpoint::RailPiece> pieces;
    for (const auto& [offset, bytes] : sends) pieces.push_back({landingOffset + offset, landing + offset, bytes});
    if (pieces.empty()) pieces.push_back({landingOffset, landing, 0});
    ep_.railPuts(kNetQueue, target, pieces, twoSided ? -1 : ids::kAgLaneRows + r.index, v);
    if (twoSided) {
      if (receives.empty()) ep_.railRecv(kNetQueue, source, landingOffset, 0, -1, 0);
      for (const auto& [offset, bytes] : receives) ep_.railRecv(kNetQueue, source, landingOffset + offset, bytes, -1, 0);
      ep_.signal(kNetQueue, me, ids::kAgLaneRows + r.index, v);
    }
    // The next round forwards these rows.
    ep_.wait(kNetQueue, ids::kAgLaneRows + r.index, v, source, "round rows (rail lane)");
  }
  const uint64_t netDone = ep_.record(kNetQueue);
  // A staged all-gather's rounds wait for the stage credit of the call before
  // theirs (kAgCredit, kAgStageFree), whichever group that was: this call
  // never used the stage, so it passes the credit on in copy-queue order,
  // behind the last staged call's scatters. Only where such a group exists:
  // a signal nobody waits for would hide its own loss.
  if (!layout_.stagedAllGatherAcrossNodes) {
    // nothing to pass on
  } else if (twoSided) {
    ep_.signal(kCopyQueue, me, ids::kAgStageFree, v);
  } else {
    for (const plan::AgRound& r : plan.ag.rounds)
      ep_.signal(kCopyQueue, t.railPeer(me, r.firstSlot), ids::kAgCredit + r.index, v);
  }
  if (!injected(Fault::kSkipCompletionFence)) {
    ep_.waitEvent(kCallerQueue, kNetQueue, netDone);
    ep_.waitEvent(kCallerQueue, kOwnCopyQueue, ownDone);
  } else {
    noteFaultFired();
  }
  return ep_.record(kCallerQueue);
}

}  // namespace tide::collectives
