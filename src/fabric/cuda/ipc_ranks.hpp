// Ranks as processes that reach each other's arenas through CUDA IPC, with a
// key-value store (fabric/host/kv_store.hpp) for their bootstrap and barriers:
// several processes may share one GPU, each with a CUDA context of its own
// (and so hardware queues of its own, which threads of one process share:
// co_resident_ranks.hpp). The GPU time-slices between the contexts. A test
// configuration for topologies with more ranks than GPUs, not a fast one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/cuda/device_arena.hpp"
#include "fabric/cuda/local_group.hpp"
#include "fabric/host/kv_store.hpp"

namespace tide::fabric::cuda {

// This process's rank of `ranks`, on `device`. Every rank uses the same store
// (and `prefix`, which tells one group's keys from another's in one store).
class IpcGroup final : public LocalGroup {
 public:
  IpcGroup(host::KeyValueStore& store, std::string prefix, int rank, int ranks, int device,
           double timeoutSeconds = 120);
  int ranks() const override { return ranks_; }
  int device() const override { return device_; }
  void barrier(int rank) override;
  std::vector<uint64_t> gatherWords(int rank, const std::vector<uint64_t>& mine) override;
  std::unique_ptr<DeviceArena> makeArena(int rank, int64_t userBytes, int numCounters, cudaStream_t stream) override;
  std::string description() const override { return "ranks sharing GPUs through CUDA IPC"; }

  host::KeyValueStore& store() { return store_; }
  const std::string& prefix() const { return prefix_; }
  double timeoutSeconds() const { return timeout_; }

 private:
  host::KeyValueStore& store_;
  std::string prefix_;
  int rank_;
  int ranks_;
  int device_;
  double timeout_;
  int barriers_ = 0;
  int gathers_ = 0;
};

// cudaMalloc memory, exported with cudaIpcGetMemHandle; every peer's opened
// with cudaIpcOpenMemHandle. Collective over the group.
class IpcArena final : public DeviceArena {
 public:
  IpcArena(IpcGroup& group, int rank, int64_t userBytes, int numCounters, cudaStream_t stream);
  ~IpcArena() override;

 private:
  void release() noexcept;
  int rank_;
};

}  // namespace tide::fabric::cuda
