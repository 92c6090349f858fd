#include "fabric/cuda/rail_transport.hpp"

#include <cstdio>
#include <cstdlib>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/nccl_bootstrap.hpp"
#include "fabric/cuda/stream_memops.hpp"

namespace tide::fabric::cuda {

const char* railModeName(RailMode mode) {
  switch (mode) {
    case RailMode::kCopyEngine: return "copy-engine";
    case RailMode::kSendRecv: return "nccl-send-recv";
    case RailMode::kRma: return "nccl-host-rma";
  }
  return "?";
}

SendRecvRails::SendRecvRails(ncclComm_t rail, double deadlineSeconds, int rank)
    : rail_(rail),
      deadlineSeconds_(deadlineSeconds),
      groupEnd_(deadlineSeconds, [rank, deadlineSeconds](double seconds) {
        std::fprintf(stderr,
                     "[tide cuda fabric] FATAL: rank %d: issuing NCCL rail sends and receives (ncclGroupEnd) has not "
                     "returned for %.1f s (deadline %g s): NCCL connects rail peers at their first transfers and "
                     "waits for a peer that does not issue its side (alive but stuck, or out of step). Aborting the "
                     "process (fail stop).\n",
                     rank, seconds, deadlineSeconds);
        std::fflush(stderr);
        std::abort();
      }) {}

void SendRecvRails::deferSend(cudaStream_t stream, int railPeer, const void* src, int64_t bytes) {
  ops_.push_back({.send = true, .stream = stream, .peer = railPeer, .src = src, .bytes = bytes});
}

void SendRecvRails::deferRecv(cudaStream_t stream, int railPeer, void* dst, int64_t bytes,
                              uint64_t* counter, uint64_t value) {
  ops_.push_back({.stream = stream, .peer = railPeer, .dst = dst, .bytes = bytes, .counter = counter,
                  .value = value});
}

void SendRecvRails::flush() {
  if (ops_.empty()) return;
  std::vector<Op> ops;
  ops.swap(ops_);
  TIDE_NCCL_CHECK(ncclGroupStart());
  ncclResult_t issued = ncclSuccess;
  for (const Op& op : ops) {
    if (issued != ncclSuccess) break;
    if (op.bytes == 0) continue;  // a receive of nothing: only its counter, below
    issued = op.send ? ncclSend(op.src, static_cast<size_t>(op.bytes), ncclUint8, op.peer, rail_, op.stream)
                     : ncclRecv(op.dst, static_cast<size_t>(op.bytes), ncclUint8, op.peer, rail_, op.stream);
  }
  groupEnd_.enter();
  const ncclResult_t ended = ncclGroupEnd();
  groupEnd_.leave();
  TIDE_NCCL_CHECK(issued);
  TIDE_NCCL_ISSUE(ended);
  // The counters go on the streams behind the receives: a nonblocking group is awaited first.
  if (ended == ncclInProgress) awaitCommReady(rail_, deadlineSeconds_, "enqueueing NCCL rail sends and receives");
  const StreamMemOps& memops = StreamMemOps::get();
  for (const Op& op : ops)
    if (!op.send && op.counter != nullptr) memops.write(op.stream, op.counter, op.value);
}

}  // namespace tide::fabric::cuda
