// Closed-form memory model of Sec. 5.4 (Eqs. 10-12), in NS units, where NS is
// one unsharded group (N ranks x S bytes, S in the all-gather's item type) and
// S_fp32 = (4 / agItemSize) S: 2S for the paper's bf16 groups, S for fp32 ones.
// Gradients of gradItemSize bytes scale the staging slots and In-Place's live
// gradients; the ring slots hold the group itself, so they stay 2 NS.
// The paper states Eqs. 10-12 for a one-pass pipeline; with P passes every
// staging slot, inbox and outbox block holds one pass's sub-chunk, 1/P of it,
// and the spares are min(P, 2) per bank (RsPlan::spareBlocks).
#include <algorithm>

#include "tide/plan.hpp"

namespace tide::plan {

MemoryModel memoryModel(int nodes, int gpusPerNode, int bufferGenerations, int roundWidth,
                        int stagingSlots, Mode mode, int gradItemSize, Landing landing, int agItemSize,
                        bool railLane, bool agRailLane, int passes) {
  const double m = nodes;
  const int p = std::max(passes, 1);
  const double perPass = 1.0 / p;
  const double l = gpusPerNode;
  const double fp32PerAgByte = 4.0 / agItemSize;
  const double perFp32 = fp32PerAgByte / (m * l);  // one S_fp32 in NS units
  // Eq. 10: a bf16 staging slot takes at most (L/2) S_fp32, a generation L
  // blocks, the two outbox banks 2 n_out blocks, each bank one spare.
  // One node has no Level 2: its staging slot holds one row per sender
  // ((L-1)/L of an output chunk in bf16), and there is no inbox or spare.
  // The paper's bf16 slot doubles for fp32 gradients, and a push landing
  // adds a push area the size of the inbox (RsPlan::pushAreaBytes): without
  // them the bound sat below the plan's own staging bytes. One GPU per node
  // has no local peers, so nothing to stage (RsPlan::stagingSlotBytes is 0).
  const bool multiNode = nodes > 1;
  const double gradScale = gradItemSize / 2.0;  // gradient bytes per bf16 byte (Eq. 10's slot is bf16)
  const double slot = (multiNode ? (gpusPerNode > 1 ? l / 2.0 : 0.0) : (l - 1.0) / (2.0 * l)) * gradScale;
  const double inbox = multiNode ? l * bufferGenerations : 0.0;
  const double pushArea = multiNode && landing == Landing::kPush ? inbox : 0.0;
  const double spares = multiNode ? 2.0 * std::min(p, 2) : 0.0;
  auto area = [&](double outbox) {
    return (slot * stagingSlots + inbox + pushArea + 2.0 * outbox + spares) * perFp32 * perPass;
  };
  MemoryModel mm;
  if (railLane) {
    // App. F's lane: the inbox generations only, L rows in the gradient dtype;
    // the gradients themselves are the senders' outbox, in both modes.
    mm.rsAreaInPlace = mm.rsAreaSlotReuse = bufferGenerations * l * perFp32 * gradItemSize / 4.0 * perPass;
  } else {
    mm.rsAreaInPlace = area(nodes > 1 ? m - 1 : 0);               // Eq. 11
    mm.rsAreaSlotReuse = area(nodes > 1 ? std::min(2.0 * roundWidth, m - 1) : 0);  // Eq. 12 (n_out <= min(2k, M-1))
  }
  mm.rsAreaBound = mode == Mode::kInPlace ? mm.rsAreaInPlace : mm.rsAreaSlotReuse;
  // Two ring slots and the receive stage replace FSDP2's unsharded parameters
  // and prefetched output; In-Place also keeps the previous layer's
  // gradients (NS for bf16 gradients of a bf16 group), Slot-Reuse keeps them
  // in a vacated slot.
  // Two ring slots + the receive stage (none on the all-gather's rail lane).
  const double ring = 2.0 + (multiNode && !agRailLane ? 1.0 / l : 0.0);
  const double gradsNs = static_cast<double>(gradItemSize) / agItemSize;
  mm.tideLiveInPlace = ring + mm.rsAreaInPlace + gradsNs;  // the previous layer's gradients
  // Slot-Reuse parks the gradients in the vacated ring slot only where they fit
  // it; gradients wider than the group (fp32 gradients of a bf16 group, after
  // gradient sync was off) are read in place and live as in In-Place.
  mm.tideLiveSlotReuse = ring + mm.rsAreaSlotReuse + (gradItemSize > agItemSize ? gradsNs : 0.0);
  mm.tideLive = mode == Mode::kInPlace ? mm.tideLiveInPlace : mm.tideLiveSlotReuse;
  // FSDP2: the unsharded parameters, the prefetched output and the previous
  // layer's fp32 reduce-scatter input (N S_fp32): 4 NS for a bf16 group.
  mm.fsdp2Live = 2.0 + fp32PerAgByte;
  return mm;
}

}  // namespace tide::plan
