// The two-sided rail contract (Endpoint::railsTwoSided) carried by one-sided
// puts and counted signals, as NCCL's host RMA offers them (ncclPutSignal,
// ncclSignal, ncclWaitSignal, NCCL >= 2.29).
//
// Why a translation: host RMA counts signals per (communicator, peer) only
// (sigIdx and ctx must be 0), so a receiver cannot tell one put's signal
// from another's, and a put lands whenever the sender issues it, ready or
// not. The collectives' two-sided path already says when a receiver is ready
// (it posts railRecv then, in the sender's order) and groups a round's
// transfers; this class turns each such group into:
//
//   1. a credit to the sender of every receive (credit communicator): "my
//      buffer for your next message is free" -- the point where NCCL's
//      ncclRecv would be posted;
//   2. for the sends: wait for one credit per send from each destination,
//      then put every send with its signal (data communicator);
//   3. wait for one data signal per receive from each source;
//   4. the receives' counter writes, in order.
//
// Why it is sound with counts alone: credits and data travel on two
// communicators, so neither class counts the other's signals. A rank's
// credits of group k+1 follow its step 3 of group k on the same queue, so
// no sender can put group k+1 before all of group k has landed: when the
// count of data signals from a peer reaches the group's total, exactly the
// group's puts have landed, in whatever order they did. No deadlock: step 1
// waits for nothing, so every rank's credits go out before any rank waits
// for one.
//
// Zero-byte transfers move nothing and send no signal (as with send/recv):
// a zero-byte receive only writes its counter, in step 4.
#pragma once

#include <cstdint>
#include <vector>

namespace tide::fabric {

// One put: `bytes` from this rank's `src` into `peer`'s window at `dstOffset`.
struct RmaPut {
  int peer = 0;
  int64_t dstOffset = 0;
  const void* src = nullptr;
  int64_t bytes = 0;
};

struct PeerCount {
  int peer = 0;
  int count = 0;
};

// What a fabric offers on the queue a group is flushed to, in that queue's
// order. Counts are consumed: a wait for n signals from a peer waits for n
// more than the waits before it took (ncclWaitSignal's opCnt). A put's source
// is taken to be read once the queue moves past the group: the collectives
// overwrite put sources (the all-gather's rail source, the reduce-scatter
// lane's packed rows) with later work on the same queue.
class RmaRailOps {
 public:
  virtual ~RmaRailOps() = default;
  virtual void grantCredit(int peer) = 0;
  virtual void awaitCredits(const std::vector<PeerCount>& from) = 0;
  virtual void putWithSignal(const RmaPut& put) = 0;
  virtual void awaitPuts(const std::vector<PeerCount>& from) = 0;
  virtual void setCounter(int id, uint64_t value) = 0;
};

class RmaRendezvous {
 public:
  void deferSend(int peer, int64_t dstOffset, const void* src, int64_t bytes);
  // After the group's receives land: counter `signalId` := value (signalId < 0: none).
  void deferRecv(int peer, int64_t bytes, int signalId, uint64_t value);
  bool pending() const { return !sends_.empty() || !recvs_.empty(); }
  // Issues the deferred group through `ops` (steps 1-4 above) and clears it.
  void flush(RmaRailOps& ops);
  // Forgets the deferred group unissued (a call that failed midway).
  void discard() {
    sends_.clear();
    recvs_.clear();
  }

 private:
  struct Recv {
    int peer;
    int64_t bytes;
    int signalId;
    uint64_t value;
  };
  std::vector<RmaPut> sends_;
  std::vector<Recv> recvs_;
};

}  // namespace tide::fabric
