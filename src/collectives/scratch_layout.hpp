// Where the collectives' scratch regions sit in the symmetric arena, sized
// for the largest group a communicator serves. Same on every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "fabric/byte_range.hpp"
#include "tide/plan.hpp"

namespace tide::collectives {

struct ScratchLayout {
  int64_t stage = 0;          // AG receive stage
  int64_t stageBytes = 0;
  // AG across nodes: this rank's shard, copied here before the rails send it
  // where the fabric's rail puts read only from the arena (NCCL host RMA:
  // both ends of a put in a registered window). Sized for the largest
  // multi-node group's shard; unused elsewhere.
  int64_t railSource = 0;
  int64_t railSourceBytes = 0;
  // Some group runs the staged all-gather across nodes (its rounds wait for
  // the previous call's stage credit, which rail-lane calls then pass on).
  bool stagedAllGatherAcrossNodes = false;
  int64_t staging = 0;        // RS Level 1 staging slots
  int64_t stagingSlotBytes = 0;
  int stagingSlots = 0;
  int64_t blockBytes = 0;     // outbox / inbox / spare block
  int64_t outbox = 0;         // [bank][block]
  int outboxBlocks = 0;
  int64_t inbox = 0;          // [generation][sub-slice]
  int generations = 0;
  int blocksPerGeneration = 0;
  int64_t spare = 0;          // [bank][slot]: own-node partials, used in rotation
  int sparesPerBank = 0;      // the most any plan needs (every call rotates through all of them)
  // Level 2 landing of every multi-node group on this communicator: a push
  // landing leaves the inbox unzeroed, which a pull landing relies on, so the
  // two never share one.
  plan::Landing landing = plan::Landing::kPull;
  int64_t push = 0;           // push landing: [generation][sub-slice][sender GPU] rows, the inbox's size
  // App. F's rail lane (L = 1 groups with RsPlan::railLane): its own inbox,
  // [generation] blocks in the gradient dtype. Apart from the staged path's
  // inbox, which a pull landing needs all-zero between calls and the lane
  // leaves holding rows.
  int64_t laneInbox = 0;
  int64_t laneBlockBytes = 0;
  int laneGenerations = 0;
  int64_t base = 0;           // arena offset of the scratch (offsets above include it)
  int64_t bytes = 0;          // scratch size; with base 0, user regions start here

  // Scratch for every plan in `plans`, starting at arena offset `base`
  // (4 KiB aligned).
  static ScratchLayout forPlans(const std::vector<const plan::Plan*>& plans, int64_t base = 0);
  int64_t end() const { return base + bytes; }
  // Whether this scratch holds everything `plan` uses (blocks only exist on
  // several nodes, staging only with local peers).
  bool fits(const plan::Plan& plan) const;
  // [offset, offset + size) meets the scratch; offset >= 0 and size >= 0 (no sum that could wrap).
  bool overlaps(int64_t offset, int64_t size) const { return fabric::offsetRangesMeet(offset, size, base, bytes); }
  int64_t stagingSlot(int i) const { return staging + i * stagingSlotBytes; }
  int64_t outboxBlock(int bank, int i) const { return outbox + (int64_t{bank} * outboxBlocks + i) * blockBytes; }
  // The inbox's bytes (every generation); a push area is the same size.
  int64_t inboxBytes() const { return int64_t{generations} * blocksPerGeneration * blockBytes; }
  int64_t inboxBlock(int gen, int s) const {
    return inbox + (int64_t{gen} * blocksPerGeneration + s) * blockBytes;
  }
  int64_t laneInboxBlock(int gen) const { return laneInbox + int64_t{gen} * laneBlockBytes; }
  int64_t spareBlock(int bank, int slot) const { return spare + (int64_t{bank} * sparesPerBank + slot) * blockBytes; }
  // Row that local GPU `from` pushes of sub-slice s (rows of subElems fp32, as in an inbox block).
  int64_t pushRow(int gen, int s, int from, int64_t subElems) const {
    return push + (int64_t{gen} * blocksPerGeneration + s) * blockBytes + int64_t{from} * subElems * 4;
  }
};

}  // namespace tide::collectives
