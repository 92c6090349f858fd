// TIDE-AG schedule (Sec. 3): direct placement on one node, Bruck recursive
// doubling over rails across nodes, and the coalesced scatter of stage slots.
#include <algorithm>
#include <string>

#include "tide/plan.hpp"

namespace tide::plan {
namespace {

// A run of consecutive stage slots whose source nodes are consecutive too
// (split where the node index wraps past M - 1).
struct SlotRun {
  int first = 0;
  int count = 0;
};

std::vector<SlotRun> slotRuns(int node, int nodes, const AgScatterGroup& group) {
  std::vector<SlotRun> runs;
  const int wrap = nodes - node;  // slot index whose source node is 0
  const int end = group.firstSlot + group.slots;
  if (group.firstSlot < wrap) runs.push_back({group.firstSlot, std::min(end, wrap) - group.firstSlot});
  if (end > wrap) {
    int first = std::max(group.firstSlot, wrap);
    runs.push_back({first, end - first});
  }
  return runs;
}

}  // namespace

AgPlan makeAgPlan(const GroupLayout& g, const AgOptions& opt) {
  // headBytes 0 would put the head mark at byte 0, where no chunk ends: its
  // signal would never go out and the round would wait for it forever.
  if (opt.minStridedRun < 1 || opt.lastRoundGroups < 1 || opt.headBytes < 1)
    throw PlanError(Reason::kBadOption, "all-gather options out of range (minStridedRun, lastRoundGroups and "
                                        "headBytes must be at least 1)");
  if (opt.lastRoundGroups > kMaxLastRoundGroups)
    throw PlanError(Reason::kBadOption, "all-gather lastRoundGroups must be at most " +
                                            std::to_string(kMaxLastRoundGroups) + ", got " +
                                            std::to_string(opt.lastRoundGroups));
  AgPlan plan;
  plan.options = opt;
  const int m = g.topo.nodes;
  const int l = g.topo.gpusPerNode;
  const int64_t p = static_cast<int64_t>(g.params.size());
  plan.railLane = opt.railLane && m > 1 && l == 1;
  plan.stageBytes = plan.railLane ? 0 : static_cast<int64_t>(m - 1) * g.shardBytes;
  for (int d = 0, span = 1; span < m; ++d, span *= 2) {
    AgRound r;
    r.index = d;
    r.firstSlot = span;
    r.slots = std::min(span, m - span);
    r.bytes = r.slots * g.shardBytes;
    r.headBytes = std::min(r.bytes, opt.headBytes);
    plan.rounds.push_back(r);
  }
  if (plan.railLane) {
    // The rounds land in the landings themselves: only the own shard is copied
    // (P descriptors); each round's puts are rails, not copies.
    plan.descriptors = plan.descriptorsFlat = p;
    return plan;
  }
  for (size_t i = 0; i < plan.rounds.size(); ++i) {
    const AgRound& r = plan.rounds[i];
    const bool last = i + 1 == plan.rounds.size();
    const int groups = last ? std::min(opt.lastRoundGroups, r.slots) : 1;
    for (int k = 0, first = r.firstSlot; k < groups; ++k) {
      // Split as evenly as possible, larger groups first.
      int count = r.slots / groups + (k < r.slots % groups ? 1 : 0);
      plan.scatterGroups.push_back({r.index, first, count});
      first += count;
    }
  }
  // Descriptor counts per rank: local placement (P per local GPU) plus the
  // scatter; the maximum over nodes (the wrap position differs).
  const int64_t local = p * l;
  int64_t worst = 0;
  for (int n = 0; n < m; ++n) {
    int64_t count = 0;
    for (const AgScatterGroup& grp : plan.scatterGroups)
      for (const SlotRun& run : slotRuns(n, m, grp))
        count += (run.count >= opt.minStridedRun ? 1 : run.count) * p * l;
    worst = std::max(worst, count);
  }
  plan.descriptors = local + worst;
  plan.descriptorsFlat = local + static_cast<int64_t>(m - 1) * p * l;
  return plan;
}

std::vector<CopyDesc> agLocalDescriptors(const GroupLayout& g, int rank, bool inPlace) {
  g.topo.checkRank(rank);
  std::vector<CopyDesc> out;
  const int n = g.topo.nodeOf(rank);
  for (int l = 0; l < g.topo.gpusPerNode; ++l) {
    const int dst = g.topo.rankOf(n, l);
    if (inPlace && dst == rank) continue;
    for (size_t p = 0; p < g.params.size(); ++p) {
      const ParamLayout& pl = g.params[p];
      CopyDesc d;
      d.src = inPlace ? BufferRef{rank, Region::kLanding, 0, g.landing(static_cast<int>(p), rank)}
                      : BufferRef{rank, Region::kShard, 0, pl.shardOffset};
      d.dst = {dst, Region::kLanding, 0, g.landing(static_cast<int>(p), rank)};
      d.width = pl.shardBytes;
      out.push_back(d);
    }
  }
  return out;
}

std::vector<CopyDesc> agRoundPuts(const GroupLayout& g, const AgPlan& plan, int rank, int round) {
  g.topo.checkRank(rank);
  // The rail lane has no stage: its puts go from the shard to the peer's landing (ag_rail_lane.cpp).
  if (plan.railLane)
    throw PlanError(Reason::kBadOption, "a rail-lane all-gather has no stage to put rounds into");
  if (round < 0 || static_cast<size_t>(round) >= plan.rounds.size())
    throw PlanError(Reason::kBadOption, "round " + std::to_string(round) + " out of range (the plan has " +
                                            std::to_string(plan.rounds.size()) + ")");
  const AgRound& r = plan.rounds[static_cast<size_t>(round)];
  const int peer = g.topo.railPeer(rank, -r.firstSlot);
  const int64_t s = g.shardBytes;
  std::vector<CopyDesc> out;
  CopyDesc own;
  own.src = {rank, Region::kShard, 0, 0};
  own.dst = {peer, Region::kStage, 0, (r.firstSlot - 1) * s};
  own.width = s;
  out.push_back(own);
  if (r.slots > 1) {
    CopyDesc fwd;
    fwd.src = {rank, Region::kStage, 0, 0};
    fwd.dst = {peer, Region::kStage, 0, r.firstSlot * s};
    fwd.width = (r.slots - 1) * s;
    out.push_back(fwd);
  }
  return out;
}

std::vector<CopyDesc> agScatterDescriptors(const GroupLayout& g, const AgPlan& plan, int rank,
                                           const AgScatterGroup& group, bool coalesced) {
  g.topo.checkRank(rank);
  const int m = g.topo.nodes;
  const int l = g.topo.gpusPerNode;
  const int n = g.topo.nodeOf(rank);
  const int64_t s = g.shardBytes;
  // Stage slots are 1..M-1: a group past them would read beyond the stage.
  if (group.slots < 1 || group.firstSlot < 1 || group.firstSlot > m - 1 || group.slots > m - group.firstSlot)
    throw PlanError(Reason::kBadOption, "scatter group slots [" + std::to_string(group.firstSlot) + ", +" +
                                            std::to_string(group.slots) + ") outside stage slots 1.." +
                                            std::to_string(m - 1));
  std::vector<CopyDesc> out;
  for (const SlotRun& run : slotRuns(n, m, group)) {
    const bool strided = coalesced && run.count >= plan.options.minStridedRun;
    const int pieces = strided ? 1 : run.count;
    const int rowsEach = strided ? run.count : 1;
    for (int dl = 0; dl < l; ++dl) {
      const int dst = g.topo.rankOf(n, dl);
      for (size_t p = 0; p < g.params.size(); ++p) {
        const ParamLayout& pl = g.params[p];
        for (int k = 0; k < pieces; ++k) {
          const int slot = run.first + k;
          const int srcRank = g.topo.rankOf(agSlotSource(n, slot, m), g.topo.localOf(rank));
          CopyDesc d;
          d.src = {rank, Region::kStage, 0, (slot - 1) * s + pl.shardOffset};
          d.dst = {dst, Region::kLanding, 0, g.landing(static_cast<int>(p), srcRank)};
          d.width = pl.shardBytes;
          d.rows = rowsEach;
          d.srcPitch = rowsEach > 1 ? s : 0;
          d.dstPitch = rowsEach > 1 ? static_cast<int64_t>(l) * pl.shardBytes : 0;
          out.push_back(d);
        }
      }
    }
  }
  return out;
}

}  // namespace tide::plan
