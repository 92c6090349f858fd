// TIDE fabric: what the hardware does, and nothing else (DESIGN.md §3.2).
//
// One Endpoint per rank. Work is enqueued on the rank's queues and runs
// asynchronously, in order per queue (a CUDA stream, or a worker thread on the
// host fabric). Cross-queue and cross-rank order comes only from events and
// counters. The collectives (src/collectives) are written once against this
// interface; the host fabric (threads or processes) and the CUDA fabric
// implement it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tide/plan.hpp"

namespace tide::fabric {

// A wait passed its deadline, a peer died, or a checker saw a violation. The
// message names the rank, the call, the peer and what was awaited.
class FabricError : public std::runtime_error {
 public:
  // kDevice: a CUDA/NCCL call failed; kUnusable: a communicator refuses every
  // call after one failed midway (its protocol positions left its peers').
  enum class Kind { kTimeout, kProtocol, kPeerFailure, kUsage, kDevice, kUnusable };
  FabricError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// A 2-D strided copy between addresses the endpoint can reach (its own arena,
// its own buffers, a node-local peer's arena). rows == 1: a flat copy, whose
// pitches are unused. rows > 1: both pitches are at least the width
// (cudaMemcpy2D's rule: rows neither overlap nor go backwards); every fabric
// refuses other pitches as a usage error when the copy is issued.
// The ops of one copy() call may run in any order (one batched submission), so
// none may write bytes another of them reads or writes. The host fabric
// refuses such a list (findCopyBatchOverlap); the CUDA fabric does not look
// (a sort per call on the issue path): the collectives issue the same lists on
// both, so CPU runs check theirs. The same holds for a railPuts list and for
// the pieces of one sum (findSumOpOverlap: they run at once on the GPU).
struct CopyOp {
  void* dst = nullptr;
  const void* src = nullptr;
  int64_t width = 0;  // bytes per row
  int64_t rows = 1;
  int64_t srcPitch = 0;
  int64_t dstPitch = 0;
  // The copy moves inbox bytes on to their lander (push landing): for the
  // protocol checker it consumes them as a landing's read does.
  bool consumesSource = false;
};

// The fp32 sum step (Level 1). One op carries many pieces (a piece is one
// parameter's part of a sub-slice; the table travels as kernel parameters).
// For each piece, row r and element x < elems:
//   s = 0; for each source k in order: s += (x < valid[k][r]) ? src_k[r][x] : 0
//   dst[r][x] = accumulate ? dst[r][x] + alpha * s : alpha * s
// in fp32, without contraction, so every fabric gives the same bits (a NaN
// result is written as kCanonicalNanBits, the GPU's NaN, whatever NaN payloads
// the inputs carried: CPU adds keep a payload or give 0xFFC00000). Sources
// are in the gradient dtype, in the order the op lists them (TIDE-RS's Level 1
// lists every local rank's contribution in local-rank order, the own one at
// its rank's place: collectives/level1_sum.hpp says why); elements past
// `valid` are padding rows and read as zero.
inline constexpr uint32_t kCanonicalNanBits = 0x7FFFFFFFu;

struct SumSource {
  const void* ptr = nullptr;
  int64_t pitch = 0;            // elements between rows
  std::vector<int64_t> valid;   // per row (exactly `rows` counts): elements that hold data
};
struct SumPiece {
  float* dst = nullptr;
  int64_t dstPitch = 0;  // elements between rows
  int64_t rows = 1;
  int64_t elems = 0;
  std::vector<SumSource> sources;
};
struct SumOp {
  plan::DType srcType = plan::DType::kBF16;
  int ctas = 0;  // CTA budget (0: the fabric's default); never changes the bits
  float alpha = 1.0f;
  bool accumulate = false;
  std::vector<SumPiece> pieces;
};

// The Level 2 landing step: dst[x] = accumulate ? dst[x] + alpha * s : alpha * s,
// s = sum of the fp32 sources in order (one per GPU of the node, the unicast
// stand-in for multimem.ld_reduce). clearSources zeroes what was read.
struct LandOp {
  int ctas = 0;  // CTA budget (0: the fabric's default); never changes the bits
  float* dst = nullptr;
  int64_t elems = 0;
  std::vector<float*> sources;
  float alpha = 1.0f;
  bool accumulate = false;
  bool clearSources = false;
};

// Fault kinds the fabric itself injects (the collectives inject the others).
struct FabricFaults {
  int loseSignalAfter = -1;     // drop the n-th remote signal of this rank (-1: never)
  int duplicatePutAfter = -1;   // replay the n-th rail put's old bytes after the next put to the same place
  double stallSeconds = 0;      // every queue of this rank stalls before its first op (host fabric only)
  // The n-th queue task of this rank throws an exception that is not a FabricError, as a
  // failed allocation would (-1: never; host fabric only).
  int failTaskAfter = -1;
};

struct Stats {
  int64_t copyBytes = 0;   // bytes moved by copy queues (node-local)
  int64_t railBytes = 0;   // bytes moved by rail puts
  int64_t copyOps = 0;     // descriptors issued
  int64_t railPuts = 0;
  int64_t sumElems = 0;
  int64_t landElems = 0;
  int64_t copyGraphLaunches = 0;  // copy lists that went out as one launch of a cached graph (CUDA)
  int64_t copyGraphsBuilt = 0;
  int64_t events = 0;  // events recorded (record())
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;

  virtual int rank() const = 0;
  virtual const plan::Topology& topology() const = 0;

  // Symmetric arena: same size and layout on every rank, all zero when the endpoint is made
  // (before any peer can reach it): the reduce-scatter's pull landing reads a wave's unused
  // inbox blocks as zeros and only keeps the inbox zero from one call to the next.
  virtual std::byte* arena() = 0;
  virtual int64_t arenaBytes() const = 0;
  // Load/store address of a node-local peer's arena; nullptr where the peer is
  // not reachable (another node).
  virtual std::byte* peerArena(int peerRank) = 0;
  // Can copies reach a peer on another node directly (virtual nodes on one
  // host)? Otherwise rails need railPut.
  virtual bool railsByCopy() const = 0;
  // Are rail transfers two-sided (NCCL send/recv)? Then railPut only sends:
  // the receiver posts the matching railRecv (same bytes, in the same order
  // per sender), which lands them and sets the receiver's own counter;
  // signal() reaches no rank on another node, and a rank's consecutive rail
  // puts and receives form one group (any other call on the endpoint closes
  // it), so the opposite transfers of one round cannot deadlock.
  virtual bool railsTwoSided() const { return false; }
  // Do rail puts read only from this rank's arena? (NCCL host RMA wants both
  // ends of a put in a registered window.) Then the collectives copy a source
  // that lies elsewhere into their scratch first.
  virtual bool railSourcesInArena() const { return false; }
  // How rail transfers travel on this endpoint, and why, in words (e.g.
  // "nccl-send-recv (host RMA unavailable: ...)"): the run-time choice, for reports.
  virtual std::string railsDescription() const = 0;

  virtual int numQueues() const = 0;

  // Human-readable name of the call now being enqueued ("all_gather#3"), used
  // in every error message.
  virtual void setCallContext(const std::string& call) = 0;

  // ---- stream-ordered work on queue q
  virtual void copy(int q, const std::vector<CopyOp>& ops) = 0;
  virtual void sum(int q, const SumOp& op) = 0;
  virtual void land(int q, const LandOp& op) = 0;
  virtual void zero(int q, void* dst, int64_t bytes) = 0;
  // Rail transfer of `bytes` from a local address into `dstRank`'s arena at
  // `dstOffset` (same rail, any node), then counter `signalId` on dstRank is
  // set to `signalValue` (signalId < 0: no signal).
  virtual void railPut(int q, int dstRank, int64_t dstOffset, const void* src, int64_t bytes,
                       int signalId, uint64_t signalValue) = 0;
  // Several rail puts to one rank, the signal after the last: as many
  // railPut calls with the signal on the last (a list of at least one; a
  // zero-byte piece carries a signal alone). A fabric may submit them at
  // once: the CUDA fabric's copy-engine rails issue one copy batch, where a
  // put each costs the host a submission (the rail lanes put a row run per
  // parameter).
  struct RailPiece {
    int64_t dstOffset = 0;
    const void* src = nullptr;
    int64_t bytes = 0;
  };
  virtual void railPuts(int q, int dstRank, const std::vector<RailPiece>& pieces, int signalId, uint64_t signalValue) {
    if (pieces.empty()) throw FabricError(FabricError::Kind::kUsage, "railPuts of no piece");
    for (size_t i = 0; i < pieces.size(); ++i)
      railPut(q, dstRank, pieces[i].dstOffset, pieces[i].src, pieces[i].bytes, i + 1 == pieces.size() ? signalId : -1,
              signalValue);
  }
  // Two-sided rails: receive `bytes` from srcRank's matching railPut into
  // this rank's arena at `dstOffset`, then this rank's counter `signalId` :=
  // `signalValue` (signalId < 0: none). The host fabric with one-sided rails
  // refuses it; the CUDA fabric's copy-engine rails ignore it (the sender
  // writes and signals by itself).
  virtual void railRecv(int /*q*/, int /*srcRank*/, int64_t /*dstOffset*/, int64_t /*bytes*/, int /*signalId*/,
                        uint64_t /*signalValue*/) {
    throw FabricError(FabricError::Kind::kUsage, "railRecv on a fabric with one-sided rails");
  }
  // After every earlier op on q completes: counter `id` on dstRank := value.
  // Each counter has one writer and its values only grow (cuStreamWriteValue).
  virtual void signal(int q, int dstRank, int id, uint64_t value) = 0;
  // q blocks until local counter `id` >= value; past the deadline the queue
  // fails stop and the error names `peer` and `what`.
  virtual void wait(int q, int id, uint64_t value, int peer, const char* what) = 0;

  // ---- ordering between queues of this rank
  // An event stays usable for the next kEventWindow events this endpoint
  // records, on any queue; waiting on an older one is a usage error. The CUDA
  // fabric recycles its events after that many, and the host fabric refuses
  // an older one the same way, so that CPU runs catch an event held too long
  // (counters, not events, carry an order across calls). A reduce-scatter
  // pass records an event per outbox block, up to one per node, before it
  // waits on the first: the window holds that at the most nodes a
  // communicator takes with room to spare (issue_only_test).
  static constexpr uint64_t kEventWindow = 4096;
  // Never recorded: "nothing to wait for". waitEvent and synchronizeEvent take
  // it as complete and eventLive as live, on every fabric and queue.
  static constexpr uint64_t kNoEvent = 0;
  virtual uint64_t record(int q) = 0;                   // event: q's work so far (never kNoEvent)
  virtual void waitEvent(int q, int srcQueue, uint64_t event) = 0;
  // Whether waitEvent and synchronizeEvent would take `event` of queue q:
  // recorded there and not recycled since.
  virtual bool eventLive(int q, uint64_t event) const = 0;

  // ---- host side
  // Host blocks until q drained (deadline; rethrows a queue's failure).
  virtual void synchronize(int q) = 0;
  virtual void synchronizeAll() = 0;
  // Host blocks until `event` of queue q has completed (deadline; rethrows a
  // queue's failure). Work enqueued on q after the event may still run (e.g. a
  // reduce-scatter's network phase after its read-done event).
  virtual void synchronizeEvent(int q, uint64_t event) = 0;
  virtual uint64_t counterValue(int id) = 0;
  // Why work already issued failed (a wait past its deadline, a peer's
  // failure in a job that records one), once it has; empty while none did.
  // Non-blocking: the communicator asks before every call, and refuses the
  // call once this is set, as it does after a call that failed midway.
  // Fabrics whose issued work cannot fail without ending the process (the
  // CUDA fabric's wait watchdog aborts it) report nothing here.
  virtual std::string failureOfIssuedWork() const { return ""; }
  // Drops the rail transfers deferred into a group not yet issued (two-sided
  // and RMA rails issue a call's transfers as one group at its next flush).
  // For a call that failed midway: its half group, issued later by a
  // synchronize or a destroy, would meet no peer's transfers and hang them
  // (or this rank) to the deadline.
  virtual void discardDeferredRails() {}
  // A call failed midway on this rank (its issue threw after the call took its
  // number): its peers wait for work this rank will never issue. A fabric
  // whose ranks share a job failure record (the host fabric) records
  // `message` there, so that they stop at their next wait, naming it, rather
  // than at their deadline. The CUDA fabric has no such record: its peers'
  // waits end at their deadline (the wait watchdog).
  virtual void recordCallFailure(const std::string& /*message*/) {}

  // Fault-injection hook: q idles for `seconds` before its next op (the host
  // fabric gives up early, as its waits do, once it stops or the job fails).
  virtual void delay(int q, double seconds) = 0;
  // Protocol-checker hook: arena bytes a landing consumes (the inbox).
  virtual void annotateInbox(int64_t /*offset*/, int64_t /*bytes*/) {}

  virtual Stats stats() const = 0;
  virtual void resetStats() = 0;
  virtual void setFabricFaults(const FabricFaults& f) = 0;
  // How often an injected fabric fault has acted so far (a lost signal, a
  // replayed put, a stall taken): a fault with nothing to act on in a run
  // (no remote signal, no second put to one place) stays at 0, which tells
  // "not applicable here" from "not detected". The host fabric counts a
  // replayed put only where its old bytes differ from the new ones; the CUDA
  // fabric, which cannot compare them on the host, counts every replay.
  virtual int64_t fabricFaultFirings() const { return 0; }
};

}  // namespace tide::fabric
