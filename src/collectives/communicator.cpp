#include "collectives/communicator.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "collectives/counter_ids.hpp"

namespace tide::collectives {

using plan::BufferRef;
using plan::CopyDesc;
using plan::Region;

namespace {

// How long a fault that needs a lost race stalls the queue that would win it.
constexpr double kFaultRaceSeconds = 0.3;

int64_t clampValid(int64_t total, int64_t start, int64_t len) {
  return std::clamp<int64_t>(total - start, 0, len);
}

}  // namespace

Communicator::Communicator(fabric::Endpoint& ep, ScratchLayout layout, FaultConfig faults)
    : ep_(ep), layout_(layout), faults_(faults) {
  if (ep_.numQueues() < kQueuesNeeded)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "the collectives need " + std::to_string(kQueuesNeeded) + " queues");
  if (ep_.arenaBytes() < layout_.end())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "arena smaller than the scratch layout");
  const plan::Topology& t = ep_.topology();
  if (t.gpusPerNode > ids::kMaxLocal || t.nodes > ids::kMaxNodes)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "topology exceeds the counter table");
  // Two-sided rails (NCCL send/recv) need the receiver to post every rail
  // transfer (railRecv); the collectives issue one-sided puts only, so across
  // nodes they would wait for data that never comes. Refuse instead of hanging.
  if (t.nodes > 1 && !ep_.railsByCopy())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage,
                              "the collectives across nodes need one-sided rails (copy engines between load/store "
                              "reachable peers); the send/recv rails are not wired into TIDE-AG / TIDE-RS yet");
  if (layout_.inboxBytes() > 0) {
    ep_.annotateInbox(layout_.inbox, layout_.inboxBytes());
    if (layout_.landing == plan::Landing::kPush) ep_.annotateInbox(layout_.push, layout_.inboxBytes());
  }
}

void Communicator::checkPlan(const plan::Plan& plan) const {
  const plan::Topology& t = ep_.topology();
  if (plan.group.topo.nodes != t.nodes || plan.group.topo.gpusPerNode != t.gpusPerNode)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "plan made for another topology");
  if (t.nodes > 1 && plan.rs.landing != layout_.landing)
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

uint64_t Communicator::allGather(const plan::Plan& plan, const void* shard, int64_t landingOffset) {
  checkPlan(plan);
  const plan::GroupLayout& g = plan.group;
  const plan::Topology& t = g.topo;
  const int me = ep_.rank();
  const int node = t.nodeOf(me);
  const int local = t.localOf(me);
  const int64_t s = g.shardBytes;
  if (landingOffset < 0 || layout_.overlaps(landingOffset, g.unshardedBytes()) ||
      landingOffset + g.unshardedBytes() > ep_.arenaBytes())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "landing outside the arena's user area");
  const uint64_t v = ++agCalls_;
  ep_.setCallContext("all_gather#" + std::to_string(v));
  const uint64_t entry = ep_.record(kCallerQueue);

  // Condition 1, landing free to overwrite: published to every local rank.
  for (int i = 0; i < t.gpusPerNode; ++i)
    ep_.signal(kCallerQueue, t.rankOf(node, i), ids::kAgReady + local, v);

  // Rails: Bruck rounds with lead-based pacing and per-round stage credits.
  std::vector<uint64_t> arrived(plan.ag.scatterGroups.size(), 0);
  if (t.nodes > 1) {
    ep_.waitEvent(kNetQueue, kCallerQueue, entry);
    for (const plan::AgRound& r : plan.ag.rounds) {
      const int target = t.railPeer(me, -r.firstSlot);
      const int source = t.railPeer(me, r.firstSlot);
      if (v > 1) ep_.wait(kNetQueue, ids::kAgCredit + r.index, v - 1, target, "receive-stage credit");
      if (r.index >= 1) ep_.wait(kNetQueue, ids::kAgLead + r.index, v, target, "round lead");
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
      for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        const int64_t lo = cuts[k], hi = cuts[k + 1];
        if (lo >= hi || lo >= r.bytes) continue;
        const std::byte* src = lo < s ? static_cast<const std::byte*>(shard) + lo
                                      : ep_.arena() + layout_.stage + (lo - s);
        ep_.railPut(kNetQueue, target, stageDst + lo, src, hi - lo, -1, 0);
        for (auto& m : marks)
          if (m.first == hi) ep_.signal(kNetQueue, target, m.second, v);
      }
      // Receive this round; confirm it to the sender of the next round.
      ep_.wait(kNetQueue, ids::kAgHead + r.index, v, source, "round head");
      if (static_cast<size_t>(r.index + 1) < plan.ag.rounds.size())
        ep_.signal(kNetQueue, t.railPeer(me, 2 * r.firstSlot), ids::kAgLead + r.index + 1, v);
      for (size_t gi = 0; gi < plan.ag.scatterGroups.size(); ++gi) {
        if (plan.ag.scatterGroups[gi].round != r.index) continue;
        ep_.wait(kNetQueue, ids::kAgGroup + static_cast<int>(gi), v, source, "stage slots");
        arrived[gi] = ep_.record(kNetQueue);
      }
    }
  }

  // Copy engines: own shard into every local landing, then the stage slots.
  ep_.waitEvent(kCopyQueue, kCallerQueue, entry);
  if (injected(Fault::kSkipCompletionFence)) ep_.delay(kCopyQueue, kFaultRaceSeconds);
  for (int i = 0; i < t.gpusPerNode; ++i)
    ep_.wait(kCopyQueue, ids::kAgReady + i, v, t.rankOf(node, i), "landing free");
  std::vector<CopyDesc> localDescs = plan::agLocalDescriptors(g, me);
  if (injected(Fault::kWrongLandingOffset)) localDescs.front().dst.offset += 1;
  // The own landing is filled on its own queue (another copy engine) while
  // this one writes the peers'; the done signals wait for both.
  std::vector<CopyDesc> ownDescs, peerDescs;
  for (const CopyDesc& d : localDescs) (d.dst.rank == me ? ownDescs : peerDescs).push_back(d);
  ep_.waitEvent(kOwnCopyQueue, kCallerQueue, entry);
  if (injected(Fault::kSkipCompletionFence)) ep_.delay(kOwnCopyQueue, kFaultRaceSeconds);
  ep_.copy(kOwnCopyQueue, toCopyOps(ownDescs, shard, landingOffset, nullptr, 0));
  const uint64_t ownDone = ep_.record(kOwnCopyQueue);
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
  ep_.waitEvent(kCopyQueue, kOwnCopyQueue, ownDone);
  if (split) ep_.waitEvent(kCopyQueue, kNetQueue, splitDone);
  for (int i = 0; i < t.gpusPerNode; ++i) ep_.signal(kCopyQueue, t.rankOf(node, i), ids::kAgDone + local, v);
  if (!injected(Fault::kDropCredit))
    for (const plan::AgRound& r : plan.ag.rounds)
      ep_.signal(kCopyQueue, t.railPeer(me, r.firstSlot), ids::kAgCredit + r.index, v);

  if (!injected(Fault::kSkipCompletionFence))
    for (int i = 0; i < t.gpusPerNode; ++i)
      ep_.wait(kCallerQueue, ids::kAgDone + i, v, t.rankOf(node, i), "landing writes");
  return ep_.record(kCallerQueue);
}

// ------------------------------------------------------------------ TIDE-RS

ReduceScatterEvents Communicator::reduceScatter(const plan::Plan& plan, const std::vector<const void*>& grads,
                                                float* out, float alpha, bool accumulate) {
  checkPlan(plan);
  if (grads.size() != plan.group.params.size())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "one gradient pointer per parameter");
  const uint64_t call = ++rsCalls_;
  ep_.setCallContext("reduce_scatter#" + std::to_string(call));
  const uint64_t entry = ep_.record(kCallerQueue);
  ReduceScatterEvents ev;
  if (injected(Fault::kReleaseGradsEarly)) {
    ev.readDone = entry;  // claims the gradients are free before they are read
    ep_.delay(kCopyQueue, kFaultRaceSeconds);
    ep_.delay(kSumQueue, kFaultRaceSeconds);
  }
  if (plan.group.topo.nodes == 1)
    rsSingleNode(plan, grads, out, alpha, accumulate, entry);
  else
    rsMultiNode(plan, grads, out, alpha, accumulate, entry);
  const uint64_t copyEnd = ep_.record(kCopyQueue);
  const uint64_t sumEnd = ep_.record(kSumQueue);
  ep_.waitEvent(kCallerQueue, kCopyQueue, copyEnd);
  ep_.waitEvent(kCallerQueue, kSumQueue, sumEnd);
  if (!injected(Fault::kReleaseGradsEarly)) ev.readDone = ep_.record(kCallerQueue);
  if (plan.group.topo.nodes > 1) ep_.waitEvent(kCallerQueue, kNetQueue, ep_.record(kNetQueue));
  ev.done = ep_.record(kCallerQueue);
  return ev;
}

namespace {

// Level 1 sum pieces for the destination ranks `firstRank .. firstRank+rows-1`
// over element range `range`: contributions in local-rank order (staged ones
// from the staging slot, the own one from the gradient). Local-rank order,
// not "staged then own", keeps the bits independent of which rank owns an
// element, so passes and chunking never change them.
fabric::SumOp level1Sum(const plan::GroupLayout& g, const plan::RsPlan& rs, int me, int firstRank, int rows,
                        plan::ElemRange range, const std::byte* stagingSlot,
                        const std::vector<const void*>& grads, float* dst, int64_t dstPitch) {
  const plan::Topology& t = g.topo;
  const int local = t.localOf(me);
  const int64_t b = plan::itemSize(g.gradDtype);
  fabric::SumOp op;
  op.srcType = g.gradDtype;
  for (size_t p = 0; p < g.params.size(); ++p) {
    const plan::ParamLayout& pl = g.params[p];
    const int64_t a = std::max(range.begin, pl.outOffset);
    const int64_t e = std::min(range.end, pl.outOffset + pl.outElems);
    if (a >= e) continue;
    fabric::SumPiece pc;
    pc.dst = dst + (a - range.begin);
    pc.dstPitch = dstPitch;
    pc.rows = rows;
    pc.elems = e - a;
    std::vector<int64_t> valid;
    for (int i = 0; i < rows; ++i)
      valid.push_back(clampValid(pl.rows * pl.rowElems, int64_t{firstRank + i} * pl.outElems + (a - pl.outOffset), e - a));
    for (int u = 0; u < t.gpusPerNode; ++u) {
      fabric::SumSource src;
      src.valid = valid;
      if (u == local) {
        src.ptr = static_cast<const std::byte*>(grads[p]) + (int64_t{firstRank} * pl.outElems + (a - pl.outOffset)) * b;
        src.pitch = pl.outElems;
      } else {
        const int64_t row0 = int64_t{plan::stagedSenderIndex(u, local)} * rows * rs.subElems + (a - range.begin);
        src.ptr = stagingSlot + row0 * b;
        src.pitch = rs.subElems;
      }
      pc.sources.push_back(src);
    }
    op.pieces.push_back(pc);
  }
  return op;
}

}  // namespace

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
  const uint64_t slots = static_cast<uint64_t>(plan.rs.stagingSlots);
  const int slot = static_cast<int>(seq % slots);
  for (int i = 0; i < l; ++i)
    if (i != local && seq >= slots)
      ep_.wait(kCopyQueue, ids::kRsFree + i, seq - slots + 1, t.rankOf(node, i), "staging slot free");
  std::vector<CopyDesc> pushes = plan::level1Pushes(plan.group, plan.rs, me, pass, block);
  ep_.copy(kCopyQueue, toCopyOps(pushes, nullptr, 0, &grads, slot));
  if (injected(Fault::kCorruptStagedChunk) && !pushes.empty()) {
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
  const int slots = rs.stagingSlots;
  ep_.waitEvent(kCopyQueue, kCallerQueue, entry);
  ep_.waitEvent(kSumQueue, kCallerQueue, entry);
  int chunk = 0;
  for (int q = 0; q < rs.passes; ++q) {
    for (int s = 0; s < l; ++s, ++chunk) {
      const uint64_t seq = rsChunks_ + static_cast<uint64_t>(chunk);  // 0-based
      const int slot = static_cast<int>(seq % static_cast<uint64_t>(slots));
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

void Communicator::rsMultiNode(const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
                               float alpha, bool accumulate, uint64_t entry) {
  const plan::GroupLayout& g = plan.group;
  const plan::RsPlan& rs = plan.rs;
  const plan::Topology& t = g.topo;
  const int me = ep_.rank();
  const int node = t.nodeOf(me);
  const int local = t.localOf(me);
  const int m = t.nodes;
  const int l = t.gpusPerNode;
  const int slots = rs.stagingSlots;
  const int bank = static_cast<int>((rsCalls_ - 1) % 2);
  const int nOut = rs.outboxBlocks;
  const uint64_t sendBase = rsSends_[bank];
  // Own-node spares of this bank in rotation: use u (counted over all calls on
  // the bank) goes to slot u mod K, K the same for every group of this
  // communicator, once use u - K has been moved into the inbox.
  const uint64_t spareBase = rsSpareUses_[bank];
  const uint64_t spareSlots = static_cast<uint64_t>(layout_.sparesPerBank);
  const bool push = rs.landing == plan::Landing::kPush;

  // Destination blocks in read order, pass by pass: remote ones in send
  // order, then the own node (its partial lands in the pass's last wave, so
  // a later pass must not be read before it).
  struct Block { int pass; int dest; int remote; };  // remote = -1 for the own node
  std::vector<Block> blocks;
  for (int q = 0; q < rs.passes; ++q) {
    for (int c = 1; c < m; ++c) blocks.push_back({q, (node + c) % m, q * (m - 1) + (c - 1)});
    blocks.push_back({q, node, -1});
  }
  auto readIndex = [m](int pass, int c) { return static_cast<size_t>(pass) * static_cast<size_t>(m) + static_cast<size_t>(c - 1); };

  // Issue order, pass by pass: pass q's read phase, then the rest of pass q's
  // waves. The sum queue's "outbox block sent" wait (a later block reuses the
  // outbox block an earlier one was sent from: the next pass's, or with a
  // small outbox this pass's) must find the sends it waits for already
  // enqueued, so the waves' parts up to that send are issued just before it:
  // a GPU stream blocked on a wait whose signal the host has not issued yet
  // can stall the host's own issue (a full command queue, or streams sharing
  // a hardware queue), and then nothing issues it. The queues and their waits
  // are the same whatever the host's interleaving; only its issue order moves.
  ep_.waitEvent(kCopyQueue, kCallerQueue, entry);
  ep_.waitEvent(kSumQueue, kCallerQueue, entry);
  std::vector<uint64_t> summed(blocks.size());
  const uint64_t chunkBase = rsChunks_;
  rsChunks_ += blocks.size();
  uint64_t sent = sendBase;   // outbox blocks whose send is issued (the last "sent" signal's value)
  size_t nextWave = 0;        // the wave whose parts are issued next
  bool sendsIssued = false;   // its sends are, its landing is not yet
  size_t readsIssued = 0;     // blocks whose read (pushes and sum) is issued
  // A wave's network work in two parts, in this order on the net queue:
  // its sends (accept the wave, then k-way rounds of outbox blocks) and its
  // landing (receive, own-node partial, push, land). The sends can go out as
  // soon as the reads of their blocks are issued, the landing once the own
  // node's read is (last wave of a pass).
  auto issueSends = [&](const plan::RsWave& wave) {
    const uint64_t seq = rsWaves_ + static_cast<uint64_t>(wave.index) + 1;
    const int gen = wave.generation;
    // Accept the wave: the generation's previous landing is done on every
    // local rank; zero my stale blocks; tell this wave's senders.
    if (rsGenLastUse_[gen] > 0)
      for (int i = 0; i < l; ++i)
        ep_.wait(kNetQueue, ids::kRsLanded + i, rsGenLastUse_[gen], t.rankOf(node, i), "inbox generation landed");
    if (!push && !injected(Fault::kSkipStaleZeroing))
      for (const plan::InboxBlock& z : wave.zero)
        if (z.gpu == local) ep_.zero(kNetQueue, ep_.arena() + layout_.inboxBlock(gen, z.block), layout_.blockBytes);
    if (!push && wave.clearAfterLanding) {
      // The last wave on this generation clears what its landing reads, so
      // the next call starts from zero. Where this pass's sub-slice is
      // shorter than a row (the end of the output axis), an earlier pass
      // may have filled and consumed the whole row; its tail, which this
      // wave neither writes nor reads, is zeroed here, or the next call's
      // landing would read it where its wave writes nothing.
      for (int s = 0; s < l; ++s) {
        const int64_t live = plan::subSliceRange(g, rs, wave.pass, s).size();
        if (live == rs.subElems) continue;
        for (int i = 0; i < l; ++i)
          ep_.zero(kNetQueue, ep_.arena() + layout_.inboxBlock(gen, s) + (int64_t{i} * rs.subElems + live) * 4,
                   (rs.subElems - live) * 4);
      }
    }
    for (int c : wave.contributors)
      if (c < m) ep_.signal(kNetQueue, t.rankOf(((node - c) % m + m) % m, local), ids::kRsCredit + node, seq);
    // Send: k-way rounds of outbox blocks over my rail.
    for (const plan::RsRound& round : wave.rounds) {
      for (int c : round.contributors) {
        const int dest = (node + c) % m;
        const int remote = wave.pass * (m - 1) + (c - 1);
        const uint64_t k = sendBase + static_cast<uint64_t>(remote);
        ep_.waitEvent(kNetQueue, kSumQueue, summed[readIndex(wave.pass, c)]);
        ep_.wait(kNetQueue, ids::kRsCredit + dest, seq, t.rankOf(dest, local), "inbox credit");
        const int sub = plan::subSlice(local, c, m, l);
        const std::byte* block =
            ep_.arena() + layout_.outboxBlock(bank, static_cast<int>(k % static_cast<uint64_t>(nOut)));
        const int64_t rowBytes = plan::subSliceRange(g, rs, wave.pass, sub).size() * 4;
        const int64_t pitch = rs.subElems * 4;
        if (rowBytes == pitch) {
          ep_.railPut(kNetQueue, t.rankOf(dest, local), layout_.inboxBlock(gen, sub), block, rs.blockBytes,
                      ids::kRsInbox + node, seq);
        } else {
          // The output's last sub-slice is short: send only the rows' live part.
          for (int i = 0; i < l; ++i)
            ep_.railPut(kNetQueue, t.rankOf(dest, local), layout_.inboxBlock(gen, sub) + i * pitch, block + i * pitch,
                        rowBytes, i + 1 == l ? ids::kRsInbox + node : -1, seq);
        }
        sent = std::max(sent, k + 1);
      }
      ep_.signal(kNetQueue, me, ids::kRsSent + bank, sent);
    }
  };
  auto issueLanding = [&](const plan::RsWave& wave) {
    const uint64_t seq = rsWaves_ + static_cast<uint64_t>(wave.index) + 1;
    const int gen = wave.generation;
    // Receive: every contributor's block, and my own node's partial.
    for (int c : wave.contributors)
      if (c < m) {
        const int src = ((node - c) % m + m) % m;
        ep_.wait(kNetQueue, ids::kRsInbox + src, seq, t.rankOf(src, local), "inbox block");
      }
    if (wave.hasOwnNode) {
      ep_.waitEvent(kNetQueue, kSumQueue, summed[readIndex(wave.pass, m)]);
      fabric::CopyOp spare;
      spare.dst = ep_.arena() + layout_.inboxBlock(gen, local);  // own node: c = M, so GPU j holds block j
      const uint64_t use = spareBase + static_cast<uint64_t>(wave.pass);
      spare.src = ep_.arena() + layout_.spareBlock(bank, static_cast<int>(use % spareSlots));
      spare.width = plan::subSliceRange(g, rs, wave.pass, local).size() * 4;
      spare.rows = l;
      spare.srcPitch = spare.dstPitch = rs.subElems * 4;
      ep_.copy(kNetQueue, {spare});
      ep_.signal(kNetQueue, me, ids::kRsSpareFree + bank, use + 1);  // the spare is free again
    }
    if (push) {
      // Push landing: every row of the blocks this wave wrote here goes to
      // the GPU that lands it, by copy engine; "arrived" then also means
      // "pushed", and each lander reads local memory only.
      for (const plan::InboxBlock& w : wave.writes) {
        if (w.gpu != local) continue;
        const int64_t rowBytes = plan::subSliceRange(g, rs, wave.pass, w.block).size() * 4;
        if (rowBytes == 0) continue;
        std::vector<fabric::CopyOp> rows;
        for (int i = 0; i < l; ++i) {
          if (i == local) continue;
          fabric::CopyOp row;
          row.dst = ep_.peerArena(t.rankOf(node, i)) + layout_.pushRow(gen, w.block, local, rs.subElems);
          row.src = ep_.arena() + layout_.inboxBlock(gen, w.block) + int64_t{i} * rs.subElems * 4;
          row.width = rowBytes;
          row.consumesSource = true;
          rows.push_back(row);
        }
        if (!rows.empty()) ep_.copy(kNetQueue, rows);
      }
    }
    for (int i = 0; i < l; ++i) ep_.signal(kNetQueue, t.rankOf(node, i), ids::kRsArrived + local, seq);
    // Land: my rows of every sub-slice, contributors in increasing c, then
    // the GPUs that hold no contributor this wave (zeros).
    for (int i = 0; i < l; ++i) ep_.wait(kNetQueue, ids::kRsArrived + i, seq, t.rankOf(node, i), "wave arrival");
    const bool firstOfPass = wave.index % rs.wavesPerPass == 0;
    for (int s = 0; s < l; ++s) {
      const plan::ElemRange range = plan::subSliceRange(g, rs, wave.pass, s);
      if (range.size() == 0) continue;
      fabric::LandOp op;
      op.ctas = rs.landingCtas;
      op.dst = out + range.begin;
      op.elems = range.size();
      op.alpha = alpha;
      op.accumulate = firstOfPass ? accumulate : true;
      op.clearSources = !push && wave.clearAfterLanding;
      std::vector<bool> used(static_cast<size_t>(l), false);
      std::vector<int> order;
      for (int c : wave.contributors) order.push_back(plan::landingGpu(s, c, m, l));
      for (int j : order) used[static_cast<size_t>(j)] = true;
      // Pull: every GPU's block, the ones without a contributor this wave
      // read as zeros. Push: only the blocks this wave wrote (the others'
      // +0 terms change no bit), each from local memory.
      if (!push)
        for (int j = 0; j < l; ++j)
          if (!used[static_cast<size_t>(j)]) order.push_back(j);
      for (int j : order) {
        if (push) {
          op.sources.push_back(reinterpret_cast<float*>(
              ep_.arena() + (j == local ? layout_.inboxBlock(gen, s) + int64_t{local} * rs.subElems * 4
                                        : layout_.pushRow(gen, s, j, rs.subElems))));
          continue;
        }
        const int peer = t.rankOf(node, j);
        std::byte* base = peer == me ? ep_.arena() : ep_.peerArena(peer);
        op.sources.push_back(reinterpret_cast<float*>(base + layout_.inboxBlock(gen, s)) +
                             int64_t{local} * rs.subElems);
      }
      ep_.land(kNetQueue, op);
    }
    for (int i = 0; i < l; ++i) ep_.signal(kNetQueue, t.rankOf(node, i), ids::kRsLanded + local, seq);
    rsGenLastUse_[gen] = seq;
  };
  // Issues the next part in net-queue order; fails stop when its reads are
  // not issued yet (the issue order below never asks for that).
  auto issueNextPart = [&](const char* why) {
    if (nextWave >= rs.waves.size())
      throw std::logic_error(std::string("reduce-scatter issue: no wave left for ") + why);
    const plan::RsWave& wave = rs.waves[nextWave];
    if (nextWave == 0 && !sendsIssued && injected(Fault::kReuseOutboxEarly)) ep_.delay(kNetQueue, kFaultRaceSeconds);
    if (!sendsIssued) {
      for (const plan::RsRound& round : wave.rounds)
        for (int c : round.contributors)
          if (readIndex(wave.pass, c) >= readsIssued)
            throw std::logic_error(std::string("reduce-scatter issue: a send before its read, for ") + why);
      issueSends(wave);
      sendsIssued = true;
      return;
    }
    if (wave.hasOwnNode && readIndex(wave.pass, m) >= readsIssued)
      throw std::logic_error(std::string("reduce-scatter issue: a landing before the own node's read, for ") + why);
    issueLanding(wave);
    sendsIssued = false;
    ++nextWave;
  };
  for (int pass = 0; pass < rs.passes; ++pass) {
    // ---- read phase of this pass: pushes (copy engines) and Level 1 sums (short-lived SM work)
    const size_t perPass = static_cast<size_t>(m);  // blocks per pass: M - 1 remote, then the own node
    for (size_t j = static_cast<size_t>(pass) * perPass; j < static_cast<size_t>(pass + 1) * perPass; ++j) {
      const Block& blk = blocks[j];
      const uint64_t seq = chunkBase + j;
      const int slot = static_cast<int>(seq % static_cast<uint64_t>(slots));
      stageChunk(plan, grads, seq, blk.pass, blk.dest);
      std::byte* dst;
      if (blk.remote >= 0) {
        const uint64_t k = sendBase + static_cast<uint64_t>(blk.remote);
        if (k >= static_cast<uint64_t>(nOut) && !injected(Fault::kReuseOutboxEarly)) {
          // The block this one reuses must be sent first, and its send issued
          // before this wait (rule I5): a small outbox (Slot-Reuse) reuses
          // blocks of this very pass.
          while (sent < k - nOut + 1) issueNextPart("an outbox block's reuse");
          ep_.wait(kSumQueue, ids::kRsSent + bank, k - nOut + 1, me, "outbox block sent");
        }
        dst = ep_.arena() + layout_.outboxBlock(bank, static_cast<int>(k % static_cast<uint64_t>(nOut)));
      } else {
        const uint64_t use = spareBase + static_cast<uint64_t>(blk.pass);
        if (use >= spareSlots)
          ep_.wait(kSumQueue, ids::kRsSpareFree + bank, use - spareSlots + 1, me, "own-node spare free");
        dst = ep_.arena() + layout_.spareBlock(bank, static_cast<int>(use % spareSlots));
      }
      const int sub = plan::subSlice(local, plan::contributorIndex(blk.dest, node, m), m, l);
      const plan::ElemRange range = plan::subSliceRange(g, rs, blk.pass, sub);
      if (range.size() > 0) {
        fabric::SumOp op = level1Sum(g, rs, me, t.rankOf(blk.dest, 0), l, range,
                                     ep_.arena() + layout_.stagingSlot(slot), grads, reinterpret_cast<float*>(dst),
                                     rs.subElems);
        op.ctas = rs.sumCtas;
        ep_.sum(kSumQueue, op);
      }
      for (int u = 0; u < l; ++u)
        if (u != local) ep_.signal(kSumQueue, t.rankOf(node, u), ids::kRsFree + local, seq + 1);
      summed[j] = ep_.record(kSumQueue);
      readsIssued = j + 1;
    }

    // ---- network phase of this pass (what the reads above did not already
    // need), in collective order behind the previous call's
    while (nextWave < rs.waves.size() && rs.waves[nextWave].pass == pass) issueNextPart("the pass's network phase");
  }
  if (nextWave != rs.waves.size())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "plan's waves are not in pass order");
  rsSpareUses_[bank] = spareBase + static_cast<uint64_t>(rs.passes);
  rsSends_[bank] = sendBase + static_cast<uint64_t>(rs.passes) * static_cast<uint64_t>(m - 1);
  rsWaves_ += rs.waves.size();
}

}  // namespace tide::collectives
