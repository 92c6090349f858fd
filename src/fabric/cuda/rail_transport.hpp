// Rail transfers between same-local-rank GPUs of different nodes.
//
// Copy engine (railsByCopy): every rail peer is load/store reachable (virtual
// nodes on one host), so a put is a copy into the peer's arena followed by a
// stream write of the peer's counter, like any node-local copy.
//
// Send/recv (fallback across real nodes): NCCL point-to-point on the rail
// communicator. Two-sided, so the receiver posts the matching railRecv; puts
// and receives are deferred and issued together in one NCCL group at the next
// flush (any other fabric call flushes), so that opposite transfers of one
// round cannot deadlock. The receiver sets its own counter after its receive.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <vector>

#include "fabric/stall_monitor.hpp"

namespace tide::fabric::cuda {

// kRma: NCCL host RMA (rma_rails.hpp), two-sided to the collectives like kSendRecv.
enum class RailMode : int { kCopyEngine = 0, kSendRecv = 1, kRma = 2 };
const char* railModeName(RailMode mode);

class SendRecvRails {
 public:
  // `deadlineSeconds` bounds the host wait for a nonblocking rail
  // communicator's enqueue (NCCL_COMM_BLOCKING=0 in the environment makes it
  // one), and the blocking one's group end: NCCL connects a pair of rail peers
  // at their first transfers, inside ncclGroupEnd, and waits there for the
  // peer's side; a peer alive but never issuing would hold this thread for
  // good. Past the deadline the process stops (`rank` names it).
  SendRecvRails(ncclComm_t rail, double deadlineSeconds, int rank);

  void deferSend(cudaStream_t stream, int railPeer, const void* src, int64_t bytes);
  // After the receive lands: *counter := value on `stream`.
  void deferRecv(cudaStream_t stream, int railPeer, void* dst, int64_t bytes, uint64_t* counter,
                 uint64_t value);
  bool pending() const { return !ops_.empty(); }
  // Issues every deferred transfer in one NCCL group, then the counter writes.
  void flush();
  // Forgets the deferred transfers unissued (a call that failed midway).
  void discard() { ops_.clear(); }

 private:
  struct Op {
    bool send = false;
    cudaStream_t stream = nullptr;
    int peer = 0;
    const void* src = nullptr;
    void* dst = nullptr;
    int64_t bytes = 0;
    uint64_t* counter = nullptr;
    uint64_t value = 0;
  };
  ncclComm_t rail_;
  double deadlineSeconds_;
  std::vector<Op> ops_;
  StallMonitor groupEnd_;  // watches flush()'s NCCL group from a thread of its own
};

}  // namespace tide::fabric::cuda
