// CUDA implementation of tide::fabric::Endpoint for one process per GPU (as
// under torchrun), or for ranks without NCCL that test multi-rank protocols
// where ranks share GPUs (local_group.hpp: threads of one process, or
// processes through CUDA IPC). DESIGN.md §3.2.
//
//   communicators  world from an NCCL unique id, rail = split(color = local
//                  rank, key = node); the topology (M x L) may be virtual.
//                  Without NCCL: none, the group's host barrier
//   arena          ncclMemAlloc + symmetric window; peers by LSA address.
//                  Without NCCL: cudaMalloc; peers by address (or CUDA IPC)
//   queues         a small pool of CUDA streams (queue 0 may be the caller's)
//   copy           cudaMemcpyBatchAsync / cudaMemcpy2DAsync, or for a recurring
//                  copy list one launch of a cached graph of memcpy nodes (copy engines)
//   signal / wait  cuStreamWriteValue64 / cuStreamWaitValue64 (GEQ) on uint64
//                  counters in the arena, every wait under a watchdog deadline
//   sum / land     short-lived fp32 kernels under a CTA budget
//   rails          copy engine where every rail peer is reachable, else NCCL
//                  host RMA (NCCL >= 2.29 at build and run time), else NCCL
//                  send/recv; the last two are two-sided to the collectives
//                  (the receiver posts railRecv)
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "fabric/cuda/copy_engine.hpp"
#include "fabric/cuda/device_arena.hpp"
#include "fabric/cuda/device_scope.hpp"
#include "fabric/cuda/host_profile.hpp"
#include "fabric/cuda/local_group.hpp"
#include "fabric/cuda/nccl_bootstrap.hpp"
#include "fabric/cuda/rail_transport.hpp"
#include "fabric/cuda/rma_rails.hpp"
#include "fabric/cuda/wait_watchdog.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric::cuda {

struct CudaFabricOptions {
  enum class Rails { kAuto, kCopyEngine, kSendRecv, kRma };

  plan::Topology topology;
  int rank = 0;
  int device = -1;                 // CUDA ordinal; -1: the current device
  int64_t arenaBytes = 0;
  int numCounters = 1024;
  int numQueues = 4;
  double waitTimeoutSeconds = 60;  // env TIDE_FABRIC_WAIT_TIMEOUT_S overrides
  int sumCtas = 16;                // CTA budgets of the two kernels
  int landCtas = 16;
  Rails rails = Rails::kAuto;      // env TIDE_FABRIC_RAILS=auto|copy-engine|send-recv|rma overrides
};

class CudaEndpoint final : public Endpoint {
 public:
  // Collective over all ranks of options.topology.
  CudaEndpoint(const CudaFabricOptions& options, const ncclUniqueId& id);
  // Rank options.rank of `group` (local_group.hpp), on the group's GPU;
  // collective over the group, as is the destructor. Rails are copy-engine
  // copies; options.device and the NCCL rail choices do not apply.
  CudaEndpoint(const CudaFabricOptions& options, LocalGroup& group);
  ~CudaEndpoint() override;
  CudaEndpoint(const CudaEndpoint&) = delete;
  CudaEndpoint& operator=(const CudaEndpoint&) = delete;

  // ---- Endpoint
  int rank() const override { return rank_; }
  const plan::Topology& topology() const override { return topo_; }
  std::byte* arena() override { return arena_->base(); }
  int64_t arenaBytes() const override { return arena_->userBytes(); }
  std::byte* peerArena(int peerRank) override;
  bool railsByCopy() const override { return railMode_ == RailMode::kCopyEngine; }
  bool railsTwoSided() const override { return railMode_ != RailMode::kCopyEngine; }
  bool railSourcesInArena() const override { return railMode_ == RailMode::kRma; }
  std::string railsDescription() const override { return std::string(railModeName(railMode_)) + " (" + railWhy_ + ")"; }
  int numQueues() const override { return static_cast<int>(streams_.size()); }
  // A pending rail group goes out under the call that made it; copy graphs
  // wanted since the last call are built where the device is quiescent.
  void setCallContext(const std::string& call) override;

  void copy(int q, const std::vector<CopyOp>& ops) override;
  void sum(int q, const SumOp& op) override;
  void land(int q, const LandOp& op) override;
  void zero(int q, void* dst, int64_t bytes) override;
  void railPut(int q, int dstRank, int64_t dstOffset, const void* src, int64_t bytes, int signalId,
               uint64_t signalValue) override;
  // Copy-engine rails: one copy batch, then the counter write (else railPut each).
  void railPuts(int q, int dstRank, const std::vector<RailPiece>& pieces, int signalId,
                uint64_t signalValue) override;
  void signal(int q, int dstRank, int id, uint64_t value) override;
  void wait(int q, int id, uint64_t value, int peer, const char* what) override;

  uint64_t record(int q) override;
  void waitEvent(int q, int srcQueue, uint64_t event) override;
  bool eventLive(int q, uint64_t event) const override;

  void synchronize(int q) override;
  void synchronizeAll() override;
  void discardDeferredRails() override;
  void synchronizeEvent(int q, uint64_t event) override;
  uint64_t counterValue(int id) override;
  void delay(int q, double seconds) override;

  Stats stats() const override;
  void resetStats() override;
  void setFabricFaults(const FabricFaults& f) override;
  int64_t fabricFaultFirings() const override { return faultFirings_; }

  // ---- CUDA-specific
  // Queue 0 runs on `stream`, the caller's (e.g. PyTorch's current stream;
  // nullptr is the legacy default stream, PyTorch's default).
  void setCallerStream(cudaStream_t stream);
  // Queue 0 runs on its own stream again, which first waits for the caller's
  // stream as far as it was enqueued (an event): synchronize and the teardown
  // then wait for every call's work on any caller stream, yet never query a
  // stream the caller may since have destroyed. The C API releases the
  // caller's stream when each call returns. False (said on stderr) where the
  // fence failed: the caller's stream then stays queue 0, as before.
  bool clearCallerStream() noexcept;
  cudaStream_t stream(int q) const;
  // Receiver's half of a rail put on send/recv rails (a no-op on copy-engine
  // rails, where the sender writes and signals by itself); signalId < 0: no
  // counter. Puts and receives enqueued back to back go out as one NCCL group.
  void railRecv(int q, int srcRank, int64_t dstOffset, int64_t bytes, int signalId,
                uint64_t signalValue) override;
  RailMode railMode() const { return railMode_; }
  void setCtaBudget(int sumCtas, int landCtas);
  int device() const { return device_; }
  // Device bytes of the symmetric window (ncclMemAlloc: arena, counters, tag,
  // rounded to the window alignment); outside every framework allocator.
  int64_t windowBytes() const { return arena_->windowBytes(); }
  // Copy lists that went out as one graph launch, and graphs built (copy_engine.hpp).
  CopyEngine::GraphStats copyGraphStats() const { return copies_->graphStats(); }
  int ncclVersion() const { return comms_ != nullptr ? comms_->ncclVersion() : 0; }  // 0: co-resident ranks
  double waitTimeoutSeconds() const { return watchdog_->timeoutSeconds(); }
  // Host barrier over all ranks (bootstrap and tests).
  void barrier();
  // Every rank's `mine` (the same length on every rank), rank-major: a
  // host-blocking all-gather over all ranks, under the bootstrap's deadline
  // (NCCL's world communicator, or the local group's). `what` names it in errors.
  std::vector<uint64_t> gatherWords(const std::vector<uint64_t>& mine, const std::string& what);

 private:
  struct EventSlot {
    cudaEvent_t event = nullptr;
    uint64_t id = 0;
    int queue = -1;
  };
  // The slot of `event` of queue q; a usage error unless eventLive.
  const EventSlot& liveEvent(int q, uint64_t event) const;
  // The duplicatePutAfter fault: a snapshot of the n-th put's bytes, replayed
  // after the next put to the same place.
  struct Replay {
    std::byte* dst = nullptr;
    void* bytes = nullptr;
    int64_t size = 0;
    int64_t capacity = 0;
    cudaEvent_t ready = nullptr;
  };

  // Construction steps shared by both kinds of endpoint, in this order.
  void checkOptions(const CudaFabricOptions& options) const;
  // The NCCL constructor's body (communicators, arena, queues, rails, watchdog).
  void startOverNccl(const CudaFabricOptions& options, const ncclUniqueId& id);
  // Everything the endpoint holds, in dependency order, for the destructor and
  // for a constructor that throws part-way. Null members are skipped.
  void releaseResources() noexcept;
  // Every rank's arena the same size (fabric/arena_size_agreement.hpp), or a usage error on every rank.
  void requireSameArenaSize(int64_t bytes);
  void startQueues(int numQueues);  // after the arena: copy engine, streams, events
  void startWatchdog(const CudaFabricOptions& options);  // and enrolls in DeviceQuiescence
  // No watched wait outstanding and every queue it owns idle (DeviceQuiescence's probe).
  bool drainsByItself() const;
  cudaStream_t queue(int q) const;  // validates q
  // What an operation holds for its lifetime: its endpoint's device current
  // (the caller's restored at the end), and the device's gate shared
  // (fabric/device_quiescence.hpp).
  struct OpScope {
    DeviceScope device;
    std::shared_lock<std::shared_mutex> gate;
  };
  // The start of every operation: the OpScope, then faults, late duplicates,
  // and (unless a rail op) the deferred send/recv rails.
  [[nodiscard]] OpScope beginOp(bool flushRails = true);
  bool dropThisRemoteSignal();
  void replayAfterPut(cudaStream_t s, std::byte* dst, const void* src, int64_t bytes, bool duplicate);
  void writeCounter(cudaStream_t s, uint64_t* counter, uint64_t value, bool remote);
  std::string who() const;
  void reportChoiceOnce() const;
  void checkArenaRange(int64_t offset, int64_t bytes, const char* call) const;
  // Host polls `done` (a CUDA query) until it succeeds, under the drain
  // deadline, after issuing the deferred rail group (hostPoll) or not
  // (awaitOnHost: waits that no rail transfer can hold up).
  template <typename Done>
  void hostPoll(Done&& done, const std::string& what);
  template <typename Done>
  void awaitOnHost(Done&& done, const std::string& what);

  plan::Topology topo_;
  int rank_ = 0;
  std::string call_ = "(no call)";
  int sumCtas_ = 16;
  int landCtas_ = 16;
  RailMode railMode_ = RailMode::kCopyEngine;

  int device_ = 0;
  std::unique_ptr<NcclComms> comms_;  // null for co-resident ranks
  LocalGroup* group_ = nullptr;       // ranks without NCCL only
  cudaStream_t control_ = nullptr;    // bootstrap, counter reads, graph uploads (maybe the group's)
  bool ownsControl_ = true;
  std::unique_ptr<DeviceArena> arena_;
  bool keepArenaAllocated_ = false;  // a failed teardown without NCCL: peers may still write into it
  std::unique_ptr<CopyEngine> copies_;  // every copy; recurring lists as cached graphs
  CopyEngine::GraphStats graphBase_;    // the engine's counts at the last resetStats
  std::vector<cudaStream_t> own_;
  int countedStreams_ = 0;  // this endpoint's share of the process's live TIDE streams (hardware_queues.hpp)
  std::vector<cudaStream_t> streams_;
  std::unique_ptr<SendRecvRails> sendRecv_;
#if TIDE_HAVE_NCCL_RMA
  std::unique_ptr<RmaRails> rma_;
#endif
  std::string railWhy_;  // why these rails (reported once)
  // Issues the deferred rail group; the caller holds the gate (beginOp's lock or gateShared()).
  void flushRailGroup();
  std::shared_lock<std::shared_mutex> gateShared() const;
  std::unique_ptr<WaitWatchdog> watchdog_;
  std::vector<EventSlot> events_;
  uint64_t nextEvent_ = 1;
  uint64_t* hostWord_ = nullptr;  // pinned, for counterValue
  cudaEvent_t callerFence_ = nullptr;  // clearCallerStream's: where a caller's stream was left

  Stats stats_;
  HostProfile profile_;  // TIDE_HOST_PROFILE=1: host time per operation kind
  FabricFaults faults_;
  int64_t remoteSignals_ = 0;
  int64_t railPuts_ = 0;
  int64_t faultFirings_ = 0;  // fabricFaultFirings()
  Replay replay_;
};

}  // namespace tide::fabric::cuda
