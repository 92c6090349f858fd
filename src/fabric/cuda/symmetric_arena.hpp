// The rank's arena as one ncclMemAlloc buffer registered as an NCCL symmetric
// window, with its peers' load/store addresses (NCCL's LSA team: the ranks of
// this host). Layout: device_arena.hpp.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>

#include "fabric/cuda/device_arena.hpp"
#include "fabric/cuda/nccl_bootstrap.hpp"

namespace tide::fabric::cuda {

class SymmetricArena final : public DeviceArena {
 public:
  SymmetricArena(NcclComms& comms, int64_t userBytes, int numCounters, cudaStream_t stream);
  ~SymmetricArena() override;

 private:
  void release() noexcept;

  NcclComms& comms_;
  ncclWindow_t window_ = nullptr;
};

}  // namespace tide::fabric::cuda
