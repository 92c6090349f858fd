// A rank's arena on its GPU, as the CUDA endpoint addresses it: the bytes the
// collectives use, the counters that signals and waits touch, an identity tag,
// and the load/store address of every reachable rank's arena. How the memory
// is allocated and mapped is the subclass's (an NCCL symmetric window across
// processes, or plain device memory shared by co-resident ranks).
//
// Layout (same on every rank):
//   [0, userBytes)                    the arena the collectives address
//   [counterOffset, +8*numCounters)   counters, uint64 each (signal / wait)
//   [tagOffset, +64)                  identity tag, checked through every peer
//                                     address before any collective trusts it
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tide/fabric.hpp"

namespace tide::fabric::cuda {

class DeviceArena {
 public:
  virtual ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  std::byte* base() const { return base_; }
  int64_t userBytes() const { return userBytes_; }
  int64_t windowBytes() const { return windowBytes_; }  // what the allocation holds
  int numCounters() const { return numCounters_; }
  // Base of `worldRank`'s arena in this process's address space; nullptr when
  // that rank is not load/store reachable (another host).
  std::byte* peerBase(int worldRank) const { return peers_[static_cast<size_t>(worldRank)]; }
  uint64_t* counter(int id) const;                     // local
  uint64_t* peerCounter(int worldRank, int id) const;  // nullptr if unreachable
  int reachablePeers() const;

 protected:
  // cudaMalloc's granularity, for arenas in plain device memory.
  static constexpr int64_t kDeviceMemoryAlign = 4096;

  // Lays the window out; `align` is the allocation's granularity. The setup's
  // waits on the device (initCountersAndTag, verifyPeers) fail with a
  // FabricError past `setupDeadlineSeconds`.
  DeviceArena(int64_t userBytes, int numCounters, int64_t align, double setupDeadlineSeconds);
  // The window as plain device memory of the current GPU (cudaMalloc), and its release.
  void allocateDeviceMemory();
  void freeDeviceMemory() noexcept;
  // Zeroes the whole window (the arena starts zeroed on every fabric: fabric.hpp) and writes
  // `rank`'s tag (awaited on `stream`, under the setup deadline).
  // The tag mixes in `nonce`, which every rank of one communicator shares and
  // another communicator's arena (in this process or another job) does not
  // (a digest of the NCCL unique id, or drawn for a test group): a peer
  // address that reaches the right rank of another communicator's arena then
  // fails verifyPeers instead of passing it.
  void initCountersAndTag(int rank, uint64_t nonce, cudaStream_t stream);
  // Reads every reachable rank's tag through its peer address: proves the
  // mapping (throws FabricError naming `rank` and the peer otherwise). Each
  // tag is copied device to device beside this rank's own (the path the
  // collectives' copies take), then into a pinned host word, and both copies
  // are awaited under the setup deadline: a copy into pageable host memory
  // would block inside the CUDA call, where no deadline reaches.
  void verifyPeers(int rank, cudaStream_t stream) const;
  // Waits for `stream` under the setup deadline (FabricError naming `rank`
  // and `what`). Past it the setup's copies may still be queued: the memory
  // is then kept allocated (keepAfterTimeout()), not freed under them.
  void awaitSetup(int rank, cudaStream_t stream, const std::string& what) const;
  // A setup wait of a subclass's own (the LSA addresses' kernel) that threw
  // `e`: a timeout keeps the memory as awaitSetup's does.
  void noteSetupTimeout(const FabricError& e) const noexcept;
  // Whether a setup wait timed out, said on stderr when so: the releases ask it before freeing.
  bool keepAfterTimeout() const noexcept;

  double setupDeadlineSeconds_ = 0;
  mutable bool setupTimedOut_ = false;
  mutable bool keptSaid_ = false;  // keepAfterTimeout's message, once
  int64_t userBytes_ = 0;
  int numCounters_ = 0;
  int64_t counterOffset_ = 0;
  int64_t tagOffset_ = 0;
  uint64_t nonce_ = 0;
  int64_t windowBytes_ = 0;
  std::byte* base_ = nullptr;
  std::vector<std::byte*> peers_;
  // The tag's source at initCountersAndTag and verifyPeers' landing for each
  // tag read back (cudaMallocHost, first use): a copy from or to pinned memory
  // is only enqueued, so the setup waits' deadlines cover it. Freed with the
  // arena unless a setup wait timed out.
  mutable uint64_t* pinnedTagWord_ = nullptr;
  uint64_t* pinnedTagWord() const;
};

}  // namespace tide::fabric::cuda
