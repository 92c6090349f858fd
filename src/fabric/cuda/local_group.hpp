// Ranks whose arenas reach each other by address without NCCL: threads of one
// process on one GPU (co_resident_ranks.hpp) or processes that share GPUs
// through CUDA IPC (ipc_ranks.hpp). They run the CUDA fabric's multi-rank
// protocols where NCCL cannot (it refuses two ranks on one GPU): test
// configurations, with copy-engine rails only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/cuda/device_arena.hpp"

namespace tide::fabric::cuda {

class LocalGroup {
 public:
  virtual ~LocalGroup() = default;
  virtual int ranks() const = 0;
  virtual int device() const = 0;  // the GPU of the ranks this process drives
  // Host barrier of the group's ranks; throws FabricError(kTimeout) past its deadline.
  virtual void barrier(int rank) = 0;
  // Every rank's `mine` (the same length on every rank), rank-major
  // (collective over the group, under its deadline).
  virtual std::vector<uint64_t> gatherWords(int rank, const std::vector<uint64_t>& mine) = 0;
  // `rank`'s arena, every rank of the group reachable (collective over the group).
  virtual std::unique_ptr<DeviceArena> makeArena(int rank, int64_t userBytes, int numCounters,
                                                 cudaStream_t stream) = 0;
  // A stream the group's endpoints share for control work, or null: each makes its own.
  virtual cudaStream_t sharedControlStream() const { return nullptr; }
  // How the ranks reach each other, for the endpoint's report.
  virtual std::string description() const = 0;
};

}  // namespace tide::fabric::cuda
