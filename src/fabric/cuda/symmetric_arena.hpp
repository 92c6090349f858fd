// The rank's symmetric arena: one ncclMemAlloc buffer registered as an NCCL
// symmetric window, with its peers' load/store addresses.
//
// Window layout (same on every rank):
//   [0, userBytes)                    the arena the collectives address
//   [counterOffset, +8*numCounters)   counters, uint64 each (signal / wait)
//   [tagOffset, +64)                  identity tag, checked through every peer
//                                     address at registration
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fabric/cuda/nccl_bootstrap.hpp"

namespace tide::fabric::cuda {

class SymmetricArena {
 public:
  SymmetricArena(NcclComms& comms, int64_t userBytes, int numCounters, cudaStream_t stream);
  ~SymmetricArena();
  SymmetricArena(const SymmetricArena&) = delete;
  SymmetricArena& operator=(const SymmetricArena&) = delete;

  std::byte* base() const { return base_; }
  int64_t userBytes() const { return userBytes_; }
  int64_t windowBytes() const { return windowBytes_; }  // what ncclMemAlloc holds
  int numCounters() const { return numCounters_; }
  // Base of `worldRank`'s arena in this process's address space; nullptr when
  // that rank is outside the LSA team (another host).
  std::byte* peerBase(int worldRank) const { return peers_[static_cast<size_t>(worldRank)]; }
  uint64_t* counter(int id) const;                   // local
  uint64_t* peerCounter(int worldRank, int id) const;  // nullptr if unreachable
  int reachablePeers() const;

 private:
  void verifyPeers(cudaStream_t stream);
  void release() noexcept;

  NcclComms& comms_;
  int64_t userBytes_ = 0;
  int numCounters_ = 0;
  int64_t counterOffset_ = 0;
  int64_t tagOffset_ = 0;
  int64_t windowBytes_ = 0;
  std::byte* base_ = nullptr;
  ncclWindow_t window_ = nullptr;
  std::vector<std::byte*> peers_;
};

}  // namespace tide::fabric::cuda
