// Rails over NCCL's host RMA (ncclPutSignal / ncclSignal / ncclWaitSignal,
// NCCL >= 2.29): one-sided puts by copy engines (NVLink) or the proxy
// (network), no SM. Two-sided to the collectives, like send/recv: the
// receiver posts railRecv, and RmaRendezvous turns each group of rail
// transfers into credits, puts after their credits, whole-group arrival
// counts and counter writes (src/fabric/rma_rendezvous.hpp says why that is
// sound with per-peer counts). Data signals and credits travel on two rail
// communicators, so that neither counts the other's.
//
// NCCL wants both ends of a put in a window registered with
// NCCL_WIN_COLL_SYMMETRIC (tide_nccl_rma_probe, NCCL 2.30.7): the arena is
// registered so on the data communicator, and puts from anywhere else are
// refused here (the collectives copy such a source into their scratch first,
// Endpoint::railSourcesInArena).
//
// Compiled only against NCCL >= 2.29 headers (TIDE_HAVE_NCCL_RMA); the
// endpoint takes it at run time when the loaded library has the calls, is
// >= 2.29, and grants host RMA on every rank's rail communicator.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <string>

#include "fabric/rma_rendezvous.hpp"
#include "fabric/stall_monitor.hpp"

#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
#define TIDE_HAVE_NCCL_RMA 1
#else
#define TIDE_HAVE_NCCL_RMA 0
#endif

namespace tide::fabric::cuda {

class DeviceArena;
class WaitWatchdog;

// Host RMA entry points of the NCCL library loaded in this process, looked
// up at run time, so that a build against NCCL >= 2.29 headers still loads
// beside an older library (PyTorch's) and takes send/recv rails there.
// Empty when this build or that library lacks them; `missing` says which.
struct NcclRmaApi {
#if TIDE_HAVE_NCCL_RMA
  decltype(&ncclPutSignal) putSignal = nullptr;
  decltype(&ncclSignal) signal = nullptr;
  decltype(&ncclWaitSignal) waitSignal = nullptr;
#endif
  void* queryProperties = nullptr;  // ncclCommQueryProperties (nccl_device.h), optional: null, cannot ask
  const char* missing = nullptr;
  bool ok() const { return missing == nullptr; }
  static const NcclRmaApi& get();
};

#if TIDE_HAVE_NCCL_RMA
class RmaRails {
 public:
  // Collective over `data`: registers the arena there, the window the puts
  // target. `data` and `credit` join the same ranks (the rail), each created
  // with RMA contexts (ncclConfig_t::numRmaCtx >= 1). `data` is blocking: the
  // registration, and the deregistration in the destructor, run under a
  // fail-stop deadline of `deadlineSeconds` (fail_stop_deadline.hpp); `rank` names this rank.
  RmaRails(ncclComm_t data, ncclComm_t credit, DeviceArena& arena, double deadlineSeconds, int rank);
  ~RmaRails();
  // The communicators are broken (NcclComms::markBroken): the destructor
  // leaves the window to the abort instead of deregistering it collectively.
  void abandonWindow() { window_ = nullptr; }
  RmaRails(const RmaRails&) = delete;
  RmaRails& operator=(const RmaRails&) = delete;

  // The group's queue: every rail transfer of this endpoint goes on one
  // queue, `queue` with its `stream` (the counts are per peer, not per
  // stream); another one throws.
  void deferSend(int queue, cudaStream_t stream, int railPeer, int64_t dstOffset, const void* src, int64_t bytes);
  // After the group's receives land: counter `signalId` := value (< 0: none).
  void deferRecv(int queue, cudaStream_t stream, int railPeer, int64_t bytes, int signalId, uint64_t value);
  bool pending() const { return group_.pending(); }
  void discard() { group_.discard(); }
  // Issues the deferred group on its stream; its waits for credits and data
  // signals are watched like counter waits (a peer that never signals fails
  // stop at the deadline, naming call `call` and the group's queue).
  void flush(WaitWatchdog& watchdog, const std::string& call);

 private:
  void joinQueue(int queue, cudaStream_t stream);
  ncclComm_t data_;
  ncclComm_t credit_;
  DeviceArena& arena_;
  ncclWindow_t window_ = nullptr;
  double deadlineSeconds_;
  std::string who_;  // names this rank in the fail-stop message
  int queue_ = -1;
  cudaStream_t stream_ = nullptr;
  RmaRendezvous group_;
  StallMonitor issuing_;  // watches flush()'s NCCL calls from a thread of its own
};
#endif

}  // namespace tide::fabric::cuda
