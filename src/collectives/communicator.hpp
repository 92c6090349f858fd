// TIDE-AG and TIDE-RS, written once against the fabric interface.
//
// One Communicator per rank. Calls must be issued in the same order on every
// rank (the collective order); each call only enqueues work and returns events
// on queue kCallerQueue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/faults.hpp"
#include "collectives/scratch_layout.hpp"
#include "tide/fabric.hpp"
#include "tide/plan.hpp"

namespace tide::collectives {

// Queues of a rank: the caller's, copy engines, SM steps, rails.
inline constexpr int kCallerQueue = 0;
inline constexpr int kCopyQueue = 1;
inline constexpr int kSumQueue = 2;
inline constexpr int kNetQueue = 3;
inline constexpr int kOwnCopyQueue = 4;  // AG: the own landing, beside the peers' copies
// RS across nodes: each wave's receive, own-node partial and landing, so the
// next wave's sends on kNetQueue overlap this wave's landing.
inline constexpr int kLandQueue = 5;
// AG: the "landing free" signals to the node's other ranks. The caller's
// queue may be a different stream at every call, and unordered streams could
// then publish call v+1's signal before call v's, letting a peer write into
// call v's landing before the caller reached that call (counters are read as
// "at least v"). This queue runs the signals in call order, each after its
// call's entry point, and never waits on a peer.
inline constexpr int kSignalQueue = 6;
inline constexpr int kQueuesNeeded = 7;

// How a communicator issues its work (not what it computes: every choice
// gives the same bits).
struct IssueOptions {
  // RS across nodes: land on kLandQueue (true) or behind the sends on
  // kNetQueue (false, Algorithm 1's single network stream). Where rails are
  // about as fast as a landing (virtual nodes over NVLink), one queue adds
  // each wave's landing time to the next wave's sends.
  bool landingOwnQueue = true;
};

struct ReduceScatterEvents {
  uint64_t readDone = 0;  // on kCallerQueue: gradients may be released
  uint64_t done = 0;      // on kCallerQueue: the output is final
};

class Communicator {
 public:
  Communicator(fabric::Endpoint& ep, ScratchLayout layout, FaultConfig faults = {}, IssueOptions issue = {});

  // Writes every rank's shard into every node-local rank's landing at arena
  // offset `landingOffset` (same on all ranks). `shard` is this rank's packed
  // S-byte shard (any local memory), or nullptr on one node: the shard is
  // already in this rank's own landing rows (in place). Returns the
  // caller-queue event after which the landing holds the unsharded group.
  uint64_t allGather(const plan::Plan& plan, const void* shard, int64_t landingOffset);
  // Whether a landing at `landingOffset` lies in an arena of `arenaBytes`
  // (allGather also keeps it off the scratch). Static: the C API checks a call
  // before its first collective makes the communicator and sizes the scratch.
  static bool landingInArena(int64_t arenaBytes, const plan::GroupLayout& g, int64_t landingOffset);
  // Why allGather refuses a landing at `landingOffset` (outside the arena, or
  // meeting `layout`'s scratch where `layout` is not null), or "". Static, for
  // the same reason: a refused call must not make the communicator (and so fix
  // the scratch's size) first.
  static std::string landingProblem(int64_t arenaBytes, const plan::GroupLayout& g, int64_t landingOffset,
                                    const ScratchLayout* layout);
  // Why allGather refuses `shard` (one rank's argument: in place across
  // nodes, a shard in the arena that runs past it or meets the landing or
  // `layout`'s scratch, where `layout` is not null), or "". Static: the C API
  // asks before the ranks compare the call, so that a refused call is counted
  // nowhere and a retry pairs with the peers' call.
  static std::string shardProblem(const plan::GroupLayout& g, const void* shard, int64_t landingOffset,
                                  const std::byte* arena, int64_t arenaBytes, const ScratchLayout* layout);
  // Why reduceScatter refuses `grads` or `out` (one rank's arguments: a buffer that
  // shares bytes with the arena but does not lie inside it, or that meets `layout`'s
  // scratch, which every call rewrites while it reads the gradients and before it
  // writes the output), or "". Static, for the same reason as shardProblem.
  static std::string reduceScatterBufferProblem(const plan::GroupLayout& g, const std::vector<const void*>& grads,
                                                const float* out, const std::byte* arena, int64_t arenaBytes,
                                                const ScratchLayout* layout);

  // out (this rank's packed fp32 shard, E elements) =
  //   (accumulate ? out : 0) + alpha * sum over ranks of grads[p] rows.
  // grads[p] holds parameter p's unsharded gradient (D_p*K_p elements).
  ReduceScatterEvents reduceScatter(const plan::Plan& plan, const std::vector<const void*>& grads,
                                    float* out, float alpha, bool accumulate);

  fabric::Endpoint& endpoint() { return ep_; }
  // How often this rank's injected fault (FaultConfig) has changed what it
  // issues; 0 where the run gives it nothing to act on (e.g. drop-credit on
  // one node, skip-stale-zeroing without stale blocks).
  int64_t faultFirings() const { return faultFirings_; }
  const ScratchLayout& layout() const { return layout_; }
  // Throws FabricError kUnusable once a call failed after taking its call
  // number, or once work issued on the endpoint failed (a wait past its
  // deadline): either way the peers' call counts and this rank's no longer
  // pair. Every collective asks first; so may a caller about to meet the
  // peers on the host.
  void refuseIfUnusable();

 private:
  std::byte* addressOf(const plan::BufferRef& ref, const void* shard, int64_t landingOffset,
                       const std::vector<const void*>* grads, int stagingSlot);
  std::vector<fabric::CopyOp> toCopyOps(const std::vector<plan::CopyDesc>& descs, const void* shard,
                                        int64_t landingOffset, const std::vector<const void*>* grads,
                                        int stagingSlot);
  bool injected(Fault f) const { return faults_.kind == f && faults_.rank == ep_.rank(); }
  void noteFaultFired() { ++faultFirings_; }
  void checkPlan(const plan::Plan& plan) const;
  // Runs `issue`, the work of call `name` (the endpoint's call context from
  // here on, for its messages), whose call number is taken: an
  // exception from it may leave part of the call enqueued and this rank's
  // protocol positions ahead of what its peers will see, so from then on the
  // communicator refuses every call (a retry would pair with the peers'
  // next call: wrong bytes or a hang), and the exception says so.
  template <typename Issue>
  auto issueOrMarkUnusable(const std::string& name, Issue&& issue) -> decltype(issue()) {
    try {
      ep_.setCallContext(name);
      return issue();
    } catch (const fabric::FabricError& e) {
      ep_.discardDeferredRails();
      unusable_ = name + " failed midway: " + e.what();
      // A peer's failure is the job's already; this rank's own is told to them.
      if (e.kind() != fabric::FabricError::Kind::kPeerFailure) ep_.recordCallFailure(unusable_);
      throw fabric::FabricError(e.kind(), std::string(e.what()) + " [" + name +
                                              " failed midway: this communicator is unusable from here on]");
    } catch (const std::exception& e) {
      ep_.discardDeferredRails();
      unusable_ = name + " failed midway: " + e.what();
      ep_.recordCallFailure(unusable_);
      throw;
    }
  }
  uint64_t issueAllGather(const plan::Plan& plan, const void* shard, int64_t landingOffset, uint64_t v);
  ReduceScatterEvents issueReduceScatter(const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
                                         float alpha, bool accumulate);
  int rsLandQueue() const { return issue_.landingOwnQueue ? kLandQueue : kNetQueue; }
  // The staging slot of Level 1 chunk `seq` (counted over every call): by the
  // scratch's slot count (the largest of its plans), not the call's plan, so
  // that a chunk and the one it must wait for follow one modulus whatever
  // group each was.
  int stagingSlotOf(uint64_t seq) const {
    return static_cast<int>(seq % static_cast<uint64_t>(layout_.stagingSlots));
  }
  // kWrongLandingOffset: the first own-shard copy one byte off (a test hook).
  void shiftOneByteUnderFault(const plan::GroupLayout& g, std::vector<plan::CopyDesc>& localDescs);
  // TIDE-AG on App. F's rail lane (L = 1 across nodes, AgPlan::railLane;
  // ag_rail_lane.cpp): the caller-queue event after which the landing is whole.
  uint64_t agRailLane(const plan::Plan& plan, const void* shard, int64_t landingOffset, uint64_t v, uint64_t entry);
  // TIDE-AG's two halves, issued in this order (communicator.cpp).
  std::vector<uint64_t> agRailRounds(const plan::Plan& plan, const void* shard, uint64_t v, uint64_t entry);
  // Returns the copy-queue event after which this rank's own share is done.
  uint64_t agLocalCopies(const plan::Plan& plan, const void* shard, int64_t landingOffset, uint64_t v,
                     uint64_t entry, const std::vector<uint64_t>& arrived);
  void stageChunk(const plan::Plan& plan, const std::vector<const void*>& grads, uint64_t seq, int pass,
                  int block);
  void rsSingleNode(const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
                    float alpha, bool accumulate, uint64_t entry);
  // Across nodes: one call's issue as a per-call object (rs_multi_node.cpp),
  // over what every such call shares (rs_call_across_nodes.hpp).
  class RsCallAcrossNodes;
  class MultiNodeRs;
  void rsMultiNode(const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
                   float alpha, bool accumulate, uint64_t entry);
  // App. F's rail lane (L = 1 across nodes, RsPlan::railLane; rs_rail_lane.cpp).
  // Its rails and sums read the gradients: the events of the last reads (0:
  // none on that queue).
  struct GradientReads {
    uint64_t net = 0;   // kNetQueue: the last send
    uint64_t land = 0;  // the landing queue: the own rows' sum
  };
  class RailLaneRs;
  GradientReads rsRailLane(const plan::Plan& plan, const std::vector<const void*>& grads, float* out, float alpha,
                           bool accumulate, uint64_t entry);

  fabric::Endpoint& ep_;
  ScratchLayout layout_;
  FaultConfig faults_;
  int64_t faultFirings_ = 0;  // faultFirings(): this rank's, not a protocol position
  IssueOptions issue_;
  // Cumulative protocol positions; identical on every rank that issues the
  // same calls in the same order.
  uint64_t agCalls_ = 0;
  uint64_t rsCalls_ = 0;
  std::string unusable_;  // why, once a call failed after taking its number (issueOrMarkUnusable)
  // Staged reduce-scatters across nodes: their outbox and spare banks
  // alternate by this count, which rail-lane calls (no banks) leave alone.
  uint64_t rsBankedCalls_ = 0;
  uint64_t rsChunks_ = 0;       // Level 1 destination blocks consumed
  uint64_t rsWaves_ = 0;        // Level 2 waves
  uint64_t rsSends_[2] = {0, 0};  // outbox blocks filled per bank
  // Under the reuse-outbox-early fault only, per bank and outbox block:
  // whether its last fill holds elements someone reads (the fault acts only
  // where it overwrites some unsent).
  std::vector<bool> rsOutboxHeld_[2];
  uint64_t rsSpareUses_[2] = {0, 0};
  uint64_t rsGenLastUse_[2] = {0, 0};  // wave that last used each inbox generation
  uint64_t rsLaneGenLastUse_[2] = {0, 0};  // the same for the rail lane's inbox (ScratchLayout::laneInbox)
};

}  // namespace tide::collectives
