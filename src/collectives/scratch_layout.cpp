#include "collectives/scratch_layout.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tide::collectives {
namespace {
constexpr int64_t kAlign = 4096;  // NCCL windows want 4 KiB-aligned offsets

// Each plan's sizes fit 64 bits, but the scratch adds up several regions of
// the largest of many groups (and multiplies blocks by counts): through the
// C API a contrived set of groups could wrap the sum into a small, negative
// or overlapping layout. Refused instead.
[[noreturn]] void overflows() {
  throw std::invalid_argument("the collectives' scratch for these groups overflows 64 bits");
}
int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflows();
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflows();
  return r;
}
int64_t alignUp(int64_t x) { return add(x, kAlign - 1) / kAlign * kAlign; }
}  // namespace

ScratchLayout ScratchLayout::forPlans(const std::vector<const plan::Plan*>& plans, int64_t base) {
  ScratchLayout s;
  bool multiNode = false;
  for (const plan::Plan* p : plans) {
    // One communicator has one topology; sizes of groups planned for others mean nothing here.
    if (p->group.topo.nodes != plans.front()->group.topo.nodes ||
        p->group.topo.gpusPerNode != plans.front()->group.topo.gpusPerNode)
      throw std::invalid_argument("groups of one communicator must share one topology: " +
                                  std::to_string(plans.front()->group.topo.nodes) + " x " +
                                  std::to_string(plans.front()->group.topo.gpusPerNode) + " and " +
                                  std::to_string(p->group.topo.nodes) + " x " +
                                  std::to_string(p->group.topo.gpusPerNode));
    s.stageBytes = std::max(s.stageBytes, p->ag.stageBytes);
    s.stagingSlotBytes = std::max(s.stagingSlotBytes, p->rs.stagingSlotBytes);
    s.stagingSlots = std::max(s.stagingSlots, p->rs.stagingSlots);
    // Rails that read only from the arena send a staged all-gather's shard from
    // a copy here; the rail lane's all-gather sends from the landing itself.
    if (p->group.topo.nodes > 1 && !p->ag.railLane) {
      s.railSourceBytes = std::max(s.railSourceBytes, p->group.shardBytes);
      s.stagedAllGatherAcrossNodes = true;
    }
    if (p->rs.railLane) {
      // Only the lane inbox.
      s.laneBlockBytes = std::max(s.laneBlockBytes, p->rs.blockBytes);
      s.laneGenerations = std::max(s.laneGenerations, p->rs.bufferGenerations);
      continue;
    }
    s.blockBytes = std::max(s.blockBytes, p->rs.blockBytes);
    s.outboxBlocks = std::max(s.outboxBlocks, p->rs.outboxBlocks);
    s.generations = std::max(s.generations, p->rs.bufferGenerations);
    if (p->group.topo.nodes > 1) {
      if (multiNode && p->rs.landing != s.landing)
        throw std::invalid_argument("groups of one communicator must share one Level 2 landing direction (pull or push)");
      multiNode = true;
      s.landing = p->rs.landing;
      s.blocksPerGeneration = std::max(s.blocksPerGeneration, p->group.topo.gpusPerNode);
      s.sparesPerBank = std::max(s.sparesPerBank, p->rs.spareBlocks);
    }
  }
  s.stagingSlotBytes = alignUp(s.stagingSlotBytes);
  s.blockBytes = alignUp(s.blockBytes);
  s.laneBlockBytes = alignUp(s.laneBlockBytes);
  s.base = alignUp(base);
  const int64_t inbox = mul(mul(s.generations, s.blocksPerGeneration), s.blockBytes);  // inboxBytes(), checked
  int64_t at = s.base;
  s.stage = at;
  at = add(at, alignUp(s.stageBytes));
  s.railSource = at;
  at = add(at, alignUp(s.railSourceBytes));
  s.staging = at;
  at = add(at, mul(s.stagingSlots, s.stagingSlotBytes));
  s.outbox = at;
  at = add(at, mul(2 * int64_t{s.outboxBlocks}, s.blockBytes));
  s.inbox = at;
  at = add(at, inbox);
  s.spare = at;
  at = add(at, mul(2 * int64_t{s.sparesPerBank}, s.blockBytes));
  s.push = at;
  if (s.landing == plan::Landing::kPush) at = add(at, inbox);
  s.laneInbox = at;
  at = add(at, mul(s.laneGenerations, s.laneBlockBytes));
  // Callers add a 4 KiB alignment margin (tideScratchBytes) to the size.
  add(at, kAlign);
  s.bytes = at - s.base;
  return s;
}

bool ScratchLayout::fits(const plan::Plan& p) const {
  const bool peers = p.group.topo.gpusPerNode > 1;
  const bool nodes = p.group.topo.nodes > 1;
  if (p.ag.stageBytes > stageBytes) return false;
  if (nodes && !p.ag.railLane && p.group.shardBytes > railSourceBytes) return false;
  if (p.rs.railLane) return p.rs.blockBytes <= laneBlockBytes && p.rs.bufferGenerations <= laneGenerations;
  if (peers && (p.rs.stagingSlotBytes > stagingSlotBytes || p.rs.stagingSlots > stagingSlots)) return false;
  if (nodes && (p.rs.blockBytes > blockBytes || p.rs.outboxBlocks > outboxBlocks ||
                p.rs.bufferGenerations > generations || p.rs.spareBlocks > sparesPerBank || p.rs.landing != landing ||
                p.group.topo.gpusPerNode > blocksPerGeneration))
    return false;
  return true;
}

}  // namespace tide::collectives
